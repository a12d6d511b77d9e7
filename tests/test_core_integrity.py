"""Sums that cannot wrap, windows that are never read torn, strict integer arguments."""

from __future__ import annotations

import mmap
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import gyreprof as gp
from gyreprof._core import Recorder
from gyreprof._support.block import StatsBlock, decode_windows
from gyreprof.model.snapshot import merge

INT64_MAX = (1 << 63) - 1


# ------------------------------------------------------------------ sums cannot wrap


def test_clamped_values_carry_the_sum_instead_of_wrapping() -> None:
    # 2.6 M values clamped at the default 1 h top wrapped the int64 sum (negative mean),
    # then were held at INT64_MAX (a mean below the minimum); now the sum carries
    rec = Recorder(1)
    record = rec.record
    for _ in range(2_600_000):
        record(0, 4_000_000_000_000)
    block = StatsBlock.of(rec)
    assert block.out_of_range == 2_600_000
    assert block.exact_sums()[0] == 2_600_000 * 3_600_000_000_000
    assert block.stat_table()[0, 1] == INT64_MAX  # the int64 table holds the limit
    assert block.saturated == 0
    prof = gp.Profiler(["x"], highest_ns=1 << 62)  # the snapshot carries the exact sum
    for _ in range(3):
        prof.record("x", 1 << 62)
    snap = prof.snapshot()
    assert snap.totals.saturated == 0 and snap.meta.exact_sums == ((0, 3 << 62),)
    assert snap.rows[0].sum == 3 << 62


def test_huge_record_carries_with_a_wide_range() -> None:
    rec = Recorder(2, highest_ns=1 << 62)
    for _ in range(3):
        rec.record(1, 1 << 62)
    block = StatsBlock.of(rec)
    st = block.stat_table()
    assert st[1, 1] == INT64_MAX and st[1, 0] == 3
    assert block.exact_sums()[1] == 3 << 62 and block.saturated == 0


def test_profiler_mean_is_exact_past_the_int64_range() -> None:
    prof = gp.Profiler(["x"], highest_ns=1 << 62)
    for _ in range(4):
        prof.record("x", 1 << 62)
    x = prof.snapshot().summary().phases["x"]
    assert x.mean == float(1 << 62) and x.min <= x.mean <= x.max


def test_merge_adds_sums_exactly() -> None:
    snaps = []
    for _ in range(2):
        prof = gp.Profiler(["x"], highest_ns=1 << 62)
        prof.record("x", 1 << 62)
        prof.record("x", 1 << 61)
        snaps.append(prof.snapshot())
    merged = merge(snaps)
    assert merged.meta.exact_sums == ((0, 2 * ((1 << 62) + (1 << 61))),)
    assert merged.rows[0].sum == 2 * ((1 << 62) + (1 << 61))
    assert merged.totals.saturated == 0
    assert merged.rows[0].count == 4
    assert merged.summary().phases["x"].mean == ((1 << 62) + (1 << 61)) / 2


def test_counter_saturates() -> None:
    rec = Recorder(1)
    rec.count(0, INT64_MAX)
    rec.count(0, 5)
    block = StatsBlock.of(rec)
    assert block.counter(0) == INT64_MAX and block.saturated == 1


# ------------------------------------------------- windows from the ring, as before


def _drive(rec: Recorder, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        rec.begin()
        for _ in range(int(rng.integers(0, 6))):
            d = int(10 ** rng.uniform(0, 13)) if rng.random() < 0.9 else -5
            rec.record(int(rng.integers(0, 3)), d)


@pytest.mark.parametrize("warmup", [0, 4])
def test_windows_from_the_ring_equal_windows_accounted_per_event(warmup: int) -> None:
    # capacity 1: every window outgrows the ring at once and is accounted per event;
    # 65536: every window is folded out of the ring at close. Same phase rows.
    rows = []
    for cap in (1, 8, 65536):
        rec = Recorder(3, cap, window_steps=9, warmup_steps=warmup, max_windows=64)
        _drive(rec, 7)
        w = StatsBlock.of(rec).window_records()
        hists = [wr.histograms[:3] for wr in decode_windows(w, 3)]
        rows.append(([(wr.first_step, wr.steps, wr.warmup) for wr in decode_windows(w, 3)], hists))
    assert len(rows[0][0]) == 300 // 9
    assert rows[0] == rows[1] == rows[2]
    counts = sum(h.count for ws in rows[0][1] for h in ws)
    assert counts > 0


def test_windows_far_longer_than_the_ring_are_folded_in_batches() -> None:
    # 60 records per step, 5 steps per window, a ring of 16 events: every window is
    # folded out of the ring about 19 times before it closes
    rows = []
    for cap in (16, 1 << 16):
        rec = Recorder(2, cap, window_steps=5, max_windows=64)
        rng = np.random.default_rng(3)
        for _ in range(40):
            rec.begin()
            for d in rng.integers(1, 10**9, 60):
                rec.record(int(d) % 2, int(d))
        rows.append([wr.histograms[:2] for wr in StatsBlock.of(rec).windows()])
    assert len(rows[0]) == 7  # 39 closed steps
    assert rows[0] == rows[1]
    assert sum(h.count for ws in rows[0] for h in ws) == 60 * 5 * len(rows[0])


# ------------------------------------------------------ windows are never read torn

_WRITER = textwrap.dedent(
    """
    import mmap, sys, time
    from gyreprof._core import Recorder
    kw = dict(window_steps=4, max_windows=8)
    with open(sys.argv[1], "r+b") as f:
        buf = mmap.mmap(f.fileno(), 0)
    rec = Recorder(2, 1024, buffer=buf, **kw)
    begin, lap = rec.begin, rec.lap
    print("ready", flush=True)
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        for _ in range(2000):
            begin(); lap(0); lap(1)
    """
)


def test_windows_are_never_read_torn_by_a_live_reader(tmp_path: Path) -> None:
    # The stats block sits in a file both processes map (a plain file: no
    # multiprocessing resource tracker outlives the test).
    kw = dict(window_steps=4, max_windows=8)
    nbytes = Recorder.required_bytes(2, max_windows=8)
    path = tmp_path / "block"
    path.write_bytes(bytes(nbytes))
    layout = Recorder(2, 1024, **kw)
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), "3.0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with open(path, "r+b") as f:
            buf = mmap.mmap(f.fileno(), 0)
        view = np.ndarray((nbytes // 8,), dtype=np.int64, buffer=buf)
        block = StatsBlock(view, layout.offsets, 2)
        seen = 0
        end = time.monotonic() + 2.0
        while time.monotonic() < end and child.poll() is None:
            for wr in block.windows():
                for h in wr.histograms:
                    if h.count == 0:
                        continue
                    assert 0 <= h.p50 <= h.p90 <= h.p99 <= h.max, wr
                    seen += 1
            # a frozen copy (what a live reader's snapshot decodes) is filtered too
            for wr in StatsBlock(view.copy(), layout.offsets, 2).windows():
                for h in wr.histograms:
                    if h.count:
                        assert 0 <= h.p50 <= h.p90 <= h.p99 <= h.max, wr
        child.wait(timeout=30)
        assert child.returncode == 0
        assert seen > 100
        del view, block
        buf.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# --------------------------------------------------------- strict integer arguments


@pytest.mark.parametrize("bad", [1.5, True, np.bool_(True), "1", None])
def test_phase_ids_are_strict_ints(bad: object) -> None:
    rec = Recorder(3)
    for call in (rec.lap, rec.timer, lambda p: rec.record(p, 10)):
        with pytest.raises(TypeError, match="phase id"):
            call(bad)
    assert StatsBlock.of(rec).ring_head == 0


def test_numpy_ints_are_accepted_and_big_ints_named() -> None:
    rec = Recorder(3)
    rec.lap(np.int64(1))
    rec.lap(np.int32(2))
    rec.record(np.uint8(0), 5)
    with pytest.raises(IndexError, match="phase id"):
        rec.lap(1 << 70)
    with pytest.raises(IndexError, match="phase id"):
        rec.lap(-1)


@pytest.mark.parametrize("bad", [1.5, True, "2"])
def test_count_n_is_a_strict_int(bad: object) -> None:
    rec = Recorder(1)
    with pytest.raises(TypeError, match=r"\bn\b"):
        rec.count(0, bad)
    with pytest.raises(TypeError, match="counter slot"):
        rec.count(bad)  # type: ignore[arg-type]
    with pytest.raises(OverflowError, match=r"\bn="):
        rec.count(0, 1 << 64)
    prof = gp.Profiler(["x"])
    with pytest.raises(TypeError, match=r"\bn\b"):
        prof.count("retries", bad)  # type: ignore[arg-type]


def test_record_refuses_a_bool_duration() -> None:
    rec = Recorder(1)
    with pytest.raises(TypeError, match="duration_ns"):
        rec.record(0, True)


# ------------------------------------------------------ overhead priced by form


def test_each_event_is_priced_at_its_form() -> None:
    prof = gp.Profiler(["a", "b", "c", "d"])
    costs = prof.form_cost_ns
    assert set(costs) == {"lap", "begin", "with", "timed", "record"}
    assert all(v >= 1 for v in costs.values())
    # (which form costs more is timed, so it is left to the benchmarks: under load a
    # calibration of 10 ms can price a with statement under a lap)

    @prof.timed("d")
    def f() -> None:
        return None

    t_b = prof.phase("b")
    lap = prof.lap
    for _ in range(50):
        prof.begin()
        lap(0)
        with t_b:
            pass
        prof.record("c", 1000)
        f()
    prof.end()
    block = StatsBlock.of(prof.recorder)
    assert block.form_events() == {"with": 50, "timed": 50, "record": 50}
    snap = prof.snapshot()
    want = (
        50 * costs["lap"]
        + 50 * costs["with"]
        + 50 * costs["timed"]
        + 50 * costs["record"]
        + 50 * costs["begin"]
    )
    src = snap.sources[0]
    # the profiler cannot have taken more than all of the steady time: a loop of nothing
    # but boundaries, on a loaded machine, can be shorter than its calibrated costs
    assert src.overhead_ns == pytest.approx(min(want, float(src.steady_ns)))
    assert src.steady_ns > 0


def test_warmup_events_are_not_priced() -> None:
    prof = gp.Profiler(["a"], warmup_steps=10)
    t = prof.phase("a")
    for _ in range(30):
        prof.begin()
        with t:
            pass
    prof.end()
    assert StatsBlock.of(prof.recorder).form_events()["with"] == 20


def test_verdict_overhead_caveat_fires_for_a_loop_of_empty_phases() -> None:
    from gyreprof.analysis.verdict import diagnose

    tp = gp.Profiler(["wait", "compute"])
    tw, tc = tp.phase("wait"), tp.phase("compute")
    for _ in range(20_000):  # nothing but the profiler: it is most of the wall time
        tp.begin()
        with tw:
            pass
        with tc:
            pass
    tp.end()
    s = tp.summary()
    assert s.overhead_share > 0.05
    assert any("the profiler itself took" in c for c in diagnose(trainer=tp).caveats)


# ------------------------------------------------------------------ clock="auto"


def _cpu_has_invariant_tsc() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"constant_tsc", "nonstop_tsc"} <= flags
    except OSError:
        pass
    return False


def _kernel_keeps_time_with_the_tsc() -> bool:
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip() == "tsc"
    except OSError:
        return False


def test_auto_picks_the_tsc_exactly_where_it_is_invariant_and_the_kernels_clock() -> None:
    rec = Recorder(1, clock="auto")
    want = _cpu_has_invariant_tsc() and _kernel_keeps_time_with_the_tsc()
    assert rec.clock == ("tsc" if want else "monotonic")
    assert rec.clock_requested == "auto"
    assert rec.config()["clock"] == rec.clock
    prof = gp.Profiler(["x"], clock="auto")
    assert prof.recorder.clock == rec.clock
    with pytest.raises(ValueError, match="'auto'"):
        Recorder(1, clock="fast")


needs_tsc = pytest.mark.skipif(not _cpu_has_invariant_tsc(), reason="no invariant TSC here")


def _clock_pair(rec: Recorder) -> tuple[int, int]:
    """The recorder's clock and CLOCK_MONOTONIC read together: the pair read between two
    monotonic reads closest in time, so a preemption between the reads (70 us on a
    loaded machine, 1.4e-3 of 50 ms) cannot pass for drift."""
    from gyreprof._core import monotonic_ns

    best = None
    for _ in range(50):
        before = monotonic_ns()
        a = rec.now_ns()
        after = monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, a, (before + after) // 2)
        if best[0] < 2_000:
            break
    assert best is not None
    return best[1], best[2]


@needs_tsc
def test_injected_drift_is_found_and_recalibrated() -> None:
    rec = Recorder(1, clock="auto")
    good = rec.clock_health()["ns_per_tick"]
    time.sleep(0.03)
    assert not rec.check_clock(min_span_s=0.02)  # no drift: nothing changes
    rec._inject_tsc_error(1e-3)  # durations now run 0.1% fast
    time.sleep(0.03)
    assert rec.check_clock(min_span_s=0.02)
    h = rec.clock_health()
    assert h["recalibrations"] == 1 and h["fallbacks"] == 0 and h["clock"] == "tsc"
    assert abs(h["error_ppm"] - 1000) < 200
    assert h["ns_per_tick"] == pytest.approx(good, rel=2e-4)
    # after recalibration a duration agrees with CLOCK_MONOTONIC again
    a0, m0 = _clock_pair(rec)
    time.sleep(0.05)
    a1, m1 = _clock_pair(rec)
    assert abs((a1 - a0) - (m1 - m0)) / (m1 - m0) < 2e-4
    assert StatsBlock.of(rec).clock_checks()["recalibrations"] == 1


@needs_tsc
def test_a_tsc_far_off_falls_back_to_monotonic() -> None:
    rec = Recorder(1, clock="auto")
    rec._inject_tsc_error(0.05)
    time.sleep(0.03)
    assert rec.check_clock(min_span_s=0.02)
    h = rec.clock_health()
    assert h["clock"] == "monotonic" and h["fallbacks"] == 1
    rec.lap(0)
    rec.lap(0)  # records on CLOCK_MONOTONIC now
    assert StatsBlock.of(rec).stat_table()[0, 0] == 1


def test_auto_keeps_monotonic_where_the_kernel_distrusts_the_tsc(tmp_path: Path) -> None:
    from gyreprof._core import kernel_clocksource, tsc_trusted

    src = tmp_path / "current_clocksource"
    src.write_text("kvm-clock\n")
    assert kernel_clocksource(str(src)) == "kvm-clock"
    assert not tsc_trusted(str(src))  # the kernel stopped keeping time with the TSC
    assert kernel_clocksource(str(tmp_path / "missing")) is None
    assert not tsc_trusted(str(tmp_path / "missing"))  # unknown: be safe
    src.write_text("tsc\n")
    assert tsc_trusted(str(src)) == _cpu_has_invariant_tsc()


@needs_tsc
def test_a_loop_without_windows_checks_the_clock_too() -> None:
    """Laps only, no begin(): no window ever closes, and the fold checks the clock."""
    rec = Recorder(2, clock="tsc")
    rec._inject_tsc_error(5e-4)
    with pytest.raises(ValueError, match="seconds"):
        rec._set_clock_check_interval(0.0)
    rec._set_clock_check_interval(0.02)  # not 1 s: the test waits on the check, not on time
    deadline = time.monotonic() + 60
    while rec.clock_health()["checks"] < 1:  # a check whose clock pair was preempted waits
        assert time.monotonic() < deadline, "no fold checked the clock within 60 s"
        for _ in range(200):
            rec.lap(0)
            rec.lap(1)
    h = rec.clock_health()
    assert h["checks"] >= 1 and h["recalibrations"] >= 1 and h["clock"] == "tsc"
    assert StatsBlock.of(rec).stat_table()[0, 0] > 0


@needs_tsc
def test_window_close_checks_the_clock_by_itself() -> None:
    rec = Recorder(1, clock="auto", window_steps=50)
    rec._inject_tsc_error(5e-4)
    rec._set_clock_check_interval(0.02)
    deadline = time.monotonic() + 60
    while rec.clock_health()["checks"] < 1:
        assert time.monotonic() < deadline, "no window close checked the clock within 60 s"
        for _ in range(200):
            rec.begin()
            rec.lap(0)
    h = rec.clock_health()
    assert h["checks"] >= 1 and h["recalibrations"] >= 1 and h["clock"] == "tsc"


@pytest.mark.parametrize(
    "kw",
    [
        {"capacity": 1 << 70},
        {"highest_ns": 1 << 70},
        {"window_steps": 1 << 70},
        {"lowest_ns": 1 << 70},
        {"warmup_steps": 1 << 70},
        {"warmup_s": 1e30},
    ],
)
def test_overflow_errors_name_their_argument(kw: dict[str, object]) -> None:
    # the Profiler's own checks refuse such values first (ValueError naming the
    # argument); whichever check answers, the message names the argument
    name = next(iter(kw))
    with pytest.raises((OverflowError, ValueError), match=name):
        gp.Profiler(["a"], **kw)  # type: ignore[arg-type]


def test_recorder_sizes_are_strict_ints() -> None:
    with pytest.raises(TypeError, match="n_phases"):
        Recorder(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="capacity"):
        Recorder(2, True)
    with pytest.raises(OverflowError, match="n_phases"):
        Recorder(1 << 70)
    assert Recorder(np.int64(3), np.int32(64)).n_phases == 3
