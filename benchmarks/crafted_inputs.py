"""Cost of the crafted inputs from issue 14: peak RSS, wall time and outcome per case.

    PYTHONPATH=src python benchmarks/crafted_inputs.py [--vm-limit-gb 8]

Each case runs in its own interpreter under an address-space limit (so a reader
without caps fails with MemoryError instead of taking the machine), and prints
one line: its wall time, the input size, the child's peak RSS and what happened.
Point PYTHONPATH at another checkout to compare trees.
"""

from __future__ import annotations

import argparse
import base64
import resource
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

CASES = ("snapshot-merge:30", "snapshot-merge:255", "hdr-log", "profiler", "report-dev-zero")


# one builder for the adversarial tests and this benchmark
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.crafted import crafted_snapshot  # noqa: E402


def huge_histogram_b64() -> str:
    """An HdrHistogram V2 histogram declaring 6.2 M buckets (sf=5, highest 2**63-1), empty."""
    head = struct.pack(">IIiiqqd", 0x1C849313, 0, 0, 5, 1, 2**63 - 1, 1.0)
    comp = zlib.compress(head)
    return base64.b64encode(struct.pack(">II", 0x1C849314, len(comp)) + comp).decode()


def run_case(case: str) -> str:
    import gyreprof as gp

    size = 0
    try:
        if case.startswith("snapshot-merge:"):
            blob = crafted_snapshot(int(case.split(":")[1]), 5, 2**63 - 1)
            size = len(blob)
            snap = gp.Snapshot.from_bytes(blob)
            out = f"accepted; merge -> {gp.merge([snap, snap]).counts.shape}"
        elif case == "hdr-log":
            from gyreprof.export.hdrlog import parse_hdr_log

            b64 = huge_histogram_b64()
            text = "".join(f"Tag=a,{i}.0,1.0,0.0,{b64}\n" for i in range(200))
            size = len(text)
            out = f"accepted {len(parse_hdr_log(text))} intervals"
        elif case == "profiler":
            gp.Profiler([f"p{i}" for i in range(255)], significant_figures=5)
            out = "accepted"
        elif case == "report-dev-zero":
            from gyreprof.export._source import load_file

            load_file("/dev/zero")
            out = "accepted"
        else:
            raise SystemExit(f"unknown case {case!r}; one of {CASES}")
    except Exception as exc:  # noqa: BLE001 - the point is to report whatever it raised
        out = f"{type(exc).__name__}: {str(exc)[:110]}"
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return f"input={size:6d} B  peak_rss={rss_mb:6.0f} MB  -> {out}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vm-limit-gb", type=float, default=8.0)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        limit = int(args.vm_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        print(run_case(args.case), flush=True)
        return
    for case in CASES:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--case", case, "--vm-limit-gb", str(args.vm_limit_gb)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wall = time.perf_counter() - t0
        line = (proc.stdout.strip() or proc.stderr.strip()[-200:]).splitlines()[-1:]
        print(f"{case:20s} wall={wall:5.1f} s  {''.join(line)}")


if __name__ == "__main__":
    main()
