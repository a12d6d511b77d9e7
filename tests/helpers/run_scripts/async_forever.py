"""A gymnasium AsyncVectorEnv of 4 CartPoles stepped until stopped; prints READY after 50
vector steps (every worker has recorded by then)."""

import gymnasium as gym
import numpy as np

envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)
envs.reset(seed=0)
n = 0
while True:
    envs.step(np.array([envs.single_action_space.sample() for _ in range(4)]))
    n += 1
    if n == 50:
        print("READY", flush=True)
