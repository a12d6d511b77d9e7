# cython: language_level=3, always_allow_keywords=False, boundscheck=False, wraparound=False, cdivision=True
"""Bookkeeping-budget probe for issue 16 (built and timed by ``bench_floor.py --probe``).

Not gyreprof's recorder: stripped-down laps that add one piece of per-lap
bookkeeping at a time on top of the floor, so a run shows what each piece
costs in the same harness and how close a restructured lap can get to the
floor. Layout fixed at 3 significant figures, lowest 1 ns (unit magnitude 0),
so the bucket index uses compile-time constants; no rolling windows, no
warm-up. Variants (all take one int like ``Recorder.lap``):

- ``lap_a2``: range check, writer check, clock, open-phase header words (every
  variant reads the probe's clock: the TSC when it is made with ``tsc=True``);
- ``lap_b``: + histogram bucket (index from the duration, one read-modify-write);
- ``lap_c``: + sum / min / max on the phase's hot line (branch-free min/max);
- ``lap``: + a 32-byte ring event (the current event layout): "lean";
- ``lap_defer``: lean, but the previous lap's duration is bucketed after this
  lap's clock read, off the clock-dependent chain;
- ``lap_defer_noring``: deferred, no ring;
- ``lap_batch``: clock, header and a 16-byte ring event per lap; histograms
  filled from the ring every 64 events.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from gyreprof._core.clock cimport gyre_mono_ns, gyre_rdtsc, gyre_thread_token
cnp.import_array()

cdef extern from *:
    """
    static inline int64_t lean_min(int64_t a, int64_t b) { return a < b ? a : b; }
    static inline int64_t lean_max(int64_t a, int64_t b) { return a > b ? a : b; }
    static inline int lean_clz(uint64_t x) { return __builtin_clzll(x); }
    #define LEAN_LIKELY(x) __builtin_expect(!!(x), 1)
    """
    int64_t lean_min(int64_t a, int64_t b) nogil
    int64_t lean_max(int64_t a, int64_t b) nogil
    int lean_clz(uint64_t x) nogil
    bint LEAN_LIKELY(bint x) nogil

cdef enum:
    OPEN_SINCE = 0
    OPEN_PHASE = 1
    RING_HEAD = 2
    STEP = 3
    NEG = 4
    SHM = 10          # 3 significant figures, lowest 1 ns: sub-bucket half count 2**10
    MASK = 2047       # sub-bucket mask (unit magnitude 0)
    CLEN = 33 * 1024
    HIGHEST_CLAMP = 3600000000000

cdef class Probe:
    """A lap with the minimum bookkeeping: histogram bucket, sum/min/max, ring slot, header."""
    cdef int64_t* s
    cdef int64_t* hot
    cdef int64_t* counts
    cdef int64_t* ring
    cdef int64_t mask
    cdef int n_phases
    cdef unsigned long owner
    cdef bint tsc
    cdef double ns_per_tick
    cdef uint64_t tsc_base
    cdef int64_t tsc_base_ns
    cdef object _a, _b, _c, _d

    def __cinit__(self, int n_phases, int64_t capacity=65536, bint tsc=False, double ns_per_tick=0.0):
        self.n_phases = n_phases
        self._a = np.zeros(64, np.int64); self.s = <int64_t*>cnp.PyArray_DATA(self._a)
        self._b = np.zeros(8 * n_phases, np.int64); self.hot = <int64_t*>cnp.PyArray_DATA(self._b)
        self._c = np.zeros(CLEN * n_phases, np.int64); self.counts = <int64_t*>cnp.PyArray_DATA(self._c)
        self._d = np.zeros(4 * capacity, np.int64); self.ring = <int64_t*>cnp.PyArray_DATA(self._d)
        self.mask = capacity - 1
        self.s[OPEN_SINCE] = -1
        self.s[9] = -1
        for h in range(n_phases):
            self.hot[8 * h + 1] = 0x7FFFFFFFFFFFFFFF
        self.tsc = tsc
        self.ns_per_tick = ns_per_tick
        self.tsc_base = gyre_rdtsc()
        self.tsc_base_ns = gyre_mono_ns()

    cdef inline int _check(self, long long phase) except -1:
        """The range check and the writer check every variant makes."""
        if <unsigned long long>phase >= <unsigned long long>self.n_phases:
            raise IndexError("phase")
        if gyre_thread_token() != self.owner:
            self.owner = gyre_thread_token()
        return 0

    cdef inline int64_t _now(self) noexcept:
        """The probe's clock: CLOCK_MONOTONIC, or the TSC converted as the recorder does."""
        if self.tsc:
            return self.tsc_base_ns + <int64_t>(
                <double>(<long long>(gyre_rdtsc() - self.tsc_base)) * self.ns_per_tick)
        return gyre_mono_ns()

    # -- the pieces a lap is made of (inline: each variant compiles to a straight line)

    cdef inline int64_t _open(self, long long phase, int64_t now) noexcept:
        """Close the open phase at ``now`` and open the next; returns its start."""
        cdef int64_t* s = self.s
        cdef int64_t start = s[OPEN_SINCE]
        s[OPEN_SINCE] = now
        s[OPEN_PHASE] = phase + 1 if phase + 1 < self.n_phases else -1
        return start

    cdef inline void _bucket(self, int64_t phase, int64_t v) noexcept:
        cdef int b = 64 - lean_clz(<uint64_t>v | MASK) - (SHM + 1)
        self.counts[phase * CLEN + ((<int64_t>(b + 1)) << SHM) + (v >> b) - (1 << SHM)] += 1

    cdef inline void _extremes(self, int64_t phase, int64_t v, int64_t d) noexcept:
        cdef int64_t* hl = self.hot + 8 * phase
        hl[0] += v
        hl[1] = lean_min(hl[1], d)
        hl[2] = lean_max(hl[2], d)

    cdef inline void _ring32(self, int64_t phase, int64_t start, int64_t d) noexcept:
        cdef int64_t* s = self.s
        cdef int64_t head = s[RING_HEAD]
        cdef int64_t* e = self.ring + 4 * (head & self.mask)
        e[0] = phase
        e[1] = s[STEP]
        e[2] = start
        e[3] = d
        s[RING_HEAD] = head + 1

    cdef inline void _account_pending(self) noexcept:
        """Bucket the previous lap's duration (s[9] = phase or -1, s[10] = value)."""
        cdef int64_t pp = self.s[9]
        cdef int64_t pv = self.s[10]
        if LEAN_LIKELY(pp >= 0):
            self._bucket(pp, pv)
            self._extremes(pp, pv, pv)

    cdef inline bint _valid(self, int64_t start, int64_t d) noexcept:
        """A duration to record; a negative one is counted."""
        if LEAN_LIKELY(start >= 0 and d >= 0):
            return True
        if start >= 0:
            self.s[NEG] += 1
        return False

    # -- the variants

    def lap(self, long long phase):
        """lean: bucket, sum/min/max and a 32-byte ring event, all at the lap"""
        self._check(phase)
        cdef int64_t now = self._now()
        cdef int64_t start = self._open(phase, now)
        cdef int64_t d = now - start
        cdef int64_t v
        if self._valid(start, d):
            v = lean_min(d, HIGHEST_CLAMP)
            self._bucket(phase, v)
            self._extremes(phase, v, d)
            self._ring32(phase, start, d)

    def lap_a2(self, long long phase):
        """checks + header on the probe's clock (``tsc``: the converted TSC read)"""
        self._check(phase)
        cdef int64_t now = self._now()
        cdef int64_t start = self._open(phase, now)
        if start < 0:
            self.s[NEG] += 1

    def lap_b(self, long long phase):
        """+ histogram bucket"""
        self._check(phase)
        cdef int64_t now = self._now()
        cdef int64_t start = self._open(phase, now)
        cdef int64_t d = now - start
        if self._valid(start, d):
            self._bucket(phase, lean_min(d, HIGHEST_CLAMP))

    def lap_c(self, long long phase):
        """+ sum/min/max"""
        self._check(phase)
        cdef int64_t now = self._now()
        cdef int64_t start = self._open(phase, now)
        cdef int64_t d = now - start
        cdef int64_t v
        if self._valid(start, d):
            v = lean_min(d, HIGHEST_CLAMP)
            self._bucket(phase, v)
            self._extremes(phase, v, d)

    def lap_defer(self, long long phase):
        """lean lap, but the previous lap's duration is bucketed after this clock read"""
        self._check(phase)
        cdef int64_t now = self._now()
        self._account_pending()
        cdef int64_t start = self._open(phase, now)
        cdef int64_t d = now - start
        self.s[9] = -1
        if self._valid(start, d):
            self.s[9] = phase
            self.s[10] = lean_min(d, HIGHEST_CLAMP)
            self._ring32(phase, start, d)

    def lap_defer_noring(self, long long phase):
        """no ring; the previous lap's duration is bucketed after this clock read"""
        self._check(phase)
        cdef int64_t now = self._now()
        self._account_pending()
        cdef int64_t start = self._open(phase, now)
        cdef int64_t d = now - start
        self.s[9] = -1
        if self._valid(start, d):
            self.s[9] = phase
            self.s[10] = lean_min(d, HIGHEST_CLAMP)

    cdef void _flush(self, int64_t upto) noexcept:
        """bucket the ring events [s[11], upto) into histograms (ring holds end ns, phase)"""
        cdef int64_t i = self.s[11]
        cdef int64_t* e
        cdef int64_t ph, v
        while i < upto:
            e = self.ring + 2 * (i & self.mask)
            ph = e[1] & 0xFF
            v = e[1] >> 8
            self._bucket(ph, v)
            self._extremes(ph, v, v)
            i += 1
        self.s[11] = upto

    def lap_batch(self, long long phase):
        """per lap: clock, header, one 16-byte ring event (end ns, duration<<8|phase);
        histograms filled from the ring every 64 events"""
        self._check(phase)
        cdef int64_t now = self._now()
        cdef int64_t start = self._open(phase, now)
        cdef int64_t d = now - start
        cdef int64_t head
        cdef int64_t* e
        if self._valid(start, d):
            head = self.s[RING_HEAD]
            e = self.ring + 2 * (head & self.mask)
            e[0] = now
            e[1] = (lean_min(d, HIGHEST_CLAMP) << 8) | phase
            self.s[RING_HEAD] = head + 1
            if ((head + 1) & 63) == 0:
                self._flush(head + 1)
