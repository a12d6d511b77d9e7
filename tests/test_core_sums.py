"""Sums of durations never saturate (issue 25, item 12).

The fold carries a sum past INT64_MAX into its high word (the stats block's
"sumhi" region), so 3M events of exactly one hour have a mean of exactly one hour;
a snapshot keeps the exact sum (``meta.exact_sums``), merges add exactly, and a
sum held at the int64 limit with nothing exact behind it reads as missing (NaN,
with a note), never as a wrong mean.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof._core import recorder as _rec
from gyreprof.live import _layout as lay
from gyreprof.model.snapshot import Snapshot

HOUR = 3600 * 10**9
N = 3_000_000  # 3M x 1 h = 1.08e19 ns, past INT64_MAX (9.22e18)
INT64_MAX = (1 << 63) - 1


def _hours(prof: gp.Profiler, n: int = N, phase: int = 0) -> None:
    rec = prof.recorder.record
    for _ in range(n):
        rec(phase, HOUR)


@pytest.fixture(scope="module")
def hours_snapshot() -> Snapshot:
    prof = gp.Profiler(["env"])
    _hours(prof)
    return prof.snapshot()


def test_the_mean_of_three_million_hours_is_exact(hours_snapshot: Snapshot) -> None:
    env = hours_snapshot.summary().phases["env"]
    assert env.count == N
    assert env.mean == HOUR  # 3,547 s before: the sum saturated at INT64_MAX
    assert env.min <= env.mean <= env.max
    assert env.sum_ns == float(N * HOUR)
    assert hours_snapshot.meta.exact_sums == ((0, N * HOUR),)
    assert hours_snapshot.totals.saturated == 0


def test_merged_and_reloaded_the_mean_stays_exact(hours_snapshot: Snapshot) -> None:
    m = gp.merge([hours_snapshot, hours_snapshot, hours_snapshot])
    assert m.summary().phases["env"].mean == HOUR  # 1,182 s before
    again = gp.merge([m, hours_snapshot])
    assert again.summary().phases["env"].mean == HOUR
    back = Snapshot.from_bytes(again.to_bytes())
    assert back.summary().phases["env"].mean == HOUR
    assert back.summary().phases["env"].sum_ns == float(4 * N * HOUR)


def test_the_high_word_carries_in_the_stats_block() -> None:
    prof = gp.Profiler(["env"])
    _hours(prof, 2_600_000)
    prof.recorder.flush()
    stats = prof.recorder.stats_array()
    off = prof.recorder.offsets
    hi = stats[off["sumhi"] + _rec.SUMHI_FIELDS * 0 + _rec.SUMHI_STAT]
    lo = stats[off["hot"] + _rec.HOT_STAT + _rec.STAT_SUM]
    assert int(hi) * 2**63 + int(lo) == 2_600_000 * HOUR
    assert 0 <= lo < 2**63 and hi == 1
    assert stats[_rec.H_SUM_HI] == off["sumhi"]


def test_warm_up_sums_carry_too() -> None:
    prof = gp.Profiler(["env"], warmup_steps=1)
    prof.begin()
    _hours(prof)
    prof.end()
    s = prof.summary()
    assert s.warmup.mean_ns["env"] == HOUR


def test_a_shared_block_read_live_keeps_the_exact_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-sums-"))
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    try:
        prof = gp.Profiler(["env"], live=True)
        _hours(prof)
        with gp.live.attach(os.getpid()) as r:
            assert r.snapshot().summary().phases["env"].mean == HOUR
        prof.live.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _with_sum(snap: Snapshot, total: int) -> Snapshot:
    stat = snap.stat.copy()
    stat[0, 1] = total
    meta = snap.meta.replace(exact_sums=None)
    return Snapshot(
        phases=snap.phases,
        config=snap.config,
        counts=snap.counts,
        stat=stat,
        warm=snap.warm,
        first=snap.first,
        totals=snap.totals,
        counters=snap.counters,
        times=snap.times,
        rolling=snap.rolling,
        lap_cost_ns=snap.lap_cost_ns,
        sources=snap.sources,
        meta=meta,
    )


def test_a_held_sum_with_nothing_exact_reads_missing_with_a_note() -> None:
    prof = gp.Profiler(["env"])
    for _ in range(10):
        prof.begin()
        prof.recorder.record(0, 10**6)
    prof.end()
    held = _with_sum(prof.snapshot(), INT64_MAX)  # an older record, saturated
    env = held.summary().phases["env"]
    assert math.isnan(env.mean) and math.isnan(env.share) and math.isnan(env.sum_ns)
    assert env.count == 10 and env.max == 10**6
    assert "sums past the int64 range" in str(held.summary())
    merged = gp.merge([held, prof.snapshot()])
    assert math.isnan(merged.summary().phases["env"].mean)
    assert merged.rows[0].sum == INT64_MAX  # held, with nothing exact behind it
