"""A rollout client that runs until it is killed: ``http_killed.py URL N``.

Sends chat completions (httpx) to URL without end; after the first N prints
``READY <pid> <run folder>`` (the folder ``gyreprof run`` gave it), then goes on.
It never saves anything itself: the test kills it with SIGKILL.
"""

from __future__ import annotations

import os
import sys

import httpx

url, n = sys.argv[1], int(sys.argv[2])
with httpx.Client(base_url=url) as client:
    for _ in range(n):
        client.post("/v1/chat/completions", json={"max_tokens": 2})
    print("READY", os.getpid(), os.environ.get("GYREPROF_RUN_DIR", ""), flush=True)
    while True:
        client.post("/v1/chat/completions", json={"max_tokens": 2, "test_delay_ms": 2})
