"""A trainer fed by a rollout service: ``rollout_trainer.py URL MODE STEPS DELAY_MS UPDATE_MS``.

Each training step asks the local server for completions, answered after
``DELAY_MS`` (the server's ``x-test-delay-ms``), then runs Adam steps on a small
torch model for ``UPDATE_MS``. ``MODE``: ``seq`` (two openai-SDK calls one after
the other, on the training thread) or ``pool`` (4 httpx requests from a thread
pool, the training thread waiting on their futures). Prints one JSON line with
the script's own clock: the share of the loop spent waiting on rollouts.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import torch

url, mode, steps, delay_ms, update_ms = (
    sys.argv[1],
    sys.argv[2],
    int(sys.argv[3]),
    float(sys.argv[4]),
    float(sys.argv[5]),
)
headers = {"x-test-delay-ms": str(delay_ms)}
sdk = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
client = httpx.Client(base_url=url)
# one intra-op thread: on a loaded machine two OpenMP threads wait at every op's barrier
# for a descheduled partner, and a 10 ms update ran 130 ms
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(256, 64)


def one(i: int) -> int:
    r = client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "a b"}], "max_tokens": 4},
        headers=headers,
    )
    return int(r.json()["usage"]["completion_tokens"])


def generate(pool: ThreadPoolExecutor) -> int:
    if mode == "seq":
        tokens = 0
        for _ in range(2):
            out = sdk.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "x"}],
                extra_headers=headers,
            )
            tokens += out.usage.completion_tokens if out.usage else 0
        return tokens
    return sum(f.result() for f in [pool.submit(one, i) for i in range(4)])


def update() -> None:
    end = time.perf_counter() + update_ms / 1000.0
    while time.perf_counter() < end:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


gen_s = total_s = 0.0
with ThreadPoolExecutor(4) as pool:
    generate(pool)  # warm-up: connections, the pool's threads
    update()
    for _ in range(steps):
        t0 = time.perf_counter()
        generate(pool)
        t1 = time.perf_counter()
        update()
        t2 = time.perf_counter()
        gen_s += t1 - t0
        total_s += t2 - t0
print(json.dumps({"wait_ratio": gen_s / total_s, "steps": steps}), flush=True)
