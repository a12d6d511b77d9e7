"""One table from one run: the cost of timing one region, per form, against the floor.

    python benchmarks/compare_forms.py            # full run (about a minute)
    python benchmarks/compare_forms.py --quick    # smoke run
    python benchmarks/compare_forms.py --json out.json

A *region* is one timed span of a loop. In lap form a region costs one boundary
(one ``lap`` call); the two-read forms pay an enter and an exit. Every form
times four regions per loop iteration (unrolled, so the loop's own cost is a
quarter of an iteration); an empty loop timed in the same rounds is
subtracted. Contenders, interleaved round by round in a fresh random order:

* ``floor``: the compiled floor of ``bench_floor.py`` (one CLOCK_MONOTONIC read,
  one store), once per region;
* ``gyreprof lap``: ``lap = prof.lap; lap(0)`` (int ids);
* ``gyreprof with (pre-made timer)``: ``t = prof.phase("a")`` once, ``with t:``;
* ``gyreprof with prof.phase(name)``: the name looked up at every use;
* ``gyreprof @prof.timed``: a decorated no-op function, net of a plain call;
* ``perf_counter dict``: ``t = pc(); sums[k] += pc() - t``;
* ``perf_counter_ns list``: ``ts.append(perf_counter_ns())`` once per region;
* ``codetiming.Timer``: ``with timer:`` (``Timer(name, logger=None)``, reused);
* ``torchrl timeit``: ``with timeit(name):`` (its documented form), if importable;
* ``hdrhistogram record_value``: ``t = pc_ns(); h.record_value(pc_ns() - t)``.

Reported: net ns per region (min, lower quartile and median over rounds) and
the ratio to the floor of the lower quartiles (the least-disturbed runs), with a
95% bootstrap interval over rounds. Absolute numbers on the
shared guest wander; compare ratios from one run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import gyreprof as gp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import load_floor, ratio_stats, run_rounds  # noqa: E402

Run = Callable[[], None]


def _with4(cm: Any, m: int) -> Run:
    rep = itertools.repeat

    def run() -> None:
        for _ in rep(None, m):
            with cm:
                pass
            with cm:
                pass
            with cm:
                pass
            with cm:
                pass

    return run


def contenders(m: int) -> tuple[dict[str, Run], dict[str, str]]:
    """(name -> loop of 4*m regions, name -> name of the baseline to subtract)."""
    rep = itertools.repeat
    fl = load_floor().Floor()
    f = fl.mono
    prof = gp.Profiler(["a", "b", "c", "d"])
    lap = prof.lap
    timer = prof.phase("a")
    phase = prof.phase
    pc, pcn = time.perf_counter, time.perf_counter_ns
    sums: dict[str, float] = defaultdict(float)
    ts: list[int] = []

    def loop() -> None:
        for _ in rep(None, m):
            pass

    def floor() -> None:
        for _ in rep(None, m):
            f(0)
            f(1)
            f(2)
            f(3)

    def gyre_lap() -> None:
        for _ in rep(None, m):
            lap(0)
            lap(1)
            lap(2)
            lap(3)

    def gyre_phase() -> None:
        for _ in rep(None, m):
            with phase("a"):
                pass
            with phase("b"):
                pass
            with phase("c"):
                pass
            with phase("d"):
                pass

    def noop_a() -> None:
        pass

    timed_noop: Callable[[], None] = prof.timed("a")(noop_a)

    def noop() -> None:
        pass

    def calls(g: Callable[[], None]) -> Run:
        def run() -> None:
            for _ in rep(None, m):
                g()
                g()
                g()
                g()

        return run

    def dict_pattern() -> None:
        for _ in rep(None, m):
            t = pc()
            sums["a"] += pc() - t
            t = pc()
            sums["b"] += pc() - t
            t = pc()
            sums["c"] += pc() - t
            t = pc()
            sums["d"] += pc() - t

    def raw_list() -> None:
        app = ts.append
        for _ in rep(None, m):
            app(pcn())
            app(pcn())
            app(pcn())
            app(pcn())
        ts.clear()

    out: dict[str, Run] = {
        "empty loop": loop,
        "floor": floor,
        "gyreprof lap": gyre_lap,
        "gyreprof with (pre-made timer)": _with4(timer, m),
        "gyreprof with prof.phase(name)": gyre_phase,
        "plain call": calls(noop),
        "gyreprof @prof.timed": calls(timed_noop),
        "perf_counter dict": dict_pattern,
        "perf_counter_ns list": raw_list,
    }
    base = {name: "empty loop" for name in out}
    base["gyreprof @prof.timed"] = "plain call"
    try:
        from codetiming import Timer

        out["codetiming.Timer"] = _with4(Timer("a", logger=None), m)
    except ImportError:
        pass
    try:
        from torchrl._utils import timeit

        def torchrl_timeit() -> None:
            for _ in rep(None, m):
                with timeit("a"):
                    pass
                with timeit("b"):
                    pass
                with timeit("c"):
                    pass
                with timeit("d"):
                    pass

        out["torchrl timeit"] = torchrl_timeit
    except ImportError:
        pass
    try:
        from hdrh.histogram import HdrHistogram

        hist = HdrHistogram(1, 3_600_000_000_000, 3)
        rec = hist.record_value

        def hdr() -> None:
            for _ in rep(None, m):
                t = pcn()
                rec(pcn() - t)
                t = pcn()
                rec(pcn() - t)
                t = pcn()
                rec(pcn() - t)
                t = pcn()
                rec(pcn() - t)

        out["hdrhistogram record_value"] = hdr
    except ImportError:
        pass
    prof.begin()
    return out, base


def measure(calls: int, rounds: int, n_boot: int = 2000) -> dict[str, Any]:
    m = calls // 4
    runs, base = contenders(m)
    r = run_rounds(runs, 4 * m, rounds, seed=5)
    rows: dict[str, dict[str, float]] = {}
    for name, v in r.items():
        if name in ("empty loop", "plain call"):
            continue
        b = r[base.get(name, "empty loop")]
        rows[name] = {
            "net_min_ns": float(v.min() - b.min()),
            "net_q25_ns": float(np.quantile(v, 0.25) - np.quantile(b, 0.25)),
            "net_median_ns": float(np.median(v - b)),
            **ratio_stats(v, r["floor"], b, r["empty loop"], n_boot=n_boot),
        }
    return {
        "regions_per_run": 4 * m,
        "rounds": rounds,
        "empty_loop_ns": float(np.median(r["empty loop"])),
        "rows": rows,
    }


def report(res: dict[str, Any]) -> str:
    lines = [
        f"{res['rounds']} rounds x {res['regions_per_run']} regions; net of the empty loop "
        f"({res['empty_loop_ns']:.1f} ns/region)\n",
        "| form | ns per region (min) | ns per region (q25) | ns per region (median) "
        "| ratio to floor, q25 [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for name, v in sorted(res["rows"].items(), key=lambda kv: kv[1]["net_q25_ns"]):
        lines.append(
            f"| {name} | {v['net_min_ns']:.0f} | {v['net_q25_ns']:.0f} | {v['net_median_ns']:.0f} | "
            f"{v['ratio']:.2f}x [{v['ci_lo']:.2f}, {v['ci_hi']:.2f}] |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=textwrap.dedent(__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers as JSON")
    a = ap.parse_args(argv)
    t0 = time.time()
    res = measure(4_000 if a.quick else 8_000, 41 if a.quick else 401, 1000 if a.quick else 2000)
    print(report(res))
    print(f"\n(load average at end {os.getloadavg()}, {time.time() - t0:.1f} s)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
