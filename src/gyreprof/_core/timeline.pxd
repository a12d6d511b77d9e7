# cython: language_level=3
"""One thread's training timeline (timeline.pyx says what it holds and its contract):
declared here so that compiled callers (requestlog's patched send) reach its C methods
with no Python call."""

from libc.stdint cimport int64_t

from gyreprof._core.recorder cimport Recorder


cdef class Timeline:
    cdef readonly Recorder srec
    cdef readonly Recorder trec
    cdef readonly object trainer
    cdef public unsigned long ident
    cdef public bint trains          # saw an update signal
    cdef public bint framework       # a framework patch marks this thread's steps itself
    cdef public bint in_wait         # inside a data wait already reported
    cdef public bint step_open       # a trainer step begun (its wait closed, compute running)
    cdef public bint blk_own         # a span of the open block was the thread's own sampling
    cdef public bint provisional     # its steps so far are the default trainer's
    cdef public bint last_own
    cdef public int64_t prev_end     # end of the last collect block (where compute began)
    cdef public int64_t blk_start    # data waits / own sampling since the last update
    cdef public int64_t blk_end
    cdef public int64_t pend_start   # the last outermost no-grad block, not classified yet
    cdef public int64_t pend_end
    cdef public int64_t blocks       # collect blocks closed into trainer steps
    cdef public int64_t last_start   # the last collect block's start
    cdef int fwd
    cdef long long own_slot          # trainer counter slots, found at the first block
    cdef long long fed_slot

    cdef inline int _bound(self) except -1
    cpdef bint waits_count(self, unsigned long default_main)
    cdef int _data_wait(self, int64_t start_ns, int64_t end_ns, bint own,
                        unsigned long default_main) except -1
    # request_wait for a compiled caller: the timeline is bound (``_bound``)
    cdef int _request_wait(self, int64_t start_ns, int64_t end_ns,
                           unsigned long default_main) except -1
    cdef int _classify(self) except -1
    cdef long long _slot(self, bint own) except -1
    cdef int _close_block(self) except -1
