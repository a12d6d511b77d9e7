"""Two threads each step their own CartPole N times: ``threads.py N``."""

import sys
import threading

import gymnasium as gym


def work(n):
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    for _ in range(n):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()


n = int(sys.argv[1])
threads = [threading.Thread(target=work, args=(n,)) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
