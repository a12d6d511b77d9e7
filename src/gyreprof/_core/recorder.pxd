# cython: language_level=3
"""The hot-path recorder: per-phase histograms, a ring of raw events, rolling windows.

Contracts (the stats block's layout is the enum below):
- Units: every time and duration is int64 nanoseconds on the recorder's clock
  (CLOCK_MONOTONIC unless clock="tsc").
- Single writer: ``begin/lap/end/record/count`` and the PhaseTimer methods may be
  called from one thread only (the first that writes claims the recorder); a
  write from another thread raises RuntimeError before touching any state.
- Every event goes to the ring of raw events first; histograms, warm-up totals
  and the open rolling window are accounted from the ring in order (*folded*).
  A private stats block folds every FOLD_BATCH events, at a step boundary
  that ends the warm-up or closes a window, and before an in-process read. A block in a
  caller's buffer (shared memory, read by other processes, which cannot fold)
  accounts each event in its histograms as it is written and folds only the
  open window's accumulators (which no reader sees) in those batches. Every
  event is folded exactly once, with the warm-up state it was recorded in, so
  the result is the same as accounting it at once.
- Readers (``stats_array``, ``stats_view``, ``events``, ``progress``) never
  block the writer. In one process they run under the GIL, fold what is
  pending, and see the state between two writes. Across processes (a
  shared-memory stats block, which has nothing pending), every bucket and
  counter only ever grows, so a copy taken while the writer
  runs is a valid histogram of the events folded between the copy's start and
  end; counts are taken from the buckets.
- Sums of durations never saturate: steady and warm-up sums carry into their
  high words (the "sumhi" region, after the counters) on the fold path.
- The write path allocates nothing, takes no lock, never calls into Python and
  never raises for data: negative durations, values above the range and
  non-finite ``record`` durations are counted instead.
"""

from libc.stdint cimport int32_t, int64_t

from gyreprof._core.hdr cimport HdrLayout


# The stats block layout, declared once: the C enum below is where each word's value
# lives. The write path and the fold's C code use its GYRE_* constants; ``cpdef enum``
# makes each name a module-level int of gyreprof._core.recorder as well (Python code
# reads a block through gyreprof._support.block, never by these words directly).
cdef extern from *:
    """
    enum {
        GYRE_LAYOUT_VERSION = 2,        /* 2: the sums carry into high words (the sumhi region) */

        /* header words; words 0..7 are the ones lap() touches (one cache line) */
        GYRE_H_STEP = 0,                /* steps begun */
        GYRE_H_OPEN_PHASE = 1,          /* phase now open (-1: none / between phases) */
        GYRE_H_OPEN_SINCE = 2,          /* ns of the last boundary (-1: none) */
        GYRE_H_RING_HEAD = 3,           /* events ever written to the ring */
        GYRE_H_STEP_START = 4,          /* ns the open step began (-1: no step open) */
        GYRE_H_NEGATIVE = 5,            /* negative durations (counted, not recorded) */
        GYRE_H_OUT_OF_RANGE = 6,        /* values above the range (clamped into the top bucket) */
        GYRE_H_START = 7,               /* ns of the first write (0: nothing written yet) */
        GYRE_H_STEPS_DONE = 8,          /* steps completed (closed by begin() or end()) */
        GYRE_H_SATURATED = 9,           /* sums that would have wrapped: held at INT64_MAX instead (counted) */
        GYRE_H_NONFINITE = 10,          /* NaN / infinite durations given to record() */
        GYRE_H_STEADY_START = 11,       /* ns warm-up ended (-1: still warming up) */
        GYRE_H_WARMUP_STEPS = 12,       /* steps completed during warm-up */
        GYRE_H_LAST_STEP_END = 13,      /* ns the last step closed (-1: none) */
        GYRE_H_WINDOWS = 14,            /* rolling windows closed so far */
        GYRE_H_WIN_STEPS = 15,          /* steps in the current window */
        GYRE_H_WIN_START = 16,          /* ns the current window began (-1: none) */
        GYRE_H_WIN_FIRST_STEP = 17,     /* first step number of the current window */
        GYRE_H_LAST_WRITE = 18,         /* ns of the last begin/end/record/timed phase (lap() leaves it) */
        GYRE_H_WARMUP_END_STEP = 19,    /* step number of the last warm-up step (-1: warm-up not over) */
        GYRE_H_WIN_SEQ = 20,            /* closed-window seqlock: odd while a window record is written */
        /* steady phase events by the form that recorded them (laps are the rest: the lap
           path keeps no counter of its own); used to price the profiler's overhead */
        GYRE_H_N_TIMER = 21,            /* closed by a PhaseTimer (``with`` and ``@timed``) */
        GYRE_H_N_TIMED = 22,            /* of those, by a TimedFunction (``@timed``) */
        GYRE_H_N_RECORD = 23,           /* given to record() */
        GYRE_H_CLOCK_CHECKS = 24,       /* TSC drift checks against CLOCK_MONOTONIC */
        GYRE_H_CLOCK_RECAL = 25,        /* ... that found drift above 0.01% and recalibrated */
        GYRE_H_CLOCK_FALLBACK = 26,     /* ... that found the TSC unusable and fell back to CLOCK_MONOTONIC */
        GYRE_H_CLOCK_ERROR_PPM = 27,    /* rate error (ppm, signed) found by the last check */
        GYRE_H_SUM_HI = 28,             /* word offset of the "sumhi" region (the sums' high words) */
        GYRE_HEADER_WORDS = 32,

        /* the "hot" region: one 64-byte line per histogram */
        GYRE_HOT_WORDS = 8,
        GYRE_HOT_FIRST = 0,             /* first value recorded (-1: none) */
        GYRE_HOT_STAT = 1,              /* steady statistics: STAT_FIELDS words from here */
        GYRE_HOT_WIN = 5,               /* current rolling window: WCUR_FIELDS words from here */
        /* steady statistics (HOT_STAT + ...). The count is not maintained by the writer
           (the buckets hold it); readers fill it in from the buckets. */
        GYRE_STAT_COUNT = 0,
        GYRE_STAT_SUM = 1,
        GYRE_STAT_MIN = 2,              /* -1: none */
        GYRE_STAT_MAX = 3,
        GYRE_STAT_FIELDS = 4,
        /* current window (HOT_WIN + ...); its count is left to the window's buckets */
        GYRE_WCUR_MIN = 0,              /* -1: none */
        GYRE_WCUR_SUM = 1,
        GYRE_WCUR_MAX = 2,              /* -1: none */
        GYRE_WCUR_FIELDS = 3,
        /* the "warm" region: per histogram, totals of the warm-up */
        GYRE_WARM_COUNT = 0,
        GYRE_WARM_SUM = 1,
        GYRE_WARM_MAX = 2,
        GYRE_WARM_FIELDS = 3,
        /* the "sumhi" region (after the counters): per histogram, the high words of the
           steady and warm-up sums. A sum is ``hi * 2**63 + lo`` with ``0 <= lo < 2**63``:
           the fold carries into ``hi`` where ``lo`` would pass INT64_MAX, so no sum of
           durations saturates (2**63 ns of events per carry, ~292 years) */
        GYRE_SUMHI_STAT = 0,
        GYRE_SUMHI_WARM = 1,
        GYRE_SUMHI_FIELDS = 2,
        /* the "wring" region: closed windows, each WIN_HEADER + WIN_FIELDS * histograms words */
        GYRE_WIN_START = 0,             /* ns the window began */
        GYRE_WIN_END = 1,               /* ns it closed */
        GYRE_WIN_FIRST_STEP = 2,
        GYRE_WIN_STEPS = 3,
        GYRE_WIN_WARMUP = 4,            /* 1: closed during warm-up */
        GYRE_WIN_HEADER = 5,
        GYRE_WIN_COUNT = 0,             /* per histogram, from WIN_HEADER + WIN_FIELDS * h */
        GYRE_WIN_SUM = 1,
        GYRE_WIN_MAX = 2,
        GYRE_WIN_P50 = 3,
        GYRE_WIN_P90 = 4,
        GYRE_WIN_P99 = 5,
        GYRE_WIN_FIELDS = 6,

        GYRE_WINDOW_SIGNIFICANT_FIGURES = 1, /* rolling windows: ~3% buckets, 39x16 counters per histogram */

        /* the form that wrote a ring event (Event.form): steady events are counted by form
           when they are folded into the histograms (H_N_TIMER / H_N_TIMED / H_N_RECORD) */
        GYRE_FORM_LAP = 0,              /* lap() and whole steps (begin / end) */
        GYRE_FORM_TIMER = 1,            /* a PhaseTimer (``with``) */
        GYRE_FORM_TIMED = 2,            /* a TimedFunction (``@timed``) */
        GYRE_FORM_RECORD = 3,           /* record() */
        GYRE_FOLD_BATCH = 64,           /* ring events between two folds (fewer when the ring is smaller) */
    };

    /* one raw event in the ring (Event below): phase is a histogram id (a phase, or
       n_phases for a whole step), form which entry point wrote it (GYRE_FORM_*), step
       its step number (1-based; 0 before the first begin()) */
    typedef struct {
        int32_t phase;
        int32_t form;
        int64_t step;
        int64_t start_ns;
        int64_t duration_ns;
    } gyre_event;
    """
    cpdef enum:
        LAYOUT_VERSION "GYRE_LAYOUT_VERSION"
        H_STEP "GYRE_H_STEP"
        H_OPEN_PHASE "GYRE_H_OPEN_PHASE"
        H_OPEN_SINCE "GYRE_H_OPEN_SINCE"
        H_RING_HEAD "GYRE_H_RING_HEAD"
        H_STEP_START "GYRE_H_STEP_START"
        H_NEGATIVE "GYRE_H_NEGATIVE"
        H_OUT_OF_RANGE "GYRE_H_OUT_OF_RANGE"
        H_START "GYRE_H_START"
        H_STEPS_DONE "GYRE_H_STEPS_DONE"
        H_SATURATED "GYRE_H_SATURATED"
        H_NONFINITE "GYRE_H_NONFINITE"
        H_STEADY_START "GYRE_H_STEADY_START"
        H_WARMUP_STEPS "GYRE_H_WARMUP_STEPS"
        H_LAST_STEP_END "GYRE_H_LAST_STEP_END"
        H_WINDOWS "GYRE_H_WINDOWS"
        H_WIN_STEPS "GYRE_H_WIN_STEPS"
        H_WIN_START "GYRE_H_WIN_START"
        H_WIN_FIRST_STEP "GYRE_H_WIN_FIRST_STEP"
        H_LAST_WRITE "GYRE_H_LAST_WRITE"
        H_WARMUP_END_STEP "GYRE_H_WARMUP_END_STEP"
        H_WIN_SEQ "GYRE_H_WIN_SEQ"
        H_N_TIMER "GYRE_H_N_TIMER"
        H_N_TIMED "GYRE_H_N_TIMED"
        H_N_RECORD "GYRE_H_N_RECORD"
        H_CLOCK_CHECKS "GYRE_H_CLOCK_CHECKS"
        H_CLOCK_RECAL "GYRE_H_CLOCK_RECAL"
        H_CLOCK_FALLBACK "GYRE_H_CLOCK_FALLBACK"
        H_CLOCK_ERROR_PPM "GYRE_H_CLOCK_ERROR_PPM"
        H_SUM_HI "GYRE_H_SUM_HI"
        HEADER_WORDS "GYRE_HEADER_WORDS"
        HOT_WORDS "GYRE_HOT_WORDS"
        HOT_FIRST "GYRE_HOT_FIRST"
        HOT_STAT "GYRE_HOT_STAT"
        HOT_WIN "GYRE_HOT_WIN"
        STAT_COUNT "GYRE_STAT_COUNT"
        STAT_SUM "GYRE_STAT_SUM"
        STAT_MIN "GYRE_STAT_MIN"
        STAT_MAX "GYRE_STAT_MAX"
        STAT_FIELDS "GYRE_STAT_FIELDS"
        WCUR_MIN "GYRE_WCUR_MIN"
        WCUR_SUM "GYRE_WCUR_SUM"
        WCUR_MAX "GYRE_WCUR_MAX"
        WCUR_FIELDS "GYRE_WCUR_FIELDS"
        WARM_COUNT "GYRE_WARM_COUNT"
        WARM_SUM "GYRE_WARM_SUM"
        WARM_MAX "GYRE_WARM_MAX"
        WARM_FIELDS "GYRE_WARM_FIELDS"
        SUMHI_STAT "GYRE_SUMHI_STAT"
        SUMHI_WARM "GYRE_SUMHI_WARM"
        SUMHI_FIELDS "GYRE_SUMHI_FIELDS"
        WIN_START "GYRE_WIN_START"
        WIN_END "GYRE_WIN_END"
        WIN_FIRST_STEP "GYRE_WIN_FIRST_STEP"
        WIN_STEPS "GYRE_WIN_STEPS"
        WIN_WARMUP "GYRE_WIN_WARMUP"
        WIN_HEADER "GYRE_WIN_HEADER"
        WIN_COUNT "GYRE_WIN_COUNT"
        WIN_SUM "GYRE_WIN_SUM"
        WIN_MAX "GYRE_WIN_MAX"
        WIN_P50 "GYRE_WIN_P50"
        WIN_P90 "GYRE_WIN_P90"
        WIN_P99 "GYRE_WIN_P99"
        WIN_FIELDS "GYRE_WIN_FIELDS"
        WINDOW_SIGNIFICANT_FIGURES "GYRE_WINDOW_SIGNIFICANT_FIGURES"
        FORM_LAP "GYRE_FORM_LAP"
        FORM_TIMER "GYRE_FORM_TIMER"
        FORM_TIMED "GYRE_FORM_TIMED"
        FORM_RECORD "GYRE_FORM_RECORD"
        FOLD_BATCH "GYRE_FOLD_BATCH"

    ctypedef struct Event "gyre_event":
        int32_t phase        # histogram id: a phase, or n_phases for a whole step
        int32_t form         # FORM_*: which entry point wrote it
        int64_t step         # step number (1-based; 0 before the first begin())
        int64_t start_ns
        int64_t duration_ns




cdef class Recorder:
    # Hot fields first: the lap path reads these (the stats header, the ring, the fold
    # threshold, the writer token and the clock), and keeping them together keeps the
    # number of cache lines a lap touches small.
    cdef int64_t* s              # the stats block (hot header words first)
    cdef Event* ring             # the ring of raw events (events not folded yet included)
    cdef int64_t mask
    cdef int64_t fold_at         # ring head at which the pending events are folded
    cdef bint shared             # the block is in a caller's buffer: histograms at once
    cdef unsigned long owner     # thread token (clock.pxd) of the writer, 0 until the first write
    # ns of the first write since mark_since() (-1: none yet); every write form sets it
    # when it is < 0 (one compare). Private to the writer's process: not in the block.
    cdef int64_t since_mark
    cdef readonly int n_phases
    cdef readonly bint use_tsc
    cdef double ns_per_tick
    cdef unsigned long long tsc_base
    cdef int64_t tsc_base_ns
    # the fold (every FOLD_BATCH events, at step and window boundaries, before a read)
    cdef bint in_warmup
    cdef bint default_layout     # 3 significant figures from 1 ns (the fold's compiled-in case)
    cdef int64_t fk[9]           # the layouts' constants for the fold (see gyre_fold)
    cdef int64_t folded          # ring events accounted so far (histograms and windows)
    cdef int64_t batch           # FOLD_BATCH, or the capacity when that is smaller
    cdef int64_t* hot            # per histogram, one 64-byte line: see HOT_* above
    cdef int64_t* counts         # per histogram: L.counts_len buckets
    cdef int64_t* wcounts        # per histogram: WL.counts_len buckets
    cdef HdrLayout L             # full-resolution phase histograms
    cdef HdrLayout WL            # coarse histograms of the current rolling window
    # cold: the long-baseline anchor of the TSC calibration and the drift checks
    cdef unsigned long long cal_tsc0
    cdef int64_t cal_mono0
    cdef int64_t next_clock_check
    cdef int64_t clock_check_ns  # the drift checks' interval and least span (1 s)
    cdef readonly str clock_requested
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
    cdef public object form_cost_ns  # dict: form -> calibrated ns per event (config())

    cdef _bind(self, object buffer, object copy_from)
    cdef inline void _reset_wcur(self, int64_t h) noexcept
    cdef inline int64_t _now(self) noexcept
    cdef int _claim(self) except -1
    cdef inline void _put(self, int h, int64_t d, int64_t start, int form) noexcept
    cdef inline void _emit(self, int h, int64_t d, int64_t start, int form) noexcept
    cdef void _fold(self, int64_t upto) noexcept
    cdef inline void _account_now(self, int64_t idx) noexcept
    cdef void _account_slow(self, int h, int64_t d, int64_t start, int form,
                            int64_t idx) noexcept
    cdef void _close_step(self, int64_t now) noexcept
    cdef inline void _begin(self, int64_t now) noexcept
    cdef inline void _end(self, int64_t now) noexcept
    cdef inline void _lap(self, long long phase, int64_t now) noexcept
    # adds ``k`` to counter ``slot``: the caller has checked 0 <= slot < max_counters and
    # claimed the writer (``count`` does both); saturates at the int64 limits, counted
    cdef inline void _add_count(self, long long slot, long long k) noexcept
    cdef void _close_window(self, int64_t now) noexcept
    cdef int _check_clock(self, int64_t min_span_ns) noexcept
    cdef void _fall_back(self) noexcept
    cdef bint _warmup_over_unstepped(self, int64_t now, int64_t idx) noexcept
    cdef void _end_warmup(self, int64_t now) noexcept


cdef class Spans:
    cdef Recorder rec
    cdef readonly int64_t in_flight       # spans begun and not ended now
    cdef readonly int64_t max_in_flight   # the most at once so far
    cdef readonly int64_t begun
    cdef readonly int64_t ended
    cdef readonly int64_t unmatched       # end() with no span open
    cdef readonly int64_t first_ns        # first begin (-1: none)
    cdef int64_t since                    # ns of the last change of in_flight (-1: none)
    cdef int64_t area_lo                  # integral of in_flight over time (ns x spans)
    cdef int64_t area_hi                  # its carries (units of 2**62)
    cdef int64_t busy                     # ns with at least one span in flight
    cdef int64_t at_max                   # ns with in_flight == max_in_flight (this max)

    cdef inline void _advance(self, int64_t now) noexcept
    # ``begin`` and ``end`` for compiled callers: the same, with no Python
    # call; ``_end`` takes a phase id the caller has checked (0 <= p < rec.n_phases)
    cdef int64_t _begin(self) except? -1
    cdef int64_t _end(self, int p, int64_t start_ns) except? -1

