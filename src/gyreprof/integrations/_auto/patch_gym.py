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

from gyreprof.integrations._auto import hooks, versions
from gyreprof.integrations._auto import state as st


def _env_call(phase: str) -> Callable[[Callable[..., Any], str], Callable[..., Any]]:
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        if phase == "env_step":

            def step(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    t = st.tls.t
                except AttributeError:
                    t = st.new_thread()
                if t.inside:
                    return original(self, *args, **kwargs)
                t.inside = True
                try:
                    with t.env_step:
                        return original(self, *args, **kwargs)
                finally:
                    t.inside = False

            return step

        def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                t = st.tls.t
            except AttributeError:
                t = st.new_thread()
            if t.inside:
                return original(self, *args, **kwargs)
            t.inside = True
            try:
                with t.env_reset:
                    return original(self, *args, **kwargs)
            finally:
                t.inside = False

        return reset

    return make


def _vector_call(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    if name == "step_async":

        def step_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                t = st.tls.t
            except AttributeError:
                t = st.new_thread()
            with t.step_async:
                return original(self, *args, **kwargs)

        return step_async

    def step_wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            t = st.tls.t
        except AttributeError:
            t = st.new_thread()
        with t.step_wait:
            return original(self, *args, **kwargs)

    return step_wait


_STEP = _env_call("env_step")
_RESET = _env_call("env_reset")


def _make_env_method(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    return _STEP(original, name) if name == "step" else _RESET(original, name)


def install(gym: ModuleType) -> None:
    """Patch gymnasium (idempotent); a version it does not know: a warning, no patch."""
    problem = versions.check("gymnasium", getattr(gym, "__version__", None))
    if problem is not None:
        st.warn_once("gymnasium", problem)
        return
    hooks.patch_methods(gym.Env, ("step", "reset"), _make_env_method, skip=(gym.Env,))
    hooks.when_imported("gymnasium.vector.async_vector_env", _install_async)


def _install_async(module: ModuleType) -> None:
    cls = getattr(module, "AsyncVectorEnv", None)
    if cls is not None:
        hooks.patch_methods(cls, ("step_async", "step_wait"), _vector_call)


def register() -> None:
    hooks.when_imported("gymnasium", install)
