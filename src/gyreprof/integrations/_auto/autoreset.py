"""gymnasium's next-step autoreset, said in the report (issue 38 item 7).

A gymnasium 1.x vector env (``SyncVectorEnv`` / ``AsyncVectorEnv``, ``autoreset_mode``
``NextStep``, the default) does not step a sub-env that finished on the previous step:
its ``step()`` resets that sub-env instead. The env-call wrappers time that call as
what it is, an ``env_reset``, so ``env_step`` reads fewer calls than a framework that
counts vector steps times ``num_envs``. Creating such a vector env (its ``__init__``
only: nothing is added to a step) leaves :data:`MARK` among the process's notes; the
launcher (``collect``) replaces it with the run's numbers (:func:`words`).
"""

from __future__ import annotations

from typing import Any

#: the note a process leaves; ``collect`` words it with the run's counts
MARK = "gymnasium next-step autoreset in use"
_CLASSES = (
    ("gymnasium.vector.sync_vector_env", "SyncVectorEnv"),
    ("gymnasium.vector.async_vector_env", "AsyncVectorEnv"),
)


def _next_step(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """The vector env is built with next-step autoreset (its default)."""
    mode = kwargs.get("autoreset_mode", args[4] if len(args) > 4 else None)
    if mode is None:
        return True
    value = getattr(mode, "value", mode)
    return str(value).lower().replace("_", "") == "nextstep"


def _on_init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    out = wrapped(*args, **kwargs)
    try:
        if _next_step(args, kwargs):
            from gyreprof.integrations._auto import state

            state.note(MARK)
    except Exception:  # noqa: BLE001, S110 - a note is never worth the user's env
        pass
    return out


def register(gymnasium: Any) -> None:
    """Watch the vector envs' construction (gymnasium 1.x; older ones reset in the same
    step and have no ``autoreset_mode``)."""
    version = str(getattr(gymnasium, "__version__", "0"))
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) < 1:
        return
    import importlib

    import wrapt

    for module, name in _CLASSES:
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if getattr(cls.__init__, "__gyreprof_autoreset__", False):
            continue
        wrapt.wrap_function_wrapper(cls, "__init__", _on_init)
        try:
            cls.__init__.__gyreprof_autoreset__ = True
        except AttributeError:
            pass


def words(env_step: int, env_reset: int) -> str:
    """The report's note: which calls were counted apart, and why."""
    return (
        f"gymnasium's next-step autoreset: a vector env resets a sub-env that finished on "
        f"the previous step inside its next step() instead of stepping it; those calls are "
        f"counted as env_reset (they do a reset's work), not env_step. A framework that "
        f"counts vector steps x num_envs counts them as steps: its count is env_step + "
        f"env_reset = {env_step + env_reset} ({env_step} + {env_reset}), less the vector "
        f"env's own reset() calls (one per sub-env each)"
    )
