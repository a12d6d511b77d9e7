"""Processes for ``gyreprof doctor``: a real SB3 training run, and a loop polling an empty queue.

python validation/doctor_targets.py sb3    # PPO on CartPole, verbose=1 (prints a table per rollout)
python validation/doctor_targets.py spin   # busy-polls an empty queue.Queue forever, prints nothing
python validation/doctor_targets.py refused [PORT]  # retries a refused 127.0.0.1:PORT (default
                                                    # 18004), logging each failure: retrying
python validation/doctor_targets.py poll   # sleeps 50 ms on each empty batch: spinning (low CPU)
"""

from __future__ import annotations

import queue
import socket
import sys
import time


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


def refused() -> None:
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 18004
    attempt = 0
    while True:
        attempt += 1
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
        except OSError as exc:
            print(f"WARNING sampler: 127.0.0.1:{port} {exc}; retry {attempt} in 0.5 s", flush=True)
        time.sleep(0.5)


def poll() -> None:
    q: queue.Queue[int] = queue.Queue()
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            time.sleep(0.05)


if __name__ == "__main__":
    {"sb3": sb3, "spin": spin, "refused": refused, "poll": poll}[sys.argv[1]]()
