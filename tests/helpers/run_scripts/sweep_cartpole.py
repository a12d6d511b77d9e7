"""A plain CartPole loop for ``gyreprof sweep -- ...``: ``sweep_cartpole.py --num-envs N``.

A gymnasium ``SyncVectorEnv`` of N CartPoles and a numpy linear policy, stepped until
``--iters`` vector steps are done (0, the default: for ever, until a signal stops it).
Each env step spins ``--batch-us / N`` microseconds: a fixed cost per vector step
shared by its envs (a batched simulator's), so env steps per second of sampling time
grow about linearly with N and the values of a sweep differ measurably.
``--async``: an ``AsyncVectorEnv`` (one worker process per env) instead.
``--ignore-sigint``: a KeyboardInterrupt is swallowed and the loop goes on (only
SIGTERM or SIGKILL ends it). Prints ``READY`` once the first step is done.
"""

import argparse
import sys
import time

import gymnasium as gym
import numpy as np


class Costly(gym.Wrapper):
    def __init__(self, env, spin_s):
        super().__init__(env)
        self.spin_s = spin_s

    def step(self, action):
        end = time.perf_counter() + self.spin_s
        while time.perf_counter() < end:
            pass
        return self.env.step(action)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--batch-us", type=float, default=400.0)
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--ignore-sigint", action="store_true")
    p.add_argument("--async", dest="use_async", action="store_true")
    a = p.parse_args()
    spin_s = a.batch_us / a.num_envs / 1e6
    vector = gym.vector.AsyncVectorEnv if a.use_async else gym.vector.SyncVectorEnv
    envs = vector([lambda: Costly(gym.make("CartPole-v1"), spin_s) for _ in range(a.num_envs)])
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 2))
    obs, _ = envs.reset(seed=0)
    i = 0
    while a.iters <= 0 or i < a.iters:
        try:
            actions = np.argmax(obs @ w, axis=1)
            obs, _, _, _, _ = envs.step(actions)
            if i == 0:
                print("READY", flush=True)
            i += 1
        except KeyboardInterrupt:
            if not a.ignore_sigint:
                raise
    envs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
