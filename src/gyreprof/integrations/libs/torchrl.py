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

Inside a collector (in-process, or in each worker of a multi-process one):

- the policy call of the synchronous collector's rollout is the sampler's ``fwd``
  (TorchRL opens a ``_maybe_record_function("Collector.policy")`` context around it;
  that helper is wrapped, so the forward is timed where it runs);
- each batch a thread collects itself (the inner collector's ``next`` in a worker)
  is counted in its sampler's counters with its wall time and the env_step,
  env_reset and fwd time inside it (``batches.Batches``), and marked
  ``in_rollout`` for the stack sampler: the run's report splits the workers'
  collection time into env, fwd and the untimed rest from these
  (``analysis.workers``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto import versions, workers
from gyreprof.integrations._auto.batches import Batches
from gyreprof.integrations._instrument import Instrumentor

# collectors whose trainer loop is synchronous: no batch is collected while the body runs
SYNC_COLLECTORS = ("Collector", "SyncDataCollector", "MultiSyncCollector", "MultiSyncDataCollector")
# collectors that collect in the iterating thread itself (a multi-process collector's
# workers iterate one): their batches are counted (``batches.Batches``) and marked ``in_rollout``
IN_THREAD = ("Collector", "SyncDataCollector")


#: the label TorchRL's collector puts around its policy call (``_maybe_record_function``)
POLICY_LABEL = "Collector.policy"


def _iter(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __iter__(self: Any) -> Iterator[Any]:
        own = type(self).__name__ in SYNC_COLLECTORS
        here = type(self).__name__ in IN_THREAD
        inner = original(self)
        t = st.thread_state()
        batches: Batches | None = None
        try:
            while True:
                nested = t.in_wait
                rollout = here and not nested and not t.in_rollout
                if rollout and batches is None:
                    batches = Batches(t)
                t.in_wait = True  # the queue gets inside are this wait, not waits of their own
                start = t.now()
                if rollout and batches is not None:
                    batches.begin(start)
                    t.in_rollout = t.rolled = True
                try:
                    batch = next(inner)
                except StopIteration:
                    return
                finally:
                    t.in_wait = nested
                    if rollout:
                        t.in_rollout = False
                end = t.now()
                if rollout and batches is not None:
                    batches.end(end)
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


class _Forward:
    """The collector's policy call, timed as the sampler's ``fwd`` (outermost only),
    inside the context TorchRL gave for it (its ``record_function`` when profiling)."""

    __slots__ = ("t", "ctx", "outer")

    def __init__(self, t: Any, ctx: Any) -> None:
        self.t, self.ctx, self.outer = t, ctx, True

    def __enter__(self) -> Any:
        t = self.t
        self.outer = not t.in_fwd
        got = self.ctx.__enter__()
        if self.outer:
            t.in_fwd = True
            t.fwd.__enter__()
        return got

    def __exit__(self, *exc: Any) -> Any:
        t = self.t
        if self.outer:
            try:
                t.fwd.__exit__(*exc)
            finally:
                t.in_fwd = False
        return self.ctx.__exit__(*exc)


def _record_function(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def _maybe_record_function(label: Any) -> Any:
        ctx = original(label)
        if label != POLICY_LABEL:
            return ctx
        return _Forward(st.thread_state(), ctx)

    return _maybe_record_function


def _install_policy(single: ModuleType) -> None:
    """Time the policy call of TorchRL's synchronous collector (in a multi-process
    collector: in each worker) as ``fwd``, through the context TorchRL opens around it."""
    if callable(getattr(single, "_maybe_record_function", None)):
        _inst.patches.replace(single, "_maybe_record_function", _record_function)
    else:
        st.note(
            "this torchrl's collector opens no Collector.policy context: the policy forward "
            "inside its collectors (and their worker processes) is not timed as fwd"
        )


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
            _inst.when_imported("torchrl.collectors._single", _install_policy)
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
