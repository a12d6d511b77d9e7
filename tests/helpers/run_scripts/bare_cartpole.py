"""A bare gymnasium CartPole loop: ``bare_cartpole.py STEPS``: a fixed action pattern
(no sampling in Python), reset at the end of each episode; prints the loop's own wall
and CPU time (``LEARN_S`` / ``LEARN_CPU_S``) for ``benchmarks/bench_run.py``."""

import itertools
import sys
import time

import gymnasium as gym

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
env = gym.make("CartPole-v1")
env.reset(seed=0)


def loop():
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(i & 1)
        if terminated or truncated:
            env.reset()


t0, c0 = time.perf_counter(), time.process_time()
# under one C-level call callgrind can name (benchmarks/bench_run.py --instructions)
list(itertools.starmap(loop, [()]))
print("LEARN_S", f"{time.perf_counter() - t0:.6f}", flush=True)
print("LEARN_CPU_S", f"{time.process_time() - c0:.6f}", flush=True)
