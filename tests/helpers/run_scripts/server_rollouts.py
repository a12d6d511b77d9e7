"""A rollout client run under ``gyreprof run``: ``server_rollouts.py URL ROUNDS AT_ONCE
MAX_TOKENS``: ROUNDS rounds of AT_ONCE completions sent together from a thread pool
(httpx), as a trainer collecting a batch does. Prints ``requests N`` at the end."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import httpx

url, rounds, at_once, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
client = httpx.Client(base_url=url, timeout=60)
n = 0


def one(i: int) -> int:
    r = client.post("/v1/completions", json={"prompt": "a b c", "max_tokens": tokens})
    return int(r.json()["usage"]["completion_tokens"])


with ThreadPoolExecutor(at_once) as pool:
    for _ in range(rounds):
        assert sum(pool.map(one, range(at_once))) == tokens * at_once
        n += at_once
print("requests", n, flush=True)
