"""Steps CartPole N times, then fails: ``crash.py N {raise,exit3}``."""

import sys

import gymnasium as gym

n, how = int(sys.argv[1]), sys.argv[2]
env = gym.make("CartPole-v1")
env.reset(seed=0)
for _ in range(n):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
if how == "raise":
    raise RuntimeError("boom from the training script")
sys.exit(3)
