"""Instructions per Recorder call, counted by valgrind: a load-independent hot-path check.

    python benchmarks/instructions_core.py            # needs valgrind on PATH
    python benchmarks/instructions_core.py --calls 50000

Wall-clock timings on a shared machine move by tens of percent between runs;
instruction counts do not. Each write-path call (``lap``, ``begin``, ``record``,
``with timer``) runs ``--calls`` times in a child process under callgrind, which
counts only inside the recorder's Python-visible methods (and what they call:
the clock read, window closing). Compare two trees by running this script
with each on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

_CHILD = """
import itertools, sys
from gyreprof._core import Recorder
op, n = sys.argv[1], int(sys.argv[2])
r = Recorder(3, window_steps=100)
rep = itertools.repeat
if op == "lap":
    f = r.lap
    r.begin()
    for _ in rep(None, n): f(0)
elif op == "begin":
    f = r.begin
    for _ in rep(None, n): f()
elif op == "record":
    f = r.record
    for _ in rep(None, n): f(2, 1000)
elif op == "with":
    t = r.timer(1)
    for _ in rep(None, n):
        with t: pass
elif op == "step":
    f, b = r.lap, r.begin
    for _ in rep(None, n):
        b(); f(0); f(1); f(2)
"""
# "step" is counted per step (begin + 3 laps, a window closing every 100 steps): the one
# figure that holds every piece of bookkeeping whichever call it happens in
OPS = ("lap", "begin", "record", "with", "step")


def count(op: str, calls: int) -> float:
    """Instructions per call of ``op`` inside the recorder's methods."""
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--toggle-collect=__pyx_pw_8gyreprof_5_core_8recorder_*",
        sys.executable,
        "-c",
        _CHILD,
        op,
        str(calls),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    m = re.search(r"Collected\s*:\s*(\d+)", out)
    if m is None:
        raise RuntimeError(f"callgrind gave no count for {op}:\n{out[-2000:]}")
    return int(m.group(1)) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000, help="calls per operation")
    args = ap.parse_args()
    if args.calls < 1:
        ap.error("--calls must be a positive number")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed; this benchmark counts instructions with it")
    print("| call | instructions per call |")
    print("|---|---|")
    for op in OPS:
        print(f"| {op} | {count(op, args.calls):.1f} |")


if __name__ == "__main__":
    main()
