"""Runnable comparison for the core's speed claims, as ratios measured in one run.

    python benchmarks/compare_core.py            # full run (about a minute)
    python benchmarks/compare_core.py --quick    # smoke run

Every comparison interleaves its contenders round by round and reports the
median per-round ratio, so drift on a shared machine hits all of them alike.
Prints a Markdown table (pasted into BENCHMARKS.md) and, with --json, the raw numbers.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import sys
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable

import numpy as np

import gyreprof as gp


def _per_call_ns(fn: Callable[[], None], n: int) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / n


def interleaved(
    contenders: dict[str, Callable[[], None]], n: int, rounds: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds):
        items = list(contenders.items())
        if r % 2:
            items.reverse()
        for name, fn in items:
            out[name].append(_per_call_ns(fn, n))
    return out


def bench_lap_vs_clock(n: int, rounds: int) -> dict[str, float]:
    """One lap() vs one bare time.perf_counter_ns() call (loop overhead subtracted)."""
    prof = gp.Profiler(["a"])
    lap, pc = prof.lap, time.perf_counter_ns
    prof.begin()
    rep = itertools.repeat

    def laps() -> None:
        for _ in rep(None, n):
            lap(0)

    def clock() -> None:
        for _ in rep(None, n):
            pc()

    def empty() -> None:
        for _ in rep(None, n):
            pass

    r = interleaved({"lap": laps, "perf_counter_ns": clock, "loop": empty}, n, rounds)
    loop = statistics.median(r["loop"])
    lap_ns = statistics.median(r["lap"]) - loop
    clk_ns = statistics.median(r["perf_counter_ns"]) - loop
    ratios = [
        (a - b) / (c - b) for a, b, c in zip(r["lap"], r["loop"], r["perf_counter_ns"], strict=True)
    ]
    return {"lap_ns": lap_ns, "perf_counter_ns_ns": clk_ns, "ratio": statistics.median(ratios)}


def bench_phase_context(n: int, rounds: int) -> dict[str, float]:
    """``with prof.phase(...)`` per phase vs codetiming.Timer and a perf_counter+dict timer."""
    prof = gp.Profiler(["env"])
    phase = prof.phase
    sums: dict[str, float] = defaultdict(float)
    pc = time.perf_counter
    rep = itertools.repeat

    def with_gyreprof() -> None:
        for _ in rep(None, n):
            with phase("env"):
                pass

    def with_dict() -> None:
        for _ in rep(None, n):
            t = pc()
            sums["env"] += pc() - t

    def empty() -> None:
        for _ in rep(None, n):
            pass

    lock = threading.Lock()

    def with_lock() -> None:  # a C-implemented context manager that reads no clock
        for _ in rep(None, n):
            with lock:
                pass

    contenders = {"gyreprof": with_gyreprof, "dict": with_dict, "lock": with_lock, "loop": empty}
    try:
        from codetiming import Timer

        timer = Timer("env", logger=None)

        def with_codetiming() -> None:
            for _ in rep(None, n):
                with timer:
                    pass

        contenders["codetiming"] = with_codetiming
    except ImportError:
        pass
    r = interleaved(contenders, n, rounds)
    loop = statistics.median(r["loop"])
    return {name: statistics.median(v) - loop for name, v in r.items() if name != "loop"}


def bench_cartpole(steps: int, rounds: int) -> dict[str, float]:
    """A real unwrapped CartPole loop with three phases: bare vs gyreprof vs perf_counter+dict."""
    import gymnasium as gym

    env = gym.make("CartPole-v1").unwrapped
    w = np.random.default_rng(0).standard_normal(4)
    out: list[float] = []
    prof = gp.Profiler(["env", "fwd", "xfer"], capacity=1 << 12)
    ENV, FWD, XFER = prof.ids("env", "fwd", "xfer")
    lap, begin = prof.lap, prof.begin
    sums: dict[str, float] = defaultdict(float)
    pc = time.perf_counter

    def bare() -> None:
        obs, _ = env.reset(seed=0)
        for _ in range(steps):
            obs, r, term, trunc, _ = env.step(1 if float(obs @ w) > 0 else 0)
            if term:
                obs, _ = env.reset()
            action = 1 if float(obs @ w) > 0 else 0
            out.append(action)
        out.clear()

    def gyre() -> None:
        obs, _ = env.reset(seed=0)
        for _ in range(steps):
            begin()
            obs, r, term, trunc, _ = env.step(1 if float(obs @ w) > 0 else 0)
            if term:
                obs, _ = env.reset()
            lap(ENV)
            action = 1 if float(obs @ w) > 0 else 0
            lap(FWD)
            out.append(action)
            lap(XFER)
        out.clear()

    def dict_timer() -> None:
        obs, _ = env.reset(seed=0)
        for _ in range(steps):
            t0 = pc()
            obs, r, term, trunc, _ = env.step(1 if float(obs @ w) > 0 else 0)
            if term:
                obs, _ = env.reset()
            t1 = pc()
            sums["env"] += t1 - t0
            action = 1 if float(obs @ w) > 0 else 0
            t2 = pc()
            sums["fwd"] += t2 - t1
            out.append(action)
            t3 = pc()
            sums["xfer"] += t3 - t2
        out.clear()

    gc.collect()
    gc.disable()  # collections would land on whichever contender is running
    try:
        r = interleaved({"bare": bare, "gyreprof": gyre, "dict": dict_timer}, steps, rounds)
    finally:
        gc.enable()
    slow_g = [g / b - 1 for g, b in zip(r["gyreprof"], r["bare"], strict=True)]
    slow_d = [d / b - 1 for d, b in zip(r["dict"], r["bare"], strict=True)]
    return {
        "bare_step_ns": statistics.median(r["bare"]),
        "gyreprof_slowdown": statistics.median(slow_g),
        "dict_slowdown": statistics.median(slow_d),
        # least-disturbed round of each contender
        "gyreprof_slowdown_min": min(r["gyreprof"]) / min(r["bare"]) - 1,
        "dict_slowdown_min": min(r["dict"]) / min(r["bare"]) - 1,
    }


def bench_percentile_error(n: int) -> dict[str, float]:
    """Worst relative error of reported percentiles vs numpy (inverted CDF) at 3 sf."""
    rng = np.random.default_rng(7)
    worst = 0.0
    qs = [50, 90, 99, 99.9, 99.99]
    for x in (
        rng.lognormal(10, 1.5, n),
        (rng.pareto(1.1, n) + 1) * 1000,
        np.concatenate([rng.normal(2e3, 50, n // 2), rng.normal(2e6, 5e4, n // 2)]),
    ):
        v = np.clip(np.round(x), 1, 3.6e12).astype(np.int64)
        h = gp._core.Histogram(significant_figures=3)
        h.record_many(v)
        got = h.percentiles(qs)
        want = np.percentile(v, qs, method="inverted_cdf")
        worst = max(worst, float(np.max(np.abs(got - want) / want)))
    return {"max_relative_error": worst}


def bench_allocations(n: int) -> dict[str, float]:
    """Traced-memory peak growth per lap (0 means the lap path allocates nothing)."""
    prof = gp.Profiler(["a", "b"])
    lap, begin = prof.lap, prof.begin

    def laps() -> None:
        for _ in itertools.repeat(None, n):
            lap(0)

    def empty() -> None:
        for _ in itertools.repeat(None, n):
            pass

    begin()
    res = {}
    for name, fn in (("laps", laps), ("loop", empty)):
        tracemalloc.start()
        fn()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        res[name] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return {"bytes_per_lap": (res["laps"] - res["loop"]) / n, "laps": n}


def bench_summary(events: int, rounds: int) -> dict[str, float]:
    """summary() on a profiler that recorded ``events`` events."""
    prof = gp.Profiler(["env", "fwd", "xfer"], capacity=1 << 16)
    lap, begin = prof.lap, prof.begin
    for _ in range(events // 4):
        begin()
        lap(0)
        lap(1)
        lap(2)
    prof.end()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        s = prof.summary()
        times.append((time.perf_counter_ns() - t0) / 1e6)
    assert s.phases["env"].count == events // 4
    return {"summary_ms": statistics.median(times), "events": events}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes: checks that it runs")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers as JSON")
    a = ap.parse_args(argv)
    q = a.quick
    res = {
        "lap_vs_perf_counter_ns": bench_lap_vs_clock(20_000 if q else 500_000, 3 if q else 15),
        "phase_context": bench_phase_context(10_000 if q else 200_000, 3 if q else 11),
        "cartpole": bench_cartpole(1_000 if q else 4_000, 3 if q else 61),
        "percentile_error": bench_percentile_error(10_000 if q else 1_000_000),
        "allocations": bench_allocations(10_000 if q else 1_000_000),
        "summary_10M": bench_summary(100_000 if q else 10_000_000, 3 if q else 9),
    }
    lp, p, c = res["lap_vs_perf_counter_ns"], res["phase_context"], res["cartpole"]
    rows = [
        (
            "one lap() vs one time.perf_counter_ns()",
            f"{lp['lap_ns']:.1f} ns vs {lp['perf_counter_ns_ns']:.1f} ns",
            f"{lp['ratio']:.2f}x",
            "<= 0.9x",
        ),
        (
            "`with prof.phase()` per phase",
            f"{p['gyreprof']:.0f} ns (codetiming {p.get('codetiming', float('nan')):.0f} ns, "
            f"perf_counter+dict {p['dict']:.0f} ns; floor: `with threading.Lock()` {p['lock']:.0f} ns)",
            f"{p['gyreprof'] / p['dict']:.2f}x of dict",
            "<= 150 ns",
        ),
        (
            "CartPole loop, 3 phases: slowdown vs bare",
            f"bare {c['bare_step_ns'] / 1e3:.2f} us/step",
            f"gyreprof +{100 * c['gyreprof_slowdown']:.1f}%, dict +{100 * c['dict_slowdown']:.1f}% "
            f"(best rounds: +{100 * c['gyreprof_slowdown_min']:.1f}%, "
            f"+{100 * c['dict_slowdown_min']:.1f}%)",
            "<= 3%",
        ),
        (
            "percentile relative error, 3 sf",
            f"{100 * res['percentile_error']['max_relative_error']:.4f}%",
            "",
            "<= 0.1%",
        ),
        (
            "Python allocations per lap",
            f"{res['allocations']['bytes_per_lap']:.3f} bytes/lap over {res['allocations']['laps']:.0f} laps",
            "",
            "0",
        ),
        (
            "summary() after 10M events",
            f"{res['summary_10M']['summary_ms']:.2f} ms ({res['summary_10M']['events']:.0f} events)",
            "",
            "<= 20 ms",
        ),
    ]
    print("| measurement | result | ratio | target |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
