"""A trainer fed through a queue whose feeder may die: ``dead_feeder_run.py MODE``.

- ``thread``: a thread named ``producer`` makes an item every 20 ms and dies with a
  ValueError on its 25th; the trainer works 10 ms on each item and gives up after
  waiting 1.5 s for the next (``queue.Empty``);
- ``process``: the same producer in a ``multiprocessing`` process (fork) named
  ``producer``, through a ``multiprocessing.Queue``;
- ``first``: the ``process`` producer, dying on its first item (before it puts any):
  the trainer never steps;
- ``backlog``: the ``thread`` producer makes an item every 1 ms and dies on its 41st,
  leaving about 40 in the queue; the trainer works 30 ms on each (about 1.2 s in all)
  before it starts waiting;
- ``helper``: the producer makes 60 items and then a ``None`` (the end); a thread named
  ``reporter`` that feeds nothing dies with a KeyError after 0.3 s. The trainer's pace
  never changes: the reporter was not its feeder.

Prints ``trainer got N items`` at the end.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import threading
import time


def make_item(i: int) -> int:
    mode = sys.argv[1]
    time.sleep(0.001 if mode == "backlog" else 0.02)  # the sampler's work
    die_at = {"first": 0, "backlog": 40}.get(mode, 24)
    if i == die_at and mode != "helper":
        raise ValueError(f"item {i} came out malformed")
    return i


def produce(q, n: int) -> None:  # noqa: ANN001 - queue.Queue or multiprocessing.Queue
    for i in range(n):
        q.put(make_item(i))
    q.put(None)


def report_progress() -> None:
    time.sleep(0.3)
    settings: dict[str, str] = {}
    print("progress to", settings["endpoint"])  # KeyError


def train_on(item: int) -> None:
    end = time.perf_counter() + (0.03 if sys.argv[1] == "backlog" else 0.01)
    while time.perf_counter() < end:  # the trainer's compute
        pass


def main() -> None:
    mode = sys.argv[1]
    n = 60
    if mode in ("process", "first"):
        q = mp.get_context("fork").Queue()
        feeder = mp.get_context("fork").Process(target=produce, args=(q, n), name="producer")
    else:
        q = queue.Queue()
        feeder = threading.Thread(target=produce, args=(q, n), name="producer", daemon=True)
    feeder.start()
    if mode == "helper":
        threading.Thread(target=report_progress, name="reporter", daemon=True).start()
    got = 0
    while True:
        try:
            item = q.get(timeout=1.5)
        except queue.Empty:
            print("no item for 1.5 s: giving up", flush=True)
            break
        if item is None:
            break
        train_on(item)
        got += 1
    print(f"trainer got {got} items", flush=True)
    if mode in ("process", "first"):
        feeder.join()


if __name__ == "__main__":
    main()
