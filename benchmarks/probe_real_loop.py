"""What each piece of a lap's bookkeeping costs inside a real loop, not a tight one.

    python benchmarks/probe_real_loop.py            # 301 interleaved rounds (about a minute)
    python benchmarks/probe_real_loop.py --rounds 51

In a tight loop of nothing but laps every line a lap touches stays in the L1
cache; in a real loop the step between two boundaries evicts them, and a
boundary pays for its cache misses. This script times the unwrapped CartPole
loop of ``bench_skew.py`` (four boundaries a step) with the floor and with each
variant of ``_floor_probe.pyx`` (checks + header; + histogram bucket; +
sum/min/max; + a 32-byte ring event; the deferred and batched variants) at the
boundaries, and with gyreprof's ``lap`` for ring capacities of 2**10 and
2**16 events (the default), each twice (two recorders of the same settings: the
spread between them is the noise floor of the comparison). Reported: ns per
boundary above the floor, from the lower quartile of interleaved runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import gyreprof as gp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loops import CartPoleLoop  # noqa: E402
from bench_floor import load_floor, load_probe  # noqa: E402


def forms(steps: int) -> dict[str, Callable[[], None]]:
    cp = CartPoleLoop(steps)
    make = cp.boundary_loop
    bare = cp.bare_loop()
    probe = load_probe()
    floor = load_floor().Floor()
    out_forms: dict[str, Callable[[], None]] = {"bare": bare, "floor": make(floor.mono)}
    for name, meth in (
        ("checks + header", "lap_a2"),
        ("+ bucket", "lap_b"),
        ("+ sum/min/max", "lap_c"),
        ("+ 32-byte ring (lean)", "lap"),
        ("lean, bucket deferred", "lap_defer"),
        ("16-byte ring, batch of 64", "lap_batch"),
    ):
        out_forms[name] = make(getattr(probe.Probe(4), meth))  # one probe per variant
    for cap in (10, 16):
        for copy in ("a", "b"):
            prof = gp.Profiler(["env", "fwd", "xfer", "top"], capacity=1 << cap)
            out_forms[f"gyreprof lap, ring 2^{cap} ({copy})"] = make(prof.lap)
    return out_forms


def run(rounds: int, steps: int = 200) -> dict[str, float]:
    fs = forms(steps)
    names = list(fs)
    res: dict[str, list[float]] = {k: [] for k in names}
    order = np.random.default_rng(0)
    gc.collect()
    gc.disable()
    try:
        for f in fs.values():
            f()
        for _ in range(rounds):
            for i in order.permutation(len(names)):
                k = names[i]
                t0 = time.perf_counter_ns()
                fs[k]()
                res[k].append((time.perf_counter_ns() - t0) / steps)
    finally:
        gc.enable()
    return {k: float(np.quantile(v, 0.25)) for k, v in res.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=301)
    a = ap.parse_args(argv)
    q = run(a.rounds)
    print(f"CartPole, 4 boundaries a step, {a.rounds} interleaved rounds x 200 steps (q25)\n")
    print("| form | ns/step | vs bare | ns per boundary above the floor |")
    print("|---|---|---|---|")
    for k, v in q.items():
        print(
            f"| {k} | {v:.0f} | {100 * (v / q['bare'] - 1):+.2f}% | {(v - q['floor']) / 4:+.1f} |"
        )
    print(f"\n(load average at end {os.getloadavg()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
