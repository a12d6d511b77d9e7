"""stable-baselines3's instrumentor (:func:`instrument` / :func:`uninstrument`): rollout
collection is the trainer's ``wait``, ``train`` its ``compute``.

- ``collect_rollouts`` (on- and off-policy) starts a trainer step and is timed
  as ``wait``; ``train`` (every algorithm's own) closes the step as
  ``compute``. Both loops are synchronous (collect, then train): each collection
  counts as one collect block the thread sampled itself (``loop.own``). The
  thread is marked as one whose steps a framework records, so the universal
  update signals (its optimizer steps) do not record it a second time. Nothing
  is declared at import: stable-baselines3 merely installed (torchrl imports
  it) changes nothing.
- The policy forward during rollouts is the sampler's ``fwd``: the
  ``ActorCriticPolicy.forward`` call of an on-policy rollout, the
  ``_sample_action`` of an off-policy one.
- ``SubprocVecEnv``: ``step_async`` / ``step_wait`` in the main process; the
  workers' env steps are timed in the workers (gymnasium's patch).
  ``DummyVecEnv`` steps its envs in-process, timed one by one as ``env_step``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto import versions, workers
from gyreprof.integrations._instrument import Instrumentor
from gyreprof.integrations.libs.gymnasium import _vector_call

WAIT, COMPUTE = st.WAIT, st.COMPUTE


def _collect(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def collect_rollouts(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            t = st.tls.t
        except AttributeError:
            t = st.new_thread()
        if t.in_collect:
            return original(self, *args, **kwargs)
        t.in_collect = True
        t.framework = True
        t.trainer.count(st.OWN)
        t.tbegin()
        try:
            return original(self, *args, **kwargs)
        finally:
            t.tlap(WAIT)
            t.in_collect = False

    return collect_rollouts


def _train(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            t = st.tls.t
        except AttributeError:
            t = st.new_thread()
        if t.in_train:
            return original(self, *args, **kwargs)
        t.in_train = True
        try:
            return original(self, *args, **kwargs)
        finally:
            t.tlap(COMPUTE)
            t.tend()  # the step is collect + train: the last one is closed too
            t.in_train = False

    return train


def _forward(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            t = st.tls.t
        except AttributeError:
            t = st.new_thread()
        b = t.guard_binding  # the nesting flag the C env guard reads: one lookup a forward
        if not t.in_collect or b.inside:
            return original(self, *args, **kwargs)
        b.inside = True
        try:
            with t.fwd:
                return original(self, *args, **kwargs)
        finally:
            b.inside = False

    return forward


def install(sb3: ModuleType) -> None:
    """Patch stable-baselines3 (once); an unknown version: a warning, no patch."""
    problem = versions.check("stable_baselines3", getattr(sb3, "__version__", None))
    if problem is not None:
        st.warn_once("stable_baselines3", problem)
        return
    on = importlib.import_module("stable_baselines3.common.on_policy_algorithm")
    off = importlib.import_module("stable_baselines3.common.off_policy_algorithm")
    pol = importlib.import_module("stable_baselines3.common.policies")
    sub = importlib.import_module("stable_baselines3.common.vec_env.subproc_vec_env")
    patches = _inst.patches
    for base in (on.OnPolicyAlgorithm, off.OffPolicyAlgorithm):
        patches.replace_tree(base, ("collect_rollouts",), _collect)
        patches.replace_tree(base, ("train",), _train, skip=(base,))
    patches.replace_tree(pol.ActorCriticPolicy, ("forward",), _forward)
    patches.replace_tree(off.OffPolicyAlgorithm, ("_sample_action",), _forward)
    patches.replace_tree(sub.SubprocVecEnv, ("step_async", "step_wait"), _vector_call)
    workers.install_sb3(
        patches, sub, importlib.import_module("stable_baselines3.common.vec_env.dummy_vec_env")
    )
    st.preload()


_inst = Instrumentor("stable_baselines3", {"stable_baselines3": install})


def instrument() -> None:
    """Patch stable-baselines3 now (imported) or when it is imported; undone by one
    :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
