"""TorchRL's instrumentor (:func:`instrument` / :func:`uninstrument`): waiting on a
collector's next batch is a data wait of the iterating thread.

Iterating any collector (``for batch in collector:``) reports each wait for a
batch to the thread's training timeline (``state.data_wait``): as the
thread's own sampling for a synchronous collector (``Collector``,
``SyncDataCollector``, ``MultiSync*``: no batch is collected while the loop
body runs) and as a wait on data made elsewhere for the others
(``MultiAsync*``). No trainer step is marked here: the thread that steps an
optimizer is the trainer, so a multi-process collector's workers, whose inner
collectors are iterated too, stay samplers. Env steps are timed by the
gymnasium patch wherever they run: in-process for ``GymEnv`` and
``SerialEnv``, in the worker processes of ``ParallelEnv`` and of
multi-process collectors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto import versions, workers
from gyreprof.integrations._instrument import Instrumentor

# collectors whose trainer loop is synchronous: no batch is collected while the body runs
SYNC_COLLECTORS = ("Collector", "SyncDataCollector", "MultiSyncCollector", "MultiSyncDataCollector")


def _iter(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __iter__(self: Any) -> Iterator[Any]:
        own = type(self).__name__ in SYNC_COLLECTORS
        inner = original(self)
        t = st.thread_state()
        try:
            while True:
                nested = t.in_wait
                t.in_wait = True  # the queue gets inside are this wait, not waits of their own
                start = t.now()
                try:
                    batch = next(inner)
                except StopIteration:
                    return
                finally:
                    t.in_wait = nested
                end = t.now()
                if nested:
                    pass
                elif own:
                    st.own_sampling(t, start, end)
                elif st.waiting_thread() is t:
                    st.data_wait(t, start, end, "fed")
                try:
                    yield batch
                finally:  # the body ran (or the loop was left)
                    st.update_end(t, t.now())
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
    """Patch TorchRL's collectors (once); an unknown version: a warning, no patch."""
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
            _inst.patches.replace_tree(base, ("__iter__",), _iter)
            _inst.when_imported("torchrl.envs.batched_envs", _install_batched)
            st.preload()
            return
    st.warn_once("torchrl", problem)


def _install_batched(batched: ModuleType) -> None:
    workers.install_torchrl(_inst.patches, batched)


_inst = Instrumentor("torchrl", {"torchrl": install})


def instrument() -> None:
    """Patch TorchRL now (imported) or when it is imported; undone by one
    :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
