# cython: language_level=3, embedsignature=True
"""One thread's training timeline in compiled code: its collect block and the trainer
steps it closes (``integrations/_auto/state.py`` says what they mean; its ThreadState,
in ``thread_state.py``, is a :class:`Timeline`).

A blocking wait for data (a queue get, a future, an HTTP request) ends on the waiting
thread with :meth:`Timeline.data_wait`, and on a default trainer (a main thread that
never stepped an optimizer) each wait's end also closes the collect block: in Python
that was a dozen attribute updates and five calls into the Recorder per request. Here
the block's state is typed fields and the trainer step is written through the
Recorder's C methods: one call per wait.

Contract: every method runs on the timeline's thread (the trainer Recorder's writer:
a write from another thread raises RuntimeError, as the Recorder's own methods do).
The fields are public attributes (Python code reads and sets them); a timeline not
bound to its recorders (``bind``) raises ValueError, never reads memory.
"""

from libc.stdint cimport int64_t

from gyreprof._core.clock cimport gyre_mono_ns, gyre_thread_token
from gyreprof._core.recorder cimport H_LAST_WRITE, Recorder

cdef enum:
    WAIT = 0     # trainer phase ids (records.TRAINER_PHASES)
    COMPUTE = 1


cdef class Timeline:
    """The training-timeline state of one thread (see the module doc).

    ``bind(srec, trec, trainer, fwd)``: the sampler and trainer Recorders, the trainer
    Profiler (its counter slots: ``loop.own`` / ``loop.fed``) and the sampler's phase id
    of the policy forward. Subclassed by ``thread_state.ThreadState``, which may override
    :meth:`_trim_start_up` (the first block's start, read from the sampler's ring).
    """

    # its fields and C methods are declared in timeline.pxd

    def __cinit__(self, *args, **kwargs):
        self.prev_end = -1
        self.blk_start = -1
        self.blk_end = -1
        self.pend_start = -1
        self.pend_end = -1
        self.last_start = -1
        self.own_slot = -1
        self.fed_slot = -1

    def bind(self, Recorder srec not None, Recorder trec not None, trainer, int fwd,
             unsigned long ident):
        """Attach the thread's recorders (once, before any other method)."""
        if fwd < 0 or fwd >= srec.n_phases:
            raise ValueError(f"fwd phase id {fwd} out of range 0..{srec.n_phases - 1}")
        if trec.n_phases <= COMPUTE:
            raise ValueError(f"the trainer recorder needs wait and compute phases, "
                             f"got {trec.n_phases} phase(s)")
        self.srec = srec
        self.trec = trec
        self.trainer = trainer
        self.fwd = fwd
        self.ident = ident
        self.own_slot = self.fed_slot = -1

    cdef inline int _bound(self) except -1:
        if self.trec is None:
            raise ValueError("this Timeline is not bound to its recorders (call bind first)")
        return 0

    cpdef bint waits_count(self, unsigned long default_main):
        """The thread's blocking data waits count: it trains, or it is the default
        trainer (``default_main``: its ident, 0 for none), and no framework patch marks
        its steps and no reported wait is open (``state.waiting_thread``'s gate)."""
        if self.framework or self.in_wait:
            return False
        return self.trains or (default_main != 0 and self.ident == default_main)

    def data_wait(self, int64_t start_ns, int64_t end_ns, bint own,
                  unsigned long default_main):
        """The thread waited for data from ``start_ns`` to ``end_ns`` (the sampler
        recorder's clock); ``own``: it made the data itself. On the default trainer the
        wait's end closes the block (``state.data_wait``)."""
        self._bound()
        self._data_wait(start_ns, end_ns, own, default_main)

    cdef int _data_wait(self, int64_t start_ns, int64_t end_ns, bint own,
                        unsigned long default_main) except -1:
        if self.blk_start < 0 or start_ns < self.blk_start:
            self.blk_start = start_ns
        if end_ns > self.blk_end:
            self.blk_end = end_ns
        if own:
            self.blk_own = True
        if (not self.trains and default_main != 0 and self.ident == default_main
                and not self.framework):
            self._close_block()
        return 0

    def request_wait(self, int64_t start_ns, int64_t end_ns, unsigned long default_main):
        """A synchronous request this thread made ran from ``start_ns`` to ``end_ns``
        (CLOCK_MONOTONIC ns): when its waits count (:meth:`waits_count`), an ``own``
        data wait, placed on the sampler recorder's clock (the TSC's offset from
        CLOCK_MONOTONIC added when it is more than a millisecond)."""
        self._bound()
        self._request_wait(start_ns, end_ns, default_main)

    cdef int _request_wait(self, int64_t start_ns, int64_t end_ns,
                           unsigned long default_main) except -1:
        if not self.waits_count(default_main):
            return 0
        cdef int64_t shift = 0
        if self.srec.use_tsc:
            shift = self.srec._now() - gyre_mono_ns()  # 0 but for the read's gap
            if -1_000_000 < shift < 1_000_000:
                shift = 0
        self._data_wait(start_ns + shift, end_ns + shift, True, default_main)
        return 0

    def close_block(self):
        """End the collect block since the last update (if there was one): close the
        previous trainer step's compute at its start, begin a step there, close its wait
        at its end, count it (``loop.own`` / ``loop.fed``)."""
        self._bound()
        self._close_block()

    def classify(self):
        """The pending no-grad block was a policy forward when the sampler wrote after it
        ended (an env step followed before the next update); else it was update work."""
        self._bound()
        self._classify()

    cdef int _classify(self) except -1:
        cdef int64_t end = self.pend_end
        self.pend_end = -1
        if self.srec.s[H_LAST_WRITE] > end:
            self.srec.record_span(self.fwd, self.pend_start, end)
        return 0

    def _trim_start_up(self, int64_t start, int64_t end):
        """The first block's start (``thread_state.ThreadState`` trims the set-up before it)."""
        return start

    cdef long long _slot(self, bint own) except -1:
        cdef long long slot = self.own_slot if own else self.fed_slot
        if slot < 0:
            slot = self.trainer._counter_slot("loop.own" if own else "loop.fed")
            if slot < 0 or slot >= self.trec.max_counters:
                raise ValueError(f"counter slot {slot} out of range 0..{self.trec.max_counters - 1}")
            if own:
                self.own_slot = slot
            else:
                self.fed_slot = slot
        return slot

    cdef int _close_block(self) except -1:
        cdef Recorder srec = self.srec
        cdef Recorder trec = self.trec
        if self.pend_end >= 0:
            self._classify()
        cdef int64_t since = srec.since_mark
        if since < 0 and self.blk_end < 0:
            return 0  # nothing sampled or waited on since the last update: a further minibatch
        cdef int64_t start = since
        cdef int64_t end = srec.s[H_LAST_WRITE] if since >= 0 else -1
        if self.blk_start >= 0 and (start < 0 or self.blk_start < start):
            start = self.blk_start
        if self.blk_end > end:
            end = self.blk_end
        cdef bint own = since >= 0 or self.blk_own
        if self.blocks == 0 and since >= 0:
            start = self._trim_start_up(start, end)
        if start < 0 or end < 0:
            raise ValueError(f"a collect block needs times >= 0 ns, got {start} .. {end}")
        cdef long long slot = self._slot(own)
        if gyre_thread_token() != trec.owner:
            trec._claim()
        if self.step_open:
            trec._lap(COMPUTE, start)
        trec._begin(start)  # closes the previous step at this block's start
        trec._lap(WAIT, end)
        self.step_open = True
        self.prev_end = end
        self.last_start = start
        self.last_own = own
        self.blocks += 1
        if not self.trains:
            self.provisional = True
        trec._add_count(slot, 1)
        srec.since_mark = -1
        self.blk_start = -1
        self.blk_end = -1
        self.blk_own = False
        return 0
