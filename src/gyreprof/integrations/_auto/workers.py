"""Vector-env workers register themselves under ``gyreprof run`` (role ``env_worker``).

So ``gyreprof check PID --expect env_worker=4`` and ``gp.check_parallelism`` work
on an unmodified script while it runs, and the run report names the roles:

- a worker process of gymnasium's ``AsyncVectorEnv``, stable-baselines3's
  ``SubprocVecEnv`` or TorchRL's ``ParallelEnv`` registers when its worker
  function starts (the module's worker function is wrapped; under spawn and
  forkserver the child imports the wrapped one by name, since the start-up
  hook patched the module there too);
- envs built in the calling process register there: each env of a
  ``SyncVectorEnv`` or ``DummyVecEnv``, and the one env ``AsyncVectorEnv``
  builds in its parent to read the spaces. ``register_worker`` counts them as
  envs built in that process, so ``check_parallelism`` reports "N envs built in
  the main process" (and, for a ``SyncVectorEnv`` alone, "no worker
  processes") instead of taking the parent for a worker.

Registering never raises into the user's code: a failure becomes a note in the
run's report. Outside ``gyreprof run`` nothing registers. The wrappers go in through
the instrumentor's :class:`~gyreprof.integrations._instrument.Patches` they are given
(gymnasium's, stable-baselines3's, TorchRL's), which undoes them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import MARK, Patches

ROLE = "env_worker"


def register_here(envs: int, vector_env: str) -> None:
    """Register ``envs`` envs of role ``env_worker`` in this process (under a run only)."""
    if st.run_dir is None or envs <= 0:
        return
    try:
        from gyreprof.analysis.parallelism.registry import register_worker

        config: dict[str, Any] = {"vector_env": vector_env, "registered_by": "gyreprof run"}
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "get_num_threads"):
            config["num_threads"] = int(torch.get_num_threads())
        for _ in range(envs):
            register_worker(ROLE, **config)
        st.registered(ROLE)
    except Exception as exc:  # noqa: BLE001 - never break the user's program
        st.note(f"could not register a {vector_env} env as {ROLE!r}: {exc!r}")


def _wrap_worker(original: Callable[..., Any], vector_env: str) -> Callable[..., Any]:
    @functools.wraps(original)  # same __module__/__qualname__: pickled by name as before
    def worker(*args: Any, **kwargs: Any) -> Any:
        register_here(1, vector_env)
        return original(*args, **kwargs)

    setattr(worker, MARK, True)
    return worker


def wrap_worker_function(patches: Patches, module: ModuleType, name: str, vector_env: str) -> None:
    """Replace ``module.name`` (a worker process's target) by one that registers first."""
    patches.replace(module, name, lambda fn, _: _wrap_worker(fn, vector_env))


def _envs_of(obj: Any) -> int:
    envs = getattr(obj, "envs", None)
    try:
        return len(envs) if envs is not None else 0
    except TypeError:
        return 0


def wrap_init(
    patches: Patches, cls: type, vector_env: str, envs: Callable[[Any], int] = _envs_of
) -> None:
    """Register the envs ``cls`` builds in the calling process once its ``__init__`` is
    done (only ``cls`` itself is wrapped: a subclass calling ``super().__init__`` counts
    once)."""

    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            register_here(envs(self), vector_env)

        return __init__

    patches.replace(cls, "__init__", make)


def install_gym_sync(patches: Patches, module: ModuleType) -> None:
    cls = getattr(module, "SyncVectorEnv", None)
    if isinstance(cls, type):
        wrap_init(patches, cls, "gymnasium.SyncVectorEnv")


def install_gym_async(patches: Patches, module: ModuleType) -> None:
    wrap_worker_function(patches, module, "_async_worker", "gymnasium.AsyncVectorEnv")
    cls = getattr(module, "AsyncVectorEnv", None)
    if isinstance(cls, type):  # the env it builds in the parent to read the spaces
        wrap_init(patches, cls, "gymnasium.AsyncVectorEnv (in the parent)", lambda self: 1)


def install_sb3(patches: Patches, subproc: ModuleType, dummy: ModuleType) -> None:
    wrap_worker_function(patches, subproc, "_worker", "stable_baselines3.SubprocVecEnv")
    cls = getattr(dummy, "DummyVecEnv", None)
    if isinstance(cls, type):
        wrap_init(patches, cls, "stable_baselines3.DummyVecEnv")


def install_torchrl(patches: Patches, batched: ModuleType) -> None:
    for name in ("_run_worker_pipe_shared_mem", "_run_worker_pipe_direct"):
        wrap_worker_function(patches, batched, name, "torchrl.ParallelEnv")
