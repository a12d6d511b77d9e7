"""Helper process for tests/test_parallelism.py: a real sampler with worker processes.

Starts a gymnasium vector env of CartPole-v1 whose envs call
``gyreprof.register_worker`` when they are built (inside the worker process
for ``AsyncVectorEnv``, inline for ``SyncVectorEnv``), prints one JSON line
``{"pid": ..., "workers": [...], "sleepers": [...]}`` and then waits until
stdin closes or reads ``quit``. Everything is closed on the way out.

    python tests/helpers/workers_parallel.py --vector async --num-envs 4 --role env_worker \
        --config num_threads=1 --blas-threads 4 --cpus 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from typing import Any

import gymnasium

from gyreprof.analysis.parallelism import register_worker


class RegisteringEnv(gymnasium.Wrapper):  # type: ignore[type-arg]
    """Registers the process it is built in as a worker, as the README tells users to.

    Nothing else: no unregistering on close, no special case. ``AsyncVectorEnv``
    builds one env in the parent to read the spaces (the census must count it
    as an env built in the main process, not a fifth worker) and
    ``SyncVectorEnv`` builds all four in one process (the second call must not
    raise).
    """

    def __init__(
        self, env: gymnasium.Env, role: str, config: dict[str, Any], blas: int | None
    ) -> None:
        super().__init__(env)
        if blas is not None:
            import threadpoolctl

            # Keep the limiter alive: the pools stay at this size in this process.
            self._limits = threadpoolctl.threadpool_limits(blas)
        register_worker(role, **config)


def _make(role: str, config: dict[str, Any], blas: int | None) -> Any:
    def thunk() -> gymnasium.Env:
        return RegisteringEnv(gymnasium.make("CartPole-v1"), role, config, blas)

    return thunk


def _config(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vector", choices=["async", "sync"], default="async")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--role", default="env_worker")
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--blas-threads", type=int, default=None)
    parser.add_argument("--cpus", type=int, default=None, help="restrict CPU affinity first")
    parser.add_argument("--sleepers", type=int, default=0, help="extra `sleep 60` children")
    parser.add_argument("--churn", action="store_true", help="keep starting short children")
    parser.add_argument("--no-env", action="store_true", help="start no vector env at all")
    args = parser.parse_args()

    if args.cpus is not None:
        cpus = sorted(os.sched_getaffinity(0))[: args.cpus]
        os.sched_setaffinity(0, cpus)

    stop = threading.Event()
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(args.sleepers)]
    reapers = [threading.Thread(target=p.wait, daemon=True) for p in sleepers]
    for t in reapers:
        t.start()

    def churn() -> None:
        while not stop.is_set():
            subprocess.run(["sleep", "0.01"], check=False)

    churner = threading.Thread(target=churn, daemon=True)
    if args.churn:
        churner.start()

    env: Any = None
    try:
        if not args.no_env:
            fns = [_make(args.role, _config(args.config), args.blas_threads)] * args.num_envs
            if args.vector == "async":
                env = gymnasium.vector.AsyncVectorEnv(fns, context="fork")
                workers = [p.pid for p in env.processes]
            else:
                env = gymnasium.vector.SyncVectorEnv(fns)
                workers = [os.getpid()]
            env.reset(seed=0)
        else:
            workers = []
        print(
            json.dumps(
                {"pid": os.getpid(), "workers": workers, "sleepers": [p.pid for p in sleepers]}
            ),
            flush=True,
        )
        for line in sys.stdin:
            if line.strip() == "quit":
                break
    finally:
        stop.set()
        if env is not None:
            env.close()
        for p in sleepers:
            if p.poll() is None:
                p.kill()
        if args.churn:
            churner.join(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
