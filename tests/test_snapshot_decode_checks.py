"""What the snapshot decoder checks from its one pass over each row (the row's total and
its first and last non-empty bucket) and the rolling windows read flat: each refusal
where the rule could be got wrong, and what must still read."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gyreprof as gp
from gyreprof._core import encode_counts
from gyreprof._support.errors import CorruptDataError
from gyreprof.model.histogram import layout_edges

from helpers.crafted import as_version_1, join_snapshot, split_snapshot


def _seed() -> bytes:
    prof = gp.Profiler(["env"], window_steps=2, label="seed")
    for d in (1000, 1000, 5000, 90_000):
        prof.begin()
        prof.record("env", d)
    prof.end()
    return prof.snapshot().to_bytes()


SEED = _seed()


def _row(
    header: dict[str, Any], rows: list[bytes], buckets: dict[int, int], vmin: int, vmax: int
) -> None:
    L = header["counts_len"]
    row = np.zeros(L, dtype=np.int64)
    for i, c in buckets.items():
        row[i] = c
    rows[0] = encode_counts(row)
    n = sum(buckets.values())
    header["stat"][0] = [n, n * vmin + (vmax - vmin), vmin, vmax]


def _edges() -> np.ndarray:
    snap = gp.Snapshot.from_bytes(SEED)
    return layout_edges(*snap.config.layout)[0]


def _decode_with(buckets: dict[int, int], vmin: int, vmax: int) -> gp.Snapshot:
    prefix, header, rows = split_snapshot(SEED)
    _row(header, rows, buckets, vmin, vmax)
    return gp.Snapshot.from_bytes(join_snapshot(prefix, header, rows))


def test_extremes_anywhere_inside_the_end_buckets_read() -> None:
    lo = _edges()
    i, j = 3000, 3100  # buckets wider than one value (3 significant figures)
    assert lo[i + 1] - lo[i] > 1 and lo[j + 1] - lo[j] > 1
    # min at the top of its bucket, max at the bottom of its: both still the end buckets
    snap = _decode_with({i: 2, j: 1}, int(lo[i + 1]) - 1, int(lo[j]))
    assert snap.row("env").count == 3


def test_a_min_one_past_the_bottom_bucket_is_refused() -> None:
    lo = _edges()
    i, j = 3000, 3100
    with pytest.raises(CorruptDataError, match="lie outside the buckets"):
        _decode_with({i: 2, j: 1}, int(lo[i + 1]), int(lo[j]))


def test_a_max_one_below_the_top_bucket_is_refused() -> None:
    lo = _edges()
    i, j = 3000, 3100
    with pytest.raises(CorruptDataError, match="lie outside the buckets"):
        _decode_with({i: 2, j: 1}, int(lo[i]), int(lo[j]) - 1)


def test_values_in_the_last_bucket_with_a_max_above_the_layout_read() -> None:
    lo = _edges()
    last = len(lo) - 1
    snap = _decode_with({last - 1: 1, last: 1}, int(lo[last - 1]), int(lo[last]) + 10**6)
    assert snap.row("env").count == 2


def test_a_total_past_int64_is_not_taken_for_the_count() -> None:
    big = 2**62
    with pytest.raises(CorruptDataError, match="do not add up"):
        prefix, header, rows = split_snapshot(SEED)
        L = header["counts_len"]
        row = np.zeros(L, dtype=np.int64)
        row[1000:1004] = [big, big, big, big + 4]  # wraps to 4 in int64
        rows[0] = encode_counts(row)
        header["stat"][0] = [4, 4000, 1000, 1003]
        gp.Snapshot.from_bytes(join_snapshot(prefix, header, rows))


@pytest.mark.parametrize(
    "rolling",
    [[[1, 2], [3]], [1, 2], [[1], 2], 7, [[1, [2]]]],
)
def test_malformed_rolling_windows_are_refused(rolling: Any) -> None:
    prefix, header, rows = split_snapshot(as_version_1(SEED))  # windows in the header
    header["rolling"] = rolling
    with pytest.raises(CorruptDataError, match="corrupted snapshot"):
        gp.Snapshot.from_bytes(join_snapshot(prefix, header, rows))


def test_rolling_windows_read_flat_equal_the_nested_lists() -> None:
    v1 = as_version_1(SEED)  # version 1 kept the windows in the JSON header
    snap = gp.Snapshot.from_bytes(v1)
    v2 = gp.Snapshot.from_bytes(SEED).rolling
    assert snap.rolling is not None and v2 is not None and np.array_equal(snap.rolling, v2)
    _, header, _ = split_snapshot(v1)
    assert snap.rolling is not None and snap.rolling.shape[0] == 2
    assert snap.rolling.tolist() == header["rolling"]
    empties: list[list[Any]] = [[], [[]]]
    for empty in empties:
        prefix, header, rows = split_snapshot(v1)
        header["rolling"] = empty
        header["meta"]["windows_closed"] = 0
        back = gp.Snapshot.from_bytes(join_snapshot(prefix, header, rows))
        assert back.rolling is not None and back.rolling.shape == (0, 0)
