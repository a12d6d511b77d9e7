"""What ``gyreprof run``'s stall watch costs the launcher while the command runs.

Every second the watch counts, for each process of the run, the events its live
segments hold (``diagnostics._doctor_evidence._launcher_events``): each segment's
events per phase and its steps completed. This compares the two ways of reading one
segment, in the same run, on segments holding the run's own phases:

- ``snapshot``: a full snapshot (``LiveReader.snapshot(windows=False)``), the watch's
  read before issue 33's round 5;
- ``event_counts``: ``LiveReader.event_counts()``, one copy of the block and its
  counts added up, no snapshot built;

and the watch's whole look at one process (list its segments, attach, count, close)
with two segments (sampler and trainer), as ``gyreprof run`` publishes them.

Runnable comparison (interleaved rounds, median of each, prints the ratio)::

    python benchmarks/bench_watch.py [--rounds 15] [--reads 50]

``test_watch_quick`` runs each once, small, so the script keeps working in the
README's test run; the figures live in BENCHMARKS.md, not in an assert.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof.diagnostics._doctor_evidence import _launcher_events
from gyreprof.integrations._auto.records import SAMPLER_PHASES, TRAINER_PHASES
from gyreprof.live import _layout as lay


def _profilers(steps: int) -> list[gp.Profiler]:
    """A sampler and a trainer profiler, live as ``gyreprof run`` names them, each with
    ``steps`` steps recorded."""
    out = []
    for side, phases in (("sampler", SAMPLER_PHASES), ("trainer", TRAINER_PHASES)):
        prof = gp.Profiler(phases, live=f"gyreprof-run-bench:{side}", capacity=1 << 12)
        for _ in range(steps):
            prof.begin()
            prof.lap(0)
            prof.lap(1)
        out.append(prof)
    return out


def _cpu_ms(fn: Callable[[], object], reads: int) -> float:
    t0 = time.process_time()
    for _ in range(reads):
        fn()
    return (time.process_time() - t0) * 1e3 / reads


def measure(rounds: int, reads: int, steps: int = 10_000) -> dict[str, list[float]]:
    """ms of CPU per read of each way, ``rounds`` interleaved rounds of ``reads`` reads."""
    profs = _profilers(steps)
    try:
        path = profs[0].live.path
        reader = gp.live.attach(path)
        pid = os.getpid()
        ways: dict[str, Callable[[], object]] = {
            "snapshot": lambda: reader.snapshot(windows=False),
            "event_counts": reader.event_counts,
            "look at a process (2 segments)": lambda: _launcher_events(pid),
        }
        for fn in ways.values():  # first calls: imports, page faults
            fn()
        out: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(rounds):
            for name, fn in ways.items():
                out[name].append(_cpu_ms(fn, reads))
        reader.close()
        return out
    finally:
        for p in profs:
            p.live.close()


def report(res: dict[str, list[float]]) -> str:
    med = {k: statistics.median(v) for k, v in res.items()}
    base = med["snapshot"]
    lines = ["CPU ms per read (median of rounds), one segment unless said:"]
    for k, v in med.items():
        lines.append(f"  {k:32s} {v:8.3f} ms   {v / base:6.3f}x the snapshot")
    return "\n".join(lines)


@pytest.fixture()
def segment_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-bench-watch-"))
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_watch_quick(segment_dir: Path) -> None:
    res = measure(rounds=1, reads=2, steps=100)
    assert set(res) == {"snapshot", "event_counts", "look at a process (2 segments)"}
    assert all(len(v) == 1 and v[0] >= 0 for v in res.values())
    assert "x the snapshot" in report(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reads", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10_000)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gyreprof-bench-watch-")
    os.environ[lay.ENV_DIR] = d
    try:
        print(report(measure(args.rounds, args.reads, args.steps)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
