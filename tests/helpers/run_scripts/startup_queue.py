"""A queue-fed trainer whose producer starts late: ``startup_queue.py START_S N WORK_S
[STALL_EVERY STALL_S]``.

A producer thread sleeps START_S (its start-up: a model loaded, workers started), then
puts N items on a ``queue.Queue`` at once, sleeping STALL_S before every STALL_EVERY-th
of them (a stall that comes back). The main thread, torch-free, does
``item = q.get(); work(item)`` with WORK_S of sleep per item. The script's clock around
each get and each item's work is printed as ``CLOCK {"first_wait_s", "wait_s",
"work_s", "items"}`` (``wait_s`` without the first get); ``READY`` once the 11th item is
taken: the trainer's first ten steps are then complete (a step ends where the next wait
begins), however soon a test that waits for it kills the loop.
"""

import json
import queue
import sys
import threading
import time


def producer(q, start_s, n, stall_every, stall_s):
    time.sleep(start_s)
    for i in range(n):
        if stall_every and i and i % stall_every == 0:
            time.sleep(stall_s)
        q.put(i)
    q.put(None)


def main():
    start_s, n, work_s = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    stall_every = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    stall_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    q = queue.Queue()
    threading.Thread(target=producer, args=(q, start_s, n, stall_every, stall_s)).start()
    waits, work, items = [], 0.0, 0
    while True:
        t0 = time.perf_counter()
        item = q.get()
        t1 = time.perf_counter()
        if items == 10:
            print("READY", flush=True)  # for a test that kills the loop while it runs
        if item is None:
            break
        waits.append(t1 - t0)
        time.sleep(work_s)
        work += time.perf_counter() - t1
        items += 1
    clock = {"first_wait_s": waits[0], "wait_s": sum(waits[1:]), "work_s": work, "items": items}
    print("CLOCK " + json.dumps(clock), flush=True)


if __name__ == "__main__":
    main()
