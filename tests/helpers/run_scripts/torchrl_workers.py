"""TorchRL multi-process collector (2 worker processes) with a policy, feeding a torch
update: ``torchrl_workers.py {sync,async} ENV_SLEEP_S POLICY_REPEATS FRAMES``.

Each env step sleeps ENV_SLEEP_S in the workers; the policy (a TensorDictModule MLP)
repeats its forward POLICY_REPEATS times, in the workers too. Before the collector is
built, the main process builds one env and resets it once, slowly (``MAIN_RESET_S``:
an env read for its specs): the only env time the main process has. Each update sleeps
20 ms. Prints the script's clock around each batch wait (the first batch's left out:
the workers' start-up) and each update as ``CLOCK {...}``.
"""

import gc
import json
import sys
import time

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import MultiAsyncCollector, MultiSyncCollector
from torchrl.envs import GymWrapper

MAIN_RESET_S = 0.5
UPDATE_SLEEP_S = 0.02


class Slow(gym.Wrapper):
    def __init__(self, env, step_s, reset_s=0.0):
        super().__init__(env)
        self.step_s, self.reset_s = step_s, reset_s

    def step(self, action):
        if self.step_s > 0:
            time.sleep(self.step_s)
        return self.env.step(action)

    def reset(self, **kwargs):
        if self.reset_s > 0:
            time.sleep(self.reset_s)
        return self.env.reset(**kwargs)


class Factory:
    def __init__(self, step_s):
        self.step_s = step_s

    def __call__(self):
        return GymWrapper(Slow(gym.make("CartPole-v1"), self.step_s))


class Policy(torch.nn.Module):
    def __init__(self, repeats):
        super().__init__()
        self.repeats = repeats
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, 256), torch.nn.Tanh(), torch.nn.Linear(256, 2)
        )

    def forward(self, obs):
        x = obs.float()
        y = self.net(x)
        for _ in range(self.repeats - 1):
            y = self.net(x)
        return torch.nn.functional.one_hot(y.argmax(-1), 2)


def main():
    kind, step_s, repeats, frames = (
        sys.argv[1],
        float(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    torch.set_num_threads(1)
    probe = GymWrapper(Slow(gym.make("CartPole-v1"), 0.0, MAIN_RESET_S))
    probe.reset()  # the main process's one env call: a slow start-up reset
    cls = MultiSyncCollector if kind == "sync" else MultiAsyncCollector
    policy = TensorDictModule(Policy(repeats), in_keys=["observation"], out_keys=["action"])
    collector = cls(
        [Factory(step_s), Factory(step_s)],
        policy=policy,
        frames_per_batch=100,
        total_frames=frames,
    )
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    wait_s = update_s = 0.0
    first = True
    it = iter(collector)
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        if first:  # the workers' start-up is left out of this clock
            t0, first = t1, False
        obs = batch["observation"].reshape(-1, 4).float()
        for _ in range(4):
            loss = model(obs).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        time.sleep(UPDATE_SLEEP_S)
        wait_s += t1 - t0
        update_s += time.perf_counter() - t1
    collector.shutdown()
    del it, collector  # its weight-sync scheme shut down here, not at interpreter exit
    gc.collect()
    print("CLOCK " + json.dumps({"wait_s": wait_s, "update_s": update_s}), flush=True)


if __name__ == "__main__":
    main()
