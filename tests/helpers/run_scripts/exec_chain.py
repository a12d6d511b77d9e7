"""``exec_chain.py K``: steps CartPole 500 times, then (K > 1) replaces itself with
``exec_chain.py K-1`` through ``os.execv``: K images of 500 steps in one pid."""

import os
import sys

import gymnasium as gym

k = int(sys.argv[1])
env = gym.make("CartPole-v1")
env.reset(seed=k)
for _ in range(500):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
print("IMAGE", k, os.getpid(), flush=True)
if k > 1:
    os.execv(sys.executable, [sys.executable, __file__, str(k - 1)])
