"""A TorchRL SyncDataCollector on GymEnv("CartPole-v1"), timed by its own clock.

    python validation/torchrl_collector.py [--frames 5000] [--sleep-ms 0] [--sleep-factor 0]

Times ``next(it)`` (the wait for a batch) and the loop body with
``time.perf_counter()``; ``--sleep-ms`` adds a fixed sleep to the body,
``--sleep-factor 3`` one of 3x the wait that preceded it (a slow "update"). Prints one JSON line prefixed ``INDEPENDENT``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from tensordict.nn import TensorDictModule

try:
    from torchrl.collectors import SyncDataCollector
except ImportError:  # torchrl >= 0.14 renamed it
    from torchrl.collectors import Collector as SyncDataCollector
from torchrl.envs import GymEnv
from torchrl.modules import OneHotCategorical, ProbabilisticActor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=5000)
    ap.add_argument("--frames-per-batch", type=int, default=200)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument(
        "--sleep-factor", type=float, default=0.0, help="body sleeps this x the wait before it"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    env = GymEnv("CartPole-v1")
    net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    policy = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        spec=env.action_spec,
        distribution_class=OneHotCategorical,
        return_log_prob=False,
    )
    collector = SyncDataCollector(
        env, policy, frames_per_batch=args.frames_per_batch, total_frames=args.frames
    )
    wait_s = body_s = 0.0
    batches = frames = 0
    t_loop = time.perf_counter()
    it = iter(collector)
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            wait_s += time.perf_counter() - t0
            break
        t1 = time.perf_counter()
        wait_s += t1 - t0
        last_wait = t1 - t0
        # the "update": a little real work on the batch, plus the optional sleep
        frames += batch.numel()
        batches += 1
        (batch["observation"].float() ** 2).mean().item()
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000)
        if args.sleep_factor:
            time.sleep(args.sleep_factor * last_wait)
        body_s += time.perf_counter() - t1
    loop_s = time.perf_counter() - t_loop
    collector.shutdown()
    out = {
        "sleep_ms": args.sleep_ms,
        "sleep_factor": args.sleep_factor,
        "batches": batches,
        "frames": frames,
        "wait_s": round(wait_s, 3),
        "body_s": round(body_s, 3),
        "wait_ratio": round(wait_s / (wait_s + body_s), 4),
        "loop_s": round(loop_s, 3),
        "frames_per_s_collecting": round(frames / wait_s, 1),
    }
    print("INDEPENDENT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
