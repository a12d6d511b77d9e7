# cython: language_level=3, embedsignature=True, always_allow_keywords=False
"""The hot-path recorder.

Memory: one int64 *stats block* (histograms, counters, rolling windows; it can
live in shared memory for the live view) and one *ring* of raw events
(private). Word offsets of the stats block's regions are in
``Recorder.offsets``; the words inside each region are named in recorder.pxd. With ``P`` phases there
are ``P + 1`` histograms: ``0..P-1`` are the phases, ``P`` is the whole step.
"""

cimport cython
import operator
from types import MethodType
import os
import time

import numpy as np
cimport numpy as cnp
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from libc.math cimport isfinite
from libc.stdint cimport INT64_MAX, int64_t, uint64_t
from libc.string cimport memcpy, memset

from gyreprof._core.clock cimport GYRE_HAVE_TSC, gyre_mono_ns, gyre_rdtsc, gyre_thread_token
from gyreprof._core.hdr cimport HdrLayout, hdr_index, hdr_init, hdr_rank, hdr_value_at

cnp.import_array()

cdef extern from *:
    """
    #define gyre_unlikely(x) __builtin_expect(!!(x), 0)
    #define gyre_likely(x) __builtin_expect(!!(x), 1)
    static inline int gyre_add_overflow(int64_t a, int64_t b, int64_t* out) {
        return __builtin_add_overflow(a, b, out);
    }
    static inline int64_t gyre_min64(int64_t a, int64_t b) { return b < a ? b : a; }
    static inline int64_t gyre_max64(int64_t a, int64_t b) { return b > a ? b : a; }
    /* Orders the writer's stores for a reader in another process (x86: compiler only). */
    static inline void gyre_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
    """
    bint gyre_unlikely(bint x) noexcept nogil
    bint gyre_likely(bint x) noexcept nogil
    bint gyre_add_overflow(int64_t a, int64_t b, int64_t* out) noexcept nogil
    int64_t gyre_min64(int64_t a, int64_t b) noexcept nogil
    int64_t gyre_max64(int64_t a, int64_t b) noexcept nogil
    void gyre_release_fence() noexcept nogil

cdef extern from *:
    """
    /* The fold's steady-state loop (see Recorder._fold), in C so that the layout
       constants of the default histograms (3 significant figures, 1 ns lowest; windows
       at 1 significant figure) are compile-time constants in one copy of it. Words
       and the event are the stats block's GYRE_* enum and gyre_event (recorder.pxd,
       their one declaration). */
    /* ``*lo + d`` (d >= 0) with the carry past INT64_MAX into ``*hi``: the sum stays
       ``hi * 2**63 + lo`` with 0 <= lo < 2**63. The rare branch of the fold. */
    static inline void gyre_carry_add(int64_t* lo, int64_t* hi, int64_t d) {
        uint64_t t = (uint64_t)*lo + (uint64_t)d;  /* < 2**64: both below 2**63 */
        if (t >> 63) { *hi += 1; t &= (uint64_t)INT64_MAX; }
        *lo = (int64_t)t;
    }
    /* A log-linear bucket index in closed form: with c = clz(v | submask),
       index = K - (c << shm) + (v >> (B - c)), where B = 63 - shm and
       K = ((64 - unit_magnitude - shm) << shm) - 2**shm (hdr.pxd's hdr_index, folded). */
    #define GYRE_IDX(v, c, shm, B, K) ((K) - ((int64_t)(c) << (shm)) + ((v) >> ((B) - (c))))

    #define GYRE_FOLD_HIST 1  /* the histograms, sums, extremes and form counts */
    #define GYRE_FOLD_WIN 2   /* the open rolling window's buckets, sum and extremes */

    static inline __attribute__((always_inline)) int64_t gyre_fold_body(
            const gyre_event* ring, int64_t rmask, int64_t i, int64_t upto,
            int64_t* s, int64_t* hot, int64_t* counts, int64_t* wcounts, int64_t highest,
            uint64_t m1, int shm1, int B1, int64_t K1, int64_t len1,
            uint64_t m2, int shm2, int B2, int64_t K2, int64_t len2, int what) {
        for (; i < upto; i++) {
            const gyre_event* e = &ring[i & rmask];
            int64_t h = e->phase;
            int64_t d = e->duration_ns;
            int64_t* hl = hot + GYRE_HOT_WORDS * h;
            int64_t v = d;
            if (what & GYRE_FOLD_HIST) {
                int64_t* st = hl + GYRE_HOT_STAT;
                /* the rare cases (a value above the range, a phase's first value) go back */
                if (__builtin_expect(((uint64_t)d > (uint64_t)highest) | (st[GYRE_STAT_MIN] < 0), 0))
                    return i;
                int c = __builtin_clzll((uint64_t)d | m1);
                counts[h * len1 + GYRE_IDX(d, c, shm1, B1, K1)] += 1;
                if (__builtin_expect(__builtin_add_overflow(st[GYRE_STAT_SUM], d, &st[GYRE_STAT_SUM]), 0)) {
                    /* undo the wrapped add, then carry into the high word */
                    st[GYRE_STAT_SUM] = (int64_t)((uint64_t)st[GYRE_STAT_SUM] - (uint64_t)d);
                    gyre_carry_add(&st[GYRE_STAT_SUM], s + s[GYRE_H_SUM_HI] + GYRE_SUMHI_FIELDS * h, d);
                }
                if (__builtin_expect(d < st[GYRE_STAT_MIN], 0)) st[GYRE_STAT_MIN] = d;
                if (__builtin_expect(d > st[GYRE_STAT_MAX], 0)) st[GYRE_STAT_MAX] = d;
                int32_t form = e->form;
                if (form != 0) {
                    if (form == GYRE_FORM_RECORD) {
                        s[GYRE_H_N_RECORD] += 1;
                    } else {
                        s[GYRE_H_N_TIMER] += 1;
                        if (form == GYRE_FORM_TIMED) s[GYRE_H_N_TIMED] += 1;
                    }
                }
            } else if (v > highest) {
                v = highest;  /* buckets and sums take the clamped value, extremes the raw one */
            }
            if (what & GYRE_FOLD_WIN) {
                int64_t* wc = hl + GYRE_HOT_WIN;
                int c = __builtin_clzll((uint64_t)v | m2);
                wcounts[h * len2 + GYRE_IDX(v, c, shm2, B2, K2)] += 1;
                if (__builtin_expect(__builtin_add_overflow(wc[GYRE_WCUR_SUM], v, &wc[GYRE_WCUR_SUM]), 0))
                    wc[GYRE_WCUR_SUM] = INT64_MAX;
                /* an unset min (-1) reads as the largest unsigned value */
                if (__builtin_expect((uint64_t)d < (uint64_t)wc[GYRE_WCUR_MIN], 0)) wc[GYRE_WCUR_MIN] = d;
                if (__builtin_expect(d > wc[GYRE_WCUR_MAX], 0)) wc[GYRE_WCUR_MAX] = d;
            }
        }
        return i;
    }

    /* Events i .. upto-1 (with HIST: stops at the first rare one and returns its index).
       ``default``: 3 significant figures from 1 ns, windows at 1, constants compiled in;
       ``any``: the constants from the layouts. ``all``: histograms and window (a private
       block's fold); ``hist``: one event as it is written (a shared block); ``win``:
       the window only (a shared block's fold). ``k`` (Recorder.fk): sub-bucket mask,
       half-count magnitude, unit magnitude and counts length of the phase histograms,
       the same four of the window histograms, then the highest value. */
    #define GYRE_FOLD_ARGS const void* ring, int64_t rmask, int64_t i, int64_t upto, \
            int64_t* s, int64_t* hot, int64_t* counts, int64_t* wcounts, const int64_t* k
    #define GYRE_FOLD_PASS (const gyre_event*)ring, rmask, i, upto, s, hot, counts, wcounts, k[8]
    #define GYRE_FOLD_KEYS(m, shm, unit, len) (uint64_t)(m), (int)(shm), 63 - (int)(shm), \
            ((int64_t)(64 - (unit) - (shm)) << (shm)) - ((int64_t)1 << (shm)), (len)
    #define GYRE_FOLD_ANY(what) gyre_fold_body(GYRE_FOLD_PASS, \
            GYRE_FOLD_KEYS(k[0], k[1], k[2], k[3]), GYRE_FOLD_KEYS(k[4], k[5], k[6], k[7]), what)
    #define GYRE_FOLD_DEFAULT(what) gyre_fold_body(GYRE_FOLD_PASS, \
            2047, 10, 53, 54272, k[3], 31, 4, 59, 944, k[7], what)
    #define GYRE_FOLD_ALL (GYRE_FOLD_HIST | GYRE_FOLD_WIN)

    static int64_t gyre_fold_default_all(GYRE_FOLD_ARGS) { return GYRE_FOLD_DEFAULT(GYRE_FOLD_ALL); }
    static int64_t gyre_fold_default_win(GYRE_FOLD_ARGS) { return GYRE_FOLD_DEFAULT(GYRE_FOLD_WIN); }
    static inline __attribute__((always_inline)) int64_t gyre_fold_default_hist(GYRE_FOLD_ARGS) {
        return GYRE_FOLD_DEFAULT(GYRE_FOLD_HIST);
    }
    static int64_t gyre_fold_any_all(GYRE_FOLD_ARGS) { return GYRE_FOLD_ANY(GYRE_FOLD_ALL); }
    static int64_t gyre_fold_any_win(GYRE_FOLD_ARGS) { return GYRE_FOLD_ANY(GYRE_FOLD_WIN); }
    static int64_t gyre_fold_any_hist(GYRE_FOLD_ARGS) { return GYRE_FOLD_ANY(GYRE_FOLD_HIST); }

    /* One entry point; ``what`` and ``dflt`` are constants at every call site, so each
       call compiles to one of the six above. */
    static inline __attribute__((always_inline)) int64_t gyre_fold(GYRE_FOLD_ARGS, int what,
                                                                    int dflt) {
        if (what == GYRE_FOLD_HIST)
            return dflt ? gyre_fold_default_hist(ring, rmask, i, upto, s, hot, counts, wcounts, k)
                        : gyre_fold_any_hist(ring, rmask, i, upto, s, hot, counts, wcounts, k);
        if (what == GYRE_FOLD_WIN)
            return dflt ? gyre_fold_default_win(ring, rmask, i, upto, s, hot, counts, wcounts, k)
                        : gyre_fold_any_win(ring, rmask, i, upto, s, hot, counts, wcounts, k);
        return dflt ? gyre_fold_default_all(ring, rmask, i, upto, s, hot, counts, wcounts, k)
                    : gyre_fold_any_all(ring, rmask, i, upto, s, hot, counts, wcounts, k);
    }
    """
    const int GYRE_FOLD_HIST
    const int GYRE_FOLD_WIN
    const int GYRE_FOLD_ALL
    int64_t gyre_fold(const void* ring, int64_t rmask, int64_t i, int64_t upto, int64_t* s,
                      int64_t* hot, int64_t* counts, int64_t* wcounts, const int64_t* k,
                      int what, int dflt) noexcept nogil
    void gyre_carry_add(int64_t* lo, int64_t* hi, int64_t d) noexcept nogil

cdef extern from *:
    """
    /* An exact int of at most one digit (0 .. 2**30-1 and its negatives): its value,
       read in place. Anything else (bool, numpy ints, floats, big ints) returns 0 and
       takes the checked path. */
    static inline int gyre_small_int(PyObject* o, long long* out) {
        if (__builtin_expect(PyLong_CheckExact(o), 1)) {
    #if PY_VERSION_HEX >= 0x030C0000
            if (_PyLong_IsCompact((PyLongObject*)o)) {
                *out = (long long)_PyLong_CompactValue((PyLongObject*)o);
                return 1;
            }
    #else
            Py_ssize_t size = Py_SIZE(o);
            if (__builtin_expect((size_t)(size + 1) <= 2, 1)) {  /* -1, 0 or 1 digit */
                *out = size * (long long)((PyLongObject*)o)->ob_digit[0];
                return 1;
            }
    #endif
        }
        return 0;
    }
    """
    bint gyre_small_int(object o, long long* out) noexcept

# The stats block's words (H_*, HOT_*, STAT_*, WCUR_*, WARM_*, WIN_*) are declared once,
# in recorder.pxd (a C enum, exported by ``cpdef enum``): the same constants for the C
# fold above, the Cython code below and, as module-level ints, for Python.

EVENT_DTYPE = np.dtype([("phase", np.int32), ("form", np.int32), ("step", np.int64),
                        ("start_ns", np.int64), ("duration_ns", np.int64)])



cdef inline void _stamp_first_write(int64_t* s, bint in_warmup, int64_t now) noexcept:
    """Record the time of the recorder's first write (and, without warm-up, of steady state)."""
    if s[H_START] == 0:
        s[H_START] = now
        if not in_warmup:
            s[H_STEADY_START] = now


cdef inline void _win_add(const HdrLayout* WL, int64_t* wcounts, int64_t* hot, int64_t h,
                          int64_t d) noexcept:
    """Account duration ``d`` (>= 0) of histogram ``h`` into the open rolling window."""
    cdef int64_t v = d if d <= WL.highest else WL.highest
    wcounts[h * WL.counts_len + hdr_index(WL, v)] += 1
    cdef int64_t* wc = hot + HOT_WORDS * h + HOT_WIN
    if gyre_unlikely(gyre_add_overflow(wc[WCUR_SUM], v, &wc[WCUR_SUM])):
        wc[WCUR_SUM] = INT64_MAX
    # min / max change rarely: predicted branches, no store; an unset min (-1) reads as
    # the largest unsigned value, so one compare covers it
    if gyre_unlikely(<uint64_t>d < <uint64_t>wc[WCUR_MIN]):
        wc[WCUR_MIN] = d
    if gyre_unlikely(d > wc[WCUR_MAX]):
        wc[WCUR_MAX] = d


cdef object _strict_int(object x, str what):
    """``x`` as a Python int: ints and integer types with ``__index__`` (numpy ints);
    bool and everything else (floats, strings) raise TypeError naming ``what``."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{what} must be an int, got a bool ({x!r})")
    if isinstance(x, int):
        return int(x)
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(x).__name__} ({x!r})") from None


cdef object _int64_arg(object x, str what):
    """``x`` as a Python int in the int64 range (TypeError / OverflowError naming ``what``)."""
    v = _strict_int(x, what)
    if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        raise OverflowError(f"{what}={v} is outside the int64 range")
    return v


cdef int64_t _ns_arg(object x, str what) except? -1:
    """A timestamp argument: an int64 >= 0 (ns of a recorder's clock)."""
    cdef int overflow = 0
    cdef long long fast
    if PyLong_CheckExact(x):  # the usual int: no conversion, no Python comparisons
        fast = PyLong_AsLongLongAndOverflow(x, &overflow)
        if overflow == 0 and fast >= 0:
            return fast
    v = _int64_arg(x, what)
    if v < 0:
        raise ValueError(f"{what} must be a time of the recorder's clock (>= 0 ns), got {v}")
    return v


cdef long long _id_slow(object x, long long n, str what) except -1:
    """The checked conversion of a phase id / counter slot: 0 <= x < n."""
    v = _strict_int(x, what)
    if v < 0 or v >= n:
        raise IndexError(f"{what} {v} out of range 0..{n - 1}")
    return v


cdef inline long long _id(object x, long long n, str what) except -1:
    cdef long long v = -1
    if gyre_likely(gyre_small_int(x, &v) & (<unsigned long long>v < <unsigned long long>n)):
        return v
    return _id_slow(x, n, what)


def _aligned_events(int64_t n):
    """A zeroed array of ``n`` events starting on a 64-byte cache line."""
    raw = np.zeros(n * sizeof(Event) + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start : start + n * sizeof(Event)].view(EVENT_DTYPE)


def stats_layout(int n_phases, int64_t counts_len, int64_t window_counts_len,
                 int max_windows, int max_counters):
    """Word offsets of each region of a stats block, and its total size in words."""
    cdef int64_t nh = n_phases + 1
    off = {}
    pos = HEADER_WORDS
    for name, size in (("hot", HOT_WORDS * nh), ("warm", WARM_FIELDS * nh),
                       ("counts", nh * counts_len),
                       ("wcounts", nh * window_counts_len),
                       ("wring", max_windows * (WIN_HEADER + WIN_FIELDS * nh)),
                       ("counters", max_counters),
                       ("sumhi", SUMHI_FIELDS * nh)):
        off[name] = pos
        pos += size
    off["words"] = pos
    off["hot_words"] = HOT_WORDS
    return off


def tsc_invariant():
    """True where the CPU's TSC ticks at a constant rate in every power state."""
    if not GYRE_HAVE_TSC:
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "constant_tsc" in flags and "nonstop_tsc" in flags
    except OSError:
        return False
    return False


_CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"


def kernel_clocksource(path=_CLOCKSOURCE):
    """The clock the kernel keeps time with ("tsc", "kvm-clock", "hpet"...), or None
    where it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def tsc_trusted(clocksource_path=_CLOCKSOURCE):
    """What ``clock="auto"`` asks of the TSC: invariant (``tsc_invariant``) and the
    kernel's own clocksource. The kernel watches the TSC against other clocks and
    stops keeping time with it when it finds it unstable (unsynchronised across
    CPUs, a virtual machine that does not keep it steady): then auto keeps
    CLOCK_MONOTONIC, and so it does where the clocksource cannot be read."""
    return tsc_invariant() and kernel_clocksource(clocksource_path) == "tsc"


cdef int64_t _tsc_pair(unsigned long long* tsc, int64_t* mono) noexcept nogil:
    """One TSC reading and the CLOCK_MONOTONIC time it was taken at: the TSC read
    between two CLOCK_MONOTONIC reads, their midpoint, best (narrowest) of 7 tries, so
    that neither a cold first call nor a preemption between the two reads skews it.
    Returns the bracket's width in ns."""
    cdef int64_t a, b, best = -1
    cdef unsigned long long t
    cdef int k
    for k in range(7):
        a = gyre_mono_ns()
        t = gyre_rdtsc()
        b = gyre_mono_ns()
        if best < 0 or b - a < best:
            best = b - a
            tsc[0] = t
            mono[0] = a + (b - a) // 2
    return best


def calibrate_tsc(double duration_s=0.02):
    """Measure ns per TSC tick against CLOCK_MONOTONIC: (ns_per_tick, tsc_base, base_ns)."""
    if not tsc_invariant():
        raise ValueError(
            "clock='tsc' needs an invariant TSC (x86 with constant_tsc and nonstop_tsc in "
            "/proc/cpuinfo); this machine has none. Use clock='monotonic'.")
    cdef unsigned long long t0, t1
    cdef int64_t m0, m1
    _tsc_pair(&t0, &m0)
    time.sleep(duration_s)
    _tsc_pair(&t1, &m1)
    if t1 <= t0 or m1 <= m0:
        raise ValueError("TSC calibration failed: the counter did not advance")
    return (<double>(m1 - m0)) / (<double>(t1 - t0)), t1, m1


_TSC_CALIBRATION = None


def _process_tsc_calibration():
    """The TSC calibration of this process (measured once, 20 ms; every recorder on the
    TSC starts from it and checks its own drift against CLOCK_MONOTONIC)."""
    global _TSC_CALIBRATION
    if _TSC_CALIBRATION is None or _TSC_CALIBRATION[3] != os.getpid():
        _TSC_CALIBRATION = (*calibrate_tsc(), os.getpid())
    return _TSC_CALIBRATION[:3]


def monotonic_ns():
    """CLOCK_MONOTONIC in ns, read in C (same clock as time.perf_counter_ns on Linux)."""
    return gyre_mono_ns()


cdef class Recorder:
    """Per-phase histograms + ring buffer + rolling windows for one writer thread.

    Recorder(n_phases, capacity=65536, *, significant_figures=3, lowest_ns=1,
             highest_ns=3_600_000_000_000, warmup_steps=0, warmup_ns=0,
             window_steps=1000, max_windows=512, max_counters=32,
             clock="monotonic", buffer=None)

    ``buffer``: an optional writable buffer (e.g. a shared-memory segment) of at
    least ``Recorder.required_bytes(...)`` bytes that holds the stats block.
    """

    # All set-up happens in __cinit__, which runs exactly once per object: no method can
    # meet a half-built recorder, and calling __init__ again cannot resize a live one.
    def __cinit__(self, n_phases, capacity=65536, *, significant_figures=3,
                 lowest_ns=1, highest_ns=3_600_000_000_000,
                 warmup_steps=0, warmup_ns=0, window_steps=1000,
                 max_windows=512, max_counters=32, str clock="monotonic",
                 object buffer=None):
        # every size and limit is a strict int in the int64 range, named when it is not
        n_phases, capacity, significant_figures, lowest_ns, highest_ns = (
            _int64_arg(n_phases, "n_phases"), _int64_arg(capacity, "capacity"),
            _int64_arg(significant_figures, "significant_figures"),
            _int64_arg(lowest_ns, "lowest_ns"), _int64_arg(highest_ns, "highest_ns"))
        warmup_steps, warmup_ns, window_steps, max_windows, max_counters = (
            _int64_arg(warmup_steps, "warmup_steps"), _int64_arg(warmup_ns, "warmup_ns"),
            _int64_arg(window_steps, "window_steps"), _int64_arg(max_windows, "max_windows"),
            _int64_arg(max_counters, "max_counters"))
        if n_phases < 1 or n_phases > 255:
            raise ValueError(f"n_phases must be 1..255, got {n_phases}")
        if capacity < 1:
            raise ValueError(f"capacity must be a positive number of events, got {capacity}")
        if capacity > (1 << 30):
            raise ValueError(f"capacity {capacity} is above the limit of 2**30 events")
        if warmup_steps < 0 or warmup_ns < 0:
            raise ValueError("warm-up must be >= 0")
        if warmup_steps > 0 and warmup_ns > 0:
            raise ValueError("give warm-up in steps or in time, not both")
        if window_steps < 1:
            raise ValueError(f"window_steps must be >= 1, got {window_steps}")
        if max_windows < 1 or max_windows > (1 << 20):
            raise ValueError(f"max_windows must be 1..{1 << 20}, got {max_windows}")
        if max_counters < 0 or max_counters > 4096:
            raise ValueError(f"max_counters must be 0..4096, got {max_counters}")
        if not 1 <= significant_figures <= 5:
            raise ValueError(f"significant_figures must be 1..5, got {significant_figures}")
        cdef int n_phases_c = n_phases
        cdef int64_t capacity_c = capacity
        cdef int significant_figures_c = significant_figures
        cdef int64_t lowest_ns_c = lowest_ns
        cdef int64_t highest_ns_c = highest_ns
        cdef int64_t warmup_steps_c = warmup_steps
        cdef int64_t warmup_ns_c = warmup_ns
        cdef int64_t window_steps_c = window_steps
        cdef int max_windows_c = max_windows
        cdef int max_counters_c = max_counters
        hdr_init(&self.L, lowest_ns_c, highest_ns_c, significant_figures_c)
        hdr_init(&self.WL, lowest_ns_c, highest_ns_c, WINDOW_SIGNIFICANT_FIGURES)
        self.fk[0] = <int64_t>self.L.sub_bucket_mask
        self.fk[1] = self.L.sub_bucket_half_count_magnitude
        self.fk[2] = self.L.unit_magnitude
        self.fk[3] = self.L.counts_len
        self.fk[4] = <int64_t>self.WL.sub_bucket_mask
        self.fk[5] = self.WL.sub_bucket_half_count_magnitude
        self.fk[6] = self.WL.unit_magnitude
        self.fk[7] = self.WL.counts_len
        self.fk[8] = self.L.highest
        # the layouts whose constants the fold's default copy has compiled in
        self.default_layout = (self.L.unit_magnitude == 0
                               and self.L.sub_bucket_half_count_magnitude == 10
                               and self.WL.unit_magnitude == 0
                               and self.WL.sub_bucket_half_count_magnitude == 4
                               and self.WL.highest == self.L.highest)
        if clock == "monotonic" or (clock == "auto" and not tsc_trusted()):
            self.use_tsc = False
        elif clock in ("tsc", "auto"):
            self.ns_per_tick, self.tsc_base, self.tsc_base_ns = _process_tsc_calibration()
            self.cal_tsc0, self.cal_mono0 = self.tsc_base, self.tsc_base_ns
            self.use_tsc = True
        else:
            raise ValueError(f"clock must be 'monotonic', 'tsc' or 'auto', got {clock!r}")
        self.clock_requested = clock
        self.next_clock_check = 0
        self.clock_check_ns = 1_000_000_000
        self.n_phases = n_phases_c
        cdef int64_t cap = 1
        while cap < capacity_c:
            cap <<= 1
        self.capacity = cap
        self.mask = cap - 1
        self.window_steps = window_steps_c
        self.max_windows = max_windows_c
        self.max_counters = max_counters_c
        self.warmup_steps = warmup_steps_c
        self.warmup_ns = warmup_ns_c
        self.offsets = stats_layout(n_phases_c, self.L.counts_len, self.WL.counts_len,
                                    max_windows_c, max_counters_c)
        self._ring = _aligned_events(cap)
        self.ring = <Event*>cnp.PyArray_DATA(self._ring)
        self._bind(buffer, None)
        self.reset()

    @staticmethod
    def required_bytes(int n_phases, *, int significant_figures=3, int64_t lowest_ns=1,
                       int64_t highest_ns=3_600_000_000_000, int max_windows=512,
                       int max_counters=32):
        """Size in bytes of the stats block for these settings."""
        cdef HdrLayout L, WL
        hdr_init(&L, lowest_ns, highest_ns, significant_figures)
        hdr_init(&WL, lowest_ns, highest_ns, WINDOW_SIGNIFICANT_FIGURES)
        return 8 * stats_layout(n_phases, L.counts_len, WL.counts_len, max_windows,
                                max_counters)["words"]

    cdef _bind(self, object buffer, object copy_from):
        cdef int64_t words = self.offsets["words"]
        if buffer is None:
            raw = np.zeros(words + 8, dtype=np.int64)  # aligned to a 64-byte line below
            start = ((-raw.ctypes.data) % 64) // 8
            arr = raw[start : start + words]
            owner = raw
        else:
            mv = memoryview(buffer)
            if mv.readonly:
                raise ValueError("the stats buffer must be writable")
            if not mv.c_contiguous:
                raise ValueError("the stats buffer must be contiguous")
            if mv.nbytes < 8 * words:
                raise ValueError(
                    f"the stats buffer holds {mv.nbytes} bytes; {8 * words} are needed")
            arr = np.frombuffer(mv.cast("B"), dtype=np.int64, count=words)
            owner = buffer
        if copy_from is not None:
            arr[:] = copy_from
        self._stats_owner = owner
        self._stats = arr
        self.s = <int64_t*>cnp.PyArray_DATA(arr)
        off = self.offsets
        self.hot = self.s + <int64_t>off["hot"]
        self.warm = self.s + <int64_t>off["warm"]
        self.counts = self.s + <int64_t>off["counts"]
        self.wcounts = self.s + <int64_t>off["wcounts"]
        self.wring = self.s + <int64_t>off["wring"]
        self.counters = self.s + <int64_t>off["counters"]
        self.s[H_SUM_HI] = <int64_t>off["sumhi"]  # where the fold carries (also after a copy)
        # A block in a caller's buffer (a shared-memory segment) is read by other
        # processes, which cannot fold: its histograms take every event as it is
        # written, and only its open window (which no reader sees) waits for the fold.
        # A private block folds both in batches.
        self.shared = buffer is not None
        self.batch = FOLD_BATCH if self.capacity > FOLD_BATCH else self.capacity
        self.fold_at = self.folded + self.batch

    def rebind(self, buffer=None):
        """Move the stats block to ``buffer`` (None: private memory), keeping its content.

        Used after fork so a child stops writing into its parent's shared segment:
        nothing is written to the old block. Pending events are folded into the new
        one as the old one would have folded them.
        """
        current = np.array(self._stats, copy=True)
        cdef bint was_shared = self.shared
        self._bind(buffer, current)
        cdef bint now_shared = self.shared
        self.shared = was_shared
        self._fold(self.s[H_RING_HEAD])
        self.shared = now_shared

    def reset(self):
        """Forget everything recorded (the writer thread is released too)."""
        cdef int64_t nh = self.n_phases + 1
        cdef int64_t h
        self._stats[:] = 0
        cdef int64_t* s = self.s
        s[H_SUM_HI] = self.offsets["sumhi"]
        s[H_OPEN_PHASE] = -1
        s[H_OPEN_SINCE] = -1
        s[H_STEP_START] = -1
        s[H_LAST_STEP_END] = -1
        s[H_WIN_START] = -1
        s[H_WARMUP_END_STEP] = -1
        self.in_warmup = self.warmup_steps > 0 or self.warmup_ns > 0
        s[H_STEADY_START] = -1
        for h in range(nh):
            self.hot[HOT_WORDS * h + HOT_FIRST] = -1
            self.hot[HOT_WORDS * h + HOT_STAT + STAT_MIN] = -1
            self._reset_wcur(h)
        self.folded = 0
        self.fold_at = self.batch
        self.owner = 0
        self.since_mark = -1

    cdef inline void _reset_wcur(self, int64_t h) noexcept:
        cdef int64_t* wc = self.hot + HOT_WORDS * h + HOT_WIN
        wc[WCUR_MIN] = -1
        wc[WCUR_SUM] = 0
        wc[WCUR_MAX] = -1

    # ------------------------------------------------------------------ clock

    cdef inline int64_t _now(self) noexcept:
        # the default clock on the straight path (a cold branch costs a loop that
        # evicts the predictor's state more than a warm one)
        if gyre_unlikely(self.use_tsc):
            return self.tsc_base_ns + <int64_t>(
                <double>(<long long>(gyre_rdtsc() - self.tsc_base)) * self.ns_per_tick)
        return gyre_mono_ns()

    def now_ns(self):
        """The recorder's clock now, in ns."""
        return self._now()

    # ------------------------------------------------------------ write path

    cdef int _claim(self) except -1:
        cdef unsigned long tid = gyre_thread_token()
        if self.owner == 0:
            self.owner = tid
            return 0
        if tid != self.owner:
            raise RuntimeError(
                "this Recorder is written by another thread; a Recorder has one writer. "
                "Give each thread its own Profiler, or use Profiler(..., per_thread=True).")
        return 0

    cdef inline void _put(self, int h, int64_t d, int64_t start, int form) noexcept:
        """Append the event (``d`` >= 0) to the ring; fold when a batch is pending."""
        cdef int64_t* s = self.s
        cdef int64_t head = s[H_RING_HEAD]
        cdef Event* e = &self.ring[head & self.mask]
        e.phase = h  # n_phases marks a whole step; events() turns it into -1
        e.form = form
        e.step = s[H_STEP]
        e.start_ns = start
        e.duration_ns = d
        s[H_RING_HEAD] = head + 1
        if gyre_unlikely(self.shared):
            self._account_now(head)
        if gyre_unlikely(head + 1 >= self.fold_at):
            self._fold(head + 1)

    cdef inline void _account_now(self, int64_t idx) noexcept:
        """A shared block's histograms take ring event ``idx`` as it is written (another
        process reads them); its window waits for the fold."""
        cdef int64_t r = idx
        cdef Event* e
        if not self.in_warmup:
            r = gyre_fold(self.ring, self.mask, idx, idx + 1, self.s, self.hot, self.counts,
                          self.wcounts, self.fk, GYRE_FOLD_HIST, self.default_layout)
        if r == idx:
            e = &self.ring[idx & self.mask]
            self._account_slow(e.phase, e.duration_ns, e.start_ns, e.form, idx)

    cdef inline void _emit(self, int h, int64_t d, int64_t start, int form) noexcept:
        """Record duration ``d`` of histogram ``h``: negative ones are counted, the rest
        go to the ring (and from there, in order, into the histograms)."""
        if gyre_unlikely(d < 0):
            self.s[H_NEGATIVE] += 1
            return
        self._put(h, d, start, form)

    # -- the fold: histograms and the open rolling window, accounted from the ring -----
    # A lap only appends its event to the ring. The events not folded yet (fewer than
    # ``batch``, which is at most the capacity, so none is overwritten first) are
    # accounted here in recording order: every ``batch`` events, when a step closes
    # during warm-up or closes a window, and before any in-process read. Each event is
    # folded exactly once, into the histograms (or the warm-up totals) and the open
    # window, with the warm-up state it was recorded in: that state changes only at a
    # step close (which folds first) or inside this loop.

    cdef void _fold(self, int64_t upto) noexcept:
        """Account the ring's events ``folded .. upto - 1``: histograms and window for a
        private block, the window only for a shared one (its histograms took them as
        they were written)."""
        cdef int64_t i = self.folded
        cdef Event* e
        if self.shared:
            if i < upto:
                gyre_fold(self.ring, self.mask, i, upto, self.s, self.hot, self.counts,
                          self.wcounts, self.fk, GYRE_FOLD_WIN, self.default_layout)
            i = upto
        while i < upto:
            if not self.in_warmup:
                # the common case, a straight line per event, in C (stops at a rare one)
                i = gyre_fold(self.ring, self.mask, i, upto, self.s, self.hot, self.counts,
                              self.wcounts, self.fk, GYRE_FOLD_ALL, self.default_layout)
                if i >= upto:
                    break
            # warm-up, a phase's first value or a value above the range
            e = &self.ring[i & self.mask]
            self.folded = i  # a window closed in there holds the events before this one
            self._account_slow(e.phase, e.duration_ns, e.start_ns, e.form, i)
            _win_add(&self.WL, self.wcounts, self.hot, e.phase, e.duration_ns)
            i += 1
        self.folded = upto
        self.fold_at = upto + self.batch
        if self.use_tsc and upto > 0:
            # the drift check, at most once a second, also in a loop that never closes
            # a window; the newest event's end is the time (no clock read here)
            e = &self.ring[(upto - 1) & self.mask]
            if e.start_ns + e.duration_ns >= self.next_clock_check:
                self.next_clock_check = e.start_ns + e.duration_ns + self.clock_check_ns
                self._check_clock(self.clock_check_ns)

    cdef void _account_slow(self, int h, int64_t d, int64_t start, int form,
                            int64_t idx) noexcept:
        """The rare cases of ring event ``idx``: warm-up, a phase's first value, a value
        above the range (histograms and totals; the caller sees to the window)."""
        cdef int64_t* s = self.s
        cdef int64_t v = d
        if v > self.L.highest:
            s[H_OUT_OF_RANGE] += 1
            v = self.L.highest
        cdef int64_t* hl = self.hot + HOT_WORDS * h
        if hl[HOT_FIRST] < 0:
            hl[HOT_FIRST] = d
        cdef int64_t* st
        if self.in_warmup and not self._warmup_over_unstepped(start + d, idx):
            st = self.warm + WARM_FIELDS * h
            st[WARM_COUNT] += 1
            gyre_carry_add(&st[WARM_SUM], s + s[H_SUM_HI] + SUMHI_FIELDS * h + SUMHI_WARM, v)
            if d > st[WARM_MAX]:
                st[WARM_MAX] = d
            return
        # no count is kept beside the buckets: readers add up the buckets
        self.counts[h * self.L.counts_len + hdr_index(&self.L, v)] += 1
        st = hl + HOT_STAT
        gyre_carry_add(&st[STAT_SUM], s + s[H_SUM_HI] + SUMHI_FIELDS * h + SUMHI_STAT, v)
        if st[STAT_MIN] < 0 or d < st[STAT_MIN]:
            st[STAT_MIN] = d
        if d > st[STAT_MAX]:
            st[STAT_MAX] = d
        if form == FORM_RECORD:
            s[H_N_RECORD] += 1
        elif form != FORM_LAP:
            s[H_N_TIMER] += 1
            if form == FORM_TIMED:
                s[H_N_TIMED] += 1

    def flush(self):
        """Fold the events recorded since the last fold into the histograms and the open
        window. Every in-process read does this itself; a writer whose stats block is
        read from another process can call it to leave nothing pending (it stops)."""
        self._fold(self.s[H_RING_HEAD])

    def begin(self):
        """Start a step now, closing the step that is open (one clock read)."""
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        self._begin(self._now())

    def begin_at(self, now_ns):
        """``begin()`` at ``now_ns`` (ns of this recorder's clock, e.g. an earlier
        ``now_ns()``): a step boundary placed afterwards. A time before the open step's
        start closes that step with a negative duration, which is counted, not raised."""
        cdef int64_t now = _ns_arg(now_ns, "now_ns")
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        self._begin(now)

    cdef inline void _begin(self, int64_t now) noexcept:
        cdef int64_t* s = self.s
        if self.in_warmup:
            # the pending events were recorded before this step boundary: fold them
            # with the step state they saw (an unstepped warm-up ends at an event)
            self._fold(s[H_RING_HEAD])
        _stamp_first_write(s, self.in_warmup, now)
        if gyre_unlikely(self.since_mark < 0):
            self.since_mark = now
        if s[H_STEP_START] >= 0:
            self._close_step(now)
        if s[H_WIN_START] < 0:
            s[H_WIN_START] = now
            s[H_WIN_FIRST_STEP] = s[H_STEP] + 1
        s[H_STEP] += 1
        s[H_STEP_START] = now
        s[H_OPEN_SINCE] = now
        s[H_OPEN_PHASE] = 0
        s[H_LAST_WRITE] = now

    def end(self):
        """Close the open step now (no new step starts). No-op without an open step."""
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        if self.s[H_STEP_START] < 0:
            return
        self._end(self._now())

    def end_at(self, now_ns):
        """``end()`` at ``now_ns`` (this recorder's clock); a time before the step's start
        is counted as a negative duration."""
        cdef int64_t now = _ns_arg(now_ns, "now_ns")
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        if self.s[H_STEP_START] < 0:
            return
        self._end(now)

    cdef inline void _end(self, int64_t now) noexcept:
        cdef int64_t* s = self.s
        if gyre_unlikely(self.since_mark < 0):
            self.since_mark = now
        self._close_step(now)
        s[H_STEP_START] = -1
        s[H_OPEN_SINCE] = -1
        s[H_OPEN_PHASE] = -1
        s[H_LAST_WRITE] = now

    def lap(self, phase_id):
        """Close phase ``phase_id`` (an int) at now and open the next declared phase
        (one clock read).

        The first lap after construction or ``end()`` only sets the boundary.
        """
        cdef long long phase = _id(phase_id, self.n_phases, "phase id")
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        self._lap(phase, self._now())

    def lap_at(self, phase_id, now_ns):
        """``lap(phase_id)`` at ``now_ns`` (this recorder's clock): the phase closed
        afterwards. A time before the open boundary is counted as negative, not raised."""
        cdef long long phase = _id(phase_id, self.n_phases, "phase id")
        cdef int64_t now = _ns_arg(now_ns, "now_ns")
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        self._lap(phase, now)

    cdef inline void _lap(self, long long phase, int64_t now) noexcept:
        cdef int64_t* s = self.s
        cdef int64_t start = s[H_OPEN_SINCE]
        cdef int64_t d = now - start
        if gyre_unlikely(self.since_mark < 0):
            self.since_mark = now
        if gyre_likely((start | d) >= 0):
            # the whole bookkeeping of a lap: one ring event (folded later, in a batch)
            self._put(phase, d, start, FORM_LAP)
        elif start < 0:
            _stamp_first_write(s, self.in_warmup, now)
        else:
            s[H_NEGATIVE] += 1
        s[H_OPEN_SINCE] = now
        s[H_OPEN_PHASE] = phase + 1 if phase + 1 < self.n_phases else -1

    def record_span(self, phase_id, start_ns, end_ns):
        """Record an event of ``phase_id`` that ran from ``start_ns`` to ``end_ns`` (this
        recorder's clock), placed afterwards (a span classified once it was over). An end
        before the start is counted as negative. The first-write-since-mark stamp takes
        the span's start when that is earlier."""
        cdef long long p = _id(phase_id, self.n_phases, "phase id")
        cdef int64_t start = _ns_arg(start_ns, "start_ns")
        cdef int64_t end = _ns_arg(end_ns, "end_ns")
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        cdef int64_t* s = self.s
        _stamp_first_write(s, self.in_warmup, start)
        if self.since_mark < 0 or start < self.since_mark:
            self.since_mark = start
        self._emit(p, end - start, start, FORM_RECORD)
        if end > s[H_LAST_WRITE]:
            s[H_LAST_WRITE] = end

    def mark_since(self):
        """Start a new "since" span: ``since_mark_ns()`` reads -1 until the next write."""
        self.since_mark = -1

    def since_mark_ns(self):
        """ns of the first write (a begin, lap, record or timed phase entered) since
        ``mark_since()``, or -1 when nothing was written since."""
        return self.since_mark

    def last_write_ns(self):
        """ns of the last begin/end/record/timed phase boundary (0: nothing written)."""
        return self.s[H_LAST_WRITE]

    def record(self, phase, duration_ns):
        """Record a duration measured elsewhere (int or float ns) for ``phase``.

        Negative, NaN or infinite durations are counted (``negative`` /
        ``nonfinite``), never recorded; values above the range are clamped and
        counted as out of range.
        """
        cdef long long p = _id(phase, self.n_phases, "phase id")
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        cdef int64_t d
        cdef double f
        cdef long long small
        if gyre_small_int(duration_ns, &small):
            d = small if small >= 0 else -1
        elif isinstance(duration_ns, (bool, np.bool_)):
            raise TypeError(
                f"duration_ns must be a number of nanoseconds, got a bool ({duration_ns!r})")
        elif isinstance(duration_ns, int):
            if duration_ns > 0x7FFFFFFFFFFFFFFF:
                d = 0x7FFFFFFFFFFFFFFF
            elif duration_ns < 0:
                d = -1
            else:
                d = duration_ns
        else:
            try:
                f = float(duration_ns)
            except (TypeError, ValueError):
                raise TypeError(
                    f"duration_ns must be a number of nanoseconds, got {type(duration_ns).__name__}")
            if not isfinite(f):
                self.s[H_NONFINITE] += 1
                return
            if f >= 9.2e18:
                d = 0x7FFFFFFFFFFFFFFF
            elif f < 0:
                d = -1
            else:
                d = <int64_t>f
        cdef int64_t now = self._now()
        _stamp_first_write(self.s, self.in_warmup, now)
        if gyre_unlikely(self.since_mark < 0):
            self.since_mark = now
        self._emit(p, d, now - d if d >= 0 else now, FORM_RECORD)
        self.s[H_LAST_WRITE] = now

    def count(self, slot, n=1):
        """Add ``n`` (an int) to event counter ``slot``. A counter that would pass
        the int64 range stays at its limit (counted as saturated)."""
        cdef long long i = _id(slot, self.max_counters, "counter slot")
        cdef long long k
        if not gyre_small_int(n, &k):
            nv = _strict_int(n, "n")
            if not -0x8000000000000000 <= nv <= 0x7FFFFFFFFFFFFFFF:
                raise OverflowError(f"n={nv} is outside the int64 range of a counter")
            k = nv
        if gyre_unlikely(gyre_thread_token() != self.owner):
            self._claim()
        self._add_count(i, k)

    cdef inline void _add_count(self, long long slot, long long k) noexcept:
        """``count(slot, k)`` once the slot (0 <= slot < max_counters) and the writer are
        checked: the counter saturates at the int64 limits (counted)."""
        cdef int64_t* c = &self.counters[slot]
        if gyre_unlikely(gyre_add_overflow(c[0], k, c)):
            c[0] = INT64_MAX if k > 0 else -INT64_MAX - 1
            self.s[H_SATURATED] += 1

    def timer(self, phase_id):
        """A reusable context manager timing ``phase_id`` (two clock reads, nestable)."""
        return PhaseTimer(self, _id(phase_id, self.n_phases, "phase id"))

    def release_writer(self):
        """Let another thread become the writer (e.g. after handing the loop over)."""
        self.owner = 0

    @property
    def writer_token(self):
        """The token of the thread that writes this recorder, 0 before its first write:
        two recorders with the same nonzero token are written by one thread (a token is
        unique among the live threads; a later thread may reuse an ended one's)."""
        return self.owner

    cdef void _close_step(self, int64_t now) noexcept:
        cdef int64_t* s = self.s
        cdef int64_t start = s[H_STEP_START]
        self._emit(self.n_phases, now - start, start, FORM_LAP)
        s[H_STEPS_DONE] += 1
        s[H_LAST_STEP_END] = now
        s[H_WIN_STEPS] += 1
        # warm-up ends and windows close on folded events; otherwise the events of
        # several steps wait for one fold (a batch amortises the cache lines it touches)
        if self.in_warmup:
            self._fold(s[H_RING_HEAD])
            s[H_WARMUP_STEPS] += 1
            if ((self.warmup_steps > 0 and s[H_WARMUP_STEPS] >= self.warmup_steps)
                    or (self.warmup_ns > 0 and now - s[H_START] >= self.warmup_ns)):
                self._end_warmup(now)
        elif s[H_WIN_STEPS] >= self.window_steps:
            self._fold(s[H_RING_HEAD])
            self._close_window(now)

    cdef bint _warmup_over_unstepped(self, int64_t now, int64_t idx) noexcept:
        """A time-based warm-up of a loop that marks no steps ends at the first record
        past it (with steps it ends at a step boundary, in _close_step). The window it
        closes holds the events before ring event ``idx``."""
        cdef int64_t* s = self.s
        if (self.warmup_ns > 0 and s[H_STEP_START] < 0 and s[H_START] > 0
                and now - s[H_START] >= self.warmup_ns):
            self._fold(idx)  # a shared block's window catches up (a private fold is there)
            self._end_warmup(now)
            return True
        return False

    cdef void _end_warmup(self, int64_t now) noexcept:
        self._close_window(now)
        self.in_warmup = False
        self.s[H_STEADY_START] = now
        self.s[H_WARMUP_END_STEP] = self.s[H_STEP]

    cdef int _check_clock(self, int64_t min_span_ns) noexcept:
        """Compare the TSC's rate with CLOCK_MONOTONIC's over the whole run so far.

        The error is measured against the calibration anchor (the longer the span,
        the finer the check). Above 0.01% the rate is recalibrated over that span
        (the conversion is re-anchored at the current reading, so timestamps stay
        continuous); above 1%, or with a TSC that went backwards, the recorder
        falls back to CLOCK_MONOTONIC. Counted in the header. Returns 1 when it
        changed the clock, else 0. No-op on CLOCK_MONOTONIC.
        """
        if not self.use_tsc:
            return 0
        cdef int64_t* s = self.s
        cdef unsigned long long t
        cdef int64_t m
        cdef int64_t width = _tsc_pair(&t, &m)
        cdef int64_t span = m - self.cal_mono0
        if span < min_span_ns or span <= 0:
            return 0
        if width * 20000 > span:
            # every try was preempted: the pair could be off by more than 50 ppm of the
            # span; leave the check to the next window close
            return 0
        s[H_CLOCK_CHECKS] += 1
        if t <= self.cal_tsc0:
            self._fall_back()
            return 1
        cdef double predicted = <double>(<long long>(t - self.cal_tsc0)) * self.ns_per_tick
        cdef double err = (predicted - <double>span) / <double>span
        s[H_CLOCK_ERROR_PPM] = <int64_t>(err * 1e6)
        if err > 0.01 or err < -0.01:
            self._fall_back()
            return 1
        if err > 1e-4 or err < -1e-4:
            # re-anchor at the current reading (continuous), then take the rate over the span
            self.tsc_base_ns = self.tsc_base_ns + <int64_t>(
                <double>(<long long>(t - self.tsc_base)) * self.ns_per_tick)
            self.tsc_base = t
            self.ns_per_tick = <double>span / <double>(<long long>(t - self.cal_tsc0))
            s[H_CLOCK_RECAL] += 1
            return 1
        return 0

    cdef void _fall_back(self) noexcept:
        self.use_tsc = False
        self.s[H_CLOCK_FALLBACK] += 1

    def check_clock(self, *, double min_span_s=1.0):
        """Check the TSC against CLOCK_MONOTONIC now (see ``clock_health``); True if
        it recalibrated or fell back. Also runs by itself at most once a second, when
        a rolling window closes. Call it from the writer's thread or under the GIL."""
        return bool(self._check_clock(<int64_t>(min_span_s * 1e9)))

    def clock_health(self):
        """The clock's drift checks: dict of clock, checks, recalibrations, fallbacks,
        last rate error (ppm) and ns_per_tick (0.0 on CLOCK_MONOTONIC)."""
        cdef int64_t* s = self.s
        return {
            "clock": self.clock,
            "requested": self.clock_requested,
            "checks": s[H_CLOCK_CHECKS],
            "recalibrations": s[H_CLOCK_RECAL],
            "fallbacks": s[H_CLOCK_FALLBACK],
            "error_ppm": s[H_CLOCK_ERROR_PPM],
            "ns_per_tick": self.ns_per_tick if self.use_tsc else 0.0,
        }

    def _set_clock_check_interval(self, double seconds):
        """Test hook: check the clock every ``seconds`` (1 s by default), over a span of
        at least that, starting at the next fold or window close."""
        if not 0 < seconds <= 3600:
            raise ValueError(f"seconds must be in (0, 3600], got {seconds!r}")
        self.clock_check_ns = <int64_t>(seconds * 1e9)
        self.next_clock_check = 0

    def _inject_tsc_error(self, double relative):
        """Test hook: scale the TSC rate by ``1 + relative`` (a simulated drift)."""
        if not self.use_tsc:
            raise ValueError("the recorder is not on the TSC")
        self.ns_per_tick *= 1.0 + relative

    cdef void _close_window(self, int64_t now) noexcept:
        """Close the open window at ``now``: the caller has folded the events it holds."""
        cdef int64_t* s = self.s
        if self.use_tsc and now >= self.next_clock_check:
            # off the lap path: at most once a second, at a window close
            self.next_clock_check = now + self.clock_check_ns
            self._check_clock(self.clock_check_ns)
        cdef int64_t nh = self.n_phases + 1
        cdef int64_t stride = WIN_HEADER + WIN_FIELDS * nh
        cdef int64_t* w = self.wring + (s[H_WINDOWS] % self.max_windows) * stride
        cdef int64_t h, i, cum, total, lo, hi
        cdef int64_t* wc
        cdef int64_t* wf
        cdef int64_t* cnt
        cdef int k
        cdef int64_t ranks[3]
        cdef double qs[3]
        qs[0] = 50.0
        qs[1] = 90.0
        qs[2] = 99.0
        # seqlock: odd while the record is written; readers retry on a change
        s[H_WIN_SEQ] += 1
        gyre_release_fence()
        w[WIN_START] = s[H_WIN_START]
        w[WIN_END] = now
        w[WIN_FIRST_STEP] = s[H_WIN_FIRST_STEP]
        w[WIN_STEPS] = s[H_WIN_STEPS]
        w[WIN_WARMUP] = 1 if self.in_warmup else 0
        for h in range(nh):
            wc = self.hot + HOT_WORDS * h + HOT_WIN
            wf = w + WIN_HEADER + WIN_FIELDS * h
            cnt = self.wcounts + h * self.WL.counts_len
            # every value added sets the window's min and max: its buckets lie between
            # theirs, so only that range is summed, walked and cleared (not counts_len)
            lo = hi = 0
            if wc[WCUR_MAX] >= 0:
                lo = hdr_index(&self.WL, min(wc[WCUR_MIN], self.WL.highest))
                hi = hdr_index(&self.WL, min(wc[WCUR_MAX], self.WL.highest)) + 1
            total = 0
            for i in range(lo, hi):
                total += cnt[i]
            wf[WIN_COUNT] = total
            wf[WIN_SUM] = wc[WCUR_SUM]
            wf[WIN_MAX] = wc[WCUR_MAX]
            for k in range(3):
                wf[WIN_P50 + k] = -1
                ranks[k] = hdr_rank(qs[k], total)  # the one rank rule (hdr.pxd)
            if total > 0:
                cum = 0
                k = 0
                i = lo
                while i < hi and k < 3:
                    cum += cnt[i]
                    while k < 3 and cum >= ranks[k]:
                        wf[WIN_P50 + k] = hdr_value_at(&self.WL, i, ranks[k], total,
                                                      wc[WCUR_MIN], wc[WCUR_MAX])
                        k += 1
                    i += 1
                memset(cnt + lo, 0, (hi - lo) * sizeof(int64_t))
            self._reset_wcur(h)
        s[H_WINDOWS] += 1
        gyre_release_fence()
        s[H_WIN_SEQ] += 1
        s[H_WIN_STEPS] = 0
        s[H_WIN_START] = now
        s[H_WIN_FIRST_STEP] = s[H_STEP] + 1

    # ------------------------------------------------------------- read side

    def stats_array(self):
        """A private copy of the stats block (int64 numpy array), pending events folded."""
        self._fold(self.s[H_RING_HEAD])
        return np.array(self._stats, copy=True)

    def stats_view(self):
        """The live stats block itself (read-only numpy view; changes as the writer runs).
        Pending events are folded first; later ones reach it in batches."""
        self._fold(self.s[H_RING_HEAD])
        v = self._stats.view()
        v.flags.writeable = False
        return v

    def events(self):
        """The ring's events in recording order (a copy: numpy array of EVENT_DTYPE)."""
        cdef int64_t head = self.s[H_RING_HEAD]
        cdef int64_t n = head if head < self.capacity else self.capacity
        cdef int64_t cut = head & self.mask
        if head <= self.capacity:
            out = np.array(self._ring[:n], copy=True)
        else:
            out = np.concatenate((self._ring[cut:], self._ring[:cut]))
        out["phase"][out["phase"] == self.n_phases] = -1
        return out

    @property
    def overwritten(self):
        """Events that the ring no longer holds (histograms still count them)."""
        cdef int64_t head = self.s[H_RING_HEAD]
        return head - self.capacity if head > self.capacity else 0

    @property
    def in_warmup_now(self):
        return bool(self.in_warmup)

    @property
    def clock(self):
        return "tsc" if self.use_tsc else "monotonic"

    def progress(self):
        """(step, steps_completed, open_phase id or -1, open_since_ns or -1, now_ns)."""
        return (self.s[H_STEP], self.s[H_STEPS_DONE], self.s[H_OPEN_PHASE],
                self.s[H_OPEN_SINCE], self._now())

    def config(self):
        """The settings needed to read a stats block of this recorder."""
        return {
            "layout_version": LAYOUT_VERSION,
            "n_phases": self.n_phases,
            "capacity": self.capacity,
            "significant_figures": self.L.significant_figures,
            "lowest_ns": self.L.lowest,
            "highest_ns": self.L.highest,
            "counts_len": self.L.counts_len,
            "window_significant_figures": WINDOW_SIGNIFICANT_FIGURES,
            "window_counts_len": self.WL.counts_len,
            "window_steps": self.window_steps,
            "max_windows": self.max_windows,
            "max_counters": self.max_counters,
            "warmup_steps": self.warmup_steps,
            "warmup_ns": self.warmup_ns,
            "clock": self.clock,
            "offsets": dict(self.offsets),
            "form_cost_ns": dict(self.form_cost_ns) if self.form_cost_ns else {},
        }


@cython.final
cdef class PhaseTimer:
    """Context manager for one phase of one Recorder; reusable and nestable (64 deep)."""
    cdef Recorder rec
    cdef int phase
    cdef int depth
    cdef int64_t starts[64]
    cdef int64_t parents[64]

    def __cinit__(self, Recorder rec not None, int phase):
        if phase < 0 or phase >= rec.n_phases:
            raise IndexError(f"phase id {phase} out of range 0..{rec.n_phases - 1}")
        self.rec = rec
        self.phase = phase
        self.depth = 0

    cdef inline int _enter(self) except -1:
        cdef Recorder r = self.rec
        if gyre_unlikely(gyre_thread_token() != r.owner):
            r._claim()
        cdef int64_t now = r._now()
        cdef int64_t* s = r.s
        _stamp_first_write(s, r.in_warmup, now)
        if gyre_unlikely(r.since_mark < 0):
            r.since_mark = now
        if self.depth < 64:
            self.starts[self.depth] = now
            self.parents[self.depth] = s[H_OPEN_PHASE]
        self.depth += 1
        s[H_OPEN_PHASE] = self.phase
        s[H_OPEN_SINCE] = now
        s[H_LAST_WRITE] = now
        return 0

    cdef inline int _exit(self, int form) except -1:
        cdef Recorder r = self.rec
        if self.depth <= 0:
            return 0
        if gyre_unlikely(gyre_thread_token() != r.owner):
            r._claim()
        cdef int64_t now = r._now()
        self.depth -= 1
        cdef int64_t* s = r.s
        if self.depth < 64:
            r._emit(self.phase, now - self.starts[self.depth], self.starts[self.depth], form)
            s[H_OPEN_PHASE] = self.parents[self.depth]
        s[H_OPEN_SINCE] = now
        s[H_LAST_WRITE] = now
        return 0

    def __enter__(self):
        self._enter()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._exit(FORM_TIMER)
        return False


@cython.final
cdef class TimedFunction:
    """``fn`` timed as one phase at every call: ``timer`` entered and left in C,
    no Python frame of its own. Binds as a method (``__get__``) like a function.
    Made by ``Profiler.timed``; metadata (``__name__``, ``__wrapped__``...) goes in
    its ``__dict__``."""
    cdef PhaseTimer timer
    cdef readonly object fn
    cdef dict __dict__

    def __cinit__(self, PhaseTimer timer not None, fn):
        if not callable(fn):
            raise TypeError(f"timed() decorates a callable, got {type(fn).__name__}")
        self.timer = timer
        self.fn = fn

    def __call__(self, *args, **kwargs):
        cdef PhaseTimer t = self.timer
        t._enter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            t._exit(FORM_TIMED)

    def __get__(self, obj, objtype):
        if obj is None:
            return self
        return MethodType(self, obj)


# ------------------------------------------------------------------ overlapping spans
# (issue 23) Requests overlap: many in flight in one thread (asyncio tasks) or across
# threads. A lap tiles; a span does not. ``Spans`` records spans into a Recorder's ring
# and histograms (``FORM_RECORD`` events: start, duration, phase) and keeps the
# Recorder's thread's in-flight count over time: its mean (the time integral), its
# max and the time spent at the max. Single writer: the Recorder's writer thread.


@cython.final
cdef class Spans:
    """Overlapping spans of one phase family written into ``rec`` (its writer thread).

    ``tok = spans.begin()`` (the start, ns on the recorder's clock) ... ``spans.end(phase,
    tok)``: one event of ``phase`` from the start to now, in the ring and the
    histograms as a ``record`` event, and the in-flight count one lower. ``end`` of a
    token that was not begun here is counted in ``unmatched``, never raised.
    """
    # its fields are declared in recorder.pxd

    def __cinit__(self, Recorder rec not None):
        self.rec = rec
        self.first_ns = -1
        self.since = -1

    cdef inline void _advance(self, int64_t now) noexcept:
        cdef int64_t dt
        if self.since >= 0 and now > self.since and self.in_flight > 0:
            dt = now - self.since
            self.busy += dt
            if self.in_flight == self.max_in_flight:
                self.at_max += dt
            self.area_lo += dt * self.in_flight  # dt < 2**40 s-scale, in_flight small
            if self.area_lo >= (<int64_t>1 << 62):
                self.area_hi += 1
                self.area_lo -= (<int64_t>1 << 62)
        if now > self.since:
            self.since = now

    def begin(self):
        """A span starts now: its token (the start in ns)."""
        return self._begin()

    cdef int64_t _begin(self) except? -1:
        cdef Recorder r = self.rec
        if gyre_unlikely(gyre_thread_token() != r.owner):
            r._claim()
        cdef int64_t now = r._now()
        _stamp_first_write(r.s, r.in_warmup, now)
        if self.first_ns < 0:
            self.first_ns = now
        self._advance(now)
        self.in_flight += 1
        self.begun += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
            self.at_max = 0
        return now

    def end(self, phase, int64_t start_ns):
        """The span begun at ``start_ns`` (a token of :meth:`begin`) ends now, recorded
        as ``phase``; its duration in ns."""
        return self._end(<int>_id(phase, self.rec.n_phases, "phase id"), start_ns)

    cdef int64_t _end(self, int p, int64_t start_ns) except? -1:
        cdef int64_t small = start_ns
        cdef Recorder r = self.rec
        if gyre_unlikely(gyre_thread_token() != r.owner):
            r._claim()
        cdef int64_t now = r._now()
        self._advance(now)
        if self.in_flight > 0:
            self.in_flight -= 1
            self.ended += 1
        else:
            self.unmatched += 1
        r._emit(p, now - small, small, FORM_RECORD)
        r.s[H_LAST_WRITE] = now
        return now - small

    def gauge(self):
        """The in-flight figures up to now: a dict of ``in_flight``, ``max_in_flight``,
        ``mean_in_flight`` (over the time since the first begin), ``busy_ns``,
        ``at_max_ns`` (time at the max), ``elapsed_ns``, ``begun``, ``ended``,
        ``unmatched``. Read on the writer thread (or with it stopped)."""
        cdef int64_t now = self.rec._now()
        cdef int64_t elapsed = now - self.first_ns if self.first_ns >= 0 else 0
        # the open interval since the last change, without moving the writer's state
        cdef int64_t dt = now - self.since if self.since >= 0 and now > self.since else 0
        area = self.area_hi * (1 << 62) + self.area_lo + dt * self.in_flight
        busy = self.busy + (dt if self.in_flight > 0 else 0)
        at_max = self.at_max + (
            dt if self.in_flight > 0 and self.in_flight == self.max_in_flight else 0)
        return {
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "mean_in_flight": (area / elapsed) if elapsed > 0 else 0.0,
            "busy_ns": busy,
            "at_max_ns": at_max,
            "elapsed_ns": elapsed,
            "begun": self.begun,
            "ended": self.ended,
            "unmatched": self.unmatched,
        }
