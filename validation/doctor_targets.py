"""Processes for ``gyreprof doctor``: a real SB3 training run, and a loop polling an empty queue.

python validation/doctor_targets.py sb3    # PPO on CartPole, verbose=1 (prints a table per rollout)
python validation/doctor_targets.py spin   # busy-polls an empty queue.Queue forever, prints nothing
"""

from __future__ import annotations

import queue
import sys


def sb3() -> None:
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    # n_steps=128: a log table about every second; runs until killed
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=1, verbose=1)
    model.learn(total_timesteps=10**8)


def spin() -> None:
    q: queue.Queue[int] = queue.Queue()
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            pass


if __name__ == "__main__":
    {"sb3": sb3, "spin": spin}[sys.argv[1]]()
