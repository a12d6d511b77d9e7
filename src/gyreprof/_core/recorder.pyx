# cython: language_level=3, embedsignature=True, always_allow_keywords=False
"""The hot-path recorder.

Memory: one int64 *stats block* (histograms, counters, rolling windows; it can
live in shared memory for the live view) and one *ring* of raw events
(private). Word offsets of the stats block's regions are in
``Recorder.offsets``; ``H_*`` below index its header. With ``P`` phases there
are ``P + 1`` histograms: ``0..P-1`` are the phases, ``P`` is the whole step.
"""

cimport cython
import os
import time

import numpy as np
cimport numpy as cnp
from libc.math cimport isfinite
from libc.stdint cimport int64_t
from libc.string cimport memcpy, memset

from gyreprof._core.clock cimport GYRE_HAVE_TSC, gyre_mono_ns, gyre_rdtsc, gyre_thread_token
from gyreprof._core.hdr cimport (HdrLayout, hdr_bucket_width, hdr_index, hdr_init,
                                 hdr_lowest_equivalent)

cnp.import_array()

LAYOUT_VERSION = 1

# header words of the stats block; words 0..7 are the ones lap() touches (one cache line)
H_STEP = 0            # steps begun
H_OPEN_PHASE = 1      # phase now open (-1: none / between phases)
H_OPEN_SINCE = 2      # ns of the last boundary (-1: none)
H_RING_HEAD = 3       # events ever written to the ring
H_STEP_START = 4      # ns the open step began (-1: no step open)
H_NEGATIVE = 5        # negative durations (counted, not recorded)
H_OUT_OF_RANGE = 6    # values above the range (clamped into the top bucket)
H_START = 7           # ns of the first write (0: nothing written yet)
H_STEPS_DONE = 8      # steps completed (closed by begin() or end())
H_EVENTS = 9          # unused (phase records are the histogram and warm-up counts)
H_NONFINITE = 10      # NaN / infinite durations given to record()
H_STEADY_START = 11   # ns warm-up ended (-1: still warming up)
H_WARMUP_STEPS = 12   # steps completed during warm-up
H_LAST_STEP_END = 13  # ns the last step closed (-1: none)
H_WINDOWS = 14        # rolling windows closed so far
H_WIN_STEPS = 15      # steps in the current window
H_WIN_START = 16      # ns the current window began (-1: none)
H_WIN_FIRST_STEP = 17 # first step number of the current window
H_LAST_WRITE = 18     # ns of the last begin/end/record/timed phase (lap() leaves it: see H_OPEN_SINCE)
H_WARMUP_END_STEP = 19  # step number of the last warm-up step (-1: warm-up not over)
HEADER_WORDS = 32

cdef enum:
    # one 64-byte line per histogram: first value, steady count/sum/min/max,
    # current-window count/sum/max. The two counts are not maintained by the writer (the
    # buckets hold them); readers fill them in from the buckets.
    C_HOT = 8
    C_HOT_FIRST = 0
    C_HOT_STAT = 1
    C_HOT_WIN = 5
    C_WIN_HEADER = 5    # per closed window: start_ns, end_ns, first_step, steps, warmup flag
    C_WIN_FIELDS = 6    # per window and histogram: count, sum, max, p50, p90, p99
    C_WCUR_FIELDS = 3   # current window per histogram: count, sum, max
WIN_HEADER = C_WIN_HEADER
WIN_FIELDS = C_WIN_FIELDS
WCUR_FIELDS = C_WCUR_FIELDS
HOT_WORDS = C_HOT
HOT_FIRST = C_HOT_FIRST
HOT_STAT = C_HOT_STAT
HOT_WIN = C_HOT_WIN
WINDOW_SIGNIFICANT_FIGURES = 1   # rolling windows: ~3% buckets, 39x16 counters per histogram

EVENT_DTYPE = np.dtype([("phase", np.int32), ("_pad", np.int32), ("step", np.int64),
                        ("start_ns", np.int64), ("duration_ns", np.int64)])

cdef int64_t _H_STEP = 0, _H_OPEN_PHASE = 1, _H_OPEN_SINCE = 2, _H_RING_HEAD = 3
cdef int64_t _H_STEP_START = 4, _H_NEGATIVE = 5, _H_OUT_OF_RANGE = 6, _H_START = 7
cdef int64_t _H_STEPS_DONE = 8, _H_EVENTS = 9, _H_NONFINITE = 10, _H_STEADY_START = 11
cdef int64_t _H_WARMUP_STEPS = 12, _H_LAST_STEP_END = 13, _H_WINDOWS = 14, _H_WIN_STEPS = 15
cdef int64_t _H_WIN_START = 16, _H_WIN_FIRST_STEP = 17, _H_LAST_WRITE = 18
cdef int64_t _H_WARMUP_END_STEP = 19


def stats_layout(int n_phases, int64_t counts_len, int64_t window_counts_len,
                 int max_windows, int max_counters):
    """Word offsets of each region of a stats block, and its total size in words."""
    cdef int64_t nh = n_phases + 1
    off = {}
    pos = HEADER_WORDS
    for name, size in (("hot", C_HOT * nh), ("warm", 3 * nh),
                       ("counts", nh * counts_len),
                       ("wcounts", nh * window_counts_len),
                       ("wring", max_windows * (C_WIN_HEADER + C_WIN_FIELDS * nh)),
                       ("counters", max_counters)):
        off[name] = pos
        pos += size
    off["words"] = pos
    off["hot_words"] = C_HOT
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


def calibrate_tsc(double duration_s=0.02):
    """Measure ns per TSC tick against CLOCK_MONOTONIC: (ns_per_tick, tsc_base, base_ns)."""
    if not tsc_invariant():
        raise ValueError(
            "clock='tsc' needs an invariant TSC (x86 with constant_tsc and nonstop_tsc in "
            "/proc/cpuinfo); this machine has none. Use clock='monotonic'.")
    cdef unsigned long long t0 = gyre_rdtsc()
    cdef int64_t m0 = gyre_mono_ns()
    time.sleep(duration_s)
    cdef unsigned long long t1 = gyre_rdtsc()
    cdef int64_t m1 = gyre_mono_ns()
    if t1 <= t0 or m1 <= m0:
        raise ValueError("TSC calibration failed: the counter did not advance")
    return (<double>(m1 - m0)) / (<double>(t1 - t0)), t1, m1


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
    def __cinit__(self, int n_phases, int64_t capacity=65536, *, int significant_figures=3,
                 int64_t lowest_ns=1, int64_t highest_ns=3_600_000_000_000,
                 int64_t warmup_steps=0, int64_t warmup_ns=0, int64_t window_steps=1000,
                 int max_windows=512, int max_counters=32, str clock="monotonic",
                 object buffer=None):
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
        hdr_init(&self.L, lowest_ns, highest_ns, significant_figures)
        hdr_init(&self.WL, lowest_ns, highest_ns, WINDOW_SIGNIFICANT_FIGURES)
        if clock == "monotonic":
            self.use_tsc = False
        elif clock == "tsc":
            self.ns_per_tick, self.tsc_base, self.tsc_base_ns = calibrate_tsc()
            self.use_tsc = True
        else:
            raise ValueError(f"clock must be 'monotonic' or 'tsc', got {clock!r}")
        self.n_phases = n_phases
        cdef int64_t cap = 1
        while cap < capacity:
            cap <<= 1
        self.capacity = cap
        self.mask = cap - 1
        self.window_steps = window_steps
        self.max_windows = max_windows
        self.max_counters = max_counters
        self.warmup_steps = warmup_steps
        self.warmup_ns = warmup_ns
        self.offsets = stats_layout(n_phases, self.L.counts_len, self.WL.counts_len,
                                    max_windows, max_counters)
        self._ring = np.zeros(cap, dtype=EVENT_DTYPE)
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

    def rebind(self, buffer=None):
        """Move the stats block to ``buffer`` (None: private memory), keeping its content.

        Used after fork so a child stops writing into its parent's shared segment.
        """
        current = np.array(self._stats, copy=True)
        self._bind(buffer, current)

    def reset(self):
        """Forget everything recorded (the writer thread is released too)."""
        cdef int64_t nh = self.n_phases + 1
        cdef int64_t h
        self._stats[:] = 0
        cdef int64_t* s = self.s
        s[_H_OPEN_PHASE] = -1
        s[_H_OPEN_SINCE] = -1
        s[_H_STEP_START] = -1
        s[_H_LAST_STEP_END] = -1
        s[_H_WIN_START] = -1
        s[_H_WARMUP_END_STEP] = -1
        self.in_warmup = self.warmup_steps > 0 or self.warmup_ns > 0
        s[_H_STEADY_START] = -1
        for h in range(nh):
            self.hot[C_HOT * h + C_HOT_FIRST] = -1
            self.hot[C_HOT * h + C_HOT_STAT + 2] = -1
            self._reset_wcur(h)
        self.owner = 0

    cdef inline void _reset_wcur(self, int64_t h) noexcept:
        cdef int64_t* wc = self.hot + C_HOT * h + C_HOT_WIN
        wc[0] = 0
        wc[1] = 0
        wc[2] = -1

    # ------------------------------------------------------------------ clock

    cdef inline int64_t _now(self) noexcept:
        if self.use_tsc:
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

    cdef inline void _record(self, int h, int64_t d, int64_t start) noexcept:
        cdef int64_t* s = self.s
        if d < 0:
            s[_H_NEGATIVE] += 1
            return
        cdef int64_t v = d
        if v > self.L.highest:
            s[_H_OUT_OF_RANGE] += 1
            v = self.L.highest
        cdef int64_t* hl = self.hot + C_HOT * h
        if hl[C_HOT_FIRST] < 0:
            hl[C_HOT_FIRST] = d
        cdef int64_t* st
        if self.in_warmup and not self._warmup_over_unstepped(start + d):
            st = self.warm + 3 * h
            st[0] += 1
            st[1] += v  # sums add the clamped value: they cannot overflow
            if d > st[2]:
                st[2] = d
        else:
            # no count is kept beside the buckets: readers add up the buckets
            self.counts[h * self.L.counts_len + hdr_index(&self.L, v)] += 1
            st = hl + C_HOT_STAT
            st[1] += v
            if st[2] < 0 or d < st[2]:
                st[2] = d
            if d > st[3]:
                st[3] = d
        self.wcounts[h * self.WL.counts_len + hdr_index(&self.WL, v)] += 1
        st = hl + C_HOT_WIN
        st[1] += v
        if d > st[2]:
            st[2] = d
        cdef int64_t head = s[_H_RING_HEAD]
        cdef Event* e = &self.ring[head & self.mask]
        e.phase = h  # n_phases marks a whole step; events() turns it into -1
        e.step = s[_H_STEP]
        e.start_ns = start
        e.duration_ns = d
        s[_H_RING_HEAD] = head + 1

    def begin(self):
        """Start a step now, closing the step that is open (one clock read)."""
        if gyre_thread_token() != self.owner:
            self._claim()
        cdef int64_t now = self._now()
        cdef int64_t* s = self.s
        if s[_H_START] == 0:
            s[_H_START] = now
            if not self.in_warmup:
                s[_H_STEADY_START] = now
        if s[_H_STEP_START] >= 0:
            self._close_step(now)
        if s[_H_WIN_START] < 0:
            s[_H_WIN_START] = now
            s[_H_WIN_FIRST_STEP] = s[_H_STEP] + 1
        s[_H_STEP] += 1
        s[_H_STEP_START] = now
        s[_H_OPEN_SINCE] = now
        s[_H_OPEN_PHASE] = 0
        s[_H_LAST_WRITE] = now

    def end(self):
        """Close the open step now (no new step starts). No-op without an open step."""
        if gyre_thread_token() != self.owner:
            self._claim()
        cdef int64_t* s = self.s
        if s[_H_STEP_START] < 0:
            return
        cdef int64_t now = self._now()
        self._close_step(now)
        s[_H_STEP_START] = -1
        s[_H_OPEN_SINCE] = -1
        s[_H_OPEN_PHASE] = -1
        s[_H_LAST_WRITE] = now

    def lap(self, long long phase):
        """Close ``phase`` at now and open the next declared phase (one clock read).

        The first lap after construction or ``end()`` only sets the boundary.
        """
        if <unsigned long long>phase >= <unsigned long long>self.n_phases:
            raise IndexError(f"phase id {phase} out of range 0..{self.n_phases - 1}")
        if gyre_thread_token() != self.owner:
            self._claim()
        cdef int64_t now = self._now()
        cdef int64_t* s = self.s
        cdef int64_t start = s[_H_OPEN_SINCE]
        if start >= 0:
            self._record(phase, now - start, start)
        elif s[_H_START] == 0:
            s[_H_START] = now
            if not self.in_warmup:
                s[_H_STEADY_START] = now
        s[_H_OPEN_SINCE] = now
        s[_H_OPEN_PHASE] = phase + 1 if phase + 1 < self.n_phases else -1

    def record(self, long long phase, duration_ns):
        """Record a duration measured elsewhere (int or float ns) for ``phase``.

        Negative, NaN or infinite durations are counted (``negative`` /
        ``nonfinite``), never recorded; values above the range are clamped and
        counted as out of range.
        """
        if <unsigned long long>phase >= <unsigned long long>self.n_phases:
            raise IndexError(f"phase id {phase} out of range 0..{self.n_phases - 1}")
        if gyre_thread_token() != self.owner:
            self._claim()
        cdef int64_t d
        cdef double f
        if isinstance(duration_ns, int):
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
                self.s[_H_NONFINITE] += 1
                return
            if f >= 9.2e18:
                d = 0x7FFFFFFFFFFFFFFF
            elif f < 0:
                d = -1
            else:
                d = <int64_t>f
        cdef int64_t now = self._now()
        if self.s[_H_START] == 0:
            self.s[_H_START] = now
            if not self.in_warmup:
                self.s[_H_STEADY_START] = now
        self._record(phase, d, now - d if d >= 0 else now)
        self.s[_H_LAST_WRITE] = now

    def count(self, long long slot, int64_t n=1):
        """Add ``n`` to event counter ``slot``."""
        if <unsigned long long>slot >= <unsigned long long>self.max_counters:
            raise IndexError(f"counter slot {slot} out of range 0..{self.max_counters - 1}")
        if gyre_thread_token() != self.owner:
            self._claim()
        self.counters[slot] += n

    def timer(self, long long phase):
        """A reusable context manager timing ``phase`` (two clock reads, nestable)."""
        if <unsigned long long>phase >= <unsigned long long>self.n_phases:
            raise IndexError(f"phase id {phase} out of range 0..{self.n_phases - 1}")
        return PhaseTimer(self, phase)

    def release_writer(self):
        """Let another thread become the writer (e.g. after handing the loop over)."""
        self.owner = 0

    cdef void _close_step(self, int64_t now) noexcept:
        cdef int64_t* s = self.s
        cdef int64_t start = s[_H_STEP_START]
        self._record(self.n_phases, now - start, start)
        s[_H_STEPS_DONE] += 1
        s[_H_LAST_STEP_END] = now
        s[_H_WIN_STEPS] += 1
        if self.in_warmup:
            s[_H_WARMUP_STEPS] += 1
            if ((self.warmup_steps > 0 and s[_H_WARMUP_STEPS] >= self.warmup_steps)
                    or (self.warmup_ns > 0 and now - s[_H_START] >= self.warmup_ns)):
                self._end_warmup(now)
        elif s[_H_WIN_STEPS] >= self.window_steps:
            self._close_window(now)

    cdef bint _warmup_over_unstepped(self, int64_t now) noexcept:
        """A time-based warm-up of a loop that marks no steps ends at the first record
        past it (with steps it ends at a step boundary, in _close_step)."""
        cdef int64_t* s = self.s
        if (self.warmup_ns > 0 and s[_H_STEP_START] < 0 and s[_H_START] > 0
                and now - s[_H_START] >= self.warmup_ns):
            self._end_warmup(now)
            return True
        return False

    cdef void _end_warmup(self, int64_t now) noexcept:
        self._close_window(now)
        self.in_warmup = False
        self.s[_H_STEADY_START] = now
        self.s[_H_WARMUP_END_STEP] = self.s[_H_STEP]

    cdef void _close_window(self, int64_t now) noexcept:
        cdef int64_t* s = self.s
        cdef int64_t nh = self.n_phases + 1
        cdef int64_t stride = C_WIN_HEADER + C_WIN_FIELDS * nh
        cdef int64_t* w = self.wring + (s[_H_WINDOWS] % self.max_windows) * stride
        cdef int64_t h, i, lo, hi, cum, rank, total, value
        cdef int64_t* wc
        cdef int64_t* cnt
        cdef int k
        cdef int64_t ranks[3]
        cdef int64_t qs_permille[3]
        qs_permille[0] = 500
        qs_permille[1] = 900
        qs_permille[2] = 990
        w[0] = s[_H_WIN_START]
        w[1] = now
        w[2] = s[_H_WIN_FIRST_STEP]
        w[3] = s[_H_WIN_STEPS]
        w[4] = 1 if self.in_warmup else 0
        for h in range(nh):
            wc = self.hot + C_HOT * h + C_HOT_WIN
            cnt = self.wcounts + h * self.WL.counts_len
            total = 0
            for i in range(self.WL.counts_len):
                total += cnt[i]
            w[C_WIN_HEADER + C_WIN_FIELDS * h + 0] = total
            w[C_WIN_HEADER + C_WIN_FIELDS * h + 1] = wc[1]
            w[C_WIN_HEADER + C_WIN_FIELDS * h + 2] = wc[2]
            lo = 0
            hi = self.WL.counts_len - 1
            for k in range(3):
                w[C_WIN_HEADER + C_WIN_FIELDS * h + 3 + k] = -1
                rank = (qs_permille[k] * total + 999) // 1000
                if rank < 1:
                    rank = 1
                ranks[k] = rank
            if total > 0:
                cum = 0
                k = 0
                i = lo
                while i <= hi and k < 3:
                    cum += cnt[i]
                    while k < 3 and cum >= ranks[k]:
                        value = hdr_lowest_equivalent(&self.WL, i) + (hdr_bucket_width(&self.WL, i) - 1) // 2
                        if value > wc[2]:
                            value = wc[2]
                        w[C_WIN_HEADER + C_WIN_FIELDS * h + 3 + k] = value
                        k += 1
                    i += 1
                memset(cnt + lo, 0, (hi - lo + 1) * sizeof(int64_t))
            self._reset_wcur(h)
        s[_H_WINDOWS] += 1
        s[_H_WIN_STEPS] = 0
        s[_H_WIN_START] = now
        s[_H_WIN_FIRST_STEP] = s[_H_STEP] + 1

    # ------------------------------------------------------------- read side

    def stats_array(self):
        """A private copy of the stats block (int64 numpy array)."""
        return np.array(self._stats, copy=True)

    def stats_view(self):
        """The live stats block itself (read-only numpy view; changes as the writer runs)."""
        v = self._stats.view()
        v.flags.writeable = False
        return v

    def events(self):
        """The ring's events in recording order (a copy: numpy array of EVENT_DTYPE)."""
        cdef int64_t head = self.s[_H_RING_HEAD]
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
        cdef int64_t head = self.s[_H_RING_HEAD]
        return head - self.capacity if head > self.capacity else 0

    @property
    def in_warmup_now(self):
        return bool(self.in_warmup)

    @property
    def clock(self):
        return "tsc" if self.use_tsc else "monotonic"

    def progress(self):
        """(step, steps_completed, open_phase id or -1, open_since_ns or -1, now_ns)."""
        return (self.s[_H_STEP], self.s[_H_STEPS_DONE], self.s[_H_OPEN_PHASE],
                self.s[_H_OPEN_SINCE], self._now())

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
            "clock": "tsc" if self.use_tsc else "monotonic",
            "offsets": dict(self.offsets),
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

    def __enter__(self):
        cdef Recorder r = self.rec
        if gyre_thread_token() != r.owner:
            r._claim()
        cdef int64_t now = r._now()
        cdef int64_t* s = r.s
        if s[_H_START] == 0:
            s[_H_START] = now
            if not r.in_warmup:
                s[_H_STEADY_START] = now
        if self.depth < 64:
            self.starts[self.depth] = now
            self.parents[self.depth] = s[_H_OPEN_PHASE]
        self.depth += 1
        s[_H_OPEN_PHASE] = self.phase
        s[_H_OPEN_SINCE] = now
        s[_H_LAST_WRITE] = now
        return self

    def __exit__(self, exc_type, exc, tb):
        cdef Recorder r = self.rec
        if self.depth <= 0:
            return False
        if gyre_thread_token() != r.owner:
            r._claim()
        cdef int64_t now = r._now()
        self.depth -= 1
        cdef int64_t* s = r.s
        if self.depth < 64:
            r._record(self.phase, now - self.starts[self.depth], self.starts[self.depth])
            s[_H_OPEN_PHASE] = self.parents[self.depth]
        s[_H_OPEN_SINCE] = now
        s[_H_LAST_WRITE] = now
        return False
