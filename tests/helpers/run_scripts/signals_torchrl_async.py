"""TorchRL ``MultiAsyncCollector`` (2 worker processes) feeding a torch update:
``signals_torchrl_async.py {env,train} FRAMES PER_BATCH SLEEP_S``.

stable-baselines3 is imported first (as torchrl itself may do when it is installed):
its patch must change nothing here. ``env``: every env step sleeps SLEEP_S (in the
workers); ``train``: every update sleeps SLEEP_S. Each env's first step takes START_S more
(an env that loads its assets on first use). The collector builds its envs in its
constructor, before the first batch is asked for, but steps them only once it is, so the
first batch waits for that on any machine. Prints ``BATCHES <n>`` and the script's clock
around each batch wait and each update as ``CLOCK {...}``.
"""

import json
import sys
import time

import gymnasium as gym
import stable_baselines3  # noqa: F401 - installed and imported: must not matter
import torch
from torchrl.collectors import MultiAsyncCollector
from torchrl.envs import GymWrapper

START_S = 0.5


class SlowStep(gym.Wrapper):
    def __init__(self, env, sleep_s):
        super().__init__(env)
        self.sleep_s = sleep_s
        self.first = True

    def step(self, action):
        if self.first:
            self.first = False
            time.sleep(START_S)
        if self.sleep_s > 0:
            time.sleep(self.sleep_s)
        return self.env.step(action)


class Factory:
    def __init__(self, sleep_s):
        self.sleep_s = sleep_s

    def __call__(self):
        return GymWrapper(SlowStep(gym.make("CartPole-v1"), self.sleep_s))


def main():
    slow, frames, per_batch, sleep_s = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
    factory = Factory(sleep_s if slow == "env" else 0.0)
    collector = MultiAsyncCollector(
        [factory, factory], policy=None, frames_per_batch=per_batch, total_frames=frames
    )
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    wait_s = update_s = 0.0
    batches = 0
    it = iter(collector)
    first = True
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        if first:  # the start-up of the workers is left out of this clock
            t0, first = t1, False
        batches += 1
        obs = batch["observation"].reshape(-1, 4).float()
        for _ in range(4):
            loss = model(obs).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        if slow == "train":
            time.sleep(sleep_s)
        wait_s += t1 - t0
        update_s += time.perf_counter() - t1
    collector.shutdown()
    print("BATCHES", batches, flush=True)
    print("CLOCK " + json.dumps({"wait_s": wait_s, "update_s": update_s}), flush=True)


if __name__ == "__main__":
    main()
