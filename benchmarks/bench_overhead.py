"""Is ``overhead_share`` honest? The profiler's own estimate against the measured slowdown.

    python benchmarks/bench_overhead.py            # full run (about a minute)
    python benchmarks/bench_overhead.py --quick    # smoke run (seconds)
    python benchmarks/bench_overhead.py --json out.json

Two real loops (the unwrapped gymnasium ``CartPole-v1`` with a linear policy, and
a batched numpy step: a linearised CartPole for 64 envs) run in three forms:

* ``bare``: no timing;
* ``lap``: ``begin()`` then three laps (``lap = prof.lap``, int ids);
* ``with``: ``begin()`` then three pre-made timers (``with t_env: ...``).

The forms run interleaved (a fresh random order every round, the garbage
collector off); each form's time per step is the lower quartile of its runs
(the least-disturbed ones). The *measured* share of wall time the profiler took
is ``(t_form - t_bare) / t_form``. The profiler's *own* figure is
``Summary.overhead_share`` of separate runs of the same form (the profiler reset
before each, the run at the lower quartile of run time kept, as for the
measurement): each event priced at the calibrated cost of the form that
recorded it. Reported: both, and their ratio (own / measured;
1.0 is exact, the target is within a factor of 1.5 either way).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import gyreprof as gp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loops import CartPoleLoop, NumpyLoop  # noqa: E402

FORMS = ("bare", "lap", "with")
Loop = Callable[[], None]
PHASES = ["env", "fwd", "xfer"]


def _loops(kind: str, steps: int) -> tuple[dict[str, Loop], dict[str, gp.Profiler]]:
    """The loop of ``kind`` in each form, and the profiler each timed form writes to."""
    profs = {f: gp.Profiler(PHASES, capacity=1 << 16) for f in FORMS[1:]}
    lp = profs["lap"]
    lap, lbegin = lp.lap, lp.begin
    ENV, FWD, XFER = lp.ids(*PHASES)
    wp = profs["with"]
    wbegin = wp.begin
    env_t, fwd_t, xfer_t = (wp.phase(n) for n in PHASES)
    loop = CartPoleLoop(steps) if kind == "cartpole" else NumpyLoop(steps)
    assert (ENV, FWD, XFER) == (0, 1, 2)  # the shared loops lap 0, 1, 2
    return {
        "bare": loop.bare_loop(),
        "lap": loop.step_loop(lbegin, lap),
        "with": loop.with_loop((env_t, fwd_t, xfer_t), wbegin),
    }, profs


def _interleaved(loops: dict[str, Loop], steps: int, rounds: int) -> np.ndarray:
    """ns per step, (rounds, len(FORMS)); every round runs each form once, shuffled."""
    rng = np.random.default_rng(0)
    fns = [loops[f] for f in FORMS]
    out = np.empty((rounds, len(FORMS)))
    pc = time.perf_counter_ns
    for fn in fns:
        fn()
    for r in range(rounds):
        for i in rng.permutation(len(fns)):
            t0 = pc()
            fns[i]()
            out[r, i] = (pc() - t0) / steps
    return out


def _own_share(loop: Loop, prof: gp.Profiler, reps: int) -> float:
    """``overhead_share`` of the least-disturbed of ``reps`` single runs.

    ``overhead_share`` is a share of wall time, and on a loaded machine wall time
    includes the time the process waited for a core; the measured slowdown is
    taken from the least-disturbed runs, so the profiler's figure is too: each run
    on a fresh (reset) profiler, the share of the run at the lower quartile of
    run time.
    """
    shares = []
    for _ in range(reps):
        prof.reset()
        loop()
        prof.end()
        s = prof.summary()
        shares.append((s.steps / s.steps_per_s if s.steps_per_s else 0.0, s.overhead_share))
    shares.sort()
    return float(shares[len(shares) // 4][1])


def bench(kind: str, steps: int, rounds: int, reps: int, n_boot: int = 1000) -> dict[str, Any]:
    loops, profs = _loops(kind, steps)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        t = _interleaved(loops, steps, rounds)
        own = {f: _own_share(loops[f], profs[f], reps) for f in FORMS[1:]}
    finally:
        if was:
            gc.enable()
    q = {f: float(np.quantile(t[:, i], 0.25)) for i, f in enumerate(FORMS)}
    boot = np.random.default_rng(1)
    res: dict[str, Any] = {"loop": kind, "steps": steps, "rounds": rounds, "bare_ns": q["bare"]}
    for i, f in enumerate(FORMS[1:], start=1):
        measured = (q[f] - q["bare"]) / q[f]
        bs = []
        for _ in range(n_boot):
            idx = boot.integers(0, rounds, rounds)
            qb, qf = np.quantile(t[idx, 0], 0.25), np.quantile(t[idx, i], 0.25)
            bs.append((qf - qb) / qf)
        lo, hi = np.quantile(bs, [0.025, 0.975])
        res[f] = {
            "step_ns": q[f],
            "measured_share": measured,
            "measured_ci": (float(lo), float(hi)),
            "overhead_share": own[f],
            "ratio": own[f] / measured if measured > 0 else float("inf"),
            "form_cost_ns": dict(profs[f].form_cost_ns),
        }
    return res


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        "| loop | form | bare us/step | measured share [95% CI] | overhead_share | "
        "own / measured (target 0.67..1.5) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        for f in FORMS[1:]:
            m = r[f]
            lo, hi = m["measured_ci"]
            lines.append(
                f"| {r['loop']} | {f} | {r['bare_ns'] / 1e3:.2f} | {100 * m['measured_share']:.2f}% "
                f"[{100 * lo:.2f}, {100 * hi:.2f}] | {100 * m['overhead_share']:.2f}% | "
                f"{m['ratio']:.2f} |"
            )
    costs = results[0]["lap"]["form_cost_ns"]
    lines.append("")
    lines.append("calibrated ns per event: " + ", ".join(f"{k} {v:.0f}" for k, v in costs.items()))
    return "\n".join(lines)


def run_all(quick: bool, tiny: bool = False) -> list[dict[str, Any]]:
    if tiny:
        steps, rounds, reps, nb = 100, 9, 9, 100
    elif quick:
        steps, rounds, reps, nb = 200, 101, 41, 500
    else:
        steps, rounds, reps, nb = 200, 801, 201, 1000
    return [bench(k, steps, rounds, reps, nb) for k in ("cartpole", "numpy")]


def test_overhead_sanity() -> None:
    """pytest quick mode: the estimate is in a wide band around the measured slowdown."""
    res = run_all(quick=False, tiny=True)
    for r in res:
        for f in FORMS[1:]:
            m = r[f]
            assert 0 < m["overhead_share"] < 0.5, m
            lo, hi = m["measured_ci"]
            # tiny runs on a loaded machine: the ratio is checked only where the measured
            # slowdown is told apart from noise (its interval excludes zero) and the
            # estimate lies outside that interval by more than the band allows
            if lo > 0.01:
                est = m["overhead_share"]
                assert lo / 4.0 <= est <= hi * 4.0, (r["loop"], f, m)
    text = report(res)  # every loop's every form, with its own figures
    for r in res:
        for f in FORMS[1:]:
            assert f"| {r['loop']} | {f} |" in text and f"{r[f]['ratio']:.2f} |" in text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=textwrap.dedent(__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers as JSON")
    a = ap.parse_args(argv)
    t0 = time.time()
    res = run_all(a.quick)
    print(report(res))
    print(f"(load average at end {os.getloadavg()}, {time.time() - t0:.1f} s)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
