"""The C env-call guard (``gyreprof._core.guard``) on real gymnasium envs, and what its
calls add to ``overhead_share``.

The guard is the gymnasium instrumentor's only wrapper; a Python reference of what it does
(``helpers/gym_reference.py``) is what these tests compare it with (same events, same
counts).
"""

from __future__ import annotations

import inspect
import math
import os
import pickle
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gyreprof._core import guard  # noqa: E402
from gyreprof.integrations._auto import state as st  # noqa: E402
from gyreprof.integrations._instrument import is_wrapped, mark  # noqa: E402
from gyreprof.integrations.libs import gymnasium as gym_lib  # noqa: E402
from gyreprof.model.snapshot import wrapper_overhead  # noqa: E402
from gyreprof.model.summary import WRAPPER_COUNTER_PREFIX  # noqa: E402

from helpers import gym_reference  # noqa: E402

P = WRAPPER_COUNTER_PREFIX


@pytest.fixture(autouse=True)
def patched() -> Iterator[None]:
    gym_lib.instrument()  # in-process, as gyreprof.integrations.sb3 does
    assert isinstance(gym.Wrapper.__dict__["step"], guard.Guard)  # the C guard, always
    yield
    gym_lib.uninstrument()


def fresh() -> Any:
    """A fresh ThreadState for this thread (as a Session starts one)."""
    st.fresh_threads()
    return st.new_thread()


def counts(t: Any) -> dict[str, int]:
    snap = t.sampler.snapshot()
    return {k[len(P) :]: v for k, v in snap.counters.items() if k.startswith(P) and v}


def events(t: Any, phase: str) -> int:
    return int(t.sampler.snapshot().summary().phases[phase].count)


class Boom(Exception):
    pass


class Echo(gym.Env):  # type: ignore[misc]
    """Defined after the patch: patched through ``__init_subclass__``."""

    def step(self, action: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(action, BaseException):
            raise action
        return (action, args, kwargs)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return seed, {"options": options}


class Layer(gym.Wrapper):  # type: ignore[misc]
    def step(self, action: Any) -> Any:
        return self.env.step(action)


def test_the_guard_takes_its_fast_paths() -> None:
    # ThreadState's Binding read as C fields, PhaseTimer entered and left as C functions:
    # a change of either would keep the answers and lose the speed
    assert guard.fast_layout()
    assert guard.timer_direct() == 3
    t = fresh()
    Echo().step(0)
    assert guard.thread_reads_binding()
    assert isinstance(t.guard_binding, guard.Binding)


def test_the_thread_state_owns_the_binding_the_guard_reads() -> None:
    t = fresh()
    b = t.guard_binding
    for kind in guard.KINDS:
        assert b.timer(kind) is getattr(t, kind)
    t.inside = True  # the state's flag is the binding's
    assert b.inside is True
    seen: list[bool] = []

    class Peek(gym.Env):  # type: ignore[misc]
        def step(self, action: Any) -> Any:
            seen.append(b.inside)
            return action

    b.inside = False
    Peek().step(1)  # the guard sets the binding's flag around the outermost call
    assert seen == [True] and t.inside is False
    with pytest.raises(TypeError, match="env_reset timer"):
        guard.Binding(b.timer("env_step"), 3, b.timer("step_async"), b.timer("step_wait"))
    with pytest.raises(ValueError, match="kind"):
        b.timer("nope")


def test_the_patch_installs_c_guards_that_look_like_the_methods() -> None:
    for cls in (Echo, Layer, gym.Wrapper, gym.wrappers.TimeLimit):
        g = cls.__dict__["step"]
        assert isinstance(g, guard.Guard) and is_wrapped(g)
        assert g.__wrapped__ is g.fn and g.__name__ == "step"
        assert inspect.signature(g) == inspect.signature(g.fn)
    e = Echo()
    bound = e.step  # an attribute read without a call: a bound method
    assert bound.__self__ is e and bound.__func__ is Echo.__dict__["step"]
    assert Echo.step(e, 3) == (3, (), {})  # through the class, self given


def test_arguments_results_and_exceptions_pass_unchanged() -> None:
    t = fresh()
    e = Echo()
    payload = object()
    assert e.step(payload, 1, 2, k=payload) == (payload, (1, 2), {"k": payload})
    assert e.reset(seed=5, options="x") == (5, {"options": "x"})
    err = Boom("the env's own")
    with pytest.raises(Boom) as caught:
        e.step(err)
    assert caught.value is err
    assert t.inside is False  # the guard is released on the way out
    e.step(1)  # and the next call is timed again
    assert events(t, "env_step") == 3  # the call that raised is timed too (as ``with``)
    assert events(t, "env_reset") == 1


def _reference(cls: type, *names: str) -> None:
    """``cls``'s guarded methods replaced by the Python reference of the same wrapper."""
    for name in names:
        g = cls.__dict__[name]
        assert isinstance(g, guard.Guard)
        setattr(cls, name, gym_reference.env_method(g.fn, name))


def _stack_counts(use_c: bool, steps: int) -> tuple[int, int, dict[str, int]]:
    class Inner(gym.Env):  # type: ignore[misc]
        def step(self, action: Any) -> Any:
            return action

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return 0, {}

    class Outer(gym.Wrapper):  # type: ignore[misc]
        def step(self, action: Any) -> Any:
            return self.env.step(action)

    class Wrap(gym.Wrapper):  # type: ignore[misc]
        pass  # gym.Wrapper's own step and reset (patched at import: C)

    if not use_c:  # the Python reference on Outer and Inner, the C guard in between
        _reference(Inner, "step", "reset")
        _reference(Outer, "step")
    env = Outer(Wrap(Inner()))
    t = fresh()
    env.reset()
    for i in range(steps):
        assert env.step(i) == i
    return events(t, "env_step"), events(t, "env_reset"), counts(t)


def test_only_the_outermost_call_of_a_stack_is_timed_as_the_python_reference_does() -> None:
    c_step, c_reset, c_counts = _stack_counts(True, 50)
    py_step, py_reset, py_counts = _stack_counts(False, 50)
    assert (c_step, c_reset) == (py_step, py_reset) == (50, 1)
    # Outer(Wrap(Inner)): 1 timed and 2 passed-through steps per step (resets through
    # gym.Wrapper.reset); with Python wrappers on Outer and Inner (gym.Wrapper's own
    # C guard in between) every call is counted all the same: the Python reference is
    # priced too, one nesting flag shared by both kinds of wrapper
    want = {"env_step.timed": 50, "env_step.inner": 100, "env_reset.timed": 1}
    want["env_reset.inner"] = 2
    assert c_counts == want
    assert py_counts == want


def test_a_real_cartpole_stack_times_each_step_once() -> None:
    env = gym.make("CartPole-v1")
    t = fresh()
    env.reset(seed=0)
    n = 0
    for i in range(300):
        n += 1
        _, _, term, trunc, _ = env.step(i % 2)
        if term or trunc:
            env.reset()
    s = t.sampler.snapshot().summary()
    assert s.phases["env_step"].count == n
    c = counts(t)
    assert c["env_step.timed"] == n
    depth = 1
    e = env
    while hasattr(e, "env"):  # every layer defines step (TimeLimit, OrderEnforcing, ...)
        depth += 1
        e = e.env
    assert c["env_step.inner"] >= n * (depth - 1)  # super().step of a Wrapper counts too


def test_a_thread_without_a_state_gets_its_own() -> None:
    t = fresh()
    e = Echo()
    e.step(0)
    seen: dict[str, Any] = {}

    def work() -> None:
        assert not hasattr(st.tls, "t")
        e.step(1)
        e.step(2)
        seen["t"] = st.tls.t

    th = threading.Thread(target=work)
    th.start()
    th.join(60)
    other = seen["t"]
    assert other is not t
    assert events(other, "env_step") == 2 and events(t, "env_step") == 1
    e.step(3)  # this thread's slot still holds its own state
    assert events(t, "env_step") == 2


def test_a_new_session_rebinds_every_thread() -> None:
    t1 = fresh()
    Echo().step(0)
    t2 = fresh()
    Echo().step(0)
    assert t2 is not t1
    assert events(t1, "env_step") == 1 and events(t2, "env_step") == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_records_into_its_own_state() -> None:
    t = fresh()
    e = Echo()
    e.step(0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            e.step(1)
            e.step(2)
            mine = st.tls.t
            ok = mine is not t and events(mine, "env_step") == 2
            os.write(w, b"ok" if ok else b"bad")
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    assert got == b"ok" and os.waitstatus_to_exitcode(status) == 0
    assert events(t, "env_step") == 1  # the parent's state saw none of the child's


def test_a_guard_pickles_by_reference_or_rebuilt_around_its_function() -> None:
    g = Echo.__dict__["step"]
    assert pickle.loads(pickle.dumps(g)) is g  # by name, as the Python wrapper does
    loose = mark(guard.Guard(_loose_step, "env_reset", True), _loose_step)
    back = pickle.loads(pickle.dumps(loose))  # its name finds the function: rebuilt
    assert isinstance(back, guard.Guard) and back is not loose
    assert back.fn is _loose_step and back.kind == "env_reset" and back.guarded
    assert is_wrapped(back) and back.__wrapped__ is _loose_step


def _loose_step(self: Any, action: Any) -> Any:
    return action


_MAIN_CLASS = """
import pickle, subprocess, sys
import gymnasium as gym
from ray import cloudpickle

class SlowStep(gym.Wrapper):  # defined in __main__: cloudpickle sends it by value
    def step(self, action):
        return super().step(action)

code = (
    "import pickle, sys, gymnasium; cls = pickle.loads(sys.stdin.buffer.read()); "
    "env = cls(gymnasium.make('CartPole-v1')); env.reset(seed=0); print(env.step(0)[1])"
)
out = subprocess.run([sys.executable, "-c", code], input=cloudpickle.dumps(SlowStep),
                     capture_output=True)
print(out.returncode, out.stdout.decode().strip(), out.stderr.decode()[-500:])
"""


def test_a_class_of_main_pickled_by_value_takes_its_guard_along(tmp_path: Any) -> None:
    # a Ray actor's env wrapper class defined in the driver's script: under gyreprof run
    # its step is a Guard, which must travel with the class (by value), not name
    # ``__main__.SlowStep.step``: the actor's process has another __main__ (RLlib's env
    # runners failed to start with "Can't get attribute 'SlowStep.step'")
    pytest.importorskip("ray")
    from helpers.run_scripts.runhelp import gyreprof_run

    path = tmp_path / "main_class.py"
    path.write_text(_MAIN_CLASS)
    proc, _ = gyreprof_run(tmp_path, sys.executable, str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0].strip().startswith("0 1.0"), proc.stdout


def test_bad_guard_arguments_are_type_and_value_errors() -> None:
    with pytest.raises(TypeError):
        guard.Guard(3, "env_step")
    with pytest.raises(ValueError, match="kind"):
        guard.Guard(len, "nope")


# ------------------------------------------------------------------ the overhead


def test_each_kind_is_calibrated_and_a_timed_call_costs_more_than_a_passed_one() -> None:
    costs = gym_lib.wrapper_costs()
    assert set(costs) == set(gym_lib.counter_names())
    for name in ("env_step.timed", "env_step.inner", "step_async.timed"):
        assert 1.0 <= costs[P + name] < 100_000  # ns per call, measured
    # a timed call is never priced under a passed one (under load the calibration's
    # difference can fall below the passed cost: it is clipped to it, never under)
    assert costs[P + "env_step.timed"] >= costs[P + "env_step.inner"]


def test_overhead_share_includes_the_wrappers_calls() -> None:
    env = Layer(Layer(gym.make("CartPole-v1")))
    t = fresh()
    env.reset(seed=1)
    for i in range(2000):
        _, _, term, trunc, _ = env.step(i % 2)
        if term or trunc:
            env.reset()
    snap = t.sampler.snapshot()
    src = snap.sources[0]
    s = snap.summary()
    costs = gym_lib.wrapper_costs()
    want = sum(v * costs.get(k, 0.0) for k, v in snap.counters.items() if k.startswith(P))
    # no warm-up here: every counted call is a steady one, priced at its kind's cost
    assert src.wrapper_ns == pytest.approx(want, rel=0.01)
    assert 0 < s.wrapper_share <= s.overhead_share
    assert s.wrapper_share == pytest.approx(want / src.steady_ns, rel=0.01)
    # left out, the share would be the clock reads alone: the wrappers are most of it
    # (7 guarded calls per step against one timer)
    assert s.overhead_share - s.wrapper_share < s.wrapper_share
    assert not any(k.startswith(P) for k in s.counters)  # internal, not the program's
    line = str(s)
    assert "the env-call wrappers" in line and "the other clock reads" in line
    assert "the env-call wrappers" in s.to_markdown()


def test_the_wrappers_warm_up_calls_are_not_priced_as_steady() -> None:
    phases = ("env_step", "env_reset")
    costs = {P + "env_step.timed": 100.0, P + "env_step.inner": 10.0}
    counters = {P + "env_step.timed": 1000, P + "env_step.inner": 3000}
    # all of them steady
    ns, timed = wrapper_overhead(phases, np.array([1000, 0]), np.array([0, 0]), counters, costs)
    assert ns == pytest.approx(1000 * 100 + 3000 * 10) and timed == 1000
    # three quarters in the warm-up: a quarter of the calls are steady ones (the naive
    # rule, every counted call, would price four times as much)
    ns, timed = wrapper_overhead(phases, np.array([250, 0]), np.array([750, 0]), counters, costs)
    assert ns == pytest.approx((1000 * 100 + 3000 * 10) / 4) and timed == 250
    # no costs (a snapshot of a profiler the guard never bound): nothing priced
    assert wrapper_overhead(phases, np.array([1, 0]), np.array([0, 0]), counters, None) == (0, 0)
    bad = {P + "env_step.timed": math.nan}
    assert wrapper_overhead(phases, np.array([1, 0]), np.array([0, 0]), counters, bad) == (0, 0)


def test_the_wrapper_part_survives_a_save_and_an_interval() -> None:
    from gyreprof.model.snapshot import Snapshot, interval

    t = fresh()
    e = Layer(Echo())
    for i in range(500):
        e.step(i)
    a = t.sampler.snapshot()
    for i in range(500):
        e.step(i)
    b = t.sampler.snapshot()
    back = Snapshot.from_bytes(b.to_bytes())
    assert back.sources[0].wrapper_ns == pytest.approx(b.sources[0].wrapper_ns)
    assert back.summary().wrapper_share == pytest.approx(b.summary().wrapper_share)
    part = interval(a, b)
    src = part.sources[0]
    assert src.wrapper_ns is not None and 0 < src.wrapper_ns <= src.overhead_ns


def test_a_state_of_another_type_is_read_by_attribute() -> None:
    # what the guard does if ThreadState stops being a __slots__ class of these names
    from gyreprof.integrations._auto import records as rec
    from gyreprof.recording.profiler import Profiler

    class Loose:
        pass

    prof = Profiler(rec.SAMPLER_PHASES, capacity=1 << 10)
    state: Any = Loose()
    state.inside = False
    for kind in guard.KINDS:
        setattr(state, kind, prof.phase(kind))
    slot = guard.CalibrationSlot(state, prof.recorder, [-1] * 8)

    def bottom(self: Any, x: Any) -> Any:
        assert state.inside is True  # set around the outermost call
        return x

    def top(self: Any, x: Any) -> Any:
        return self.bottom(x)

    cls = type(
        "Stack",
        (),
        {
            "top": guard.Guard(top, "env_step", True, slot),
            "bottom": guard.Guard(bottom, "env_step", True, slot),
        },
    )
    obj = cls()
    assert [obj.top(i) for i in range(5)] == list(range(5))
    assert state.inside is False
    assert prof.snapshot().summary().phases["env_step"].count == 5  # the outer ones only
    del state.inside  # an attribute gone: the error of reading it, not a crash
    with pytest.raises(AttributeError):
        obj.top(1)


def test_a_thread_profiler_carries_the_wrapper_costs_in_its_config() -> None:
    # so a process read back from its live segment (killed before it saved) prices the
    # wrappers' counted calls as well: the segment's config is taken at its creation
    t = fresh()
    cfg = t.sampler.recorder.config()["form_cost_ns"]
    for name, cost in gym_lib.wrapper_costs().items():
        assert cfg[name] == cost


def test_threads_one_after_another_each_record_into_their_own_state() -> None:
    # the guard caches the last calling thread's slot by its PyThreadState: threads
    # started one after another often get the same PyThreadState address back, and
    # each must still get its own ThreadState (by the state's unique id), never the
    # previous thread's
    t = fresh()
    e = Echo()
    e.step(0)
    seen: list[Any] = []

    def work() -> None:
        e.step(1)
        seen.append(st.tls.t)

    for _ in range(8):
        th = threading.Thread(target=work)
        th.start()
        th.join(60)
        e.step(2)  # this thread in between: its own state again
    assert len(seen) == 8 and len({id(s) for s in seen}) == 8 and t not in seen
    assert all(events(s, "env_step") == 1 for s in seen)
    assert events(t, "env_step") == 9


def test_the_python_reference_is_counted_and_priced() -> None:
    class PyLayer(gym.Wrapper):  # type: ignore[misc]
        def step(self, action: Any) -> Any:
            return self.env.step(action)

    class PyInner(gym.Env):  # type: ignore[misc]
        def step(self, action: Any) -> Any:
            # an env's work, so that the steady time is far above what the calls are
            # priced at: a loop of bare wrappers, priced by a calibration that a
            # loaded machine inflates, can come to more than all of its time, and
            # the snapshot then caps the overhead at that time
            end = time.perf_counter_ns() + 50_000
            while time.perf_counter_ns() < end:
                pass
            return action

    _reference(PyLayer, "step")
    _reference(PyInner, "step")
    py_costs = gym_reference.measure_costs()  # the Python wrappers' own cost per call
    assert not isinstance(PyLayer.__dict__["step"], guard.Guard)
    # (a timed call is never priced below a passed-through one; equal where the
    # calibration's difference fell below it on a loaded machine)
    assert py_costs[P + "env_step.timed"] >= py_costs[P + "env_step.inner"] > 0
    env = PyLayer(PyLayer(PyInner()))
    t = fresh()
    t.sampler.form_cost_ns.update(py_costs)
    for i in range(200):
        assert env.step(i) == i
    # two Python layers and gym.Wrapper-free inner env: 1 timed and 2 passed through
    assert counts(t) == {"env_step.timed": 200, "env_step.inner": 400}
    src = t.sampler.snapshot().sources[0]
    want = 200 * py_costs[P + "env_step.timed"] + 400 * py_costs[P + "env_step.inner"]
    assert src.wrapper_ns == pytest.approx(want, rel=0.01)
