"""Start-up told apart: with no warm-up rule, a trainer's first step whose wait dwarfs
every later one is counted as warm-up, and the verdict judges the steady state.

The unit tests lay each step on a real Profiler's clock at chosen times (``begin_at`` /
``lap_at``, the core's own path), so the figures are exact and the machine's load stays
out. The runs are real ``gyreprof run`` runs of a queue-fed trainer whose producer
starts late, checked against the script's own clock."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gyreprof as gp
from gyreprof.analysis import startup
from gyreprof.analysis.run import RunRecord
from gyreprof.analysis.verdict import diagnose
from gyreprof.model.histogram import STEP

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers.run_scripts.runhelp import (  # noqa: E402
    check_format,
    gyreprof_run,
    script,
    signal_when_ready,  # noqa: E402
)
from helpers.run_scripts.runhelp import clock as _clock  # noqa: E402

MS = 1_000_000


def rec_json(rec: RunRecord) -> str:
    import json

    return json.dumps(rec.to_dict())


def laid(
    waits_ms: list[float],
    compute_ms: float | list[float],
    *,
    warmup_steps: int = 0,
    window_steps: int = 1,
) -> Any:
    """A trainer Profiler whose steps wait ``waits_ms`` and compute ``compute_ms``; a
    rolling window a step, as ``gyreprof run``'s trainer profiler closes them."""
    computes = compute_ms if isinstance(compute_ms, list) else [compute_ms] * len(waits_ms)
    tp = gp.Profiler(["wait", "compute"], warmup_steps=warmup_steps, window_steps=window_steps)
    rec = tp.recorder
    wait, compute = tp.ids("wait", "compute")
    t = rec.now_ns()
    for w, c in zip(waits_ms, computes, strict=True):
        rec.begin_at(t)
        t += int(w * MS)
        rec.lap_at(wait, t)
        t += int(c * MS)
        rec.lap_at(compute, t)
    rec.end_at(t)
    return tp


def noisy(n: int, mean_ms: float, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).uniform(0.5, 1.5, n) * mean_ms)


# ------------------------------------------------------------- the one-step surgery


@pytest.mark.parametrize("window_steps", [1, 7])
def test_the_first_step_as_warm_up_is_what_warmup_steps_1_records(window_steps: int) -> None:
    """The same steps, recorded once with no warm-up and moved afterwards, once with
    ``warmup_steps=1``: the same buckets, sums, warm-up records, steps and rate; the
    extremes exact with a window a step, to the buckets' resolution with longer ones."""
    waits = [820.0, *noisy(40, 4.0, 1)]
    computes = [900.0, *noisy(40, 200.0, 2)]  # the first compute is the max as well
    moved = laid(waits, computes, window_steps=window_steps).snapshot().first_step_as_warmup()
    native = laid(waits, computes, warmup_steps=1, window_steps=window_steps).snapshot()
    assert np.array_equal(moved.counts, native.counts)
    for a, b in zip(moved.rows, native.rows, strict=True):
        assert (a.count, a.sum, a.warm_count, a.warm_sum, a.warm_max, a.first) == (
            b.count,
            b.sum,
            b.warm_count,
            b.warm_sum,
            b.warm_max,
            b.first,
        ), a.name
        # the extremes are read again from the buckets left: to the histogram's resolution
        assert a.min <= b.min and a.max >= b.max and a.max <= b.max * 1.002 + 1, a.name
        if window_steps == 1:
            assert a.max == b.max, a.name
    ms, ns = moved.summary(), native.summary()
    assert ms.steps == ns.steps == 40
    assert ms.warmup.rule == ns.warmup.rule == "first step" and ms.warmup.steps == 1
    assert ms.steps_per_s == pytest.approx(ns.steps_per_s, rel=1e-9)
    mt, nt = moved.times, native.times
    assert mt.steady_start_ns - mt.start_ns == nt.steady_start_ns - nt.start_ns
    assert mt.warmup_end_step == nt.warmup_end_step == 1
    assert moved.sources[0].steady_ns == native.sources[0].steady_ns
    assert moved.sources[0].warmup_ns == native.sources[0].warmup_ns
    assert ms["wait"].p50 == ns["wait"].p50
    if window_steps == 1:
        assert ms["wait"].p99 == ns["wait"].p99 and ms["compute"].max == ns["compute"].max
        # the rolling window of step 1 is warm-up, as the native profiler marks it
        assert [w.warmup for w in moved.windows()] == [w.warmup for w in native.windows()]
    else:  # the window that holds step 1 holds steady steps too: it is warm-up here
        assert moved.windows()[0].warmup and not any(w.warmup for w in moved.windows()[1:])
    assert gp.wait_report(moved).ratio == pytest.approx(gp.wait_report(native).ratio)


@pytest.mark.parametrize(
    ("why", "make"),
    [
        ("a warm-up rule of its own", lambda: laid([900.0, 4, 4, 4, 4], 200.0, warmup_steps=2)),
        ("one step", lambda: laid([900.0], 200.0)),
        (
            "two stepping sources",
            lambda: gp.merge(
                [laid([900.0, 4, 4, 4, 4], 200.0).snapshot(), laid([4.0] * 5, 200.0).snapshot()]
            ),
        ),
    ],
)
def test_a_snapshot_that_cannot_say_what_its_first_step_held_is_refused(
    why: str, make: Any
) -> None:
    made = make()
    snap = made if isinstance(made, gp.Snapshot) else made.snapshot()
    with pytest.raises(ValueError):
        snap.first_step_as_warmup()
    assert startup.find(snap) is None, why


def test_a_row_not_once_per_step_is_refused() -> None:
    tp = gp.Profiler(["wait", "compute", "log"])
    for i in range(6):
        tp.begin()
        tp.record("wait", (900 if i == 0 else 4) * MS)
        tp.record("compute", 200 * MS)
        if i % 2:
            tp.record("log", MS)
    tp.end()
    with pytest.raises(ValueError, match="'log' holds 3 values in 6 steps"):
        tp.snapshot().first_step_as_warmup()


# ------------------------------------------------------------------- the rule


def test_a_start_up_wait_is_left_out_and_the_verdict_flips_to_the_steady_state() -> None:
    """A collector's workers starting: 820 ms for the first batch, ~4 ms for each later
    one, 200 ms updates. Judged whole (the naive rule) it is sampler-bound; its steady
    state waits 2%."""
    tp = laid([820.0, *noisy(14, 4.0, 3)], noisy(15, 200.0, 4))
    whole = diagnose(trainer=tp, loop="overlapped")
    assert whole.bound == "sampler" and whole.wait_ratio is not None and whole.wait_ratio > 0.2
    found = startup.find(tp.snapshot())
    assert found is not None
    assert found.wait_ns == pytest.approx(820 * MS)
    assert found.rest_steps == 14 and 2 * MS <= found.rest_p50_ns <= 6 * MS
    assert found.ratio_with == pytest.approx(whole.wait_ratio)
    steady = diagnose(trainer=found.snapshot, loop="overlapped")
    assert steady.bound == "trainer"
    assert found.ratio_without == pytest.approx(steady.wait_ratio) and steady.wait_ratio < 0.03


def test_a_stall_that_comes_back_is_the_runs_own_and_stays_in() -> None:
    """The first wait is 200x the median of the rest (a shortcut "first >> median" drops
    it), but every tenth batch stalls as long: the stall is the run's, not start-up."""
    waits = [820.0] + [700.0 if i % 10 == 0 else 4.0 for i in range(1, 40)]
    assert startup.find(laid(waits, 200.0).snapshot()) is None


@pytest.mark.parametrize(
    ("first_ms", "found"),
    [
        (4.0 * startup.OVER_MEDIAN * 1.05, True),  # above both factors
        (4.0 * startup.OVER_MEDIAN * 0.95, False),  # just below the median's factor
    ],
)
def test_the_median_factor_decides_at_its_edge(first_ms: float, found: bool) -> None:
    waits = [first_ms] + [4.0] * 30  # all later waits equal: median = max = 4 ms
    tp = laid(waits, 20.0)
    assert (startup.find(tp.snapshot()) is not None) is found


def test_a_first_wait_that_moves_nothing_is_left_in() -> None:
    """An outlier too small to move the wait ratio by a point (10 ms against 0.1 ms
    waits and 100 steps of 50 ms updates) stays in: the report says nothing new."""
    tp = laid([10.0] + [0.1] * 100, 50.0)
    assert startup.find(tp.snapshot()) is None


def test_too_few_steps_after_the_first_to_tell() -> None:
    assert startup.find(laid([900.0, 4.0, 4.0], 200.0).snapshot()) is None
    assert startup.find(laid([900.0, 4.0, 4.0, 4.0], 200.0).snapshot()) is not None


def test_a_step_left_open_by_a_kill_still_tells_its_first_step() -> None:
    """A process killed mid-step (read from its live segment) leaves one ``wait`` more than
    its completed steps: the first step is still the first values of its rows."""
    tp = laid([820.0, *noisy(14, 4.0, 6)], 200.0)
    rec = tp.recorder
    t = rec.now_ns() + 10**10
    rec.begin_at(t)
    rec.lap_at(tp.ids("wait")[0], t + 4 * MS)  # the wait of a step that never completes
    snap = tp.snapshot()
    assert snap.row("wait").count == snap.row(STEP).count + 1
    found = startup.find(snap)
    assert found is not None and found.wait_ns == pytest.approx(820 * MS)
    assert found.snapshot.row("wait").count == 15 and found.snapshot.row(STEP).count == 14


def test_the_start_up_record_reads_back_from_the_run_json() -> None:
    found = startup.find(laid([820.0, *noisy(14, 4.0, 5)], 200.0).snapshot())
    assert found is not None
    rec = RunRecord(None, None, None, None, [], 0, [], start_up=found)
    back = RunRecord.from_json(rec_json(rec))
    assert back.start_up == found
    with pytest.raises(ValueError, match="no snapshot"):
        _ = back.start_up.snapshot


# ------------------------------------------------------------------ real runs


def _whole(clock: dict[str, Any], data: dict[str, Any]) -> float:
    """The wait ratio of every step: the first wait as gyreprof timed it (the script's
    clock around the first get also holds the set-up of the thread's profilers, ~0.4 s
    of imports, which gyreprof places before the wait and counts nowhere), the rest by
    the script's clock."""
    first = data["trainer"]["warmup"]["first_ns"]["wait"] / 1e9
    return (first + clock["wait_s"]) / (first + clock["wait_s"] + clock["work_s"])


def test_a_producer_that_starts_late_is_start_up_under_gyreprof_run(tmp_path: Path) -> None:
    """A queue-fed trainer (torch-free) whose producer needs 0.6 s before its first item:
    whole, the run reads sampler-bound at a ~60% wait; its steady state waits under 2%
    by the script's clock, and that is what the verdict judges."""
    proc, data = gyreprof_run(tmp_path, script("startup_queue.py"), "0.6", "20", "0.02")
    assert proc.returncode == 0 and data is not None, proc.stderr[-4000:]
    check_format(data)
    clock = _clock(proc.stdout)
    su, v, t = data["start_up"], data["verdict"], data["trainer"]
    assert su is not None, proc.stderr[-3000:]
    assert 0.55 <= su["wait_ns"] / 1e9 <= clock["first_wait_s"] + 0.02, (su, clock)
    assert t["warmup"]["steps"] == 1 and t["warmup"]["rule"] == "first step"
    steady = clock["wait_s"] / (clock["wait_s"] + clock["work_s"])
    assert v["bound"] == "trainer" and abs(v["wait_ratio"] - steady) < 0.03, (v, clock)
    assert su["ratio_with"] == pytest.approx(_whole(clock, data), abs=0.05)
    assert su["bound_with"] == "sampler" and su["ratio_with"] > 0.3
    assert v["reasons"][0].startswith("start-up left out: the trainer's first step waited")
    assert "and the run sampler-bound" in v["reasons"][0]
    assert "start-up: no warm-up rule was given" in proc.stderr


def test_a_warm_up_rule_given_to_the_launcher_keeps_its_own_word(tmp_path: Path) -> None:
    """``--warmup-steps 0`` is a rule too: every step is kept, the run reads whole."""
    proc, data = gyreprof_run(
        tmp_path, script("startup_queue.py"), "0.6", "20", "0.02", options=("--warmup-steps", "0")
    )
    assert proc.returncode == 0 and data is not None, proc.stderr[-4000:]
    clock = _clock(proc.stdout)
    assert data["start_up"] is None and data["trainer"]["warmup"]["rule"] == "none"
    assert data["verdict"]["bound"] == "sampler" and data["verdict"]["wait_ratio"] > 0.3
    assert abs(data["verdict"]["wait_ratio"] - _whole(clock, data)) < 0.05, (data, clock)
    assert not any("start-up left out" in r for r in data["verdict"]["reasons"])


def test_a_producer_that_stalls_again_is_not_start_up(tmp_path: Path) -> None:
    """The producer starts after 0.2 s and then stalls 1 s before every 5th item: the
    first wait is far above the median wait (most items are queued already), but not
    above the stalls, so nothing is left out and the verdict has the script's whole
    clock."""
    proc, data = gyreprof_run(tmp_path, script("startup_queue.py"), "0.2", "20", "0.02", "5", "1.0")
    assert proc.returncode == 0 and data is not None, proc.stderr[-4000:]
    clock = _clock(proc.stdout)
    assert data["start_up"] is None, data["start_up"]
    assert abs(data["verdict"]["wait_ratio"] - _whole(clock, data)) < 0.05, (data, clock)
    assert data["verdict"]["bound"] == "sampler"


def test_a_run_killed_by_sigkill_keeps_its_start_up_apart(tmp_path: Path) -> None:
    """SIGKILL to the loop after its 10th item: the trainer is read from its live segment,
    its last step still open, and the start-up is told apart as in a run that ended."""
    import signal

    data, err = signal_when_ready(
        tmp_path,
        sys.executable,
        script("startup_queue.py"),
        "0.6",
        "400",
        "0.02",
        sig=signal.SIGKILL,
        child="startup_queue.py",
    )
    assert [p["source"] for p in data["processes"]] == ["live segment"], data["processes"]
    su = data["start_up"]
    assert su is not None, err[-3000:]
    assert su["wait_ns"] >= 0.55e9 and su["bound_with"] == "sampler"
    assert data["verdict"]["bound"] == "trainer" and data["trainer"]["steps"] >= 9


def test_gyreprof_report_of_a_saved_run_tells_the_same_start_up(tmp_path: Path) -> None:
    import json
    import subprocess

    saved = tmp_path / "saved"
    proc, data = gyreprof_run(
        tmp_path, script("startup_queue.py"), "0.6", "8", "0.02", options=("--save", str(saved))
    )
    assert proc.returncode == 0 and data is not None and data["start_up"] is not None
    again = subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", str(saved), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    back = json.loads(again.stdout)
    assert back["start_up"] == data["start_up"]
    assert back["verdict"]["bound"] == data["verdict"]["bound"] == "trainer"
