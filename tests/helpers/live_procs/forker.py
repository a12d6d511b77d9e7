"""Fork safety of live segments, driven line by line from tests/test_live.py.

The parent publishes profiler "parent" and records 100 steps, then
- forks a child with os.fork: the child records 1000 more steps on its copy of
  the profiler, then calls ``prof.live.reopen()`` and prints
  ``child PID PATH ACTIVE_AFTER_FORK``; it exits (normally) when its stdin pipe
  from the parent closes;
- starts a multiprocessing child (fork start method) that records 10 steps on
  the inherited profiler, then publishes a new profiler "mp" with 50 steps and
  prints ``mp PID PATH``; it exits when the parent sets an event.
The parent prints ``parent PID PATH`` first; on stdin line ``release-mp`` it
releases and joins the multiprocessing child and prints ``mp-joined``; on
``quit`` it ends the os.fork child, waits for it and exits normally.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys

import gyreprof as gp


def steps(prof: gp.Profiler, n: int) -> None:
    (a,) = prof.ids("a")
    for _ in range(n):
        prof.begin()
        prof.lap(a)
    prof.end()


def mp_child(prof: gp.Profiler, release: mp.synchronize.Event) -> None:
    steps(prof, 10)  # the inherited copy: must not reach the parent's segment
    own = gp.Profiler(["m"], live="mp")
    (m,) = own.ids("m")
    for _ in range(50):
        own.begin()
        own.lap(m)
    own.end()
    print(f"mp {os.getpid()} {own.live.path}", flush=True)
    release.wait(30)


def main() -> None:
    prof = gp.Profiler(["a"], live="parent")
    steps(prof, 100)
    print(f"parent {os.getpid()} {prof.live.path}", flush=True)

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        active_after_fork = prof.live.active
        steps(prof, 1000)
        path = prof.live.reopen()
        print(f"child {os.getpid()} {path} {active_after_fork}", flush=True)
        os.read(r, 1)  # until the parent closes its end
        sys.exit(0)
    os.close(r)

    ctx = mp.get_context("fork")
    release = ctx.Event()
    proc = ctx.Process(target=mp_child, args=(prof, release))
    proc.start()
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "release-mp":
            release.set()
            proc.join(30)
            print(f"mp-joined {proc.exitcode}", flush=True)
        elif cmd == "quit":
            break
    os.close(w)
    os.waitpid(pid, 0)
    steps(prof, 1)


if __name__ == "__main__":
    main()
