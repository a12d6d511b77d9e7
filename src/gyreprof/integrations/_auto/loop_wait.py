"""The training thread's wait on what its asyncio event loop awaits for it: rollout
requests, a gather of them, a batch from a queue.

A thread that runs ``asyncio.run(...)`` (or ``loop.run_until_complete``) to get its batch
waits from its first rollout request to the moment its code has the batch back: the
return of ``gather`` / ``wait`` / a ``TaskGroup``, of the SDK call, of the queue's
``get``. The answers' parsing, the scoring in the gathered coroutines and the loop's
own overhead are inside that wait: the training code cannot go on until they are done.

Two sources make that wait (``libs.asyncio`` and ``rollout_log`` call them):

- :func:`idled`: the loop sat in its selector while requests of this thread were in
  flight (or a coroutine was blocked in ``asyncio.Queue.get``): the proof that the
  thread waited at all, reported as it happens;
- :func:`awaited`: an awaited thing ended (a request was read to its end, a gather or a
  queue get returned): when the loop idled on it since it began, the wait runs from its
  start to now.

A collect block is the envelope of its waits (``timeline.Timeline.data_wait``). A wait
never reaches back before the last update's end or the last block's end: a request a
pipelined trainer sent before its update does not make the update a wait. Something
awaited on which the loop never idled (its answer came while the thread computed) is
no wait at all.
"""

from __future__ import annotations

import threading
import time

from gyreprof.integrations._auto import state as st

__all__ = ["awaited", "idle", "idled"]

_now = time.monotonic_ns  # the request log's clock


class _Idle(threading.local):
    """Per thread: the ThreadState its loop idled for, the end of that idle (on the
    state's clock) and the coroutines blocked in ``asyncio.Queue.get``."""

    t: st.ThreadState | None = None
    last = -1
    getters = 0


idle = _Idle()


def idled(w: st.ThreadState, start: int, end: int, kind: str) -> None:
    """Thread ``w``'s loop was idle from ``start`` to ``end`` (``w.now()`` clock) on
    what it awaits (``kind``: ``own`` requests, ``fed`` a queue)."""
    a = idle
    a.t = w
    a.last = end
    _report(w, start, end, kind)


def awaited(start_ns: int, kind: str = "own") -> None:
    """What the calling thread's loop awaited since ``start_ns`` (CLOCK_MONOTONIC ns)
    ended now: a wait from then, if the loop idled on it meanwhile (see the module doc).
    Cheap when the thread runs no loop that waited: one thread-local read."""
    a = idle
    w: st.ThreadState | None = getattr(st.tls, "t", None)
    if w is None or a.t is not w:
        return
    end = w.now()
    start = end - (_now() - start_ns)
    if a.last < start:
        return  # the loop did not wait on it: its answer came while the thread computed
    if st.waiting_thread() is w:
        _report(w, start, end, kind)


def _report(w: st.ThreadState, start: int, end: int, kind: str) -> None:
    floor = w.prev_end if w.prev_end > w.upd_end else w.upd_end
    if start < floor:
        start = floor
    if end > start:
        st.data_wait(w, start, end, kind)
