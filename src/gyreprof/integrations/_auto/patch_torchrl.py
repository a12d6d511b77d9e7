"""TorchRL: waiting on a collector's next batch is the trainer's ``wait``, the loop body ``compute``.

Iterating any collector (``for batch in collector:``) starts a trainer step at
each request for a batch, closes ``wait`` when the batch arrives and
``compute`` when the loop asks for the next one (or leaves the loop). Env steps
are timed by the gymnasium patch wherever they run: in-process for ``GymEnv``
and ``SerialEnv``, in the worker processes of ``ParallelEnv`` and of
multi-process collectors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import hooks, versions, workers
from gyreprof.integrations._auto import state as st

WAIT, COMPUTE = st.WAIT, st.COMPUTE
# collectors whose trainer loop is synchronous: no batch is collected while the body runs
SYNC_COLLECTORS = ("Collector", "SyncDataCollector", "MultiSyncCollector", "MultiSyncDataCollector")


def _iter(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __iter__(self: Any) -> Iterator[Any]:
        if type(self).__name__ in SYNC_COLLECTORS:
            st.note_loop("sync")
        inner = original(self)
        try:
            t = st.tls.t
        except AttributeError:
            t = st.new_thread()
        try:
            while True:
                t.tbegin()
                try:
                    batch = next(inner)
                except StopIteration:
                    return
                t.tlap(WAIT)
                try:
                    yield batch
                finally:  # the body ran (or the loop was left)
                    t.tlap(COMPUTE)
        finally:
            close = getattr(inner, "close", None)
            if close is not None:
                close()

    return __iter__


def _base_collector(collectors: ModuleType) -> type | None:
    for name in ("BaseCollector", "DataCollectorBase"):
        cls = getattr(collectors, name, None)
        if isinstance(cls, type):
            return cls
    return None


def install(torchrl: ModuleType) -> None:
    """Patch TorchRL's collectors (idempotent); an unknown version: a warning, no patch."""
    problem = versions.check("torchrl", getattr(torchrl, "__version__", None))
    if problem is None:
        collectors = importlib.import_module("torchrl.collectors")
        base = _base_collector(collectors)
        if base is None:
            problem = (
                f"torchrl {torchrl.__version__}: no BaseCollector/DataCollectorBase in "
                "torchrl.collectors; torchrl is not instrumented in this run"
            )
        else:
            hooks.patch_methods(base, ("__iter__",), _iter)
            hooks.when_imported("torchrl.envs.batched_envs", workers.install_torchrl)
            st.preload()
            return
    st.warn_once("torchrl", problem)


def register() -> None:
    hooks.when_imported("torchrl", install)
