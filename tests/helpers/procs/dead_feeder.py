"""A main thread that waits for good on what should feed it, which died:
``dead_feeder.py MODE``.

- ``thread``: a thread named ``producer`` puts items on a ``queue.Queue`` and dies with
  a ValueError on the third; the main thread waits in ``q.get()``;
- ``child``: a worker process that should write results to a pipe dies with a
  JSONDecodeError; the parent, which kept the pipe's write end open (the usual bug),
  waits reading the pipe and never reaps the worker (a zombie);
- ``worker``: the worker of ``child`` (argv[2]: the pipe's write descriptor).

Prints ``ready`` once the feeder is dead.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time


def produce(q: queue.Queue[int]) -> None:
    for text in ("1", "2", "three"):
        q.put(int(text))  # ValueError on "three"


def main() -> None:
    mode = sys.argv[1]
    if mode == "worker":
        fd = int(sys.argv[2])
        result = json.loads("")  # nothing came: JSONDecodeError
        os.write(fd, json.dumps(result).encode())
        return
    if mode == "thread":
        q: queue.Queue[int] = queue.Queue()
        t = threading.Thread(target=produce, args=(q,), name="producer")
        t.start()
        t.join()
        q.get()
        q.get()
        print("ready", flush=True)
        q.get()
    if mode == "child":
        r, w = os.pipe()
        worker = subprocess.Popen([sys.executable, __file__, "worker", str(w)], pass_fds=(w,))
        while worker.poll() is None:  # poll() reaps it once; a zombie is wanted: wait by pid
            time.sleep(0.01)
            break
        while True:
            try:
                os.kill(worker.pid, 0)
                if open(f"/proc/{worker.pid}/stat").read().rpartition(")")[2].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.01)
        print("ready", flush=True)
        os.read(r, 1)  # the write end is still open here: waits for good


main()
