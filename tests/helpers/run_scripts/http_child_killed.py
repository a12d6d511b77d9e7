"""A rollout client in a child process that is killed: ``http_child_killed.py URL N``.

The child (multiprocessing, fork) sends chat completions (httpx) to URL without end.
The parent waits until the child's flushed rollout record (in the folder
``gyreprof run`` gave the run) holds at least N requests, then kills the child with
SIGKILL while it is sending more, and prints ``KILLED <pid> <flushed>``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from pathlib import Path

import httpx

from gyreprof.integrations._auto import rollout_record


def client(url: str) -> None:
    with httpx.Client(base_url=url) as c:
        while True:
            c.post("/v1/chat/completions", json={"max_tokens": 2, "test_delay_ms": 2})


def flushed(path: Path) -> int:
    try:
        record = rollout_record.read(path)
    except (OSError, ValueError):
        return -1
    return len(record.spans) + sum(t.requests for t in record.folded.values())


if __name__ == "__main__":
    url, n = sys.argv[1], int(sys.argv[2])
    child = mp.get_context("fork").Process(target=client, args=(url,))
    child.start()
    assert child.pid is not None
    part = rollout_record.part_path(Path(os.environ["GYREPROF_RUN_DIR"]), child.pid)
    deadline = time.monotonic() + 120
    while flushed(part) < n:  # the condition, polled: a flush with the first N requests
        assert time.monotonic() < deadline, "the child never flushed its first requests"
        time.sleep(0.05)
    seen = flushed(part)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    print("KILLED", child.pid, seen, flush=True)
