"""The blocking ``put`` of a sampling thread (``integrations.libs.queues``), driven
directly on real queues and threads: the time a put into a full queue blocked is counted
in the thread's sampler ``idle_ns``; a put with room, a non-blocking one, one on a thread
with no state or on the default trainer is not; the original's arguments (by position or
by name: ``item`` for ``queue``, ``obj`` for ``multiprocessing``), results and exceptions
pass unchanged."""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import mark
from gyreprof.integrations.libs import queues

from helpers.threads import in_thread


def _patched(base: type, full: Callable[[Any], bool]) -> type:
    original = base.__dict__["put"]
    put = mark(queues.Queue.make_put(full)(original, "put"), original)
    return type(f"Patched{base.__name__}", (base,), {"put": put})


def _idle(t: st.ThreadState) -> int:
    return int(t.sampler.snapshot().counters.get(queues.IDLE_NS, 0))


def _take_later(q: Any, after_s: float) -> threading.Thread:
    th = threading.Thread(target=lambda: (time.sleep(after_s), q.get()))
    th.start()
    return th


def test_a_sampling_threads_blocked_put_is_idle_time() -> None:
    Q = _patched(queue.Queue, queues._queue_full)

    def body() -> tuple[int, int, int]:
        t = st.thread_state()  # a sampling thread (not the default trainer, never trained)
        q = Q(maxsize=1)
        q.put(1)  # room: straight through
        room = _idle(t)
        taker = _take_later(q, 0.1)
        t0 = time.perf_counter_ns()
        q.put(item=2)  # full: blocks until the taker gets; the item passed by name
        blocked = time.perf_counter_ns() - t0
        taker.join()
        assert q.get() == 2
        return room, _idle(t), blocked

    room, idle, blocked = in_thread(body)
    assert room == 0
    assert 0.08e9 < idle <= blocked + 5_000_000, (idle, blocked)


def test_what_is_not_idle_and_the_originals_behaviour() -> None:
    Q = _patched(queue.Queue, queues._queue_full)

    def no_state() -> None:
        q = Q(maxsize=1)
        q.put(1)
        taker = _take_later(q, 0.05)
        q.put(2, True, 5)  # blocks, but this thread has no state: nothing counted
        taker.join()
        assert st.tls.__dict__.get("t") is None

    in_thread(no_state)

    def sampling() -> int:
        t = st.thread_state()
        q = Q(maxsize=1)
        q.put(1)
        with pytest.raises(queue.Full):
            q.put(2, False)  # non-blocking: the original's answer
        with pytest.raises(queue.Full):
            q.put_nowait(2)
        with pytest.raises(queue.Full):
            q.put(2, timeout=0.05)  # a blocking put that times out: idle, and Full raised
        return _idle(t)

    idle = in_thread(sampling)
    assert 0.04e9 < idle < 2e9

    def trains() -> int:
        t = st.thread_state()
        st.update_signal(t, t.now())  # the thread trains: its puts are not a sampler's
        q = Q(maxsize=1)
        q.put(1)
        with pytest.raises(queue.Full):
            q.put(2, block=True, timeout=0.05)
        return _idle(t)

    saved = st._default_main
    try:
        assert in_thread(trains) == 0
    finally:
        st._default_main = saved


def test_a_multiprocessing_queue_put_by_its_own_names() -> None:
    ctx = mp.get_context("spawn")
    Q = _patched(type(ctx.Queue()), queues._mp_queue_full)

    def body() -> int:
        t = st.thread_state()
        q = Q(maxsize=1, ctx=ctx)
        q.put(obj=1)
        with pytest.raises(queue.Full):
            q.put(obj=2, block=True, timeout=0.05)
        assert q.get(timeout=5) == 1
        q.close()
        q.join_thread()
        return _idle(t)

    assert 0.04e9 < in_thread(body) < 2e9
