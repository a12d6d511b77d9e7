"""Snapshot algebra against sums over the values themselves: ``interval`` holds exactly
what was recorded in between, ``merge`` of sources that ran side by side counts their
wall time once, and ``as_snapshot`` reads each input kind as documented."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import gyreprof as gp
from gyreprof.model.histogram import layout_edges
from gyreprof.model.snapshot import as_snapshot, interval


def _profiler(values: list[int]) -> gp.Profiler:
    prof = gp.Profiler(["x"])
    for v in values:
        prof.begin()
        prof.record("x", v)
    return prof


def test_interval_stats_are_those_of_the_values_in_between() -> None:
    before_values = [700, 5_000, 90_000]
    between = [3_000, 4_000, 12_000, 20_000]
    prof = _profiler(before_values)
    a = prof.snapshot()
    for v in between:
        prof.begin()
        prof.record("x", v)
    b = prof.snapshot()
    iv = interval(a, b)
    assert iv.rows[0].count == len(between)
    assert iv.rows[0].sum == sum(between)  # not the whole run's 95,700 more
    st = iv.summary().phases["x"]
    assert st.mean == pytest.approx(np.mean(between))
    assert st.sum_ns == pytest.approx(sum(between))
    # no new extreme was set: min and max are bounded by the buckets that grew, so they
    # lie inside the interval's own range, never at the whole run's 700 / 90,000
    lo, width = layout_edges(*iv.layout)
    i_min = int(np.flatnonzero(iv.counts[0])[0])
    i_max = int(np.flatnonzero(iv.counts[0])[-1])
    assert int(lo[i_min]) <= iv.rows[0].min <= min(between)
    assert max(between) <= iv.rows[0].max <= int(lo[i_max] + width[i_max] - 1)
    assert iv.rows[0].min > 700 and iv.rows[0].max < 90_000


def test_an_interval_of_a_torn_copy_reads_its_sum_as_missing() -> None:
    """A reader racing a writer's fold can copy a sum that already holds a value its
    buckets do not: each snapshot is valid alone, but their interval's sum falls outside
    [n x min, n x max]. It reads as missing, never as a mean below the minimum."""
    import dataclasses

    prof = _profiler([700, 5_000, 90_000])
    a = prof.snapshot()
    between = [3_000, 3_000, 3_000, 80_000]
    for v in between:
        prof.begin()
        prof.record("x", v)
    b = prof.snapshot()
    stat = a.stat.copy()
    stat[0, 1] += 80_000  # the sum copied after the fold, the buckets before it
    torn = dataclasses.replace(a, stat=stat)
    assert torn.rows[0].sum == a.rows[0].sum + 80_000  # valid alone
    iv = interval(torn, b)
    assert iv.rows[0].count == len(between)
    assert iv.rows[0].sum == (1 << 63) - 1  # held at the limit: nothing exact behind it
    st = iv.summary().phases["x"]
    assert st.count == len(between) and math.isnan(st.mean) and math.isnan(st.sum_ns)
    assert str(iv.summary())
    assert interval(a, b).rows[0].sum == sum(between)  # the untorn pair is exact


def test_interval_keeps_new_extremes_exact() -> None:
    prof = _profiler([5_000, 6_000])
    a = prof.snapshot()
    for v in (123, 999_999):
        prof.begin()
        prof.record("x", v)
    iv = interval(a, prof.snapshot())
    assert (iv.rows[0].min, iv.rows[0].max) == (123, 999_999)
    assert iv.rows[0].sum == 123 + 999_999


def test_sources_side_by_side_merge_to_their_wall_time() -> None:
    # two loops interleaved in one thread: each covers the same ~60 ms of wall time
    a, b = gp.Profiler(["x"]), gp.Profiler(["x"])
    for _ in range(30):
        a.begin()
        b.begin()
        time.sleep(0.002)
        a.lap(0)
        b.lap(0)
    a.end()
    b.end()
    sa, sb = a.snapshot(), b.snapshot()
    m = gp.merge([sa, sb])
    longest = max(sa.steady_ns, sb.steady_ns)
    assert longest <= m.steady_ns < 1.6 * longest  # not the two sources' sum (~2x)
    s = m.summary()
    assert s.steps == 60
    assert s.steps_per_s == pytest.approx(m.steady_steps / (m.steady_ns / 1e9), rel=1e-6)
    assert s.elapsed_s == pytest.approx(m.steady_ns / 1e9)


def test_as_snapshot_reads_each_input_kind() -> None:
    prof = _profiler([1_000, 2_000])
    snap = prof.snapshot()
    assert as_snapshot(snap) is snap
    assert as_snapshot(snap.summary()) is snap
    assert as_snapshot(prof).steps == snap.steps
    loaded = gp.Summary.from_json(snap.summary().to_json())
    assert as_snapshot(loaded, summary_only=True) is None  # the caller works from the Summary
    with pytest.raises(ValueError, match="loaded from JSON has none"):
        as_snapshot(loaded, what="the test")
    with pytest.raises(TypeError, match="the test takes a Profiler, Snapshot or Summary"):
        as_snapshot([snap], what="the test")
