"""A per_thread live profiler in a real process, for tests/test_live_threads.py.

argv: N_THREADS STEPS_PER_THREAD FINISHED_THREADS. Starts FINISHED_THREADS
threads that record STEPS_PER_THREAD steps and end (enough of them to be
folded into the retired segment), then N_THREADS threads that record
STEPS_PER_THREAD steps each and then keep their phase "b" open forever.
Prints "ready PID" once every step is recorded, then sleeps until killed.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

import gyreprof as gp

n_threads, steps, finished = (int(x) for x in sys.argv[1:4])
prof = gp.Profiler(["a", "b"], per_thread=True, live="threaded")
done = threading.Semaphore(0)


def work(hold: bool) -> None:
    for _ in range(steps):
        prof.begin()
        prof.lap(0)
        prof.lap(1)
        prof.end()
    prof.count("items", 1)
    if hold:
        done.release()
        prof.begin()
        prof.lap(0)
        while True:  # holds its step open until the test kills the process
            time.sleep(1)


for _ in range(finished):
    t = threading.Thread(target=work, args=(False,))
    t.start()
    t.join()
gc.collect()
prof.snapshot()  # folds the finished threads (the retired segment is written now)
for _ in range(n_threads):
    threading.Thread(target=work, args=(True,), daemon=True).start()
for _ in range(n_threads):
    done.acquire()
print("ready", os.getpid(), flush=True)
while True:  # stays alive until the test kills it
    time.sleep(1)
