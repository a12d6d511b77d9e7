"""A Ray job that joins a cluster started before it (``ray.init(address=...)``): one
CartPole runner actor pinned to each node by a custom resource, a driver that trains a
small torch model on what they return. Prints ``STACK_JSON {...}``: the script's own
figures (env steps it asked for, its clock of the waits, each actor's pid and node).

``python ray_cluster_job.py ADDRESS MODE ITERS [STEPS]``; MODE:

- ``sync``: submit, ``ray.get``, update (the runners work only while the driver waits);
- ``pipeline``: the next batch is submitted before the update (the runners work while
  the driver trains);
- ``kill``: sync, and after half the iterations the runner on node_b is killed
  (SIGKILL: a crash, as if its node died) once it has sent a periodic record (the
  script waits past a period);
- ``tokens``: verl-style, no env: one rollout-worker actor a node generates ``STEPS``
  tokens for each of 8 prompts with a tiny random torch language model (autoregressive
  sampling under ``no_grad``, in its ``generate``) and returns the token batch; the
  driver submits, ``ray.get``s and trains its own copy of the model on the tokens.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import gymnasium as gym
import ray
import torch

ADDRESS, MODE, ITERS = sys.argv[1], sys.argv[2], int(sys.argv[3])
STEPS = int(sys.argv[4]) if len(sys.argv) > 4 else 200


@ray.remote(num_cpus=0)
class Runner:
    def __init__(self) -> None:
        self.env = gym.make("CartPole-v1")
        self.env.reset(seed=0)
        self.steps = 0

    def sample(self, n: int) -> list[list[float]]:
        out = []
        for _ in range(n):
            obs, _, term, trunc, _ = self.env.step(self.env.action_space.sample())
            time.sleep(0.0005)  # a slower env: the driver waits on its runners
            out.append([float(x) for x in obs])
            if term or trunc:
                self.env.reset()
        self.steps += n
        return out

    def where(self) -> dict[str, object]:
        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "node_id": ctx.get_node_id(), "steps": self.steps}


VOCAB, PROMPTS = 64, 8


def tiny_lm() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, 64), torch.nn.Tanh(), torch.nn.Linear(64, VOCAB)
    )


@ray.remote(num_cpus=0)
class RolloutWorker:
    """A verl-style rollout worker: token batches from a small language model."""

    def __init__(self) -> None:
        torch.set_num_threads(1)
        self.model = tiny_lm()
        self.steps = 0

    def generate(self, n: int) -> list[list[int]]:
        tokens = torch.zeros(PROMPTS, 1, dtype=torch.long)
        with torch.no_grad():
            for _ in range(n):
                logits = self.model(tokens[:, -1])
                nxt = torch.multinomial(torch.softmax(logits, -1), 1)
                tokens = torch.cat([tokens, nxt], 1)
                time.sleep(0.0005)  # a larger model's decode step
        self.steps += n
        return tokens.tolist()

    def where(self) -> dict[str, object]:
        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "node_id": ctx.get_node_id(), "steps": self.steps}


def tokens_main() -> None:
    """Mode ``tokens`` (see the module doc)."""
    ray.init(address=ADDRESS)
    workers = {
        name: RolloutWorker.options(resources={name: 1}).remote() for name in ("node_a", "node_b")
    }
    where = {name: ray.get(w.where.remote()) for name, w in workers.items()}
    torch.set_num_threads(1)
    model = tiny_lm()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    wait_s = 0.0
    t0 = time.perf_counter()
    for _ in range(ITERS):
        refs = [w.generate.remote(STEPS) for w in workers.values()]
        w0 = time.perf_counter()
        batches = ray.get(refs)
        wait_s += time.perf_counter() - w0
        seqs = torch.tensor([row for b in batches for row in b])
        for _ in range(10):
            opt.zero_grad()
            logits = model(seqs[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), seqs[:, 1:].reshape(-1)
            )
            loss.backward()
            opt.step()
    total = time.perf_counter() - t0
    own = {
        "mode": MODE,
        "asked_tokens": ITERS * STEPS * PROMPTS * len(workers),
        "wait_ratio": wait_s / total,
        "driver_pid": os.getpid(),
        "runners": where,
    }
    ray.shutdown()
    print("STACK_JSON " + json.dumps(own), flush=True)


def main() -> None:
    if MODE == "tokens":
        tokens_main()
        return
    ray.init(address=ADDRESS)
    runners = {name: Runner.options(resources={name: 1}).remote() for name in ("node_a", "node_b")}
    where = {name: ray.get(r.where.remote()) for name, r in runners.items()}
    model = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    live = list(runners.values())
    asked = 0
    wait_s = 0.0
    t0 = time.perf_counter()
    refs = [r.sample.remote(STEPS) for r in live]
    asked += STEPS * len(live)
    for i in range(ITERS):
        if MODE == "kill" and i == ITERS // 2:
            time.sleep(3.0)  # past a period: the runner has sent its periodic record
            # a crash (as if its node died): no exit handler, no fresh record first
            os.kill(int(where["node_b"]["pid"]), signal.SIGKILL)
            live = [runners["node_a"]]
        if MODE != "pipeline" and i > 0:
            refs = [r.sample.remote(STEPS) for r in live]
            asked += STEPS * len(live)
        w0 = time.perf_counter()
        batches = ray.get(refs)
        wait_s += time.perf_counter() - w0
        if MODE == "pipeline" and i < ITERS - 1:
            refs = [r.sample.remote(STEPS) for r in live]  # ahead of the update
            asked += STEPS * len(live)
        x = torch.tensor([row for b in batches for row in b])
        for _ in range(20):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
    total = time.perf_counter() - t0
    killed_steps = None
    if MODE == "kill":
        killed_steps = (ITERS // 2) * STEPS
    own = {
        "mode": MODE,
        "asked_steps": asked,
        "wait_ratio": wait_s / total,
        "driver_pid": os.getpid(),
        "runners": where,
        "killed_steps": killed_steps,
    }
    ray.shutdown()
    print("STACK_JSON " + json.dumps(own), flush=True)


if __name__ == "__main__":
    main()
