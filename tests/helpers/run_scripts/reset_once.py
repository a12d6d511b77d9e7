"""One reset, then env steps only: ``reset_once.py SECONDS``. A gymnasium env whose
episodes never end is reset once at the start and stepped for SECONDS; under
``gyreprof run --warmup-s S`` (S well under SECONDS) its only ``env_reset`` call falls in
the warm-up, so its steady count is 0 although it ran (tests/test_report_topdown.py)."""

import sys
import time

import gymnasium as gym
import numpy as np


class Endless(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        time.sleep(0.002)  # a reset costs more than a step
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 0.0, False, False, {}


seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
env = Endless()
env.reset(seed=0)
end = time.perf_counter() + seconds
steps = 0
while time.perf_counter() < end:
    env.step(steps & 1)
    steps += 1
print("STEPS", steps)
