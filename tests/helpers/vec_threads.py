"""Helper program for tests/test_parallelism_threads.py: a vector env whose workers
really run (or do not run) extra threads.

    python vec_threads.py STOPFILE --vector async --num-envs 4 --busy 2 --declare 1 --cpus 2

Builds a gymnasium vector env of CartPole-v1. Each env, when built in a worker
process, imports numpy (its BLAS pool is loaded, sized to the machine, and never
runs: no matmul), optionally registers with ``gp.register_worker("env_worker",
num_threads=N)`` and optionally starts ``--busy`` threads that hash a 1 MiB buffer in
a loop (hashlib releases the GIL: each thread keeps a core busy). The main program
steps the env at a light pace (a short sleep between steps, so the workers
themselves are mostly idle), prints ``READY {"pid": ..., "workers": [...]}`` after
the first 20 steps, and stops when STOPFILE exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium


def _spin() -> None:
    buf = b"x" * (1 << 20)
    while True:
        hashlib.sha256(buf).digest()


def _make(busy: int, declare: int | None, register: bool) -> Any:
    def thunk() -> gymnasium.Env:
        import numpy  # noqa: F401  (the BLAS pool is loaded in the worker, never used)

        in_worker = multiprocessing.current_process().name != "MainProcess"
        if register:
            import gyreprof as gp

            config: dict[str, Any] = {} if declare is None else {"num_threads": declare}
            gp.register_worker("env_worker", **config)
        if in_worker:
            for _ in range(busy):
                threading.Thread(target=_spin, daemon=True).start()
        return gymnasium.make("CartPole-v1")

    return thunk


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("stop")
    parser.add_argument("--vector", choices=["async", "sync"], default="async")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--declare", type=int, default=None)
    parser.add_argument("--no-register", action="store_true")
    parser.add_argument("--cpus", type=int, default=None)
    parser.add_argument("--pace-s", type=float, default=0.02)
    args = parser.parse_args()
    if args.cpus is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    fns = [_make(args.busy, args.declare, not args.no_register)] * args.num_envs
    env: Any
    if args.vector == "async":
        env = gymnasium.vector.AsyncVectorEnv(fns, context="fork")
        workers = [p.pid for p in env.processes]
    else:
        env = gymnasium.vector.SyncVectorEnv(fns)
        workers = []
    stop = Path(args.stop)
    try:
        env.reset(seed=0)
        steps = 0
        while not stop.exists():
            env.step(env.action_space.sample())
            steps += 1
            if steps == 20:
                print("READY " + json.dumps({"pid": os.getpid(), "workers": workers}), flush=True)
            time.sleep(args.pace_s)
    finally:
        env.close()
    print(f"STEPS {steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
