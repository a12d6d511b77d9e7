"""A rollout client run under ``gyreprof run``: ``http_rollouts.py URL BATCHES``.

Each batch: 8 chat completions sent together from a thread pool (httpx), answered
after 60 ms, the 8th after 400 ms (the server's ``x-test-delay-ms``), then one
openai-SDK call and one ``requests`` call. Prints ``requests N`` at the end.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import requests

url, batches = sys.argv[1], int(sys.argv[2])
client = httpx.Client(base_url=url)
sdk = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
n = 0


def one(i: int) -> int:
    delay = 400 if i == 7 else 60
    r = client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "a b"}], "max_tokens": 4},
        headers={"x-test-delay-ms": str(delay)},
    )
    return int(r.json()["usage"]["completion_tokens"])


with ThreadPoolExecutor(8) as pool:
    for _ in range(batches):
        assert sum(pool.map(one, range(8))) == 32
        n += 8
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        requests.post(url + "/v1/completions", json={"prompt": "p q r", "max_tokens": 2})
        n += 2
print("requests", n, flush=True)
