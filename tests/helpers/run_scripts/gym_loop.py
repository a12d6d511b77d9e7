"""A plain gymnasium loop: CartPole, random actions, a fixed number of steps."""

import sys

import gymnasium as gym

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 500
env = gym.make("CartPole-v1")
env.reset(seed=0)
for _ in range(steps):
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    if terminated or truncated:
        env.reset()
print("done", steps)
