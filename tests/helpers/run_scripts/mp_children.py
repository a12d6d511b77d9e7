"""multiprocessing children that leave in different ways: ``mp_children.py START_METHOD``.

- ``returns``: steps CartPole 200 times and returns (multiprocessing then calls os._exit);
- ``os_exit``: steps 150 times and calls os._exit(0) inside its target;
- ``killed``: steps 100 times, says so, and is killed with SIGKILL by the parent;
- ``erased``: steps 50 times, removes its own live segments, then SIGKILLs itself: it
  leaves nothing behind, so the report must name it as not contributing.
Prints ``PID <name> <pid>`` for each.
"""

import multiprocessing as mp
import os
import signal
import sys
import time

import gymnasium as gym


def steps(n):
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    for _ in range(n):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()


def returns():
    steps(200)


def os_exit():
    steps(150)
    os._exit(0)


def killed(ready):
    steps(100)
    ready.set()
    time.sleep(600)  # runs until the parent kills it


def erased():
    import gyreprof as gp

    steps(50)
    for entry in gp.live.list(os.getpid()):
        os.unlink(entry.path)
    os.kill(os.getpid(), signal.SIGKILL)  # os._exit would save first


def main():
    ctx = mp.get_context(sys.argv[1])
    ready = ctx.Event()
    procs = {
        "returns": ctx.Process(target=returns),
        "os_exit": ctx.Process(target=os_exit),
        "killed": ctx.Process(target=killed, args=(ready,)),
        "erased": ctx.Process(target=erased),
    }
    for p in procs.values():
        p.start()
    assert ready.wait(120), "the 'killed' child never got ready"
    os.kill(procs["killed"].pid, signal.SIGKILL)
    for name, p in procs.items():
        p.join(120)
        print("PID", name, p.pid, flush=True)


if __name__ == "__main__":
    main()
