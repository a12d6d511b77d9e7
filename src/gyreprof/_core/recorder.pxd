# cython: language_level=3
"""The hot-path recorder: per-phase histograms, a ring of raw events, rolling windows.

Contracts (see recorder.pyx for the memory layout):
- Units: every time and duration is int64 nanoseconds on the recorder's clock
  (CLOCK_MONOTONIC unless clock="tsc").
- Single writer: ``begin/lap/end/record/count`` and the PhaseTimer methods may be
  called from one thread only (the first that writes claims the recorder); a
  write from another thread raises RuntimeError before touching any state.
- Readers (``stats_array``, ``events``, ``progress``) never block the writer.
  In one process they run under the GIL, so they see a state between two
  writes. Across processes (a shared-memory stats block) every bucket and
  counter only ever grows, so a copy taken while the writer runs is a valid
  histogram of the events recorded between the copy's start and end; counts
  are taken from the buckets.
- The write path allocates nothing, takes no lock, never calls into Python and
  never raises for data: negative durations, values above the range and
  non-finite ``record`` durations are counted instead.
"""

from libc.stdint cimport int32_t, int64_t

from gyreprof._core.hdr cimport HdrLayout


ctypedef struct Event:
    int32_t phase        # phase id, or -1 for a whole step
    int32_t _pad
    int64_t step         # step number (1-based; 0 before the first begin())
    int64_t start_ns
    int64_t duration_ns


cdef class Recorder:
    # Hot fields first: the lap path reads these, and keeping them together keeps the
    # number of cache lines a lap touches small.
    cdef int64_t* s              # the stats block (hot header words first)
    cdef int64_t* hot            # per histogram, one 64-byte line: see C_HOT_* in recorder.pyx
    cdef int64_t* counts         # per histogram: L.counts_len buckets
    cdef int64_t* wcounts        # per histogram: WL.counts_len buckets
    cdef Event* ring
    cdef int64_t mask
    cdef unsigned long owner     # thread token (clock.pxd) of the writer, 0 until the first write
    cdef readonly int n_phases
    cdef bint in_warmup
    cdef readonly bint use_tsc
    cdef HdrLayout L             # full-resolution phase histograms
    cdef HdrLayout WL            # coarse histograms of the current rolling window
    cdef double ns_per_tick
    cdef unsigned long long tsc_base
    cdef int64_t tsc_base_ns
    # cold
    cdef int64_t* warm           # per histogram: warm-up count, sum, max
    cdef int64_t* wring          # closed windows
    cdef int64_t* counters       # event counters (prof.count)
    cdef readonly int64_t capacity
    cdef readonly int64_t window_steps
    cdef readonly int max_windows
    cdef readonly int max_counters
    cdef readonly int64_t warmup_steps
    cdef readonly int64_t warmup_ns
    cdef object _stats_owner     # object owning the stats block (numpy array or buffer)
    cdef object _stats           # numpy int64 view of the stats block
    cdef object _ring
    cdef readonly object offsets  # dict: region name -> word offset in the stats block

    cdef _bind(self, object buffer, object copy_from)
    cdef inline void _reset_wcur(self, int64_t h) noexcept
    cdef inline int64_t _now(self) noexcept
    cdef int _claim(self) except -1
    cdef inline void _record(self, int h, int64_t d, int64_t start) noexcept
    cdef void _close_step(self, int64_t now) noexcept
    cdef void _close_window(self, int64_t now) noexcept
    cdef bint _warmup_over_unstepped(self, int64_t now) noexcept
    cdef void _end_warmup(self, int64_t now) noexcept
