"""A CleanRL-DQN-style loop: ``dqn_grad.py STEPS MINIBATCHES``.

Each step picks its action with the Q-network's forward *outside* ``torch.no_grad``
(as CleanRL's ``dqn.py`` does), steps a one-env ``SyncVectorEnv`` and stores the
transition; every 4th step (after 100) it trains on MINIBATCHES minibatches, each a
target forward under ``no_grad``, a forward with grad, a backward and an optimizer
step. With 2 minibatches, the second one's forward follows an optimizer step as the
action's forward does: it is update work, not the policy. Prints the script's own
clock around the collecting (after the first update) and the updates as ``CLOCK {...}`` and the updates run as
``UPDATES n``.
"""

import json
import random
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn


def q_net() -> nn.Module:
    return nn.Sequential(
        nn.Linear(4, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2)
    )


def main() -> None:
    steps, minibatches = int(sys.argv[1]), int(sys.argv[2])
    random.seed(0)
    torch.manual_seed(0)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")])
    q, target = q_net(), q_net()
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    obs, _ = envs.reset(seed=0)
    buffer = []
    collect_s = update_s = 0.0
    updates = 0
    mark = time.perf_counter()
    for step in range(steps):
        values = q(torch.Tensor(obs))  # the action's forward, grad on
        action = torch.argmax(values, dim=1).cpu().numpy()
        next_obs, reward, term, trunc, _ = envs.step(action)
        buffer.append((obs, action, reward, next_obs))
        obs = next_obs
        if step > 100 and step % 4 == 0:
            t0 = time.perf_counter()
            if updates:  # the first block (the buffer's first 100 steps) is start-up
                collect_s += t0 - mark
            for _ in range(minibatches):
                batch = random.sample(buffer, 32)
                o = torch.Tensor(np.concatenate([b[0] for b in batch]))
                o2 = torch.Tensor(np.concatenate([b[3] for b in batch]))
                a = torch.as_tensor(np.concatenate([b[1] for b in batch])).long()
                r = torch.Tensor(np.concatenate([b[2] for b in batch]))
                with torch.no_grad():
                    goal = r + 0.99 * target(o2).max(dim=1).values
                old = q(o).gather(1, a.view(-1, 1)).squeeze()
                loss = ((goal - old) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            updates += 1
            mark = time.perf_counter()
            update_s += mark - t0
    print("UPDATES", updates, flush=True)
    print("CLOCK " + json.dumps({"collect_s": collect_s, "update_s": update_s}), flush=True)


if __name__ == "__main__":
    main()
