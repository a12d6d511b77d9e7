"""pytest-benchmark: the core's hot path against its baselines, grouped for comparison.

Full run:  python -m pytest benchmarks/bench_core.py --benchmark-enable --benchmark-only
CI runs this file once in quick mode (--benchmark-disable is the default in pyproject).
Ratios in one run on one machine are what BENCHMARKS.md reports; see also
benchmarks/compare_core.py, which interleaves the contenders.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict

import numpy as np
import pytest

import gyreprof as gp

N = 10_000


@pytest.fixture
def prof() -> gp.Profiler:
    p = gp.Profiler(["env", "fwd", "xfer"], capacity=1 << 12)
    p.begin()
    return p


@pytest.mark.benchmark(group="clock-read")
def test_lap(benchmark, prof) -> None:
    lap = prof.lap

    def run() -> None:
        for _ in itertools.repeat(None, N):
            lap(0)

    benchmark(run)


@pytest.mark.benchmark(group="clock-read")
def test_perf_counter_ns(benchmark) -> None:
    pc = time.perf_counter_ns

    def run() -> None:
        for _ in itertools.repeat(None, N):
            pc()

    benchmark(run)


@pytest.mark.benchmark(group="clock-read")
def test_empty_loop(benchmark) -> None:
    def run() -> None:
        for _ in itertools.repeat(None, N):
            pass

    benchmark(run)


@pytest.mark.benchmark(group="phase-context")
def test_phase_context(benchmark, prof) -> None:
    phase = prof.phase

    def run() -> None:
        for _ in itertools.repeat(None, N):
            with phase("env"):
                pass

    benchmark(run)


@pytest.mark.benchmark(group="phase-context")
def test_perf_counter_dict(benchmark) -> None:
    sums: dict[str, float] = defaultdict(float)
    pc = time.perf_counter

    def run() -> None:
        for _ in itertools.repeat(None, N):
            t = pc()
            sums["env"] += pc() - t

    benchmark(run)


@pytest.mark.benchmark(group="phase-context")
def test_codetiming(benchmark) -> None:
    codetiming = pytest.importorskip("codetiming")
    timer = codetiming.Timer("env", logger=None)

    def run() -> None:
        for _ in itertools.repeat(None, N):
            with timer:
                pass

    benchmark(run)


@pytest.mark.benchmark(group="summary")
def test_summary_after_many_events(benchmark) -> None:
    p = gp.Profiler(["env", "fwd", "xfer"], capacity=1 << 12)
    lap, begin = p.lap, p.begin
    for _ in range(50_000):
        begin()
        lap(0)
        lap(1)
        lap(2)
    p.end()
    s = benchmark(p.summary)
    assert s.phases["env"].count == 50_000


@pytest.mark.benchmark(group="snapshot")
def test_snapshot_round_trip(benchmark) -> None:
    rng = np.random.default_rng(0)
    p = gp.Profiler([f"p{i}" for i in range(8)])
    for i in range(8):
        for x in rng.lognormal(11, 0.3, 5_000):
            p.record(i, int(x))
    snap = p.snapshot()

    def run() -> gp.Snapshot:
        return gp.Snapshot.from_bytes(snap.to_bytes(windows=False))

    back = benchmark(run)
    assert np.array_equal(back.counts, snap.counts)


def test_compare_script_quick() -> None:
    """The runnable comparison script keeps working (its quick mode)."""
    import runpy
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("compare_core.py")
    argv = sys.argv
    sys.argv = [str(script), "--quick"]
    try:
        with pytest.raises(SystemExit) as exc:
            runpy.run_path(str(script), run_name="__main__")
        assert exc.value.code == 0
    finally:
        sys.argv = argv
