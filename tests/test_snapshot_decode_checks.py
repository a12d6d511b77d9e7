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
from gyreprof.model.snapshot import EncodedSnapshot

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


def _other() -> gp.Snapshot:
    prof = gp.Profiler(["fwd", "env"], label="other")  # the phases in another order
    for d in (700, 20_000, 3_000_000):
        prof.begin()
        prof.record("env", d)
        prof.record("fwd", d // 2)
    prof.end()
    return prof.snapshot()


def _same(a: Any, b: Any) -> bool:
    """Two snapshots (or their records) alike in every field."""
    import dataclasses

    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if not (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y):
            return False
    return True


def test_an_encoded_read_holds_the_snapshot_and_merges_as_it() -> None:
    """Its records are the Snapshot's; its buckets, decoded, are the Snapshot's; a merge
    of encoded reads is the merge of the Snapshots (the buckets straight into the sums)."""
    other = _other().to_bytes()
    enc = EncodedSnapshot.from_bytes(SEED)
    snap = gp.Snapshot.from_bytes(SEED)
    assert enc.rows == snap.rows and enc.steady_ns == snap.steady_ns
    assert _same(enc.snapshot(), snap)
    assert _same(gp.merge([enc]), snap)
    encoded = [enc, EncodedSnapshot.from_bytes(other), enc]
    dense = [snap, gp.Snapshot.from_bytes(other), snap]
    assert _same(gp.merge(encoded), gp.merge(dense))
    assert _same(gp.merge([enc, dense[1]]), gp.merge(dense[:2]))  # the two kinds mixed


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda lo: ({3000: 2, 3100: 1}, int(lo[3000 + 1]), int(lo[3100])), "lie outside"),
        (lambda lo: ({3000: 2, 3100: 1}, int(lo[3000]), int(lo[3100]) - 1), "lie outside"),
        (lambda lo: ({3000: 2, 3100: 2}, int(lo[3000]), int(lo[3100])), "do not add up"),
    ],
)
def test_an_encoded_reads_buckets_are_checked_before_they_are_added(edit: Any, match: str) -> None:
    """Buckets ``Snapshot.from_bytes`` refuses are refused where the encoded read decodes
    them (its records read: they are sound), in the same words."""
    buckets, vmin, vmax = edit(_edges())
    prefix, header, rows = split_snapshot(SEED)
    _row(header, rows, buckets, vmin, vmax)
    if match == "do not add up":
        header["stat"][0][0] -= 1  # the buckets count one more than the record
        header["stat"][0][1] -= vmax
    bad = join_snapshot(prefix, header, rows)
    with pytest.raises(CorruptDataError, match=match):
        gp.Snapshot.from_bytes(bad)
    enc = EncodedSnapshot.from_bytes(bad)
    for merging in ([enc], [EncodedSnapshot.from_bytes(SEED), enc]):
        with pytest.raises(CorruptDataError, match=match):
            gp.merge(merging)


def test_an_encoded_read_refuses_bad_records_and_truncated_counts() -> None:
    prefix, header, rows = split_snapshot(SEED)
    header["stat"][0][2] = header["stat"][0][3] + 1  # min above max
    for blob in (join_snapshot(prefix, header, rows), SEED[:-9], b"GYRS"):
        with pytest.raises(ValueError) as dense:
            gp.Snapshot.from_bytes(blob)
        with pytest.raises(ValueError) as enc:
            EncodedSnapshot.from_bytes(blob)
        assert str(enc.value) == str(dense.value)
    prefix, header, rows = split_snapshot(SEED)
    rows[0] = rows[0][:-1] + b"\x80"  # a varint cut off at the end of the row
    enc_bad = EncodedSnapshot.from_bytes(join_snapshot(prefix, header, rows))
    with pytest.raises(CorruptDataError, match="truncated counts"):
        enc_bad.snapshot()
