"""Snapshot bytes that cannot be true are refused (issue 25 item 11): sums and extremes
that disagree with the counts, negative totals, overhead above the steady time, counts
that would wrap in a merge. Whatever is accepted can be summarised, printed, merged and
written again, and every mean lies within its min and max."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gyreprof as gp
from gyreprof._core import encode_counts
from gyreprof._support.errors import CorruptDataError
from gyreprof.model.histogram import STEP
from gyreprof.model.snapshot import COUNT_CAP

from helpers.crafted import join_snapshot, split_snapshot


def _seed() -> bytes:
    prof = gp.Profiler(["env", "fwd"], warmup_steps=2, window_steps=4, label="seed")
    for d in (1000, 1200, 900, 30_000, 1100, 5000, 2500, 800):
        prof.begin()
        prof.record("env", d)
        prof.record("fwd", d // 3)
    prof.end()
    prof.count("retry", 3)
    return prof.snapshot().to_bytes()


SEED = _seed()
INT64_MAX = (1 << 63) - 1


def _with(change: Any) -> bytes:
    prefix, header, rows = split_snapshot(SEED)
    change(header, rows)
    return join_snapshot(prefix, header, rows)


def _set(path: tuple[Any, ...], value: Any) -> bytes:
    def change(header: dict[str, Any], rows: list[bytes]) -> None:
        d = header
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    return _with(change)


def test_the_seed_reads() -> None:
    snap = gp.Snapshot.from_bytes(SEED)
    assert snap.row("env").count == 6 and snap.meta.label == "seed"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("stat", 0, 2), 40_000, "min 40000 and max 30000 are impossible"),  # min > max
        (("stat", 0, 2), -1, "min -1 and max 30000 are impossible"),  # unknown with counts
        (("stat", 0, 3), 1500, "lie outside the buckets"),  # max below the top bucket
        (("stat", 0, 2), 20_000, "lie outside the buckets"),  # min above the bottom one
        (("stat", 0, 1), 10, "outside [6 x min"),  # sum below count x min
        (("stat", 0, 1), 10**12, "outside [6 x min"),  # sum above count x max
        (("stat", 0, 1), -5, "negative count or sum"),
        (("warm", 0, 1), 10**12, "warm-up sum"),
        (("warm", 0, 0), -1, "negative count or sum"),
        (("totals", "steps_completed"), -3, "totals steps_completed is -3"),
        (("totals", "events"), 2**70, "not a 64-bit integer"),
        (("sources", 0, "overhead_ns"), 1e15, "exceeds its steady time"),
        (("sources", 0, "rate"), -1.0, "not a finite number >= 0"),
        (("sources", 0, "steady_ns"), -1, "source steady_ns is -1"),
        (("sources", 0, "pid"), "me", "not a 64-bit integer"),
        (("sources", 0, "warmup_done"), 1, "not true or false"),
        (("meta", "windows_closed"), -2, "meta windows_closed is -2"),
        (("first", 0), -7, "impossible"),
        (("counters", "retry"), 2**64, "not a 64-bit integer"),
        (("config", "clock"), 5, "not a string"),
    ],
)
def test_impossible_fields_are_refused_saying_what(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(CorruptDataError, match="corrupted snapshot") as err:
        gp.Snapshot.from_bytes(_set(path, value))
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)


def _big_bucket(count: int) -> bytes:
    """The seed with env's histogram replaced by ``count`` values of 1000 ns."""

    def change(header: dict[str, Any], rows: list[bytes]) -> None:
        L = header["counts_len"]
        row = np.zeros(L, dtype=np.int64)
        row[1000 if L > 1000 else 0] = count  # 1000 ns sits in its own bucket at 3 sf
        rows[0] = encode_counts(row)
        header["stat"][0] = [count, min(count * 1000, INT64_MAX), 1000, 1000]

    return _with(change)


def test_a_warm_up_count_past_the_cap_is_refused_when_read() -> None:
    """The count cap of a snapshot read in holds for warm-up counts too (checked where
    both doors, the decoder and the live reader, check a snapshot: _limits)."""

    def change(header: dict[str, Any], rows: list[bytes]) -> None:
        header["warm"][0] = [COUNT_CAP + 1, 0, 0]

    with pytest.raises(CorruptDataError, match="more than the 2\\^62 - 1 values"):
        gp.Snapshot.from_bytes(_with(change))


def test_counts_near_the_int64_limit_merge_without_wrapping() -> None:
    snap = gp.Snapshot.from_bytes(_big_bucket(COUNT_CAP))
    two = gp.merge([snap, snap])  # 2 x (2^62 - 1) still fits an int64
    assert two.row("env").count == 2 * COUNT_CAP and int(two.counts[0].sum()) == 2 * COUNT_CAP
    assert two.summary()["env"].percentile(50) == 1000.0
    with pytest.raises(ValueError, match="more than the 2\\^63 - 1 an int64 bucket holds"):
        gp.merge([snap, snap, snap])  # refused, never wrapped
    with pytest.raises(CorruptDataError, match="more than the 2\\^62 - 1 values"):
        gp.Snapshot.from_bytes(_big_bucket(COUNT_CAP + 1))
    with pytest.raises(CorruptDataError):  # the doubled count cannot come back in either
        gp.Snapshot.from_bytes(two.to_bytes())


def test_a_copy_taken_mid_write_is_settled_against_its_buckets() -> None:
    """A stats block whose extremes and sum lag the buckets builds a valid snapshot."""
    prof = gp.Profiler(["env"])
    prof.begin()
    prof.record("env", 5000)
    prof.end()
    rec = prof.recorder
    stats = rec.stats_array()
    from gyreprof._support.block import StatsBlock

    block = StatsBlock(stats, rec.offsets, rec.n_phases)
    block.stat[0, 1:] = [0, -1, -1]  # counted in the buckets, sum and extremes not yet
    snap = gp.Snapshot.from_stats(
        stats, rec.config(), prof.phases, (), lap_cost_ns=10.0, taken_ns=1
    )
    env = snap.row("env")
    assert env.count == 1 and 0 <= env.min <= 5000 <= env.max + 5 and env.min <= env.mean <= env.max


# ------------------------------------------------------------------------- fuzz

_PRE, _HEADER, _ROWS = split_snapshot(SEED)
_EDGES = [-(2**63), -2, -1, 0, 1, 2, 999, 10**9, 2**53, COUNT_CAP, 2**62, INT64_MAX, 2**63]
_values = st.one_of(
    st.sampled_from(_EDGES),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([None, "x", [], {}, True]),
)


def _paths(header: dict[str, Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for name in ("stat", "warm"):
        for i, row in enumerate(header[name]):
            out += [(name, i, j) for j in range(len(row))]
    out += [("first", i) for i in range(len(header["first"]))]
    for name in ("totals", "times", "config", "meta", "counters"):
        out += [(name, k) for k in header[name]]
    out += [("sources", 0, k) for k in header["sources"][0]]
    out += [("lap_cost_ns",)]
    return out


_PATHS = _paths(_HEADER)
_DEADLINE = time.monotonic() + 60.0  # the fuzz is time-bounded whatever the example count


def _check_accepted(snap: gp.Snapshot) -> None:
    s = snap.summary()
    assert str(s)
    for name in (*snap.phases, STEP):
        ps = s.step if name == STEP else s[name]
        for q in (0.0, 50.0, 99.9, 100.0):
            ps.percentile(q)
        if ps.count > 0:
            assert ps.min <= ps.mean <= ps.max, (name, ps.min, ps.mean, ps.max)
    assert 0.0 <= s.overhead_share <= 1.0
    assert s.warmup.done in (True, False)
    two = gp.merge([snap, snap])
    assert str(two.summary())
    again = gp.Snapshot.from_bytes(snap.to_bytes())
    assert again.rows == snap.rows and again.sources == snap.sources


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _values, st.booleans()), min_size=1, max_size=4))
def test_accepted_snapshots_work_everywhere(edits: list[tuple[tuple[Any, ...], Any, bool]]) -> None:
    if time.monotonic() > _DEADLINE:
        return
    prefix, header, rows = split_snapshot(SEED)
    for path, value, scale in edits:
        d: Any = header
        for k in path[:-1]:
            d = d[k]
        old = d[path[-1]]
        if scale and isinstance(old, (int, float)) and isinstance(value, int):
            value = old + value % 7 - 3  # a perturbation near the true value
        d[path[-1]] = value
    try:
        snap = gp.Snapshot.from_bytes(join_snapshot(prefix, header, rows))
    except ValueError as exc:
        assert isinstance(exc, CorruptDataError) or "budget" in str(exc)
        return
    _check_accepted(snap)


def test_the_fuzz_property_holds_for_the_seed_and_its_merge() -> None:
    snap = gp.Snapshot.from_bytes(SEED)
    _check_accepted(snap)
    _check_accepted(gp.merge([snap, snap]))
    assert not math.isnan(snap.summary()["env"].mean)


def test_buckets_whose_int64_sum_wraps_to_the_count_are_refused() -> None:
    """Four buckets of about 2^62 add up, in int64, to exactly the stated count 5."""

    def change(header: dict[str, Any], rows: list[bytes]) -> None:
        row = np.zeros(header["counts_len"], dtype=np.int64)
        row[1000:1004] = [2**62, 2**62, 2**62, 2**62 + 5]
        assert int(row.sum()) == 5  # what a plain numpy sum says
        rows[0] = encode_counts(row)
        header["stat"][0] = [5, 5000, 1000, 1003]

    with pytest.raises(CorruptDataError, match="do not add up"):
        gp.Snapshot.from_bytes(_with(change))
