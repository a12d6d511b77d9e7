"""How far ``clock="tsc"`` durations drift from CLOCK_MONOTONIC over a long run.

Two recorders on the TSC are created at the start (both from the process's one
20 ms calibration): ``checked`` runs its drift check (``Recorder.check_clock``)
at every sample, as a recorder does at window closes; ``unchecked`` never does.
Every ``--every`` seconds the script reads CLOCK_MONOTONIC and both recorders'
clocks back to back and reports, per sample and over the whole run:

* the error of the elapsed time since the start, in ppm of the elapsed time
  (what a long duration measured on the TSC would be off by);
* the error of the last interval alone;
* the error of a short duration (a 1 ms sleep timed on both clocks at once);
* the recorder's own drift-check counters (checks, recalibrations, fallbacks,
  last error in ppm).

The issue's bar: durations agree within 0.01% (100 ppm) over a 10-minute run.

    python benchmarks/bench_tsc_drift.py                    # 600 s, a sample every 10 s
    python benchmarks/bench_tsc_drift.py --seconds 30 --every 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from gyreprof._core.recorder import Recorder, monotonic_ns, tsc_invariant


def _read(rec: Recorder) -> tuple[int, int, int]:
    """(mono before, recorder clock, mono after): the recorder's reading lies between."""
    m0 = monotonic_ns()
    t = rec.now_ns()
    m1 = monotonic_ns()
    return m0, t, m1


def _short_error_ppm(rec: Recorder, sleep_s: float = 0.001) -> float:
    a0, t0, b0 = _read(rec)
    time.sleep(sleep_s)
    a1, t1, b1 = _read(rec)
    mono = ((a1 + b1) / 2) - ((a0 + b0) / 2)
    return ((t1 - t0) - mono) / mono * 1e6


def run(seconds: float, every: float) -> dict[str, Any]:
    if not tsc_invariant():
        return {"skipped": "this CPU has no invariant TSC"}
    checked = Recorder(1, capacity=16, clock="tsc")
    unchecked = Recorder(1, capacity=16, clock="tsc")
    starts = {name: _read(rec) for name, rec in (("checked", checked), ("unchecked", unchecked))}
    prev = dict(starts)
    samples: list[dict[str, Any]] = []
    t_end = time.monotonic() + seconds
    while True:
        left = t_end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(every, left))
        checked.check_clock(min_span_s=min(1.0, every / 2))
        row: dict[str, Any] = {}
        for name, rec in (("checked", checked), ("unchecked", unchecked)):
            m0, t, m1 = _read(rec)
            s0, ts, s1 = starts[name]
            p0, tp, p1 = prev[name]
            mono_total = (m0 + m1) / 2 - (s0 + s1) / 2
            mono_last = (m0 + m1) / 2 - (p0 + p1) / 2
            row[name] = {
                "elapsed_s": round(mono_total / 1e9, 3),
                "total_error_ppm": round(((t - ts) - mono_total) / mono_total * 1e6, 3),
                "interval_error_ppm": round(((t - tp) - mono_last) / mono_last * 1e6, 3),
                "short_1ms_error_ppm": round(_short_error_ppm(rec), 1),
                "read_uncertainty_ppm": round(((m1 - m0) + (s1 - s0)) / mono_total * 1e6, 4),
            }
            prev[name] = (m0, t, m1)
        row["checked"]["health"] = checked.clock_health()
        samples.append(row)
        c, u = row["checked"], row["unchecked"]
        print(
            f"{c['elapsed_s']:8.1f} s  total error: checked {c['total_error_ppm']:+8.3f} ppm"
            f"  unchecked {u['total_error_ppm']:+8.3f} ppm  | last interval: checked"
            f" {c['interval_error_ppm']:+8.3f}  unchecked {u['interval_error_ppm']:+8.3f}"
            f"  | recal {c['health']['recalibrations']} fallbacks {c['health']['fallbacks']}",
            flush=True,
        )
    worst = {
        name: max((abs(r[name]["total_error_ppm"]) for r in samples), default=0.0)
        for name in ("checked", "unchecked")
    }
    worst_interval = {
        name: max((abs(r[name]["interval_error_ppm"]) for r in samples), default=0.0)
        for name in ("checked", "unchecked")
    }
    return {
        "seconds": seconds,
        "every": every,
        "samples": samples,
        "worst_total_error_ppm": worst,
        "worst_interval_error_ppm": worst_interval,
        "final_health": checked.clock_health(),
        "bar_ppm": 100.0,
        "met": all(v <= 100.0 for v in worst.values()),
        "load_average_end": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="length of the run (600)")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples (10)")
    ap.add_argument("--json", help="write the samples and summary here")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.every <= 0:
        ap.error("--seconds and --every must be > 0")
    out = run(args.seconds, args.every)
    if "skipped" in out:
        print(out["skipped"])
        return 0
    print(
        f"worst total error over {args.seconds:.0f} s: checked "
        f"{out['worst_total_error_ppm']['checked']:.3f} ppm, unchecked "
        f"{out['worst_total_error_ppm']['unchecked']:.3f} ppm (bar: 100 ppm = 0.01%); "
        f"worst {args.every:g} s interval: checked "
        f"{out['worst_interval_error_ppm']['checked']:.3f}, unchecked "
        f"{out['worst_interval_error_ppm']['unchecked']:.3f} ppm"
    )
    print(f"drift checks: {out['final_health']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
