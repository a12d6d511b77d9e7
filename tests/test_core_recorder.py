"""The compiled Recorder: tiling laps, ring wrap, warm-up, windows, threads, bad data."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gyreprof._core import Recorder, monotonic_ns, tsc_invariant
from gyreprof._core import recorder as R
from gyreprof._support.block import StatsBlock

from helpers.reference import RefRing


def _bucket_counts(rec: Recorder, stats: np.ndarray) -> np.ndarray:
    """Values recorded per histogram (phases, then the whole step), from the buckets."""
    off, L = rec.offsets, rec.config()["counts_len"]
    nh = rec.n_phases + 1
    return stats[off["counts"] : off["counts"] + nh * L].reshape(nh, L).sum(axis=1)


def test_laps_tile_the_step() -> None:
    rec = Recorder(3)
    for _ in range(50):
        rec.begin()
        rec.lap(0)
        rec.lap(1)
        rec.lap(2)
    rec.end()
    ev = rec.events()
    steps = ev[ev["phase"] == -1]
    phases = ev[ev["phase"] >= 0]
    assert len(steps) == 50 and len(phases) == 150
    for s in steps:
        mine = phases[phases["step"] == s["step"]]
        # consecutive phases share their boundary: no gaps, no double reads
        assert mine["start_ns"][0] == s["start_ns"]
        assert np.all(mine["start_ns"][1:] == mine["start_ns"][:-1] + mine["duration_ns"][:-1])
        assert mine["duration_ns"].sum() <= s["duration_ns"]


def test_clock_is_monotonic_ns() -> None:
    a = time.monotonic_ns()
    b = monotonic_ns()
    c = time.monotonic_ns()
    assert a <= b <= c


def test_ring_wrap_keeps_histogram_counts_exact() -> None:
    rec = Recorder(2, capacity=100)  # rounds up to 128
    assert rec.capacity == 128
    ref = RefRing(100)
    n = 1000
    for _ in range(n):
        rec.begin()
        rec.lap(0)
        rec.lap(1)
        for item in ("a", "b", "step"):
            ref.push(item)
    rec.end()
    ref.push("step")
    stats = rec.stats_array()
    off = rec.offsets
    L = rec.config()["counts_len"]
    counts = stats[off["counts"] : off["counts"] + 3 * L].reshape(3, L).sum(axis=1)
    assert counts.tolist() == [n, n, n]  # nothing lost to the wrap
    assert rec.overwritten == 3 * n - 128
    assert len(rec.events()) == 128
    # the ring keeps the newest events in recording order (a step is recorded when it closes)
    ev = rec.events()
    assert np.all(np.diff(ev["step"]) >= 0)
    assert ev["step"][-1] == n
    phases = ev[ev["phase"] >= 0]
    assert np.all(np.diff(phases["start_ns"]) >= 0)


def test_counters_and_first_values() -> None:
    rec = Recorder(1)
    rec.record(0, 5_000)
    rec.record(0, 7_000)
    rec.count(0, 3)
    s = rec.stats_array()
    off = rec.offsets
    assert StatsBlock(s, off, rec.n_phases).first[0] == 5_000
    assert s[off["counters"]] == 3
    assert _bucket_counts(rec, s)[0] == 2  # both records in the phase histogram


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (-5, R.H_NEGATIVE),
        (float("nan"), R.H_NONFINITE),
        (float("inf"), R.H_NONFINITE),
        (-1.5, R.H_NEGATIVE),
        (10**30, R.H_OUT_OF_RANGE),
        (4e12, R.H_OUT_OF_RANGE),
    ],
)
def test_record_counts_bad_values_instead_of_raising(value: float, field: int) -> None:
    rec = Recorder(1, highest_ns=3_600_000_000_000)
    rec.record(0, value)
    s = rec.stats_array()
    assert s[field] == 1


def test_record_rejects_non_numbers() -> None:
    rec = Recorder(1)
    with pytest.raises(TypeError, match="number of nanoseconds"):
        rec.record(0, "fast")


def test_phase_index_out_of_range() -> None:
    rec = Recorder(2)
    for bad in (2, -1, 1000):
        with pytest.raises(IndexError, match="out of range"):
            rec.lap(bad)
        with pytest.raises(IndexError):
            rec.record(bad, 5)


def test_negative_duration_is_counted() -> None:
    rec = Recorder(1)
    rec.record(0, -1)
    assert rec.stats_array()[R.H_NEGATIVE] == 1
    assert rec.events().size == 0


def test_second_writer_thread_is_refused() -> None:
    rec = Recorder(1)
    rec.begin()
    errors: list[BaseException] = []

    def other() -> None:
        for call in (
            rec.begin,
            lambda: rec.lap(0),
            lambda: rec.record(0, 5),
            rec.end,
            lambda: rec.count(0),
        ):
            try:
                call()
            except RuntimeError as exc:
                errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 5
    assert "per_thread=True" in str(errors[0])
    # the owner keeps working
    rec.lap(0)


def test_first_writer_claims_even_off_the_main_thread() -> None:
    rec = Recorder(1)
    done = threading.Event()

    def sampler() -> None:
        for _ in range(10):
            rec.begin()
            rec.lap(0)
        rec.end()
        done.set()

    t = threading.Thread(target=sampler)
    t.start()
    t.join()
    assert done.is_set()
    with pytest.raises(RuntimeError):
        rec.begin()
    rec.release_writer()
    rec.begin()


def test_warmup_steps_kept_apart() -> None:
    rec = Recorder(1, warmup_steps=5)
    for _ in range(15):
        rec.begin()
        rec.lap(0)
    rec.end()
    s = rec.stats_array()
    off = rec.offsets
    warm = s[off["warm"] : off["warm"] + 6].reshape(2, 3)
    stat = StatsBlock(s, off, rec.n_phases).stat
    assert warm[0, 0] == 5 and warm[1, 0] == 5
    assert _bucket_counts(rec, s).tolist() == [10, 10]
    assert stat[0, 1] > 0 and stat[1, 1] >= stat[0, 1]  # steady sums
    assert s[R.H_WARMUP_STEPS] == 5
    assert s[R.H_WARMUP_END_STEP] == 5  # the last warm-up step


def test_warmup_time() -> None:
    rec = Recorder(1, warmup_ns=30_000_000)
    t_end = time.monotonic() + 0.2
    n = 0
    while time.monotonic() < t_end:
        rec.begin()
        time.sleep(0.005)
        rec.lap(0)
        n += 1
    rec.end()
    s = rec.stats_array()
    assert 1 <= s[R.H_WARMUP_STEPS] < n
    assert s[R.H_STEADY_START] > 0


def test_rolling_windows_close_every_window_steps() -> None:
    rec = Recorder(2, window_steps=10, max_windows=4)
    for _ in range(95):
        rec.begin()
        rec.lap(0)
        rec.lap(1)
    rec.end()
    s = rec.stats_array()
    assert s[R.H_WINDOWS] == 9
    assert s[R.H_WIN_STEPS] == 5  # 95 steps: 9 full windows, 5 steps in the open one
    off = rec.offsets
    stride = R.WIN_HEADER + R.WIN_FIELDS * 3
    wr = s[off["wring"] : off["wring"] + 4 * stride].reshape(4, stride)
    for row in wr:
        assert row[3] == 10  # steps per window
        for h in range(3):
            count, total, mx, p50, p90, p99 = row[R.WIN_HEADER + 6 * h : R.WIN_HEADER + 6 * h + 6]
            assert count == 10
            assert 0 <= p50 <= p90 <= p99 <= mx


def test_bad_constructor_arguments() -> None:
    for kwargs, msg in [
        (dict(n_phases=0), "n_phases"),
        (dict(n_phases=1, capacity=0), "capacity"),
        (dict(n_phases=1, capacity=-5), "capacity"),
        (dict(n_phases=1, significant_figures=9), "significant_figures"),
        (dict(n_phases=1, warmup_steps=5, warmup_ns=5), "not both"),
        (dict(n_phases=1, window_steps=0), "window_steps"),
        (dict(n_phases=1, clock="wall"), "clock"),
    ]:
        with pytest.raises(ValueError, match=msg):
            Recorder(**kwargs)


def test_tsc_clock_or_clear_refusal() -> None:
    if tsc_invariant():
        rec = Recorder(1, clock="tsc")
        a = time.monotonic_ns()
        t = rec.now_ns()
        b = time.monotonic_ns()
        # calibrated against CLOCK_MONOTONIC: within a millisecond of it
        assert a - 1_000_000 <= t <= b + 1_000_000
        rec.begin()
        time.sleep(0.01)
        rec.lap(0)
        d = rec.events()["duration_ns"][0]
        assert 5_000_000 < d < 500_000_000
    else:
        with pytest.raises(ValueError, match="invariant TSC"):
            Recorder(1, clock="tsc")


def test_external_buffer_and_rebind() -> None:
    size = Recorder.required_bytes(2)
    buf = bytearray(size)
    rec = Recorder(2, buffer=buf)
    rec.begin()
    rec.lap(0)
    rec.end()
    assert np.frombuffer(buf, dtype=np.int64)[R.H_STEPS_DONE] == 1
    rec.rebind(None)
    rec.begin()
    rec.end()
    assert np.frombuffer(buf, dtype=np.int64)[R.H_STEPS_DONE] == 1  # no longer written
    assert rec.stats_array()[R.H_STEPS_DONE] == 2  # content carried over
    with pytest.raises(ValueError, match="bytes"):
        Recorder(2, buffer=bytearray(16))
    with pytest.raises(ValueError, match="writable"):
        Recorder(2, buffer=bytes(size))


def test_phase_timer_nests_and_restores_open_phase() -> None:
    rec = Recorder(2)
    outer, inner = rec.timer(0), rec.timer(1)
    with outer:
        assert rec.progress()[2] == 0
        with inner:
            assert rec.progress()[2] == 1
        assert rec.progress()[2] == 0
    assert rec.progress()[2] == -1
    ev = rec.events()
    assert sorted(ev["phase"].tolist()) == [0, 1]
    d = {int(e["phase"]): int(e["duration_ns"]) for e in ev}
    assert d[0] >= d[1]


def test_construction_cannot_be_bypassed_or_repeated() -> None:
    with pytest.raises(TypeError):
        Recorder.__new__(Recorder)  # no half-built recorder
    rec = Recorder(1, significant_figures=1)
    rec.__init__(1, significant_figures=5, clock="bogus")  # type: ignore[misc]  # no effect
    rec.record(0, 5)
    assert rec.config()["significant_figures"] == 1
    with pytest.raises(IndexError):
        R.PhaseTimer(rec, 7)
    with pytest.raises(IndexError):
        rec.lap(2**40)


def test_sums_cannot_overflow() -> None:
    rec = Recorder(1)
    for _ in range(4):
        rec.record(0, 2**63)
    stats = rec.stats_array()
    stat = StatsBlock(stats, rec.offsets, rec.n_phases).stat
    assert _bucket_counts(rec, stats)[0] == 4 and stat[0, R.STAT_SUM] > 0


def _steady_and_warm(rec: Recorder, h: int) -> tuple[list[int], list[int]]:
    """(count, sum, min, max) of histogram ``h``'s steady state, and its warm-up
    (count, sum, max), read from the stats block; the count comes from the buckets."""
    s = rec.stats_array()
    block = StatsBlock(s, rec.offsets, rec.n_phases)
    line = block.stat[h]
    total, vmin, vmax = (int(line[k]) for k in (R.STAT_SUM, R.STAT_MIN, R.STAT_MAX))
    warm = [int(x) for x in block.warm[h]]
    return [int(_bucket_counts(rec, s)[h]), total, vmin, vmax], warm


def test_steady_min_max_and_mean_are_exact() -> None:
    # neither the first nor the last value is an extreme, and the extremes are not
    # bucket edges: min, max and sum are kept exactly beside the buckets
    values = [5_003, 917, 123_457, 40_001, 888, 99_999, 7]
    rec = Recorder(2)
    for v in values:
        rec.record(0, v)
    rec.record(1, 31)
    (n, total, vmin, vmax), warm = _steady_and_warm(rec, 0)
    assert (n, total, vmin, vmax) == (len(values), sum(values), 7, 123_457)
    assert total / n == pytest.approx(np.mean(values), rel=1e-15)
    assert warm == [0, 0, 0]
    assert _steady_and_warm(rec, 1)[0] == [1, 31, 31, 31]


def test_warmup_and_steady_extremes_are_kept_apart() -> None:
    rec = Recorder(1, warmup_steps=2)
    per_step = [[900_000, 3], [50, 60], [70_000, 800], [10, 2_000_000], [400, 500]]
    for vals in per_step:
        rec.begin()
        for v in vals:
            rec.record(0, v)
    rec.end()
    (n, total, vmin, vmax), warm = _steady_and_warm(rec, 0)
    steady = [v for vals in per_step[2:] for v in vals]
    assert (n, total, vmin, vmax) == (6, sum(steady), 10, 2_000_000)
    assert warm == [4, 900_000 + 3 + 50 + 60, 900_000]
    # the whole step: three steady steps, their extremes bracket their mean
    (sn, ssum, smin, smax), swarm = _steady_and_warm(rec, 1)
    assert sn == 3 and swarm[0] == 2
    assert 0 <= smin <= ssum / sn <= smax


def test_steady_min_is_not_the_first_value_after_a_reset() -> None:
    rec = Recorder(1)
    rec.record(0, 5)
    rec.reset()
    for v in (300, 200, 400):
        rec.record(0, v)
    assert _steady_and_warm(rec, 0)[0] == [3, 900, 200, 400]
