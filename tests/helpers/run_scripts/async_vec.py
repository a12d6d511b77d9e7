"""gymnasium AsyncVectorEnv of 3 CartPoles stepped N times: ``async_vec.py N``."""

import sys

import gymnasium as gym
import numpy as np

n = int(sys.argv[1])
envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3)
envs.reset(seed=0)
for _ in range(n):
    envs.step(np.array([envs.single_action_space.sample() for _ in range(3)]))
envs.close()
print("VECTOR_STEPS", n, flush=True)
