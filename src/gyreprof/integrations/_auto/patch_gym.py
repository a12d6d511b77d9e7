"""gymnasium: ``step``/``reset`` of the outermost env called, vector-env send/wait.

Every ``gymnasium.Env`` subclass that defines ``step`` or ``reset`` gets a
wrapper; the thread's nesting guard makes only the outermost call count, so a
stack of wrappers (TimeLimit, OrderEnforcing, Monitor, ...) around CartPole is
one ``env_step``. Envs stepped by a ``SyncVectorEnv`` (or SB3's ``DummyVecEnv``,
TorchRL's ``GymEnv``/``SerialEnv``) are timed one by one in the calling
process; envs in ``AsyncVectorEnv`` workers are timed in the worker process,
and the parent times ``step_async`` (the send) and ``step_wait`` (until the
slowest worker answers).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import hooks, versions, workers
from gyreprof.integrations._auto import state as st


def _params(fn: Callable[..., Any]) -> list[str] | None:
    """Names of ``fn``'s parameters when all are plain positional-or-keyword, else None."""
    import inspect  # at patch time, not when the run bootstraps (~10 ms)

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    ps = list(sig.parameters.values())
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in ps):
        return None
    return [p.name for p in ps]


def _thread() -> Any:
    try:
        return st.tls.t
    except AttributeError:
        return st.new_thread()


def _outermost(original: Callable[..., Any], timer: str) -> Callable[..., Any]:
    """``original`` timed as the thread's ``timer`` when it is the outermost env call of
    the thread (a wrapper's step calling the inner env's step is timed once)."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = _thread()
        if t.inside:
            return original(self, *args, **kwargs)
        t.inside = True
        try:
            with getattr(t, timer):
                return original(self, *args, **kwargs)
        finally:
            t.inside = False

    return call


def _step(original: Callable[..., Any]) -> Callable[..., Any]:
    """``env.step``: timed as ``env_step`` when it is the outermost env call of the thread."""
    if _params(original) != ["self", "action"]:
        return _outermost(original, "env_step")

    # gymnasium's own signature, once per env step: no argument tuple or dict per call
    def step(self: Any, action: Any) -> Any:
        t = _thread()
        if t.inside:
            return original(self, action)
        t.inside = True
        try:
            with t.env_step:
                return original(self, action)
        finally:
            t.inside = False

    return step


def _vector_call(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A vector env's ``step_async`` / ``step_wait``, timed under its own name (once per
    vector step, around inter-process calls: the argument tuple costs nothing there)."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with getattr(_thread(), name):
            return original(self, *args, **kwargs)

    return call


def _make_env_method(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    return _step(original) if name == "step" else _outermost(original, "env_reset")


def install(gym: ModuleType) -> None:
    """Patch gymnasium (idempotent); a version it does not know: a warning, no patch."""
    problem = versions.check("gymnasium", getattr(gym, "__version__", None))
    if problem is not None:
        st.warn_once("gymnasium", problem)
        return
    hooks.patch_methods(gym.Env, ("step", "reset"), _make_env_method, skip=(gym.Env,))
    hooks.when_imported("gymnasium.vector.async_vector_env", _install_async)
    hooks.when_imported("gymnasium.vector.sync_vector_env", workers.install_gym_sync)
    st.preload()


def _install_async(module: ModuleType) -> None:
    cls = getattr(module, "AsyncVectorEnv", None)
    if cls is not None:
        hooks.patch_methods(cls, ("step_async", "step_wait"), _vector_call)
    workers.install_gym_async(module)


def register() -> None:
    hooks.when_imported("gymnasium", install)
