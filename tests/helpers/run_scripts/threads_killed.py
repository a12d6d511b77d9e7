"""A threaded sampler in a child process that is killed: ``threads_killed.py N START_METHOD``.

The child starts three threads that each step their own CartPole N times, says so,
and sleeps until its parent kills it with SIGKILL (it saves nothing itself). The
parent steps nothing. Prints ``KILLED <pid>``.
"""

import multiprocessing as mp
import os
import signal
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


def sampler(n, ready):
    threads = [threading.Thread(target=work, args=(n,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ready.set()
    threading.Event().wait(600)


if __name__ == "__main__":
    n = int(sys.argv[1])
    ctx = mp.get_context(sys.argv[2])
    ready = ctx.Event()
    child = ctx.Process(target=sampler, args=(n, ready))
    child.start()
    assert ready.wait(120), "the sampler did not finish its steps"
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    print("KILLED", child.pid, flush=True)
