"""A/B of two builds of the compiled recorder, loaded side by side in one process.

    python benchmarks/ab_core.py --a ../baseline/src --b src [--form lap|step] [--phases 4] [--rounds 501] [--shared]

Each side's ``gyreprof/_core/recorder*.so`` is loaded from its own file (the two
modules coexist), and the forms of every round run in a fresh random order with
the garbage collector off. ``lap``: laps cycling through ``--phases`` phases;
``step``: ``begin()`` then a lap per phase. Prints ns per call (lower quartile of
the rounds) for both clocks and the ratio b / a, with the median of the per-round
ratios beside it. Loading a build against a copy of itself reads 1.00x (no
order bias); differences under about 3% are within the spread between runs.
``--shared``: each recorder's stats block lives in a caller's buffer, as a live
(shared-memory) profiler's does. ``--form cartpole`` (``begin()`` and three laps)
and ``cartpole4`` (four laps) time the unwrapped CartPole loop of
``bench_skew.py`` instead, 200 steps a run (ns per step): what the two builds
cost where a step evicts the lines a boundary touches.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for _loops


def load(src: str) -> ModuleType:
    """The compiled ``gyreprof._core.recorder`` of the tree whose ``src`` is given."""
    found = sorted(Path(src, "gyreprof", "_core").glob("recorder*.so"))
    if not found:
        raise SystemExit(f"no compiled recorder under {src}/gyreprof/_core (build it first)")
    spec = importlib.util.spec_from_file_location("gyreprof._core.recorder", found[0])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cartpole_runner(rec: Any, form: str, steps: int = 200) -> Any:
    from _loops import CartPoleLoop

    cp = CartPoleLoop(steps)
    loop = cp.step_loop(rec.begin, rec.lap) if form == "cartpole" else cp.boundary_loop(rec.lap)
    pc = time.perf_counter_ns

    def run() -> float:
        t0 = pc()
        loop()
        return (pc() - t0) / steps

    return run


def _runner(rec: Any, form: str, phases: int, n: int) -> Any:
    if form.startswith("cartpole"):
        return _cartpole_runner(rec, form)
    lap, begin = rec.lap, rec.begin
    ids = list(range(phases))
    pc = time.perf_counter_ns

    def run() -> float:
        t0 = pc()
        if form == "lap":
            for _ in range(n):
                for i in ids:
                    lap(i)
        else:
            for _ in range(n):
                begin()
                for i in ids:
                    lap(i)
        calls = n * (phases + (form == "step"))
        return (pc() - t0) / calls

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--a",
        required=True,
        help="src directory of build A (e.g. a checkout of the baseline: ../baseline/src)",
    )
    ap.add_argument("--b", required=True, help="src directory of build B")
    ap.add_argument("--form", choices=("lap", "step", "cartpole", "cartpole4"), default="lap")
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=501)
    ap.add_argument("--shared", action="store_true", help="stats blocks in caller's buffers")
    a = ap.parse_args(argv)
    mods = {"a": load(a.a), "b": load(a.b)}
    clocks = ["monotonic"] + (["tsc"] if mods["a"].tsc_invariant() else [])
    if a.form.startswith("cartpole"):
        a.phases = 4
    n = max(1, 8000 // a.phases)
    runs = {}
    for clock in clocks:
        for side, mod in mods.items():
            buf = bytearray(mod.Recorder.required_bytes(a.phases)) if a.shared else None
            rec = mod.Recorder(a.phases, clock=clock, buffer=buf)
            rec.begin()
            runs[(side, clock)] = _runner(rec, a.form, a.phases, n)
    keys = list(runs)
    res: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
    gc.disable()
    try:
        for k in keys:
            runs[k]()
        for _ in range(a.rounds):
            random.shuffle(keys)
            for k in keys:
                res[k].append(runs[k]())
    finally:
        gc.enable()
    where = "stats in a caller's buffer" if a.shared else "private stats"
    print(f"form {a.form}, {a.phases} phases, {a.rounds} rounds, {where}; A={a.a} B={a.b}")
    unit = "ns/step" if a.form.startswith("cartpole") else "ns/call"
    for clock in clocks:
        qa = float(np.quantile(res[("a", clock)], 0.25))
        qb = float(np.quantile(res[("b", clock)], 0.25))
        paired = float(np.median(np.array(res[("b", clock)]) / np.array(res[("a", clock)])))
        print(
            f"{clock}: A {qa:.1f} {unit}, B {qb:.1f} {unit}, "
            f"B/A {qb / qa:.3f} (paired median {paired:.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
