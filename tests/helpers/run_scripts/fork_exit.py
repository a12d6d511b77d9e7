"""The parent steps CartPole 100 times; a plain ``os.fork`` child then steps 300 times and
leaves by ``os._exit(0)``; the parent steps 100 more after it ended."""

import os

import gymnasium as gym


def steps(n: int) -> None:
    env = gym.make("CartPole-v1")
    env.reset(seed=n)
    for _ in range(n):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()


steps(100)
pid = os.fork()
if pid == 0:
    steps(300)
    os._exit(0)
os.waitpid(pid, 0)
steps(100)
print("FORKED", pid, flush=True)
