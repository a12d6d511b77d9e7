"""A synchronous CartPole + torch loop: ``doors_cartpole_torch.py ITERS [STOP_FILE]``.

Each iteration collects 64 env steps with a ``torch.no_grad()`` forward, then runs
4 Adam updates on them (the automatic trainer's collect-and-update step). With a
STOP_FILE it prints READY and keeps iterating until that file exists (for ``top``).
"""

import os
import sys

import gymnasium as gym
import numpy as np
import torch

iters = int(sys.argv[1])
stop = sys.argv[2] if len(sys.argv) > 2 else None
torch.manual_seed(0)
env = gym.make("CartPole-v1")
net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
obs, _ = env.reset(seed=0)
it = 0
while it < iters or (stop is not None and not os.path.exists(stop)):
    if it == 2 and stop is not None:
        print(f"READY {os.getpid()}", flush=True)
    buf = []
    for _ in range(64):
        with torch.no_grad():
            logits = net(torch.as_tensor(obs, dtype=torch.float32))
        buf.append(obs)
        obs, _r, term, trunc, _ = env.step(int(torch.argmax(logits)))
        if term or trunc:
            obs, _ = env.reset()
    x = torch.as_tensor(np.array(buf), dtype=torch.float32)
    for _ in range(4):
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    it += 1
