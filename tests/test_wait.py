"""Wait ratio: real loops with known sleeps, constructed windows and spikes, errors."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

import gyreprof as gp
from gyreprof._support.errors import CorruptDataError, UnknownPhaseError
from gyreprof.analysis.wait import (
    DEFAULT_SPIKE_FACTOR,
    DEFAULT_SPIKE_MIN_SHARE,
    WaitReport,
    _busy_before,
    wait_report,
)
from gyreprof.model.summary import Summary

MS = 1_000_000
US = 1_000


def constructed(
    waits_ns: list[int],
    compute_ns: int | list[int],
    *,
    extra: dict[str, list[int]] | None = None,
    window_steps: int = 1000,
) -> gp.Profiler:
    """A trainer profile with known durations, one marked step per entry of ``waits_ns``."""
    names = ["wait", "compute", *(extra or {})]
    tp = gp.Profiler(names, window_steps=window_steps)
    computes = compute_ns if isinstance(compute_ns, list) else [compute_ns] * len(waits_ns)
    for i, w in enumerate(waits_ns):
        tp.begin()
        tp.record("wait", w)
        tp.record("compute", computes[i])
        for name, vals in (extra or {}).items():
            tp.record(name, vals[i])
    tp.end()
    return tp


def test_public_names() -> None:
    assert gp.wait_report is wait_report
    assert gp.WaitReport is WaitReport


def test_real_loop_with_sleeps_gives_the_expected_ratio() -> None:
    # sampling 3 ms, compute 1 ms -> 0.75; wide bounds for a loaded machine
    tp = gp.Profiler(["wait", "compute"], warmup_steps=2)
    for _ in range(60):
        tp.begin()
        with tp.phase("wait"):
            time.sleep(0.003)
        with tp.phase("compute"):
            time.sleep(0.001)
    tp.end()
    rep = gp.wait_report(tp, wait="wait", compute="compute")
    assert 0.55 <= rep.ratio <= 0.9
    assert rep.steps == 58
    assert rep.wait_p50_ns >= 2.5 * MS
    assert rep.wait_per_step["p99"] >= rep.wait_per_step["p50"]
    assert rep.window_source == "ring"
    assert len(rep.window_ratios) >= 5
    assert all(0.3 <= r <= 0.95 for r in rep.window_ratios)
    assert rep.speedup_bound > 2.0
    assert "warm-up was not excluded" not in " ".join(rep.notes)


def test_constructed_ratio_and_windows_are_exact() -> None:
    tp = constructed([3 * MS] * 100, 1 * MS)
    rep = wait_report(tp, window_steps=10)
    assert rep.ratio == pytest.approx(0.75)
    assert rep.steps == 100
    assert len(rep.windows) == 10
    assert rep.window_size == "10 steps"
    assert all(r == pytest.approx(0.75) for r in rep.window_ratios)
    for key in ("p10", "p50", "p90", "max"):
        assert rep.window_distribution[key] == pytest.approx(0.75)
    assert rep.wait_per_step["p50"] == pytest.approx(3 * MS, rel=1e-3)
    assert rep.compute_per_step["mean"] == pytest.approx(1 * MS)
    assert [w.first_step for w in rep.windows] == list(range(1, 101, 10))
    assert all(w.steps == 10 for w in rep.windows)
    assert rep.windows[0].wait_per_step_ns == pytest.approx(3 * MS)
    assert rep.spikes == []


def test_window_distribution_follows_the_windows() -> None:
    # window k (10 steps each) waits k+1 ms per step against 1 ms of compute
    waits = [(k + 1) * MS for k in range(10) for _ in range(10)]
    rep = wait_report(constructed(waits, MS), window_steps=10)
    expected = np.array([(k + 1) / (k + 2) for k in range(10)])
    assert rep.window_ratios == pytest.approx(list(expected))
    d = rep.window_distribution
    assert d["p10"] == pytest.approx(float(np.percentile(expected, 10)))
    assert d["p50"] == pytest.approx(float(np.percentile(expected, 50)))
    assert d["p90"] == pytest.approx(float(np.percentile(expected, 90)))
    assert d["max"] == pytest.approx(10 / 11)
    assert d["min"] == pytest.approx(0.5)


def test_default_windows_cut_the_ring_into_about_twenty() -> None:
    rep = wait_report(constructed([2 * MS] * 400, MS))
    assert rep.window_size == "20 steps"
    assert len(rep.windows) == 20
    small = wait_report(constructed([2 * MS] * 12, MS))
    assert small.window_size == "5 steps"  # min_window_steps
    assert any("only 3 window" in n for n in small.notes)


def test_spikes_with_time_size_and_coincidence() -> None:
    n = 200
    waits = [3 * MS] * n
    ckpt = [10 * US] * n
    for i in range(100, 110):  # steps 101..110: the wait jumps together with the checkpoint
        waits[i] = 30 * MS
        ckpt[i] = 5 * MS
    for i in range(150, 160):  # steps 151..160: the wait jumps on its own
        waits[i] = 15 * MS
    tp = constructed(waits, MS, extra={"ckpt": ckpt})
    rep = wait_report(tp, window_steps=10, other="ckpt")
    assert [s.first_step for s in rep.spikes] == [101, 151]
    first, second = rep.spikes
    assert first.factor == pytest.approx(10.0)
    assert second.factor == pytest.approx(5.0)
    assert first.wait_per_step_ns == pytest.approx(30 * MS)
    assert first.median_wait_per_step_ns == pytest.approx(3 * MS)
    assert first.excess_ns == pytest.approx(27 * MS)
    assert first.ratio == pytest.approx(30 / 31)
    assert first.steps == 10
    assert first.start_s >= 0 and first.duration_s >= 0
    assert first.start_s <= second.start_s
    assert first.coincident == ("ckpt",)
    assert second.coincident == ()
    other = rep.other["ckpt"]
    assert other.spike_windows == (10,)
    assert other.coincident_spikes == 1
    assert other.source == "same profiler"
    text = str(rep)
    assert "spikes: 2 window(s)" in text
    assert "coincides with ckpt" in text
    assert "1 of 2 wait spikes coincide" in text
    # a window on either side counts when asked
    wide = wait_report(tp, window_steps=10, other="ckpt", coincide_windows=1)
    assert wide.spikes[0].coincident == ("ckpt",)


def test_spike_thresholds_are_parameters() -> None:
    waits = [3 * MS] * 100
    for i in range(50, 60):
        waits[i] = 7 * MS  # 2.33x the median
    tp = constructed(waits, MS)
    assert wait_report(tp, window_steps=10).spikes == []
    rep = wait_report(tp, window_steps=10, spike_factor=2.0)
    assert [s.first_step for s in rep.spikes] == [51]
    assert rep.thresholds["spike_factor"] == 2.0
    default = wait_report(tp)
    assert default.thresholds["spike_factor"] == DEFAULT_SPIKE_FACTOR
    assert default.thresholds["spike_min_share"] == DEFAULT_SPIKE_MIN_SHARE


def test_tiny_waits_do_not_spike() -> None:
    # trainer-bound: 2 us waits, one window at 20 us (10x) against 10 ms of compute
    waits = [2 * US] * 100
    for i in range(40, 50):
        waits[i] = 20 * US
    rep = wait_report(constructed(waits, 10 * MS), window_steps=10)
    assert rep.ratio < 0.01
    assert rep.spikes == []
    # without the floor the same window is a spike
    assert (
        len(wait_report(constructed(waits, 10 * MS), window_steps=10, spike_min_share=0.0).spikes)
        == 1
    )


def test_unmarked_steps_count_from_each_wait() -> None:
    tp = gp.Profiler(["wait", "compute"])
    for i in range(40):  # no prof.begin(): one step per wait call
        tp.record("wait", (20 if 20 <= i < 30 else 2) * MS)
        tp.record("compute", 2 * MS)
    rep = wait_report(tp, window_steps=10)
    assert rep.window_source == "ring"
    assert len(rep.windows) == 4
    assert all(w.steps == 10 for w in rep.windows)
    assert [w.first_step for w in rep.windows] == [1, 11, 21, 31]
    assert any("no steps were marked" in n for n in rep.notes)
    assert rep.window_ratios[0] == pytest.approx(0.5)
    assert rep.window_ratios[2] == pytest.approx(20 / 22)
    assert [s.first_step for s in rep.spikes] == [21]


def test_windows_by_seconds() -> None:
    tp = gp.Profiler(["wait", "compute"])
    for _ in range(30):
        tp.begin()
        with tp.phase("wait"):
            time.sleep(0.002)
        with tp.phase("compute"):
            time.sleep(0.001)
    tp.end()
    rep = wait_report(tp, window_s=0.02)
    assert rep.window_size == "0.02 s"
    assert len(rep.windows) >= 2
    assert all(w.duration_s <= 0.05 for w in rep.windows)
    assert 0.4 <= rep.window_distribution["p50"] <= 0.9


def test_snapshot_and_summary_use_rolling_windows() -> None:
    waits = [3 * MS] * 200
    for i in range(100, 110):
        waits[i] = 30 * MS
    tp = constructed(waits, MS, window_steps=10)
    for source in (tp.snapshot(), tp.summary(), Summary.from_json(tp.summary().to_json())):
        rep = wait_report(source)
        assert rep.window_source == "rolling"
        assert rep.window_size == "10 steps"
        assert len(rep.windows) == 20
        assert rep.ratio == pytest.approx(wait_report(tp).ratio)
        assert [s.first_step for s in rep.spikes] == [101]
        # rolling windows hold ~3% buckets, so the ratio per window is close, not exact
        assert rep.windows[0].ratio == pytest.approx(0.75, rel=0.02)
    grouped = wait_report(tp.snapshot(), window_steps=20)
    assert grouped.window_size == "20 steps"
    assert len(grouped.windows) == 10
    assert grouped.windows[1].first_step == 21
    finer = wait_report(tp.snapshot(), window_steps=5)
    assert any("cannot be split into windows of 5 steps" in n for n in finer.notes)
    rounded = wait_report(tp.snapshot(), window_steps=25)
    assert rounded.window_size == "20 steps"
    assert any("rounded" in n for n in rounded.notes)


def test_summary_without_windows_still_gives_the_ratio() -> None:
    tp = constructed([3 * MS] * 50, MS)  # window_steps=1000: no rolling window closes
    rep = wait_report(tp.summary())
    assert rep.ratio == pytest.approx(0.75)
    assert rep.window_source == "none"
    assert rep.window_ratios == []
    assert math.isnan(rep.window_distribution["p50"])
    assert any("no closed rolling windows" in n for n in rep.notes)
    assert "no steady windows" in str(rep)


def test_other_phase_in_another_profiler_is_matched_by_time() -> None:
    tp = gp.Profiler(["wait", "compute"])
    sp = gp.Profiler(["env", "reset"])
    # Waits of 2 ms, and 40 ms while the sampler resets: a window of 5 steps is a spike
    # only at 3x the median window, so a sleep that overruns by 10 ms on a loaded
    # machine cannot make one of its own.
    for i in range(40):
        tp.begin()
        with tp.phase("wait"):
            if 20 <= i < 25:  # steps 21..25: the sampler resets while the trainer waits
                with sp.phase("reset"):
                    time.sleep(0.040)
            else:
                with sp.phase("env"):
                    time.sleep(0.002)
        with tp.phase("compute"):
            time.sleep(0.0005)
    tp.end()
    rep = wait_report(tp, window_steps=5, other="reset", other_source=sp)
    assert [s.first_step for s in rep.spikes] == [21]
    assert rep.spikes[0].coincident == ("reset",)
    assert rep.other["reset"].source == "other profiler"
    assert rep.other["reset"].spike_windows == (4,)
    assert rep.windows[4].other_ns["reset"] >= 5 * 40 * MS
    assert rep.windows[0].other_ns["reset"] == 0


def test_text_dict_and_json_forms(tmp_path) -> None:
    rep = wait_report(constructed([3 * MS] * 100, MS), window_steps=10)
    text = str(rep)
    assert "wait ratio: 75.0%" in text
    assert "per-window wait ratio (10 windows of 10 steps" in text
    assert "p50 3 ms" in text
    d = rep.to_dict()
    assert d["format"] == "gyreprof.wait_report/2"
    assert d["ratio"] == pytest.approx(0.75)
    assert len(d["window_ratios"]) == 10 and len(d["windows"]) == 10
    path = tmp_path / "wait.json"
    text_json = rep.to_json(path)
    assert json.loads(path.read_text()) == json.loads(text_json)
    assert json.loads(text_json)["wait_per_step"]["p50"] == pytest.approx(3 * MS, rel=1e-3)


def test_missing_phase_names_the_phase_and_the_known_ones() -> None:
    tp = constructed([MS] * 10, MS)
    with pytest.raises(
        UnknownPhaseError, match=r"no phase 'fetch'.*known phases: \['wait', 'compute'\]"
    ):
        wait_report(tp, wait="fetch")
    with pytest.raises(KeyError, match=r"no phase 'train'"):  # UnknownPhaseError is both
        wait_report(tp.summary(), compute="train")
    with pytest.raises(UnknownPhaseError, match=r"no phase 'ckpt' \(other=\)"):
        wait_report(tp, other="ckpt")
    with pytest.raises(ValueError, match="different phases"):
        wait_report(tp, wait="wait", compute="wait")


def test_empty_profiler_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"'wait' has no steady-state samples.*known phases"):
        wait_report(gp.Profiler(["wait", "compute"]))
    only_compute = gp.Profiler(["wait", "compute"])
    only_compute.record("compute", MS)
    with pytest.raises(ValueError, match="the wait phase 'wait' has no steady-state samples"):
        wait_report(only_compute)


def test_warmup_that_never_ends_is_explained() -> None:
    tp = gp.Profiler(["wait", "compute"], warmup_steps=5)
    for _ in range(20):  # no prof.begin(): warm-up cannot end
        tp.record("wait", MS)
        tp.record("compute", MS)
    with pytest.raises(ValueError, match=r"still in warm-up.*prof\.begin\(\)"):
        wait_report(tp)


def test_bad_arguments() -> None:
    tp = constructed([MS] * 20, MS)
    with pytest.raises(ValueError, match="not both"):
        wait_report(tp, window_steps=5, window_s=1.0)
    with pytest.raises(ValueError, match="window_steps must be >= 1"):
        wait_report(tp, window_steps=0)
    with pytest.raises(TypeError, match="window_steps must be an int"):
        wait_report(tp, window_steps=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window_s must be a finite number"):
        wait_report(tp, window_s=float("nan"))
    with pytest.raises(ValueError, match="spike_factor"):
        wait_report(tp, spike_factor=-1)
    with pytest.raises(ValueError, match="coincide_windows"):
        wait_report(tp, coincide_windows=-1)
    with pytest.raises(TypeError, match="Profiler, Snapshot or Summary"):
        wait_report({"wait": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="other_source must be a gyreprof Profiler"):
        wait_report(tp, other="wait", other_source=tp.summary())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wait must be a phase name"):
        wait_report(tp, wait=None)  # type: ignore[arg-type]


def test_ring_overwrite_is_noted() -> None:
    tp = gp.Profiler(["wait", "compute"], capacity=64)
    for _ in range(100):
        tp.begin()
        tp.record("wait", MS)
        tp.record("compute", MS)
    tp.end()
    rep = wait_report(tp)
    assert rep.steps == 100  # histograms keep everything
    assert rep.ratio == pytest.approx(0.5)
    assert any("overwrote" in n for n in rep.notes)
    assert sum(w.steps for w in rep.windows) < 100


def test_windows_start_after_warmup() -> None:
    tp = gp.Profiler(["wait", "compute"], warmup_steps=7)
    for i in range(47):
        tp.begin()
        tp.record("wait", (50 if i < 7 else 3) * MS)  # a slow warm-up must not show
        tp.record("compute", MS)
    tp.end()
    rep = wait_report(tp, window_steps=10)
    assert rep.steps == 40
    assert [w.first_step for w in rep.windows] == [8, 18, 28, 38]
    assert [w.steps for w in rep.windows] == [10, 10, 10, 10]
    assert rep.window_ratios == pytest.approx([0.75] * 4)
    assert rep.spikes == []
    assert rep.ratio == pytest.approx(0.75)


def test_overlap_of_events_with_windows_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 200))
        es = rng.uniform(0, 1e6, n)
        dur = rng.uniform(0, 5e4, n) * (rng.random(n) < 0.9)  # some zero-length events
        a = rng.uniform(-1e5, 1.1e6, 40)
        b = a + rng.uniform(0, 2e5, 40)
        brute = np.clip(np.minimum(es + dur, b[:, None]) - np.maximum(es, a[:, None]), 0, None).sum(
            axis=1
        )
        fast = _busy_before(es, dur, b) - _busy_before(es, dur, a)
        np.testing.assert_allclose(fast, brute, rtol=1e-9, atol=1e-3)


def test_open_step_does_not_invent_a_spike() -> None:
    """begin() without end(): the last, still-open step must not inflate its window."""
    tp = gp.Profiler(["wait", "compute"])
    for _ in range(102):
        tp.begin()
        tp.record("wait", 3_000_000)
        tp.record("compute", 1_000_000)
    # no tp.end(): step 102 is still open
    rep = gp.wait_report(tp, window_steps=2, spike_factor=2.0)
    assert rep.spikes == []
    assert max(rep.window_ratios) == pytest.approx(min(rep.window_ratios))


def _strict(text: str) -> object:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def test_round_trip_through_strict_json_keeps_windows_spikes_and_other_phases() -> None:
    waits = [MS] * 60 + [20 * MS] * 10 + [MS] * 30
    load = [0] * 60 + [5 * MS] * 10 + [0] * 30
    rep = wait_report(constructed(waits, MS, extra={"load": load}), window_steps=10, other="load")
    assert rep.spikes and rep.spikes[0].coincident == ("load",)
    data = _strict(rep.to_json())
    assert isinstance(data, dict) and data["format"] == "gyreprof.wait_report/2"
    assert data["windows"][0]["duration_s"] == rep.windows[0].duration_s  # derived, written
    back = WaitReport.from_dict(data)
    assert back == rep and str(back) == str(rep)
    assert isinstance(back.spikes[0].coincident, tuple)


def test_undefined_numbers_survive_the_round_trip_as_nan() -> None:
    rep = wait_report(constructed([MS] * 4, MS, window_steps=1000).summary())
    assert math.isnan(rep.window_distribution["p50"])
    data = _strict(rep.to_json())
    assert isinstance(data, dict) and data["window_distribution"]["p50"] is None
    assert math.isnan(WaitReport.from_dict(data).window_distribution["p50"])


def test_corrupt_report_dict_names_the_field() -> None:
    d = wait_report(constructed([3 * MS] * 50, MS), window_steps=10).to_dict()
    with pytest.raises(CorruptDataError, match=r"\.ratio"):
        WaitReport.from_dict({**d, "ratio": "high"})
    with pytest.raises(CorruptDataError, match="verdict"):
        WaitReport.from_dict({**d, "format": "gyreprof.verdict/1"})
    bad_spike = json.loads(json.dumps(d))
    bad_spike["windows"][0]["steps"] = 1.5
    with pytest.raises(CorruptDataError, match=r"windows\[0\]\.steps"):
        WaitReport.from_dict(bad_spike)


def test_values_lost_or_clamped_are_noted_in_the_summary_words() -> None:
    tp = constructed([3 * MS] * 50, MS)
    tp.record("compute", -5)
    tp.record("wait", 2 * 3600 * 10**9)  # above the 1 h range: clamped
    notes = wait_report(tp, window_steps=10).notes
    assert "1 negative durations ignored" in notes
    assert "1 values above the range (clamped)" in notes
    assert not any("overwritten in the ring" in n for n in notes)
