"""A live-publishing writer for tests/test_live.py.

usage: writer.py MODE [SECONDS]

``fullrate``: laps through phases a, b, c in a tight loop (no sleeping), counting
``retry`` every 64 steps, for SECONDS (default 30) or until killed.
``paced``: one step every ~2 ms (env 1 ms sleep, fwd and xfer short), for SECONDS.
Prints ``ready PID PATH`` once the segment exists and the first steps are in it;
exits normally (removing its segment) when the time is up.
"""

from __future__ import annotations

import os
import sys
import time

import gyreprof as gp

mode = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
deadline = time.monotonic() + seconds

if mode == "fullrate":
    prof = gp.Profiler(["a", "b", "c"], live="fullrate", window_steps=200)
    A, B, C = prof.ids("a", "b", "c")
    lap, begin = prof.lap, prof.begin
    for _ in range(1000):
        begin()
        lap(A)
        lap(B)
        lap(C)
    print(f"ready {os.getpid()} {prof.live.path}", flush=True)
    n = 0
    while time.monotonic() < deadline:
        for _ in range(2000):
            begin()
            lap(A)
            sum(range(n & 15))
            lap(B)
            lap(C)
            n += 1
            if n % 64 == 0:
                prof.count("retry")
elif mode == "paced":
    prof = gp.Profiler(["env", "fwd", "xfer"], live="paced")
    ENV, FWD, XFER = prof.ids("env", "fwd", "xfer")
    started = False
    while time.monotonic() < deadline:
        prof.begin()
        time.sleep(0.001)
        prof.lap(ENV)
        prof.lap(FWD)
        prof.lap(XFER)
        prof.count("steps_seen")
        if not started:
            print(f"ready {os.getpid()} {prof.live.path}", flush=True)
            started = True
else:
    raise SystemExit(f"unknown mode {mode!r}")
