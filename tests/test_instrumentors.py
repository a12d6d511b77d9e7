"""Each library's instrumentor (``gyreprof.integrations.libs``) patches and unpatches within
one process: ``instrument()`` wraps the attributes it names (each wrapper's ``__wrapped__``
the original), one real call of the library is recorded, and after ``uninstrument()``
every attribute it patched is the very object it was before (identity), and an optimizer
hook it added is gone. ``instrument()`` twice and ``uninstrument()`` once keeps the
patches (the calls nest: ``gyreprof run`` and a session from code both instrument).
A library that is not installed skips."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import queue
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gyreprof.integrations import _instrument, libs
from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto.session import Session
from gyreprof.integrations._instrument import class_tree, is_wrapped

MISSING = object()
Target = tuple[Any, str]


def _tree(cls: type, names: Sequence[str], skip: Sequence[type] = ()) -> list[Target]:
    """(class, name) wherever ``cls`` or a subclass defines a method of ``names``, and the
    ``__init_subclass__`` hook on ``cls`` that reaches later subclasses."""
    out: list[Target] = [(cls, "__init_subclass__")]
    for c in class_tree(cls):
        for name in names:
            fn = vars(c).get(name)
            if c not in skip and callable(fn) and not getattr(fn, "__isabstractmethod__", 0):
                out.append((c, name))
    return out


def _state(targets: Sequence[Target]) -> list[Any]:
    return [vars(owner).get(name, MISSING) for owner, name in targets]


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _everything_patched(inst: _instrument.Instrumentor) -> list[tuple[Any, str, Any]]:
    """Every attribute the instrumentor's Patches set, with what was there before."""
    return [(o, n, old) for o, n, old, _ in inst.patches._done if o is not _instrument._CALL]


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[ModuleType], None]]:
    """Run a library's round trip from uninstrumented (an earlier test's session may have
    left it instrumented: its count is restored afterwards), on fresh thread profilers,
    with the process-wide default trainer restored (an update signal clears it)."""
    monkeypatch.setattr(st, "_default_main", st._default_main)
    held: list[tuple[ModuleType, int]] = []

    def take(lib: ModuleType) -> None:
        inst = lib._inst
        held.append((lib, inst.depth))
        while inst.active:
            inst.uninstrument()

    st.fresh_threads()
    yield take
    for lib, depth in held:
        while lib._inst.active:
            lib._inst.uninstrument()
        for _ in range(depth):
            lib._inst.instrument()
    st.fresh_threads()


def _round_trip(
    lib: ModuleType,
    targets: Sequence[Target],
    call: Callable[[], Any],
    recorded: Callable[[Any], bool],
) -> Any:
    """Instrument ``lib``, check ``targets`` are wrapped, make one real call (``recorded``
    must hold for what it returns), uninstrument, check every patched attribute is its
    original. Returns what the call returned."""
    inst = lib._inst
    assert not inst.active
    before = _state(targets)
    lib.instrument()
    try:
        patched = _state(targets)
        for (owner, name), old, new in zip(targets, before, patched, strict=True):
            where = f"{getattr(owner, '__qualname__', owner)}.{name}"
            assert new is not old, f"{where} not patched"
            if name != "__init_subclass__" and old is not MISSING:
                assert is_wrapped(new) and new.__wrapped__ is old, where
        everything = _everything_patched(inst)
        assert everything
        lib.instrument()  # twice: one more to undo, nothing patched again
        assert _same(_state(targets), patched) and len(_everything_patched(inst)) == len(everything)
        lib.uninstrument()  # once: the patches stay
        assert inst.active and _same(_state(targets), patched)
        got = call()
        assert recorded(got), got
    finally:
        lib.uninstrument()
    assert not inst.active and len(inst.patches) == 0
    assert _same(_state(targets), before)  # the very originals
    for owner, name, old in everything:
        assert vars(owner).get(name, _instrument._MISSING) is old, f"{owner}.{name}"
    return got


# ---------------------------------------------------------------------------- gymnasium


def test_gymnasium(alone: Callable[[ModuleType], None]) -> None:
    gym = pytest.importorskip("gymnasium")
    import gymnasium.vector.async_vector_env as ave
    import gymnasium.vector.sync_vector_env as sve

    from gyreprof.integrations.libs import gymnasium as lib

    alone(lib)
    env = gym.make("CartPole-v1")
    targets = [
        *_tree(gym.Env, ("step", "reset"), skip=(gym.Env,)),
        *_tree(ave.AsyncVectorEnv, ("step_async", "step_wait")),
        (ave.AsyncVectorEnv, "__init__"),
        (ave, "_async_worker"),
        (sve.SyncVectorEnv, "__init__"),
    ]
    assert (gym.wrappers.TimeLimit, "step") in targets

    def call() -> Any:
        t = st.thread_state()
        env.reset(seed=0)
        env.step(0)
        return t

    def events(t: Any, phase: str) -> int:
        return int(t.sampler.snapshot().summary().phases[phase].count)

    t = _round_trip(lib, targets, call, lambda t: events(t, "env_step") == 1)
    assert events(t, "env_reset") == 1  # the outermost env call only: one of each
    env.step(1)
    assert events(t, "env_step") == 1  # no longer recorded


# ---------------------------------------------------------------------------- SB3


@pytest.mark.slow
def test_sb3(alone: Callable[[ModuleType], None]) -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common import off_policy_algorithm as off
    from stable_baselines3.common import on_policy_algorithm as on
    from stable_baselines3.common import policies
    from stable_baselines3.common.vec_env import dummy_vec_env, subproc_vec_env

    from gyreprof.integrations.libs import sb3 as lib

    alone(lib)
    targets = [
        *_tree(on.OnPolicyAlgorithm, ("collect_rollouts",)),
        *[x for x in _tree(on.OnPolicyAlgorithm, ("train",), skip=(on.OnPolicyAlgorithm,))
          if x[1] == "train"],
        *_tree(off.OffPolicyAlgorithm, ("collect_rollouts", "_sample_action")),
        *_tree(policies.ActorCriticPolicy, ("forward",)),
        *_tree(subproc_vec_env.SubprocVecEnv, ("step_async", "step_wait")),
        (subproc_vec_env, "_worker"),
        (dummy_vec_env.DummyVecEnv, "__init__"),
    ]  # fmt: skip
    assert (PPO, "train") in targets

    def call() -> Any:
        with Session("PPO", "sync") as run:
            model = PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, n_epochs=1)
            model.learn(16)
        sampler, trainer = run.snapshot()
        return sampler.summary(), trainer.summary()

    def recorded(got: Any) -> bool:
        sampler, trainer = got
        wait, compute = trainer.phases["wait"].count, trainer.phases["compute"].count
        return bool(wait >= 1 and compute >= 1 and sampler.phases["fwd"].count >= 16)

    _round_trip(lib, targets, call, recorded)


# ---------------------------------------------------------------------------- torch


def _optimizer_hooks() -> int:
    from torch.optim import optimizer

    return len(optimizer._global_optimizer_pre_hooks) + len(optimizer._global_optimizer_post_hooks)


def test_torch(alone: Callable[[ModuleType], None]) -> None:
    torch = pytest.importorskip("torch")

    from gyreprof.integrations.libs import torch as lib

    alone(lib)
    targets = [
        (torch.Tensor, "backward"),
        (torch.autograd, "backward"),
        (torch.no_grad, "__enter__"),
        (torch.no_grad, "__exit__"),
        (torch.inference_mode, "__enter__"),
        (torch.inference_mode, "__exit__"),
    ]
    hooks = _optimizer_hooks()

    def call() -> Any:
        assert _optimizer_hooks() == hooks + 2  # one pre and one post hook, added once
        t = st.thread_state()
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([w], lr=0.1)
        with torch.no_grad():
            (w * 2).sum()
        (w * w).sum().backward()
        opt.step()
        return t

    def steps(t: Any) -> int:
        return int(t.trainer.snapshot().counters.get(st.OPTIM_STEPS, 0))

    t = _round_trip(lib, targets, call, lambda t: steps(t) == 1 and t.trains)
    assert _optimizer_hooks() == hooks  # the hooks are removed with the patches
    w = torch.nn.Parameter(torch.ones(1))
    torch.optim.SGD([w], lr=0.1).step()
    assert steps(t) == 1  # no longer counted


# ---------------------------------------------------------------------------- queues


def _queue_targets() -> list[Target]:
    import concurrent.futures._base as base
    import concurrent.futures.process
    import concurrent.futures.thread
    import multiprocessing.queues as mpq

    return [
        *_tree(queue.Queue, ("get",)),
        (queue.Queue, "put"),
        *_tree(mpq.Queue, ("get", "put")),
        *_tree(mpq.SimpleQueue, ("get",)),
        *_tree(base.Future, ("result",)),
        *_tree(base.Executor, ("submit",), skip=(base.Executor,)),
        (base.Executor, "map"),
        (base, "wait"),
        (base, "as_completed"),
        (concurrent.futures, "wait"),
        (concurrent.futures, "as_completed"),
    ]


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[tuple[Any, ...]]:
    """Calls of ``module.name`` from now on (passed on to it), as argument tuples."""
    calls: list[tuple[Any, ...]] = []
    real = getattr(module, name)

    def spy(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_queues(alone: Callable[[ModuleType], None], monkeypatch: pytest.MonkeyPatch) -> None:
    from gyreprof.integrations.libs import queues as lib

    alone(lib)
    targets = _queue_targets()
    assert (concurrent.futures.ThreadPoolExecutor, "submit") in targets
    waits = _spy(monkeypatch, st, "data_wait")

    def call() -> Any:
        t = st.thread_state()
        st.update_signal(t, t.now())  # the thread trains: its blocking waits count
        q: queue.Queue[int] = queue.Queue()
        q.put(1)
        assert q.get() == 1
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            assert pool.submit(int, "2").result() == 2
        return [w[3] for w in waits if w[0] is t]

    assert _round_trip(lib, targets, call, lambda kinds: kinds == ["fed", "own"])
    n = len(waits)
    q2: queue.Queue[int] = queue.Queue()
    q2.put(3)
    q2.get()
    assert len(waits) == n  # no longer reported


def test_instrument_twice_uninstrument_once_keeps_the_patches(
    alone: Callable[[ModuleType], None],
) -> None:
    from gyreprof.integrations.libs import queues as lib

    alone(lib)
    original = vars(queue.Queue)["get"]
    lib.instrument()
    lib.instrument()
    lib.uninstrument()
    try:
        assert is_wrapped(vars(queue.Queue)["get"])
    finally:
        lib.uninstrument()
    assert vars(queue.Queue)["get"] is original
    lib.uninstrument()  # one too many: nothing happens
    assert vars(queue.Queue)["get"] is original and not lib._inst.active
    lib.instrument()  # again after the undo: the hook registered before patches again
    try:
        assert is_wrapped(vars(queue.Queue)["get"])
    finally:
        lib.uninstrument()
    assert vars(queue.Queue)["get"] is original


# ---------------------------------------------------------------------------- asyncio


def test_asyncio(alone: Callable[[ModuleType], None]) -> None:
    import asyncio.selector_events
    import asyncio.taskgroups
    import asyncio.tasks

    from gyreprof.integrations.libs import asyncio as lib

    alone(lib)
    targets = [
        (asyncio.selector_events.BaseSelectorEventLoop, "__init__"),
        *_tree(asyncio.Queue, ("get",)),
        (asyncio.tasks, "gather"),
        (asyncio, "gather"),
        (asyncio.tasks, "wait"),
        (asyncio, "wait"),
        (asyncio.tasks, "as_completed"),
        (asyncio, "as_completed"),
        *_tree(asyncio.taskgroups.TaskGroup, ("__aenter__", "__aexit__")),
    ]
    loops: list[Any] = []

    async def two() -> list[int]:
        got = list(await asyncio.gather(asyncio.sleep(0, 1), asyncio.sleep(0, 2)))
        pair = [asyncio.sleep(0, 3), asyncio.sleep(0, 4)]
        got += sorted([await f for f in asyncio.as_completed(pair)])
        one = asyncio.sleep(0, 5)
        refused = asyncio.as_completed(one)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expect an iterable of futures"):
            next(iter(refused))  # asyncio's own refusal, patched or not
        await one
        return got

    def call() -> Any:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        assert is_wrapped(loop._selector.select)  # type: ignore[attr-defined]
        before = len(rl.groups())
        assert loop.run_until_complete(two()) == [1, 2, 3, 4]
        return [g[0] for g in rl.groups()[before:]]

    try:
        assert _round_trip(
            lib, targets, call, lambda rules: rules == ["asyncio.gather", "asyncio.as_completed"]
        )
        sel = loops[0]._selector
        assert "select" not in vars(sel)  # the live loop's selector is its own again
        from gyreprof.integrations._auto import loop_wait

        assert loop_wait.group_open is None  # the request log no longer asks for groups
        before = len(rl.groups())
        loops[0].run_until_complete(two())
        assert len(rl.groups()) == before  # no longer recorded
    finally:
        loops[0].close()


# ---------------------------------------------------------------------------- multiprocessing


def _child() -> None:
    return None


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_multiprocessing(
    alone: Callable[[ModuleType], None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from multiprocessing.process import BaseProcess

    from gyreprof.integrations.libs import multiprocessing as lib

    alone(lib)
    out = tmp_path / "saved"

    def save(how: str, key: Any = None) -> bool:  # the forked child's save
        out.write_text(f"{how} {os.getpid()}")
        return True

    monkeypatch.setattr(st, "save", save)

    def call() -> Any:
        p = multiprocessing.get_context("fork").Process(target=_child)
        p.start()
        p.join(60)
        return p

    p = _round_trip(lib, _tree(BaseProcess, ("_bootstrap",)), call, lambda p: p.exitcode == 0)
    assert out.read_text() == f"mp-exit {p.pid}"


# ---------------------------------------------------------------------------- TorchRL


@pytest.mark.slow
def test_torchrl(alone: Callable[[ModuleType], None], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torchrl")
    pytest.importorskip("gymnasium")
    import torchrl.collectors as collectors
    import torchrl.envs.batched_envs as batched
    from torchrl.envs import GymEnv

    from gyreprof.integrations.libs import torchrl as lib

    alone(lib)
    base = lib._base_collector(collectors)
    assert base is not None
    targets = [
        *_tree(base, ("__iter__",)),
        (batched, "_run_worker_pipe_shared_mem"),
        (batched, "_run_worker_pipe_direct"),
    ]
    own = _spy(monkeypatch, st, "own_sampling")

    def call() -> Any:
        c = collectors.Collector(GymEnv("CartPole-v1"), None, frames_per_batch=8, total_frames=16)
        try:
            batches = [b.numel() for b in c]
        finally:
            c.shutdown()
        return batches, len(own)

    assert _round_trip(lib, targets, call, lambda got: got == ([8, 8], 2))


# ---------------------------------------------------------------------------- transformers


@pytest.mark.slow
def test_transformers(alone: Callable[[ModuleType], None]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.generation import utils

    from gyreprof.integrations.libs import transformers as lib

    alone(lib)
    config = transformers.LlamaConfig(
        vocab_size=16,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    targets = _tree(utils.GenerationMixin, ("generate",))

    def call() -> Any:
        with Session("generate", None) as run:
            out = model.generate(torch.tensor([[2, 3, 4]]), max_new_tokens=2, do_sample=False)
        assert out.shape[1] >= 4
        return run.snapshot()[0].summary().phases["generate"].count

    assert _round_trip(lib, targets, call, lambda n: n == 1)


# ---------------------------------------------------------------------------- RLlib


class _NoRunners:
    """An env-runner group whose first question fails: the real sampling function runs
    (and raises) inside the wrapper, which reports the wait all the same."""

    def num_remote_workers(self) -> int:
        raise LookupError("no runners")


@pytest.mark.slow
def test_rllib(alone: Callable[[ModuleType], None], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray.rllib")
    from ray.rllib.algorithms import algorithm
    from ray.rllib.core.learner import learner, learner_group
    from ray.rllib.env import env_runner
    from ray.rllib.execution import rollout_ops

    from gyreprof.integrations.libs import rllib as lib

    alone(lib)
    targets = [
        (rollout_ops, "synchronous_parallel_sample"),
        *_tree(env_runner.EnvRunner, ("__init__",)),
        *_tree(learner.Learner, ("__init__",)),
        *_tree(algorithm.Algorithm, ("__init__", "step")),
        *_tree(learner_group.LearnerGroup, ("update",)),
    ]
    waits = _spy(monkeypatch, st, "data_wait")

    def call() -> Any:
        t = st.thread_state()
        st.update_signal(t, t.now())  # the driver's training thread: its waits count
        with pytest.raises(LookupError):
            rollout_ops.synchronous_parallel_sample(worker_set=_NoRunners())
        return [w[3] for w in waits if w[0] is t]

    assert _round_trip(lib, targets, call, lambda kinds: kinds == ["own"])


# ---------------------------------------------------------------------------- TRL


@pytest.mark.slow
def test_trl_instruments_what_it_drives(alone: Callable[[ModuleType], None]) -> None:
    pytest.importorskip("trl")
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.generation import utils

    from gyreprof.integrations.libs import queues, trl
    from gyreprof.integrations.libs import torch as torch_lib
    from gyreprof.integrations.libs import transformers as tf_lib

    for lib in trl.LIBRARIES:
        alone(lib)
    targets = [
        *_tree(utils.GenerationMixin, ("generate",)),
        (torch.Tensor, "backward"),
        (torch.no_grad, "__enter__"),
        *_tree(queue.Queue, ("get",)),
    ]
    before = _state(targets)
    trl.instrument()
    try:
        assert tf_lib._inst.active and torch_lib._inst.active and queues._inst.active
        patched = _state(targets)
        assert all(a is not b for a, b in zip(before, patched, strict=True))
        t = st.thread_state()
        w = torch.nn.Parameter(torch.ones(2))
        torch.optim.SGD([w], lr=0.1).step()
        assert t.trainer.snapshot().counters.get(st.OPTIM_STEPS) == 1
    finally:
        trl.uninstrument()
    assert not (tf_lib._inst.active or torch_lib._inst.active or queues._inst.active)
    assert _same(_state(targets), before)


# ---------------------------------------------------------------------------- the registry


def test_gyreprof_run_instruments_every_library_through_the_same_api() -> None:
    """``libs.instrument()`` (the bootstrap's call) raises each library's count by one and
    ``libs.uninstrument()`` lowers it again."""
    depths = {name: libs.instrumentor(name)._inst.depth for name in libs.LIBRARIES}
    libs.instrument()
    try:
        for name in libs.LIBRARIES:
            assert libs.instrumentor(name)._inst.depth == depths[name] + 1, name
    finally:
        libs.uninstrument()
    assert {name: libs.instrumentor(name)._inst.depth for name in libs.LIBRARIES} == depths
    with pytest.raises(ValueError, match="library"):
        libs.instrumentor("nope")
