"""Hot-path cost of ``live=True``: a lap into shared memory vs into private memory.

With ``live=True`` the Recorder's stats block lives in a shared-memory file
instead of a private numpy array; the write path is the same compiled code
with a different base pointer, so the cost per lap should be the same.

pytest-benchmark (compare the ``live-lap`` group's two rows)::

    python -m pytest benchmarks/bench_live.py --benchmark-enable --benchmark-only
CI runs it once in quick mode (--benchmark-disable is the default in pyproject).

Runnable comparison (interleaved rounds, best of each, prints the ratio)::

    python benchmarks/bench_live.py [--laps 200000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import gyreprof as gp

PHASES = ["env", "fwd", "xfer"]
LAPS_PER_CALL = 10_000


def _make(live: bool) -> gp.Profiler:
    return gp.Profiler(PHASES, live="bench" if live else False)


def _step_loop(prof: gp.Profiler, n: int) -> Callable[[], None]:
    """A sampler-shaped loop: begin + one lap per phase, ``n`` steps per call."""
    env, fwd, xfer = prof.ids(*PHASES)
    begin, lap = prof.begin, prof.lap
    rng = range(n)

    def run() -> None:
        for _ in rng:
            begin()
            lap(env)
            lap(fwd)
            lap(xfer)

    return run


@pytest.fixture
def live_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="gyreprof-bench-live-") as d:
        monkeypatch.setenv("GYREPROF_LIVE_DIR", d)
        yield d


@pytest.mark.parametrize("live", [False, True], ids=["private", "live"])
def test_lap_cost(benchmark: Any, live_dir: str, live: bool) -> None:
    """Time of LAPS_PER_CALL steps (4 boundaries each); per-boundary ns in extra_info."""
    prof = _make(live)
    run = _step_loop(prof, LAPS_PER_CALL // 4)
    benchmark.group = "live-lap"
    benchmark.extra_info["boundaries_per_call"] = LAPS_PER_CALL
    benchmark.pedantic(run, rounds=50, iterations=1, warmup_rounds=3)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None in quick mode (--benchmark-disable)
        benchmark.extra_info["ns_per_boundary_min"] = stats.stats.min * 1e9 / LAPS_PER_CALL
    assert prof.summary().steps > 0
    if live:
        assert prof.live.active
        prof.live.close()


def compare(laps: int, rounds: int) -> dict[str, float]:
    """Interleave private/live rounds; best ns per boundary of each and their ratio."""
    with tempfile.TemporaryDirectory(prefix="gyreprof-bench-live-") as d:
        os.environ["GYREPROF_LIVE_DIR"] = d
        private, live = _make(False), _make(True)
        runs = {"private": _step_loop(private, laps // 4), "live": _step_loop(live, laps // 4)}
        best = {k: float("inf") for k in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                t0 = time.perf_counter_ns()
                run()
                best[name] = min(best[name], (time.perf_counter_ns() - t0) / laps)
        live.live.close()
    return {
        "private_ns_per_boundary": best["private"],
        "live_ns_per_boundary": best["live"],
        "ratio_live_over_private": best["live"] / best["private"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="lap cost with live=True vs live=False")
    ap.add_argument("--laps", type=int, default=200_000, help="boundaries per round")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    r = compare(args.laps, args.rounds)
    print(
        f"private: {r['private_ns_per_boundary']:.1f} ns/boundary  "
        f"live: {r['live_ns_per_boundary']:.1f} ns/boundary  "
        f"ratio live/private: {r['ratio_live_over_private']:.3f}"
    )


if __name__ == "__main__":
    main()
