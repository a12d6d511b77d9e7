"""A vector env that waits to be checked: ``vec_wait.py KIND GO_FILE``.

KIND: ``async`` (gymnasium AsyncVectorEnv, 4 CartPoles), ``sync`` (SyncVectorEnv, 4)
or ``sb3`` (stable-baselines3 SubprocVecEnv, 4). Steps it 50 times, prints
``READY <pid>``, waits until GO_FILE exists, closes it and exits. No gyreprof in it.
"""

import os
import sys
import time

import gymnasium as gym


def make():
    return gym.make("CartPole-v1")


def main():
    kind, go = sys.argv[1], sys.argv[2]
    if kind == "sb3":
        from stable_baselines3.common.vec_env import SubprocVecEnv

        venv = SubprocVecEnv([make] * 4)
        venv.reset()
        for _ in range(50):
            venv.step([venv.action_space.sample() for _ in range(4)])
    else:
        cls = gym.vector.AsyncVectorEnv if kind == "async" else gym.vector.SyncVectorEnv
        venv = cls([make] * 4)
        venv.reset(seed=0)
        for _ in range(50):
            venv.step(venv.action_space.sample())
    print("READY", os.getpid(), flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    venv.close()


if __name__ == "__main__":
    main()
