"""Profiler API: phases, forms of timing, warm-up, windows, threads, autosave."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import gyreprof as gp
import gyreprof.model.files
from gyreprof.recording.profiler import UnknownPhaseError


def _loop(prof: gp.Profiler, n: int, sleep_env: float = 0.0) -> None:
    ENV, FWD, XFER = prof.ids("env", "fwd", "xfer")
    lap = prof.lap
    for _ in range(n):
        prof.begin()
        if sleep_env:
            time.sleep(sleep_env)
        lap(ENV)
        sum(range(50))
        lap(FWD)
        lap(XFER)
    prof.end()


def test_summary_of_a_loop() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"])
    _loop(prof, 200, sleep_env=0.0005)
    s = prof.summary()
    assert s.steps == 200
    assert set(s.phases) == {"env", "fwd", "xfer"}
    env = s.phases["env"]
    assert env.count == 200
    assert env.min <= env.p50 <= env.p90 <= env.p99 <= env.p999 <= env.max
    assert 400_000 < env.p50 < 50_000_000  # slept 0.5 ms; wide bound for a loaded machine
    assert env.share > s.phases["xfer"].share
    assert sum(p.share for p in s.phases.values()) <= 1.0 + 1e-9
    assert s.steps_per_s > 0
    assert 0 <= s.overhead_share < 0.5
    assert env.percentile(99.5) >= env.p99
    text = str(s)
    for word in ("env", "fwd", "xfer", "p99", "overhead", "warm-up"):
        assert word in text


def test_convenient_forms_match_names() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"])

    @prof.timed("fwd")
    def forward(x: int) -> int:
        return x + 1

    with prof.phase("env"):
        time.sleep(0.001)
    assert forward(1) == 2
    prof.record("xfer", 12_345)
    prof.record(2, 5_000)
    prof.count("retry")
    prof.count("retry", 2)
    s = prof.summary()
    assert s.phases["env"].count == 1 and s.phases["env"].min >= 1_000_000
    assert s.phases["fwd"].count == 1
    assert s.phases["xfer"].count == 2 and s.phases["xfer"].max == 12_345
    assert s.counters == {"retry": 3}
    assert s.steps == 0


def test_unknown_phase_lists_known_names() -> None:
    prof = gp.Profiler(["env", "fwd"])
    for call in (
        lambda: prof.ids("envv"),
        lambda: prof.phase("nope"),
        lambda: prof.record("x", 1),
        lambda: prof.timed("zz"),
    ):
        with pytest.raises(UnknownPhaseError, match=r"known phases: \['env', 'fwd'\]"):
            call()
    with pytest.raises(KeyError):
        prof.summary()["nope"]


@pytest.mark.parametrize(
    ("kwargs", "exc", "msg"),
    [
        (dict(phases=[]), ValueError, "at least one"),
        (dict(phases="env"), TypeError, "not one string"),
        (dict(phases=["a", "a"]), ValueError, "unique"),
        (dict(phases=["a", ""]), ValueError, "non-empty"),
        (dict(phases=["a"], capacity=0), ValueError, "capacity"),
        (dict(phases=["a"], capacity=-1), ValueError, "capacity"),
        (dict(phases=["a"], capacity=1.5), TypeError, "capacity"),
        (dict(phases=["a"], significant_figures=0), ValueError, "significant_figures"),
        (dict(phases=["a"], significant_figures=6), ValueError, "significant_figures"),
        (dict(phases=["a"], warmup_steps=5, warmup_s=1.0), ValueError, "not both"),
        (dict(phases=["a"], warmup_steps=-1), ValueError, "warmup_steps"),
        (dict(phases=["a"], warmup_s=float("nan")), ValueError, "warmup_s"),
        (dict(phases=["a"], clock="wall"), ValueError, "clock"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, msg: str) -> None:
    phases = kwargs.pop("phases")
    with pytest.raises(exc, match=msg):
        gp.Profiler(phases, **kwargs)


def test_warmup_reported_apart() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"], warmup_steps=20)
    ENV = prof.id("env")
    prof.begin()
    time.sleep(0.02)  # a slow first call
    prof.lap(ENV)
    _loop(prof, 100)
    s = prof.summary()
    assert s.steps == 81  # 101 steps, 20 warm-up
    assert s.warmup.steps == 20
    assert s.warmup.done
    assert "first 20 steps" in str(s.warmup) and "excluded" in str(s.warmup)
    assert s.warmup.first_ns["env"] >= 20_000_000
    assert s.phases["env"].max < 20_000_000  # the slow first call is not in steady state
    assert "first call" in str(s)


def test_still_warming_up() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"], warmup_steps=1000)
    _loop(prof, 10)
    s = prof.summary()
    assert s.steps == 0 and not s.warmup.done
    assert "still warming up" in str(s)


def test_windows_by_steps_seconds_and_rolling() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"], warmup_steps=10, window_steps=25)
    _loop(prof, 110)
    ring = prof.windows(steps=20)
    assert [w.steps for w in ring] == [20] * 5 + [10]
    assert ring[0].warmup and not ring[-1].warmup
    assert ring[1].phases["env"].count == 20
    w = ring[2].phases["env"]
    assert w.p50 <= w.p90 <= w.p99 <= w.max
    rolling = prof.windows()
    assert rolling[0].warmup and rolling[0].steps == 10
    assert [x.steps for x in rolling[1:]] == [25, 25, 25, 25]
    assert all(x.source == "rolling" for x in rolling)
    secs = prof.windows(seconds=10.0)
    assert len(secs) == 1 and secs[0].steps == 110
    with pytest.raises(ValueError, match="not both"):
        prof.windows(steps=1, seconds=1)
    with pytest.raises(ValueError, match="positive"):
        prof.windows(steps=0)
    with pytest.raises(ValueError, match="positive"):
        prof.windows(seconds=-1)


def test_rolling_windows_keep_the_percentile_time_series_fixed_memory() -> None:
    prof = gp.Profiler(["env"], window_steps=10, max_windows=8, capacity=16)
    for i in range(200):
        prof.begin()
        prof.record("env", 1_000 if i < 100 else 100_000)
    prof.end()
    ws = prof.windows()
    assert len(ws) == 8  # only the newest max_windows are kept
    assert ws[-1].index == 19
    assert all(abs(w.phases["env"].p50 - 100_000) / 100_000 < 0.04 for w in ws)


def test_per_thread_merges_recorders() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"], per_thread=True)

    def work() -> None:
        _loop(prof, 50)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = prof.summary()
    assert s.phases["env"].count == 150
    assert s.steps == 150
    assert s.sources == 3
    assert len(prof.recorders) == 3


def test_single_writer_refuses_second_thread_through_profiler() -> None:
    prof = gp.Profiler(["env"])
    prof.begin()
    err: list[BaseException] = []

    def other() -> None:
        try:
            prof.lap(0)
        except RuntimeError as exc:
            err.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert err and "per_thread" in str(err[0])


def test_progress_names_open_phase() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"])
    prof.begin()
    assert prof.progress().phase == "env"
    prof.lap(prof.id("env"))
    p = prof.progress()
    assert p.phase == "fwd" and p.step == 1 and p.steps_completed == 0
    assert p.now_ns >= p.phase_since_ns > 0
    assert p.last_activity_ns == max(p.last_write_ns, p.phase_since_ns)


def test_progress_of_per_thread_profiler_adds_up_the_threads() -> None:
    prof = gp.Profiler(["env"], per_thread=True)
    assert prof.progress().steps_completed == 0  # no thread wrote yet: zeros, not an error
    prof.count("retry")  # registers the counter

    def work(n: int) -> None:
        for _ in range(n):
            prof.begin()
            prof.lap(prof.id("env"))
            prof.end()
        prof.count("retry", 2)

    threads = [threading.Thread(target=work, args=(n,)) for n in (3, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p = prof.progress()
    assert p.steps_completed == 8 and p.step == 8
    assert p.counters["retry"] == 5
    assert p.phase is None


def test_overhead_is_measured() -> None:
    prof = gp.Profiler(["a"])
    assert 1 <= prof.lap_cost_ns < 100_000
    _loop_single = prof.lap
    for _ in range(1000):
        prof.begin()
        _loop_single(0)
    prof.end()
    s = prof.summary()
    assert s.lap_cost_ns == prof.lap_cost_ns
    # a loop of nothing but boundaries: the profiler is (nearly) all of its time, and
    # the per-form costs (calibrated for real loops) are capped at the wall time
    assert 0 < s.overhead_share <= 1


def test_autosave_on_exit_exception_and_sigterm(tmp_path: Path) -> None:
    body = textwrap.dedent(
        """
        import os, signal, sys, time
        import gyreprof as gp
        mode, path = sys.argv[1], sys.argv[2]
        prof = gp.Profiler(["env"], autosave=path)
        for _ in range(100):
            prof.begin(); prof.lap(0)
        if mode == "raise":
            raise RuntimeError("boom")
        if mode == "term":
            print("ready", flush=True)
            time.sleep(30)  # waits for the test's SIGTERM
        """
    )
    script = tmp_path / "run.py"
    script.write_text(body)
    for mode, name in (("exit", "a.json"), ("raise", "b.json"), ("term", "c.gyre")):
        out = tmp_path / name
        if mode == "term":
            p = subprocess.Popen(
                [sys.executable, str(script), mode, str(out)], stdout=subprocess.PIPE, text=True
            )
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready"
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=30)
            assert rc == -signal.SIGTERM
        else:
            r = subprocess.run(
                [sys.executable, str(script), mode, str(out)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert (r.returncode != 0) == (mode == "raise"), r.stderr
        assert out.exists(), mode
        s = gyreprof.model.files.load(out)
        assert s.phases["env"].count >= 99


def test_no_python_allocations_per_lap() -> None:
    """The lap path allocates nothing: traced peak memory does not move over many laps,
    while a loop that makes one int per call (perf_counter_ns) does."""
    import itertools
    import tracemalloc

    prof = gp.Profiler(["a", "b"])
    lap, begin = prof.lap, prof.begin
    begin()
    lap(0)

    def peak_growth(body) -> int:
        tracemalloc.start()
        try:
            body()  # warm any lazy state
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            body()
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()

    def laps() -> None:
        for _ in itertools.repeat(None, 20_000):
            begin()
            lap(0)
            lap(1)

    def clock_reads() -> None:
        pc = time.perf_counter_ns
        for _ in itertools.repeat(None, 20_000):
            pc()

    def empty() -> None:
        for _ in itertools.repeat(None, 20_000):
            pass

    baseline = peak_growth(empty)  # the loop's own iterator
    assert peak_growth(laps) == baseline
    assert peak_growth(clock_reads) > baseline  # the probe sees an allocation when there is one


def test_nan_stats_for_unused_phase() -> None:
    prof = gp.Profiler(["env", "never"])
    prof.begin()
    prof.lap(0)
    prof.end()
    s = prof.summary()
    assert s.phases["never"].count == 0
    assert math.isnan(s.phases["never"].p50)
    assert math.isnan(s.phases["never"].percentile(50))
    json.loads(s.to_json())


def test_events_array() -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"])
    _loop(prof, 5)
    ev = prof.events()
    assert ev.dtype.names == ("phase", "form", "step", "start_ns", "duration_ns")
    assert (ev["phase"] == -1).sum() == 5
    assert np.all(ev["duration_ns"] >= 0)


def test_env_var_free_import_is_cheap() -> None:
    code = "import sys, gyreprof; print(sorted(m for m in sys.modules if m.startswith('gyreprof')))"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}, timeout=60
    )
    assert r.returncode == 0
    assert "gyreprof._core" not in r.stdout  # the core loads on first use


def test_time_warmup_ends_without_steps() -> None:
    prof = gp.Profiler(["a"], warmup_s=0.01)
    for _ in range(30):
        with prof.phase("a"):
            time.sleep(0.001)
    s = prof.summary()
    assert s.warmup.done and 0 < s.phases["a"].count < 30


def test_step_warmup_without_steps_says_how_to_fix_it() -> None:
    prof = gp.Profiler(["a"], warmup_steps=5)
    with prof.phase("a"):
        pass
    assert "prof.begin()" in str(prof.summary().warmup)
