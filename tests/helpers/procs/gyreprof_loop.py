"""A gyreprof-instrumented loop for the doctor and watchdog tests.

usage: gyreprof_loop.py MODE STEP_FILE [DUMP_FILE]

MODE ``progress``: steps every 20 ms; ``retry``: two steps, then only counts retries
(every 20 ms) without completing a step; ``phases``: two steps, then one step that
never ends while its phases keep turning (a lap every 20 ms); ``stall``: runs under ``prof.watchdog(0.3,
dump_to=DUMP_FILE)``, stalls 1.5 s inside phase 'xfer' of step 5, then finishes.
The step counter is written to STEP_FILE after each step.  The profiler publishes a
live segment when gyreprof.live is available.
"""

from __future__ import annotations

import os
import sys
import time

import gyreprof as gp

mode, step_file = sys.argv[1], sys.argv[2]
dump_file = sys.argv[3] if len(sys.argv) > 3 else None
try:
    prof = gp.Profiler(["env", "fwd", "xfer"], live=True)
    live = 1
except (ImportError, AttributeError):  # gyreprof.live not available in this build
    prof = gp.Profiler(["env", "fwd", "xfer"])
    live = 0
ENV, FWD, XFER = prof.ids("env", "fwd", "xfer")


def write_step(n: int) -> None:
    tmp = f"{step_file}.tmp"
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(str(n))
    os.replace(tmp, step_file)


def step(i: int, xfer_s: float = 0.0) -> None:
    prof.begin()
    time.sleep(0.01)
    prof.lap(ENV)
    time.sleep(0.005)
    prof.lap(FWD)
    time.sleep(0.005 + xfer_s)
    prof.lap(XFER)
    prof.end()
    write_step(i + 1)


print(f"ready live={live}", flush=True)
if mode == "progress":
    i = 0
    while True:
        step(i)
        i += 1
elif mode == "retry":
    step(0)
    step(1)
    prof.begin()
    prof.lap(ENV)
    while True:  # the request in 'fwd' never succeeds: retry forever
        prof.count("retry")
        time.sleep(0.02)
elif mode == "phases":
    step(0)
    step(1)
    prof.begin()
    while True:  # a step longer than any interval: only its phase boundaries move
        for phase in (ENV, FWD, XFER):
            time.sleep(0.02)
            prof.lap(phase)
elif mode == "stall":
    with prof.watchdog(0.3, dump_to=dump_file):
        for i in range(8):
            step(i, xfer_s=1.5 if i == 4 else 0.0)
    print("done", flush=True)
else:
    raise SystemExit(f"unknown mode {mode!r}")
