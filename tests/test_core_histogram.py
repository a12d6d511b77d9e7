"""The native log-linear histogram against numpy and the pure-Python twin."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gyreprof._core import (
    Histogram,
    bucket_edges,
    decode_counts,
    encode_counts,
    index_of,
    layout_info,
    percentiles_from_counts,
)

from helpers.reference import RefHistogram, RefLayout

QS = [0, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100]


def _distributions(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "lognormal":
        x = rng.lognormal(mean=10, sigma=1.5, size=n)
    elif kind == "bimodal":
        x = np.concatenate(
            [rng.normal(2_000, 100, n // 2), rng.normal(2_000_000, 50_000, n - n // 2)]
        )
    elif kind == "pareto":
        x = (rng.pareto(1.2, size=n) + 1) * 1_000
    elif kind == "constant":
        x = np.full(n, 123_456.0)
    elif kind == "tiny":
        x = rng.integers(0, 50, size=n).astype(float)
    elif kind == "huge":
        x = rng.uniform(1e11, 3.5e12, size=n)
    else:  # pragma: no cover
        raise AssertionError(kind)
    return np.clip(np.round(x), 0, 3_600_000_000_000).astype(np.int64)


@pytest.mark.parametrize("kind", ["lognormal", "bimodal", "pareto", "constant", "tiny", "huge"])
@pytest.mark.parametrize("sf", [1, 2, 3, 4])
def test_percentiles_within_significant_figures(kind: str, sf: int) -> None:
    rng = np.random.default_rng(abs(hash((kind, sf))) % 2**32)
    x = _distributions(rng, kind, 20_000)
    h = Histogram(significant_figures=sf)
    h.record_many(x)
    got = h.percentiles(QS)
    want = np.percentile(x, QS, method="inverted_cdf")
    bound = 10.0 ** (-sf)
    for q, g, w in zip(QS, got, want, strict=True):
        # values below the linear range are exact to within one unit
        assert abs(g - w) <= max(bound * w, 1.0), (q, g, w)
    assert h.min == x.min() and h.max == x.max()  # exact, not bucket edges
    assert h.total == len(x)
    assert h.sum == pytest.approx(float(x.sum()), rel=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.integers(min_value=0, max_value=3_600_000_000_000), min_size=1, max_size=300
    ),
    q=st.floats(min_value=0, max_value=100),
)
def test_native_matches_reference_twin(values: list[int], q: float) -> None:
    h = Histogram()
    ref = RefHistogram(RefLayout())
    for v in values:
        h.record(v)
        ref.record(v)
    assert h.counts_array().tolist() == ref.counts
    assert h.percentile(q) == ref.percentile(q)
    assert (h.min, h.max, h.total) == (ref.min, ref.max, ref.total)


@settings(max_examples=40, deadline=None)
@given(
    v=st.integers(min_value=0, max_value=10**13),
    lowest=st.sampled_from([1, 2, 1000, 1024]),
    sf=st.integers(min_value=1, max_value=5),
)
def test_index_matches_reference_and_bucket_contains_value(v: int, lowest: int, sf: int) -> None:
    highest = 10**13
    ref = RefLayout(lowest, highest, sf)
    i = index_of(v, lowest, highest, sf)
    assert i == ref.index(v)
    lo = ref.lowest_equivalent(i)
    assert lo <= v < lo + ref.width(i)
    assert layout_info(lowest, highest, sf)["counts_len"] == ref.counts_len


def test_bucket_edges_tile_the_range() -> None:
    lo, width = bucket_edges(1, 10**9, 2)
    # consecutive buckets meet without gaps or overlaps
    assert np.all(lo[1:] == lo[:-1] + width[:-1])
    assert lo[0] == 0


def test_out_of_range_counted_and_clamped() -> None:
    h = Histogram(highest=1_000_000)
    h.record(5_000_000)
    h.record(10)
    h.record(-3)
    assert h.out_of_range == 1
    assert h.negative == 1
    assert h.total == 2
    assert h.max == 5_000_000  # exact max survives clamping
    assert h.percentile(100) == 5_000_000


def test_merge_adds_counts_and_keeps_extremes() -> None:
    a, b = Histogram(), Histogram()
    a.record_many([10, 20, 30])
    b.record_many([5, 40_000])
    a.add(b)
    assert a.total == 5 and a.min == 5 and a.max == 40_000
    with pytest.raises(ValueError, match="different layouts"):
        a.add(Histogram(significant_figures=2))


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 10**10), max_size=50), min_size=3, max_size=3),
)
def test_merge_associative_commutative(parts: list[list[int]]) -> None:
    hs = []
    for p in parts:
        h = Histogram()
        h.record_many(np.asarray(p, dtype=np.int64))
        hs.append(h)

    def merged(order: list[int]) -> Histogram:
        out = Histogram()
        for i in order:
            out.add(hs[i])
        return out

    a, b = merged([0, 1, 2]), merged([2, 0, 1])
    assert a.counts_array().tolist() == b.counts_array().tolist()
    assert (a.total, a.min, a.max) == (b.total, b.min, b.max)


def test_empty_histogram_percentiles_are_nan() -> None:
    h = Histogram()
    assert math.isnan(h.percentile(50))
    assert math.isnan(h.mean())


@pytest.mark.parametrize("sf", [0, 6, -1])
def test_bad_significant_figures(sf: int) -> None:
    with pytest.raises(ValueError, match="significant_figures"):
        Histogram(significant_figures=sf)


def test_bad_range() -> None:
    with pytest.raises(ValueError, match="at least twice"):
        Histogram(lowest=100, highest=150)
    with pytest.raises(ValueError, match=">= 1"):
        Histogram(lowest=0)


@pytest.mark.parametrize("q", [-1, 101, float("nan"), float("inf")])
def test_bad_percentile(q: float) -> None:
    h = Histogram()
    h.record(5)
    with pytest.raises(ValueError, match="0..100"):
        h.percentile(q)


def test_percentiles_from_counts_checks_length() -> None:
    with pytest.raises(ValueError, match="buckets"):
        percentiles_from_counts(np.zeros(10, dtype=np.int64), [50], 1, 10**9, 3, -1, -1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**40), max_size=400))
def test_codec_round_trip(counts: list[int]) -> None:
    arr = np.asarray(counts, dtype=np.int64)
    enc = encode_counts(arr)
    dec = decode_counts(enc, len(arr))
    assert dec.tolist() == counts


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 100))
def test_codec_rejects_garbage_cleanly(data: bytes, length: int) -> None:
    try:
        out = decode_counts(data, length)
    except ValueError:
        return
    assert len(out) == length


def test_codec_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="truncated"):
        decode_counts(b"\x80", 4)
    with pytest.raises(ValueError, match="run of"):
        decode_counts(encode_counts(np.array([0, 0, 0, 0, 5], dtype=np.int64)), 3)
    with pytest.raises(ValueError, match="negative count"):
        encode_counts(np.array([1, -2], dtype=np.int64))


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 9 + b"\x02",  # a zero-run of -INT64_MIN: must not wrap the index
        b"\x02" + b"\xff" * 9 + b"\x04\x06\x08",
        b"\xff" * 9 + b"\x7e" * 1000,
    ],
)
def test_codec_extreme_zero_run_is_refused(data: bytes) -> None:
    big = np.zeros(16, dtype=np.int64)
    with pytest.raises(ValueError, match="passes the end"):
        decode_counts(data, 3, big[5:8])
    assert not big[8:].any() and not big[:5].any()  # nothing written outside the slice


def test_uninitialised_histogram_is_not_usable() -> None:
    h = Histogram.__new__(Histogram)  # __cinit__ runs: a valid empty histogram
    h.record(5)
    assert h.total == 1


def test_min_max_mean_exact_with_repeat_counts() -> None:
    h = Histogram()
    h.record(1_001, 3)
    h.record(17, 2)
    h.record(999_999_937)
    h.record(420)
    assert (h.min, h.max, h.total) == (17, 999_999_937, 7)
    assert h.mean() == pytest.approx((3 * 1_001 + 2 * 17 + 999_999_937 + 420) / 7, rel=1e-15)
    other = Histogram()
    other.record(5, 4)
    other.record(10**12)
    h.add(other)
    assert (h.min, h.max, h.total) == (5, 10**12, 12)
    assert h.sum == 3 * 1_001 + 2 * 17 + 999_999_937 + 420 + 20 + 10**12
    empty = Histogram()
    h.add(empty)  # an empty histogram changes no extreme
    assert (h.min, h.max) == (5, 10**12)
    empty.add(h)
    assert (empty.min, empty.max, empty.total) == (5, 10**12, 12)


_COUNTS_LEN = layout_info()["counts_len"]
_BIG = st.sampled_from([1, 2, 63, 64, 127, 128, 2**31, 2**55, 2**62 - 1, 2**62, 2**63 - 1])


@st.composite
def _sparse_counts(draw: st.DrawFn) -> list[int]:
    """A layout-sized counts array that is mostly zeros: long zero runs, single
    spikes, runs of length 1 and 2, and often a count in the layout's top bucket."""
    n = draw(st.sampled_from([_COUNTS_LEN, draw(st.integers(1, 300))]))
    counts = [0] * n
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, n - 1))
        counts[i] = draw(st.one_of(st.integers(1, 2**40), _BIG))
    if draw(st.booleans()):
        counts[n - 1] = draw(st.one_of(st.integers(1, 1000), _BIG))  # the top bucket
    if draw(st.booleans()) and n > 4:  # a lone zero and a two-zero run between counts
        j = draw(st.integers(0, n - 5))
        counts[j : j + 5] = [1, 0, 3, 0, 0]
    return counts


@settings(max_examples=200, deadline=None)
@given(_sparse_counts())
def test_codec_round_trip_sparse(counts: list[int]) -> None:
    arr = np.asarray(counts, dtype=np.int64)
    enc = encode_counts(arr)
    assert len(enc) <= 9 * (np.count_nonzero(arr) * 2 + 1)  # zero runs stay compact
    dec = decode_counts(enc, len(arr))
    assert dec.tolist() == counts
    into = np.zeros(len(arr), dtype=np.int64)
    decode_counts(enc, len(arr), into)
    assert into.tolist() == counts


@pytest.mark.parametrize(
    "counts",
    [
        [0] * 5000 + [7],  # one spike after a long zero run
        [9] + [0] * 5000,  # trailing zeros are dropped and restored
        [0, 0] + [2**63 - 1] + [0] * 70 + [1],  # the largest count: 9-byte varint
        [0] * (_COUNTS_LEN - 1) + [3],  # only the layout's top bucket
        [0, 5, 0, 0, 6, 0, 0, 0, 7],
    ],
)
def test_codec_round_trip_sparse_cases(counts: list[int]) -> None:
    arr = np.asarray(counts, dtype=np.int64)
    assert decode_counts(encode_counts(arr), len(arr)).tolist() == counts


def test_histogram_counts_round_trip_through_the_codec() -> None:
    h = Histogram()
    h.record_many([0, 1, 5_000, 5_001, 3_600_000_000_000, 3_600_000_000_000])
    counts = h.counts_array()
    assert counts[h.index_of(3_600_000_000_000)] == 2  # the highest value's bucket
    back = decode_counts(encode_counts(counts), h.counts_len)
    assert np.array_equal(back, counts)
