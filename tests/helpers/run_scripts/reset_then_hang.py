"""One ``env.reset()``, then a wait for good (a hang right after start-up); prints READY
after the reset."""

import threading

import gymnasium as gym

env = gym.make("CartPole-v1")
env.reset(seed=0)
print("READY", flush=True)
threading.Event().wait()
