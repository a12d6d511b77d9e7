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

A collect block is the envelope of its waits (``timeline.Timeline.data_wait``). On the
default trainer (a main thread that has not stepped an optimizer yet) a wait's end also
ends the block, so only a *whole* wait ends it: what the training code has back (a
gather, a queue get, a request awaited on its own). The loop's idle spells and the
requests of a gathered batch are pieces of that wait: they widen the block and leave it
open. (Ended at each piece, the first batch of a run would be cut into as many blocks as
it has requests and idle spells, and the one kept at the first update would be the last
sliver of it.) A wait
never reaches back before the last update's end or the last block's end: a request a
pipelined trainer sent before its update does not make the update a wait. Something
awaited on which the loop never idled (its answer came while the thread computed) is
no wait at all.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from gyreprof.integrations._auto import state as st

if TYPE_CHECKING:
    from contextvars import ContextVar

__all__ = ["awaited", "idle", "idled", "in_group"]

#: says a group (gather, wait, TaskGroup, as_completed) is open in the current context:
#: ``libs.asyncio`` sets it when it patches asyncio (None: asyncio is not patched)
group_open: ContextVar[bool] | None = None

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
    _report(w, start, end, kind, False)


def in_group() -> bool:
    """The calling code runs inside a group of awaitables (a gather's task, say): what it
    awaits is a piece of the group's wait."""
    var = group_open
    return var is not None and var.get()


def awaited(start_ns: int, kind: str = "own", whole: bool = True) -> None:
    """What the calling thread's loop awaited since ``start_ns`` (CLOCK_MONOTONIC ns)
    ended now: a wait from then, if the loop idled on it meanwhile (see the module doc).
    ``whole``: the training code has it back now (False: a piece of a larger wait, one
    request of a gathered batch). Cheap when the thread runs no loop that waited: one
    thread-local read."""
    a = idle
    w: st.ThreadState | None = getattr(st.tls, "t", None)
    if w is None or a.t is not w:
        return
    end = w.now()
    start = end - (_now() - start_ns)
    if a.last < start:
        return  # the loop did not wait on it: its answer came while the thread computed
    if st.waiting_thread() is w:
        _report(w, start, end, kind, whole)


def _report(w: st.ThreadState, start: int, end: int, kind: str, whole: bool) -> None:
    floor = w.prev_end if w.prev_end > w.upd_end else w.upd_end
    if start < floor:
        start = floor
    if end > start:
        st.data_wait(w, start, end, kind, whole)
