"""Helper program for tests/test_top_run.py: a CartPole loop that runs until STOPFILE exists.

    python top_loop.py STOPFILE [--async N]

Plain ``env.step`` in the main process, or an ``AsyncVectorEnv`` of N workers.
Prints ``READY {"pid": ..., "workers": [...]}`` once 200 steps are done.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import gymnasium as gym


def main() -> int:
    stop = Path(sys.argv[1])
    workers_n = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--async" else 0
    env: gym.Env | gym.vector.AsyncVectorEnv
    if workers_n:
        env = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * workers_n)
        workers = [p.pid for p in env.processes]
    else:
        env = gym.make("CartPole-v1")
        workers = []
    env.reset(seed=0)
    steps = 0
    try:
        while not stop.exists():
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if not workers_n and (terminated or truncated):
                env.reset()
            steps += 1
            if steps == 200:
                print("READY " + json.dumps({"pid": os.getpid(), "workers": workers}), flush=True)
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
