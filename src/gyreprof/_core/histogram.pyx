# cython: language_level=3, embedsignature=True
"""Log-linear histogram and the percentile rule every gyreprof report uses.

Percentile semantics (documented here once; the rule itself is ``hdr_value_at`` in
hdr.pxd, used by this module, the recorder's rolling windows, merged snapshots,
live windows and every report):

``percentile(q)`` takes the value of rank ``r = max(1, ceil(q/100 * N))`` in
ascending order (the inverted-CDF rule, numpy's ``method="inverted_cdf"``).
Rank 1 is the exact minimum and rank ``N`` the exact maximum (so ``q == 0``
gives the minimum and ``q == 100``, or p99 of 10 values, the maximum). Any
other rank reads as the midpoint ``lowest + (width - 1) // 2`` of the bucket
holding it, clamped to the exact minimum and maximum. The result is within
half a bucket of the true order statistic: relative error at most
``1 / 2**(m+1)`` where ``2**m`` is the sub-bucket half count (at 3
significant figures: 1/2048, under 0.05%; rolling windows use 1 significant
figure, about 3%).
"""

cimport cython
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t

from gyreprof._core.hdr cimport (HdrLayout, hdr_bucket_width, hdr_index, hdr_init,
                                 hdr_lowest_equivalent, hdr_rank, hdr_value_at)

cnp.import_array()

DEFAULT_LOWEST_NS = 1
DEFAULT_HIGHEST_NS = 3_600_000_000_000  # one hour


def layout_info(int64_t lowest=DEFAULT_LOWEST_NS, int64_t highest=DEFAULT_HIGHEST_NS,
                int significant_figures=3):
    """Describe the bucket layout for a range: a dict of its parameters.

    Raises ValueError for an impossible range or significant figures outside 1..5.
    """
    cdef HdrLayout L
    hdr_init(&L, lowest, highest, significant_figures)
    return {
        "lowest": L.lowest,
        "highest": L.highest,
        "significant_figures": L.significant_figures,
        "unit_magnitude": L.unit_magnitude,
        "sub_bucket_half_count_magnitude": L.sub_bucket_half_count_magnitude,
        "sub_bucket_half_count": L.sub_bucket_half_count,
        "sub_bucket_count": L.sub_bucket_count,
        "bucket_count": L.bucket_count,
        "counts_len": L.counts_len,
    }


def bucket_edges(int64_t lowest=DEFAULT_LOWEST_NS, int64_t highest=DEFAULT_HIGHEST_NS,
                 int significant_figures=3):
    """(lowest_equivalent, width) int64 arrays, one entry per counts index.

    Bucket ``i`` holds the integers ``lo[i] .. lo[i] + width[i] - 1``.
    """
    cdef HdrLayout L
    hdr_init(&L, lowest, highest, significant_figures)
    lo = np.empty(L.counts_len, dtype=np.int64)
    width = np.empty(L.counts_len, dtype=np.int64)
    cdef int64_t[::1] lo_v = lo
    cdef int64_t[::1] w_v = width
    cdef int64_t i
    for i in range(L.counts_len):
        lo_v[i] = hdr_lowest_equivalent(&L, i)
        w_v[i] = hdr_bucket_width(&L, i)
    return lo, width


def index_of(int64_t value, int64_t lowest=DEFAULT_LOWEST_NS,
             int64_t highest=DEFAULT_HIGHEST_NS, int significant_figures=3):
    """Counts index of ``value`` (clamped into 0..highest)."""
    cdef HdrLayout L
    hdr_init(&L, lowest, highest, significant_figures)
    if value < 0:
        value = 0
    if value > highest:
        value = highest
    return hdr_index(&L, value)


@cython.boundscheck(False)
def percentiles_from_counts(const int64_t[::1] counts, qs, int64_t lowest, int64_t highest,
                            int significant_figures, int64_t vmin, int64_t vmax):
    """Values at percentiles ``qs`` (0..100, any order) of a counts array.

    ``counts`` must have the layout's length. ``vmin``/``vmax`` are the exact
    extremes used for clamping (pass -1 when unknown). Returns a float64 array
    (NaN everywhere when the histogram is empty).
    """
    cdef HdrLayout L
    hdr_init(&L, lowest, highest, significant_figures)
    if counts.shape[0] != L.counts_len:
        raise ValueError(
            f"counts array has {counts.shape[0]} buckets; this layout needs {L.counts_len}")
    q_arr = np.asarray(qs, dtype=np.float64).reshape(-1)
    if q_arr.size and (not np.all(np.isfinite(q_arr)) or q_arr.min() < 0 or q_arr.max() > 100):
        raise ValueError(f"percentiles must be finite numbers in 0..100, got {qs!r}")
    out = np.full(q_arr.shape[0], np.nan, dtype=np.float64)
    cdef int64_t total = 0
    cdef int64_t i
    for i in range(L.counts_len):
        total += counts[i]
    if total <= 0 or q_arr.shape[0] == 0:
        return out
    order = np.argsort(q_arr, kind="stable")
    cdef double[::1] q_v = q_arr
    cdef double[::1] out_v = out
    cdef int64_t[::1] order_v = order.astype(np.int64)
    cdef Py_ssize_t k = 0, nq = q_arr.shape[0], j
    cdef int64_t cum = 0, rank
    i = 0
    for k in range(nq):
        j = order_v[k]
        rank = hdr_rank(q_v[j], total)
        while i < L.counts_len and cum + counts[i] < rank:
            cum += counts[i]
            i += 1
        if i >= L.counts_len:
            i = L.counts_len - 1
        out_v[j] = <double>hdr_value_at(&L, i, rank, total, vmin, vmax)
    return out


cdef class Histogram:
    """A log-linear histogram of non-negative integers (ns in gyreprof).

    ``Histogram(lowest=1, highest=3_600_000_000_000, significant_figures=3)``.
    Values above ``highest`` are counted in ``out_of_range`` and clamped into
    the top bucket; negative values are counted in ``negative`` and not
    recorded. ``min``, ``max`` and ``sum`` are exact, not bucket edges.
    """

    # All set-up happens in __cinit__, which runs exactly once per object (also for
    # Histogram.__new__), so no method can meet a half-built or re-initialised histogram.
    def __cinit__(self, int64_t lowest=DEFAULT_LOWEST_NS, int64_t highest=DEFAULT_HIGHEST_NS,
                  int significant_figures=3):
        hdr_init(&self.layout, lowest, highest, significant_figures)
        self._counts = np.zeros(self.layout.counts_len, dtype=np.int64)
        self.counts = <int64_t*>cnp.PyArray_DATA(self._counts)
        self.total = 0
        self.sum = 0.0
        self.min = -1
        self.max = -1
        self.out_of_range = 0
        self.negative = 0

    cdef void record_value(self, int64_t v, int64_t n) noexcept:
        if v < 0:
            self.negative += n
            return
        cdef int64_t clamped = v
        if v > self.layout.highest:
            self.out_of_range += n
            clamped = self.layout.highest
        self.counts[hdr_index(&self.layout, clamped)] += n
        self.total += n
        self.sum += <double>v * <double>n
        if self.min < 0 or v < self.min:
            self.min = v
        if v > self.max:
            self.max = v

    def record(self, int64_t value, int64_t count=1):
        """Record ``value`` ``count`` times (count must be >= 1)."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self.record_value(value, count)

    def record_many(self, values):
        """Record every value of an integer array-like."""
        cdef int64_t[::1] v = np.ascontiguousarray(values, dtype=np.int64).reshape(-1)
        cdef Py_ssize_t i
        for i in range(v.shape[0]):
            self.record_value(v[i], 1)

    @property
    def lowest(self):
        return self.layout.lowest

    @property
    def highest(self):
        return self.layout.highest

    @property
    def significant_figures(self):
        return self.layout.significant_figures

    @property
    def counts_len(self):
        return self.layout.counts_len

    def counts_array(self):
        """A copy of the bucket counts (int64, HdrHistogram layout)."""
        return self._counts.copy()

    def index_of(self, int64_t value):
        """Counts index for ``value`` (clamped into 0..highest)."""
        if value < 0:
            value = 0
        if value > self.layout.highest:
            value = self.layout.highest
        return hdr_index(&self.layout, value)

    def mean(self):
        """Exact mean of recorded values (NaN when empty)."""
        return self.sum / self.total if self.total else float("nan")

    def percentile(self, double q):
        """Value at percentile ``q`` (0..100); see the module docstring for the rule."""
        return float(self.percentiles([q])[0])

    def percentiles(self, qs):
        """Values at several percentiles at once (float64 array)."""
        return percentiles_from_counts(self._counts, qs, self.layout.lowest,
                                       self.layout.highest, self.layout.significant_figures,
                                       self.min, self.max)

    def add(self, Histogram other):
        """Merge ``other`` into this histogram (same layout required)."""
        if (other.layout.lowest != self.layout.lowest
                or other.layout.highest != self.layout.highest
                or other.layout.significant_figures != self.layout.significant_figures):
            raise ValueError(
                "cannot merge histograms with different layouts: "
                f"({self.layout.lowest}, {self.layout.highest}, {self.layout.significant_figures}) vs "
                f"({other.layout.lowest}, {other.layout.highest}, {other.layout.significant_figures})")
        self._counts += other._counts
        self.total += other.total
        self.sum += other.sum
        if other.min >= 0 and (self.min < 0 or other.min < self.min):
            self.min = other.min
        if other.max > self.max:
            self.max = other.max
        self.out_of_range += other.out_of_range
        self.negative += other.negative

    def reset(self):
        """Forget everything recorded."""
        self._counts[:] = 0
        self.total = 0
        self.sum = 0.0
        self.min = -1
        self.max = -1
        self.out_of_range = 0
        self.negative = 0

    def __repr__(self):
        return (f"Histogram(count={self.total}, min={self.min}, max={self.max}, "
                f"significant_figures={self.layout.significant_figures})")
