"""A CleanRL-style PPO loop: ``signals_cleanrl.py {sync,async} {env,train} ITERS SLEEP_S``.

A torch MLP policy, a gymnasium ``SyncVectorEnv`` (or ``AsyncVectorEnv``) of 4
CartPoles, the action from a ``torch.no_grad()`` forward, ``envs.step``, then K
minibatch updates with Adam (with ``clip_grad_norm_``, itself a no-grad block
inside the update). ``env``: every env step sleeps SLEEP_S (sampler-heavy);
``train``: every minibatch sleeps SLEEP_S, or longer: an update sleeps at least
three times the rollout just collected, so the loop stays trainer-bound on a loaded
machine too, where the rollout's compute slows most. The script's own
clock (``perf_counter`` around each rollout and each update) is printed as one
JSON line: ``CLOCK {"rollout_s": ..., "update_s": ..., "iterations": ...}``.
"""

import itertools
import json
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

N_ENVS, N_STEPS, EPOCHS, MINIBATCHES = 4, 32, 2, 4
TRAIN_FACTOR = 3.0  # ``train``: an update sleeps at least this many rollouts


class Slow(gym.Wrapper):
    def __init__(self, env, sleep_s):
        super().__init__(env)
        self.sleep_s = sleep_s

    def step(self, action):
        time.sleep(self.sleep_s)
        return self.env.step(action)


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
        self.v = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))

    def act(self, obs):
        dist = torch.distributions.Categorical(logits=self.pi(obs))
        action = dist.sample()
        return action, dist.log_prob(action), self.v(obs).squeeze(-1)


def make(slow_env, sleep_s):
    def thunk():
        env = gym.make("CartPole-v1")
        return Slow(env, sleep_s) if slow_env else env

    return thunk


def main():
    kind, slow, iters, sleep_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    fns = [make(slow == "env", sleep_s) for _ in range(N_ENVS)]
    envs = gym.vector.AsyncVectorEnv(fns) if kind == "async" else gym.vector.SyncVectorEnv(fns)
    torch.manual_seed(0)
    agent = Agent()
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4)
    obs, _ = envs.reset(seed=0)

    def learn():
        nonlocal obs
        rollout_s = update_s = 0.0
        for _ in range(iters):
            t0 = time.perf_counter()
            buf_obs, buf_act, buf_ret = [], [], []
            for _ in range(N_STEPS):
                o = torch.as_tensor(obs, dtype=torch.float32)
                with torch.no_grad():
                    action, _, _ = agent.act(o)
                obs, reward, term, trunc, _ = envs.step(action.numpy())
                buf_obs.append(o)
                buf_act.append(action)
                buf_ret.append(torch.as_tensor(reward, dtype=torch.float32))
            t1 = time.perf_counter()
            train_sleep_s = max(sleep_s, TRAIN_FACTOR * (t1 - t0) / (EPOCHS * MINIBATCHES))
            b_obs = torch.cat(buf_obs)
            b_act = torch.cat(buf_act)
            b_ret = torch.cat(buf_ret)
            idx = np.arange(len(b_obs))
            for _ in range(EPOCHS):
                np.random.shuffle(idx)
                for mb in np.array_split(idx, MINIBATCHES):
                    dist = torch.distributions.Categorical(logits=agent.pi(b_obs[mb]))
                    loss = -(dist.log_prob(b_act[mb]) * b_ret[mb]).mean()
                    loss = loss + (agent.v(b_obs[mb]).squeeze(-1) - b_ret[mb]).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                    opt.step()
                    if slow == "train":
                        time.sleep(train_sleep_s)  # the slow update itself
            rollout_s += t1 - t0
            update_s += time.perf_counter() - t1
        return rollout_s, update_s

    learn_t0, learn_c0 = time.perf_counter(), time.process_time()
    # under one C-level call callgrind can name (benchmarks/bench_run.py --instructions)
    ((rollout_s, update_s),) = itertools.starmap(learn, [()])
    # the loop's own time, for benchmarks/bench_run.py (this process's CPU only)
    print("LEARN_S", f"{time.perf_counter() - learn_t0:.6f}", flush=True)
    print("LEARN_CPU_S", f"{time.process_time() - learn_c0:.6f}", flush=True)
    envs.close()
    print(
        "CLOCK " + json.dumps({"rollout_s": rollout_s, "update_s": update_s, "iterations": iters})
    )


if __name__ == "__main__":
    main()
