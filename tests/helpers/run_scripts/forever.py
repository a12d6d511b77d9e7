"""Steps CartPole until stopped; prints READY after the first 200 steps."""

import gymnasium as gym

env = gym.make("CartPole-v1")
env.reset(seed=0)
n = 0
while True:
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
    n += 1
    if n == 200:
        print("READY", flush=True)
