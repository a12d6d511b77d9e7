# cython: language_level=3
"""Log-linear (HDR-style) bucket arithmetic shared by the histogram and the recorder.

The layout is HdrHistogram's: with ``s`` significant figures the histogram keeps
``sub_bucket_count = 2**ceil(log2(2 * 10**s))`` linear sub-buckets per power of
two, so every value ``v`` lands in a bucket no wider than ``v / 10**s``. The
counts array of a ``HdrLayout`` is laid out exactly like HdrHistogram's, which
lets the V2 log export copy it without re-bucketing.

Contract for the inline functions below: pure arithmetic, O(1) (one
count-leading-zeros, shifts and adds, no search), no GIL, no allocation, never
fail. ``hdr_index`` expects ``0 <= v <= layout.highest``; the caller clamps.
"""

from libc.stdint cimport int64_t, uint64_t

cdef extern from *:
    """
    static inline int gyre_clz64(uint64_t x) { return __builtin_clzll(x); }
    """
    int gyre_clz64(uint64_t x) noexcept nogil

ctypedef struct HdrLayout:
    int64_t lowest              # lowest discernible value (>= 1), ns
    int64_t highest             # highest trackable value, ns
    int significant_figures     # 1..5
    int unit_magnitude          # floor(log2(lowest))
    int sub_bucket_half_count_magnitude
    int64_t sub_bucket_half_count
    int64_t sub_bucket_count
    uint64_t sub_bucket_mask
    int bucket_count
    int64_t counts_len          # length of the counts array


cdef inline int64_t hdr_index(const HdrLayout* L, int64_t v) noexcept nogil:
    """Counts-array index of value ``v`` (0 <= v <= L.highest)."""
    cdef int pow2ceiling = 64 - gyre_clz64(<uint64_t>v | L.sub_bucket_mask)
    cdef int bucket = pow2ceiling - L.unit_magnitude - (L.sub_bucket_half_count_magnitude + 1)
    cdef int64_t sub = v >> (bucket + L.unit_magnitude)
    return ((<int64_t>(bucket + 1)) << L.sub_bucket_half_count_magnitude) + (sub - L.sub_bucket_half_count)


cdef inline int64_t hdr_lowest_equivalent(const HdrLayout* L, int64_t index) noexcept nogil:
    """Smallest value that maps to counts index ``index``."""
    cdef int64_t bucket = (index >> L.sub_bucket_half_count_magnitude) - 1
    cdef int64_t sub = (index & (L.sub_bucket_half_count - 1)) + L.sub_bucket_half_count
    if bucket < 0:
        sub -= L.sub_bucket_half_count
        bucket = 0
    return sub << (bucket + L.unit_magnitude)


cdef inline int64_t hdr_bucket_width(const HdrLayout* L, int64_t index) noexcept nogil:
    """Number of distinct integer values that share counts index ``index``."""
    cdef int64_t bucket = (index >> L.sub_bucket_half_count_magnitude) - 1
    if bucket < 0:
        bucket = 0
    return (<int64_t>1) << (bucket + L.unit_magnitude)


cdef inline int hdr_init(HdrLayout* L, int64_t lowest, int64_t highest,
                         int significant_figures) except -1:
    """Fill ``L`` for the given range; ValueError on an impossible one."""
    if significant_figures < 1 or significant_figures > 5:
        raise ValueError(
            f"significant_figures must be 1..5, got {significant_figures}")
    if lowest < 1:
        raise ValueError(f"lowest trackable value must be >= 1 ns, got {lowest}")
    if highest < 2 * lowest:
        raise ValueError(
            f"highest trackable value ({highest} ns) must be at least twice the lowest ({lowest} ns)")
    cdef int64_t single_unit = 2
    cdef int i
    for i in range(significant_figures):
        single_unit *= 10
    cdef int sbc_mag = 0
    while ((<int64_t>1) << sbc_mag) < single_unit:
        sbc_mag += 1
    cdef int unit_mag = 63 - gyre_clz64(<uint64_t>lowest)
    L.lowest = lowest
    L.highest = highest
    L.significant_figures = significant_figures
    L.unit_magnitude = unit_mag
    L.sub_bucket_half_count_magnitude = (sbc_mag if sbc_mag > 1 else 1) - 1
    if L.unit_magnitude + L.sub_bucket_half_count_magnitude > 61:
        raise ValueError("lowest trackable value too large for this many significant figures")
    L.sub_bucket_count = (<int64_t>1) << (L.sub_bucket_half_count_magnitude + 1)
    L.sub_bucket_half_count = L.sub_bucket_count // 2
    L.sub_bucket_mask = (<uint64_t>(L.sub_bucket_count - 1)) << unit_mag
    cdef int64_t smallest_untrackable = L.sub_bucket_count << unit_mag
    cdef int buckets = 1
    while smallest_untrackable <= highest:
        if smallest_untrackable > (0x7FFFFFFFFFFFFFFF // 2):
            buckets += 1
            break
        smallest_untrackable <<= 1
        buckets += 1
    L.bucket_count = buckets
    L.counts_len = (<int64_t>(buckets + 1)) * L.sub_bucket_half_count
    return 0


cdef inline int64_t hdr_rank(double q, int64_t total) noexcept nogil:
    """Rank (1-based, ascending) of percentile ``q`` (0..100) among ``total`` values:
    ``max(1, ceil(q/100 * total))``, the inverted-CDF rule (numpy's ``inverted_cdf``)."""
    cdef double x = q / 100.0 * <double>total
    cdef int64_t rank = <int64_t>x
    if <double>rank < x:
        rank += 1
    if rank < 1:
        rank = 1
    if rank > total:
        rank = total
    return rank


cdef inline int64_t hdr_value_at(const HdrLayout* L, int64_t index, int64_t rank, int64_t total,
                                 int64_t vmin, int64_t vmax) noexcept nogil:
    """The percentile rule, shared by every histogram, window and report.

    The value of rank ``rank`` of ``total`` lies in bucket ``index``. Rank 1 is the
    exact minimum and rank ``total`` the exact maximum; any other rank reads as its
    bucket's midpoint ``lowest + (width - 1) // 2``, clamped to ``[vmin, vmax]``.
    ``vmin``/``vmax`` of -1 mean unknown (no clamp on that side).
    """
    if rank >= total and vmax >= 0:
        return vmax
    if rank <= 1 and vmin >= 0:
        return vmin
    cdef int64_t value = hdr_lowest_equivalent(L, index) + (hdr_bucket_width(L, index) - 1) // 2
    if vmin >= 0 and value < vmin:
        return vmin
    if vmax >= 0 and value > vmax:
        return vmax
    return value
