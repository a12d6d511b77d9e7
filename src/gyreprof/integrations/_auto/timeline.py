"""One thread's training timeline: its collect block and the trainer steps it closes
(``state``'s module doc says what they mean; ``thread_state.ThreadState`` is a
:class:`Timeline`).

A blocking wait for data (a queue get, a future, an HTTP request) ends on the waiting
thread with :meth:`Timeline.data_wait`; on the default trainer (a main thread that never
stepped an optimizer) each wait's end also closes the collect block. The block is a few
plain fields; a closed block is written as a trainer step through the Recorder's public
``*_at`` methods and counted in the trainer Profiler's ``loop.own`` / ``loop.fed``.

Contract: every method runs on the timeline's thread (the trainer Recorder refuses a
write from another thread with RuntimeError, before this timeline changes). A timeline
not bound to its recorders (:meth:`Timeline.bind`) raises ValueError.
"""

from __future__ import annotations

from typing import Any

from gyreprof._core.recorder import Recorder, monotonic_ns
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError

WAIT = 0  # trainer phase ids (records.TRAINER_PHASES)
COMPUTE = 1
_TSC_SLACK_NS = 1_000_000  # a recorder clock this close to CLOCK_MONOTONIC is that clock


class Timeline:
    """The training-timeline state of one thread (see the module doc).

    ``bind(srec, trec, trainer, fwd, ident)``: the sampler and trainer Recorders, the
    trainer Profiler (its counters ``loop.own`` / ``loop.fed``), the sampler's phase id of
    the policy forward and the thread's ident. A subclass may override
    :meth:`_trim_start_up` (the first block's start)."""

    __slots__ = (
        "srec",
        "trec",
        "trainer",
        "ident",
        "trains",
        "framework",
        "in_wait",
        "step_open",
        "blk_own",
        "provisional",
        "last_own",
        "prev_end",
        "blk_start",
        "blk_end",
        "pend_start",
        "pend_end",
        "blocks",
        "last_start",
        "fwd_id",
        "_own_slot",
        "_fed_slot",
        "_is_bound",
    )

    srec: Recorder
    trec: Recorder
    trainer: Any
    ident: int
    trains: bool  # saw an update signal
    framework: bool  # a framework patch marks this thread's steps itself
    in_wait: bool  # inside a data wait already reported
    step_open: bool  # a trainer step begun (its wait closed, compute running)
    blk_own: bool  # a span of the open block was the thread's own sampling
    provisional: bool  # its steps so far are the default trainer's
    last_own: bool
    prev_end: int  # end of the last collect block (where compute began)
    blk_start: int  # data waits / own sampling since the last update
    blk_end: int
    pend_start: int  # the last outermost no-grad block, not classified yet
    pend_end: int
    blocks: int  # collect blocks closed into trainer steps
    last_start: int  # the last collect block's start
    fwd_id: int  # the sampler's phase id of the policy forward
    _is_bound: bool

    def __init__(self) -> None:
        self.ident = 0
        self.trains = self.framework = self.in_wait = self.step_open = False
        self.blk_own = self.provisional = self.last_own = False
        self.prev_end = self.blk_start = self.blk_end = -1
        self.pend_start = self.pend_end = self.last_start = -1
        self.blocks = 0
        self.fwd_id = 0
        self._own_slot = self._fed_slot = -1
        self._is_bound = False

    def bind(self, srec: Recorder, trec: Recorder, trainer: Any, fwd: int, ident: int) -> None:
        """Attach the thread's recorders (once, before any other method)."""
        if not isinstance(srec, Recorder) or not isinstance(trec, Recorder):
            raise ArgumentTypeError(
                f"bind() takes the sampler and trainer Recorders, got "
                f"{type(srec).__name__} and {type(trec).__name__}"
            )
        if not 0 <= fwd < srec.n_phases:
            raise InvalidValueError(f"fwd phase id {fwd} out of range 0..{srec.n_phases - 1}")
        if trec.n_phases <= COMPUTE:
            raise InvalidValueError(
                f"the trainer recorder needs wait and compute phases, got {trec.n_phases} phase(s)"
            )
        self.srec = srec
        self.trec = trec
        self.trainer = trainer
        self.fwd_id = fwd
        self.ident = ident
        self._own_slot = self._fed_slot = -1
        self._is_bound = True

    def _unbound(self) -> None:
        raise InvalidValueError("this Timeline is not bound to its recorders (call bind first)")

    def waits_count(self, default_main: int) -> bool:
        """The thread's blocking data waits count: it trains, or it is the default trainer
        (``default_main``: its ident, 0 for none), and no framework patch marks its steps
        and no reported wait is open (``state.waiting_thread``'s gate)."""
        if self.framework or self.in_wait:
            return False
        return self.trains or (default_main != 0 and self.ident == default_main)

    def data_wait(
        self, start_ns: int, end_ns: int, own: bool, default_main: int, closes: bool = True
    ) -> None:
        """The thread waited for data from ``start_ns`` to ``end_ns`` (the sampler
        recorder's clock); ``own``: it made the data itself. On the default trainer the
        wait's end closes the block (``state.data_wait``), unless ``closes`` is False: a
        piece of a wait whose end comes later (an event loop's idle time, one request of
        a gathered batch) widens the block and leaves it open."""
        if not self._is_bound:
            self._unbound()
        if self.blk_start < 0 or start_ns < self.blk_start:
            self.blk_start = start_ns
        if end_ns > self.blk_end:
            self.blk_end = end_ns
        if own:
            self.blk_own = True
        if (
            closes
            and not self.trains
            and default_main != 0
            and self.ident == default_main
            and not self.framework
        ):
            self.close_block()

    def request_wait(self, start_ns: int, end_ns: int, default_main: int) -> None:
        """A synchronous request this thread made ran from ``start_ns`` to ``end_ns``
        (CLOCK_MONOTONIC ns): when its waits count (:meth:`waits_count`), an ``own`` data
        wait, placed on the sampler recorder's clock (the TSC's offset from
        CLOCK_MONOTONIC added when it is more than a millisecond)."""
        if not self._is_bound:
            self._unbound()
        if not self.waits_count(default_main):
            return
        if self.srec.use_tsc:
            shift = self.srec.now_ns() - monotonic_ns()  # 0 but for the reads' gap
            if -_TSC_SLACK_NS < shift < _TSC_SLACK_NS:
                shift = 0
            start_ns += shift
            end_ns += shift
        self.data_wait(start_ns, end_ns, True, default_main)

    def classify(self) -> None:
        """The pending no-grad block was a policy forward when the sampler wrote after it
        ended (an env step followed before the next update); else it was update work."""
        if not self._is_bound:
            self._unbound()
        end = self.pend_end
        self.pend_end = -1
        if self.srec.last_write_ns() > end:
            self.srec.record_span(self.fwd_id, self.pend_start, end)

    def _trim_start_up(self, start: int, end: int) -> int:
        """The first block's start (``thread_state.ThreadState`` trims the set-up before it)."""
        return start

    def _find_slot(self, own: bool) -> int:
        """The trainer counter slot of ``loop.own`` / ``loop.fed`` (looked up once)."""
        slot = int(self.trainer._counter_slot("loop.own" if own else "loop.fed"))
        if not 0 <= slot < self.trec.max_counters:
            raise InvalidValueError(
                f"counter slot {slot} out of range 0..{self.trec.max_counters - 1}"
            )
        if own:
            self._own_slot = slot
        else:
            self._fed_slot = slot
        return slot

    def close_block(self) -> None:
        """End the collect block since the last update (if there was one): close the
        previous trainer step's compute at its start, begin a step there, close its wait
        at its end, count it (``loop.own`` / ``loop.fed``)."""
        if not self._is_bound:
            self._unbound()
        srec, trec = self.srec, self.trec
        if self.pend_end >= 0:
            self.classify()
        since = srec.since_mark_ns()
        if since < 0 and self.blk_end < 0:
            return  # nothing sampled or waited on since the last update: a further minibatch
        start = since
        end = srec.last_write_ns() if since >= 0 else -1
        if self.blk_start >= 0 and (start < 0 or self.blk_start < start):
            start = self.blk_start
        if self.blk_end > end:
            end = self.blk_end
        own = since >= 0 or self.blk_own
        if self.blocks == 0 and since >= 0:
            start = self._trim_start_up(start, end)
        if start < 0 or end < 0:
            raise InvalidValueError(f"a collect block needs times >= 0 ns, got {start} .. {end}")
        slot = self._own_slot if own else self._fed_slot
        if slot < 0:
            slot = self._find_slot(own)
        # the first write claims the trainer recorder (another thread's: RuntimeError)
        if self.step_open:
            trec.lap_at(COMPUTE, start)
        trec.begin_at(start)  # closes the previous step at this block's start
        trec.lap_at(WAIT, end)
        self.step_open = True
        self.prev_end = end
        self.last_start = start
        self.last_own = own
        self.blocks += 1
        if not self.trains:
            self.provisional = True
        trec.count(slot, 1)
        srec.mark_since()
        self.blk_start = -1
        self.blk_end = -1
        self.blk_own = False
