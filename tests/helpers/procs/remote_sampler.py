"""A sampler in its own process, profiled there; saves its raw events (argv[2]) at the end.

- ``overlapped``: produces argv[3] items, one line on stdout about every 10 ms of
  work, without waiting for anyone (the pipe is the queue);
- ``sync``: answers each request line on stdin with one item after about 20 ms of
  work, and stops when stdin closes (a rollout worker the trainer calls and waits on).
"""

from __future__ import annotations

import sys
import time

import gyreprof as gp

mode, path = sys.argv[1], sys.argv[2]
prof = gp.Profiler(["env", "put"])


def produce(work_s: float, i: int) -> None:
    prof.begin()
    with prof.phase("env"):
        time.sleep(work_s)
    with prof.phase("put"):
        sys.stdout.write(f"item {i}\n")
        sys.stdout.flush()


if mode == "overlapped":
    for i in range(int(sys.argv[3])):
        produce(0.010, i)
else:
    for i, _request in enumerate(sys.stdin):
        produce(0.020, i)
        prof.end()  # the step is over; waiting for the next request is not sampler work
prof.end()
gp.export.save_events(prof, path)
