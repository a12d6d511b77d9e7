"""``exec_steps.py N [M ...]``: steps CartPole N times, then replaces itself through
``os.execv`` with ``exec_steps.py M ...``: one pid, one image per count."""

import os
import sys

import gymnasium as gym

counts = [int(x) for x in sys.argv[1:]]
env = gym.make("CartPole-v1")
env.reset(seed=len(counts))
for _ in range(counts[0]):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
print("IMAGE", counts[0], os.getpid(), flush=True)
if len(counts) > 1:
    os.execv(sys.executable, [sys.executable, __file__, *map(str, counts[1:])])
