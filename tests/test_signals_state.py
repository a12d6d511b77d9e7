"""The training thread's timeline (``integrations._auto.state``) driven directly, in a
thread of its own: collect blocks closed by update signals into trainer steps, no-grad
blocks classified as forwards afterwards, fed and own blocks, threads that never train."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from gyreprof.integrations._auto import state as st

from helpers.threads import in_thread


@pytest.fixture(autouse=True)
def _keep_the_default_trainer() -> Iterator[None]:
    saved = st._default_main  # an update signal here ends it for the whole process
    yield
    st._default_main = saved


def _in_thread(body: Callable[[st.ThreadState], Any]) -> Any:
    """Run ``body(t)`` in a new thread with fresh profilers; its result (or its error)."""
    return in_thread(lambda: body(st.new_thread()))


def _trainer(t: st.ThreadState) -> tuple[np.ndarray, dict[str, int]]:
    return t.trainer.events(), dict(t.trainer.snapshot().counters)


def _phase(ev: np.ndarray, pid: int) -> np.ndarray:
    return ev[ev["phase"] == pid]


def _collect(t: st.ThreadState, n: int) -> None:
    for _ in range(n):
        with t.env_step:
            pass


def test_one_step_per_collect_block_however_many_minibatches() -> None:
    def body(t: st.ThreadState) -> Any:
        for _ in range(3):
            _collect(t, 4)
            for _ in range(6):  # minibatches: no sampling between them
                st.update_signal(t, t.now())
                st.update_end(t, t.now())
        st.close_open_steps([t])
        return _trainer(t)

    ev, counters = _in_thread(body)
    assert len(_phase(ev, -1)) == 3
    assert len(_phase(ev, st.WAIT)) == len(_phase(ev, st.COMPUTE)) == 3
    assert counters.get(st.OWN) == 3 and counters.get(st.FED, 0) == 0
    # the steps tile: each compute starts where its wait ended, the next wait where it ended
    w, c = _phase(ev, st.WAIT), _phase(ev, st.COMPUTE)
    assert (c["start_ns"] == w["start_ns"] + w["duration_ns"]).all()
    assert (w["start_ns"][1:] == c["start_ns"][:-1] + c["duration_ns"][:-1]).all()


def test_the_wait_is_the_collect_block_from_its_first_to_its_last_sampler_write() -> None:
    def body(t: st.ThreadState) -> Any:
        _collect(t, 1)
        st.update_signal(t, t.now())
        first = t.now()
        _collect(t, 3)
        last = t.now()
        st.update_signal(t, t.now())
        return _trainer(t)[0], first, last

    ev, first, last = _in_thread(body)
    w = _phase(ev, st.WAIT)[-1]
    assert first <= w["start_ns"] and w["start_ns"] + w["duration_ns"] <= last


def test_a_no_grad_block_is_a_forward_only_when_sampling_follows() -> None:
    def body(t: st.ThreadState) -> Any:
        fwd = st.FWD
        for _ in range(3):  # forward, env step
            st.no_grad_enter(t, t.now())
            st.no_grad_exit(t, t.now())
            _collect(t, 1)
        st.no_grad_enter(t, t.now())  # after the last env step (GAE, a target network)
        st.no_grad_exit(t, t.now())
        st.update_signal(t, t.now())
        st.no_grad_enter(t, t.now())  # inside the update (clip_grad_norm_)
        st.no_grad_exit(t, t.now())
        st.update_signal(t, t.now())
        st.no_grad_enter(t, t.now())  # a block holding an env step is no forward either
        _collect(t, 1)
        st.no_grad_exit(t, t.now())
        st.update_signal(t, t.now())
        ev = t.sampler.events()
        return ev[ev["phase"] == fwd]

    forwards = _in_thread(body)
    assert len(forwards) == 3


def test_the_first_forward_opens_the_collect_block() -> None:
    def body(t: st.ThreadState) -> Any:
        _collect(t, 1)
        st.update_signal(t, t.now())
        start = t.now()
        st.no_grad_enter(t, start)
        st.no_grad_exit(t, t.now())
        _collect(t, 2)
        st.update_signal(t, t.now())
        return _trainer(t)[0], start

    ev, start = _in_thread(body)
    assert _phase(ev, st.WAIT)[-1]["start_ns"] == start


def test_waits_on_data_made_elsewhere_are_fed_blocks() -> None:
    def body(t: st.ThreadState) -> Any:
        for _ in range(4):
            a = t.now()
            st.data_wait(t, a, a + 1000, "fed")
            st.update_signal(t, a + 2000)
        st.own_sampling(t, t.now(), t.now() + 10)
        st.update_signal(t, t.now())
        return _trainer(t)

    ev, counters = _in_thread(body)
    assert counters.get(st.FED) == 4 and counters.get(st.OWN) == 1
    assert (_phase(ev, st.WAIT)["duration_ns"][:4] == 1000).all()


def test_a_thread_that_never_updates_is_no_trainer() -> None:
    def body(t: st.ThreadState) -> Any:
        _collect(t, 5)
        st.own_sampling(t, t.now(), t.now() + 10)  # a collector worker's inner batches
        st.no_grad_enter(t, t.now())
        st.no_grad_exit(t, t.now())
        _collect(t, 1)
        st.close_open_steps([t])
        return _trainer(t), st.waiting_thread() is None

    (ev, counters), not_waiting = _in_thread(body)
    assert len(ev) == 0 and not counters.get(st.OWN) and not counters.get(st.FED)
    assert not_waiting  # its queue gets are not timed either


def test_a_thread_without_profilers_gets_none_from_the_gate() -> None:
    seen: list[object] = []

    def run() -> None:
        seen.append(st.waiting_thread())
        seen.append(st.default_trainer_here())
        seen.append(getattr(st.tls, "t", None))

    th = threading.Thread(target=run)
    th.start()
    th.join(30)
    assert seen == [None, False, None]  # nothing was created for it
