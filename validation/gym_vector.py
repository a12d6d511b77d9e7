"""A CleanRL-style loop on gymnasium's AsyncVectorEnv / SyncVectorEnv, timed by its own clock.

    python validation/gym_vector.py --vec async|sync [--steps 5000] [--num-envs 4]

Times every ``envs.step(actions)`` with ``time.perf_counter()``; each worker
env counts its own ``step`` calls (a wrapper writes the count to a file in the
worker at close), so the sum over workers is checked against steps x num_envs.
Prints one JSON line prefixed ``INDEPENDENT``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import gymnasium as gym
import numpy as np

COUNT_DIR = tempfile.mkdtemp(prefix="gymcount-")


class CountSteps(gym.Wrapper):  # type: ignore[type-arg]
    """Counts step calls in whichever process the env lives; writes the count on close."""

    def __init__(self, env: gym.Env, idx: int) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.idx = idx
        self.n = 0

    def step(self, action):  # type: ignore[no-untyped-def]
        self.n += 1
        return self.env.step(action)

    def close(self) -> None:
        with open(os.path.join(COUNT_DIR, f"env{self.idx}-{os.getpid()}.txt"), "w") as f:
            f.write(str(self.n))
        super().close()


def make(idx: int):  # type: ignore[no-untyped-def]
    def thunk():  # type: ignore[no-untyped-def]
        return CountSteps(gym.make("CartPole-v1"), idx)

    return thunk


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vec", choices=("async", "sync"), default="async")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--num-envs", type=int, default=4)
    args = ap.parse_args()
    fns = [make(i) for i in range(args.num_envs)]
    envs = gym.vector.AsyncVectorEnv(fns) if args.vec == "async" else gym.vector.SyncVectorEnv(fns)
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=0)
    w = rng.standard_normal((4, 2))
    times = []
    t_loop = time.perf_counter()
    for _ in range(args.steps):
        actions = np.argmax(obs @ w, axis=1)  # a tiny linear "policy"
        t0 = time.perf_counter()
        obs, r, term, trunc, _ = envs.step(actions)
        times.append(time.perf_counter() - t0)
    loop_s = time.perf_counter() - t_loop
    envs.close()
    counts = {}
    for name in os.listdir(COUNT_DIR):
        with open(os.path.join(COUNT_DIR, name)) as f:
            counts[name] = int(f.read())
    out = {
        "vec": args.vec,
        "num_envs": args.num_envs,
        "envs_step_calls": len(times),
        "envs_step_mean_us": round(statistics.fmean(times) * 1e6, 1),
        "envs_step_p50_us": round(statistics.median(times) * 1e6, 1),
        "envs_step_total_s": round(sum(times), 3),
        "worker_env_steps": counts,
        "worker_env_steps_sum": sum(counts.values()),
        "expected_env_steps": args.steps * args.num_envs,
        "loop_s": round(loop_s, 3),
        "vec_steps_per_s": round(args.steps / loop_s, 1),
    }
    print("INDEPENDENT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
