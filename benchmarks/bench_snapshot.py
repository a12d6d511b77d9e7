"""Snapshot encode / decode of one snapshot and of a merge of 64 sources, a merge of 64,
and a Summary's JSON round trip, through the public API.

The read model is typed records (issue 21); these are the costs it must not raise.

pytest-benchmark::

    python -m pytest benchmarks/bench_snapshot.py --benchmark-enable --benchmark-only
CI runs it once in quick mode (--benchmark-disable is the default in pyproject).

Timing script (best of ``--rounds``, microseconds per call); it uses only the public
API, so the same file times another checkout too (before / after a change)::

    python benchmarks/bench_snapshot.py [--rounds 15] [--cpu]
    PYTHONPATH=/path/to/other/src python benchmarks/bench_snapshot.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gyreprof as gp

PHASES = ["env", "policy", "transfer", "learn"]
N_MERGE = 64


def make_snapshot(seed: int = 0, steps: int = 2000) -> Any:
    """A realistic snapshot: 4 phases of lognormal durations, a counter, rolling windows."""
    rng = np.random.default_rng(seed)
    prof = gp.Profiler(PHASES, warmup_steps=10, window_steps=100)
    durations = rng.lognormal(10, 1.2, size=(steps, len(PHASES))).astype(np.int64)
    for row in durations:
        prof.begin()
        for name, d in zip(PHASES, row, strict=True):
            prof.record(name, int(d))
    prof.end()
    prof.count("retry", 7)
    return prof.snapshot()


def cases() -> dict[str, Callable[[], object]]:
    snap = make_snapshot()
    data = snap.to_bytes()
    many = [
        gp.Snapshot.from_bytes(make_snapshot(seed=i, steps=200).to_bytes()) for i in range(N_MERGE)
    ]
    merged = gp.merge(many)
    merged_data = merged.to_bytes()  # 64 source records: the records' codec per source
    summary = snap.summary()
    text = summary.to_json()
    return {
        "encode": lambda: snap.to_bytes(),
        "decode": lambda: gp.Snapshot.from_bytes(data),
        f"encode merged{N_MERGE}": lambda: merged.to_bytes(),
        f"decode merged{N_MERGE}": lambda: gp.Snapshot.from_bytes(merged_data),
        f"merge{N_MERGE}": lambda: gp.merge(many),
        f"merge{N_MERGE}+summary": lambda: gp.merge(many).summary(),
        "summary to_json": lambda: summary.to_json(),
        "summary from_json": lambda: gp.Summary.from_json(text),
    }


_CASES: dict[str, Callable[[], object]] = {}


def _case(name: str) -> Callable[[], object]:
    if not _CASES:
        _CASES.update(cases())
    return _CASES[name]


@pytest.mark.parametrize(
    "name",
    [
        "encode",
        "decode",
        f"encode merged{N_MERGE}",
        f"decode merged{N_MERGE}",
        f"merge{N_MERGE}",
        f"merge{N_MERGE}+summary",
        "summary to_json",
        "summary from_json",
    ],
)
def test_snapshot_cost(benchmark: Any, name: str) -> None:
    benchmark.group = "snapshot"
    fn = _case(name)
    out = benchmark(fn)
    assert out is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="time the thread's CPU time, not the wall clock (steadier on a loaded machine)",
    )
    args = ap.parse_args()
    clock = time.thread_time if args.cpu else time.perf_counter
    print(f"gyreprof from {gp.__file__}" + (" (thread CPU time)" if args.cpu else ""))
    for name, fn in cases().items():
        fn()
        best = float("inf")
        for _ in range(args.rounds):
            t0 = clock()
            fn()
            best = min(best, clock() - t0)
        print(f"{name:>20}: {best * 1e6:10.1f} us")


if __name__ == "__main__":
    main()
