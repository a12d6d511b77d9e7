"""decode_counts_into: the decoding pass itself yields each row's exact total and its
first and last non-empty bucket (what the snapshot decoder checks a row against)."""

from __future__ import annotations

import numpy as np
import pytest

from gyreprof._core import decode_counts, decode_counts_into, encode_counts


def _into(counts: list[int], length: int | None = None) -> tuple[tuple[int, int, int], list[int]]:
    arr = np.array(counts, dtype=np.int64)
    n = len(counts) if length is None else length
    out = np.zeros(n, dtype=np.int64)
    got = decode_counts_into(encode_counts(arr), n, out)
    return got, out.tolist()


def test_total_and_first_and_last_bucket() -> None:
    counts = [0, 0, 3, 0, 0, 0, 7, 1, 0, 0]
    got, out = _into(counts)
    assert got == (11, 2, 7) and out == counts
    assert decode_counts(encode_counts(np.array(counts, dtype=np.int64)), 10).tolist() == counts


def test_an_empty_row_has_no_first_or_last_bucket() -> None:
    assert _into([0, 0, 0, 0]) == ((0, -1, -1), [0, 0, 0, 0])
    assert _into([]) == ((0, -1, -1), [])


def test_explicit_zeros_are_no_bucket_holding_a_count() -> None:
    # a lone zero is written as the value 0, not as a run: it must not count as a bucket
    got, _ = _into([0, 5, 0, 4, 0])
    assert got == (9, 1, 3)


def test_one_bucket_at_each_end() -> None:
    assert _into([1] + [0] * 98 + [2])[0] == (3, 0, 99)
    assert _into([0] * 99 + [2])[0] == (2, 99, 99)


def test_the_total_is_exact_where_an_int64_sum_wraps() -> None:
    counts = [2**62, 2**62, 2**62, 2**62 + 5]
    assert int(np.array(counts, dtype=np.int64).sum()) == 5  # numpy's sum wraps
    got, _ = _into(counts)
    assert got == (sum(counts), 0, 3)
    big = [2**63 - 1] * 5  # past 2^64: the carry words add up too
    assert _into(big)[0] == (5 * (2**63 - 1), 0, 4)


def test_malformed_input_is_refused() -> None:
    out = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="more than 3 buckets"):
        decode_counts_into(encode_counts(np.array([1, 2, 3, 4], dtype=np.int64)), 3, out)
    with pytest.raises(ValueError, match="truncated"):
        decode_counts_into(b"\x80", 3, np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="4 needed"):
        decode_counts_into(b"", 4, out)
