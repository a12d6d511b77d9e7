"""A gymnasium 1.x ``SyncVectorEnv`` of 4 CartPoles, next-step autoreset (the default):
``autoreset_vec.py STEPS`` takes STEPS vector steps and prints the framework's own count,
``FRAMEWORK_STEPS`` (vector steps x num_envs), and the sub-env steps and autoresets it
saw (``SUB_STEPS`` / ``AUTORESETS``), counted from what the vector env returns
(tests/test_run_autoreset.py)."""

import sys

import gymnasium as gym
import numpy as np

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 500
n = 4
envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
envs.reset(seed=0)
done = np.zeros(n, dtype=bool)
sub_steps = autoresets = 0
for i in range(steps):
    # next-step autoreset: a sub-env done on the previous step is reset in this one
    autoresets += int(done.sum())
    sub_steps += int((~done).sum())
    _, _, terminated, truncated, _ = envs.step(np.full(n, i & 1))
    done = terminated | truncated
print("FRAMEWORK_STEPS", steps * n)
print("SUB_STEPS", sub_steps)
print("AUTORESETS", autoresets)
