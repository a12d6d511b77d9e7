"""TorchRL collector on CartPole: ``torchrl_collector.py {single,parallel} {env,train,none} FRAMES SLEEP_S PER_BATCH``.

``single``: one gymnasium CartPole in this process; ``parallel``: a
``ParallelEnv`` of 2 workers. ``env``: every gymnasium env step sleeps SLEEP_S;
``train``: the loop body sleeps SLEEP_S times the wait for that batch (with 3,
the loop waits about a quarter of the time on any machine). Prints
``FRAMES_TAKEN <n>``.
"""

import sys
import time

import gymnasium as gym
from torchrl.collectors import Collector
from torchrl.envs import GymWrapper, ParallelEnv


class SlowStep(gym.Wrapper):
    def __init__(self, env, sleep_s):
        super().__init__(env)
        self.sleep_s = sleep_s

    def step(self, action):
        time.sleep(self.sleep_s)
        return self.env.step(action)


def make_env(slow_env, sleep_s):
    env = gym.make("CartPole-v1")
    if slow_env:
        env = SlowStep(env, sleep_s)
    return GymWrapper(env)


class Factory:
    def __init__(self, slow_env, sleep_s):
        self.slow_env, self.sleep_s = slow_env, sleep_s

    def __call__(self):
        return make_env(self.slow_env, self.sleep_s)


def main():
    kind, slow, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sleep_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    factory = Factory(slow == "env", sleep_s)
    env = ParallelEnv(2, factory) if kind == "parallel" else factory()
    per_batch = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    collector = Collector(env, policy=None, frames_per_batch=per_batch, total_frames=frames)
    taken = 0
    asked = time.perf_counter()
    for batch in collector:
        waited = time.perf_counter() - asked
        taken += batch.numel()
        if slow == "train":
            time.sleep(sleep_s * waited)
        asked = time.perf_counter()
    collector.shutdown()  # closes the env (and a ParallelEnv's workers) too
    print("FRAMES_TAKEN", taken, flush=True)


if __name__ == "__main__":
    main()
