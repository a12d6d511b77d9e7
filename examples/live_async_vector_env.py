"""Live view of a gymnasium AsyncVectorEnv: every worker publishes its own env-step timings.

Each of the 4 worker processes wraps its env in ``LiveStepTiming``, which
creates a ``gp.Profiler(..., live=...)`` *inside the worker* and times every
``env.step`` (and ``reset``) there. The parent runs the rollout loop with a
live profiler of its own (policy, vector step); the workers are forked after
it exists, and their inherited copy of it is detached at fork (it never
writes into the parent's segment).

While it runs, from another terminal::

    gyreprof top PID          # PID is printed at start: parent + 4 workers + merged

At the end the parent reads all of them itself with ``gp.live.collect``.

Run: ``python examples/live_async_vector_env.py [--steps 3000] [--json]``
"""

from __future__ import annotations

import argparse
import functools
import json
import os
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv

import gyreprof as gp
from gyreprof._support.format import fmt_ns, fmt_rate

NUM_WORKERS = 4


class LiveStepTiming(gym.Wrapper):  # type: ignore[type-arg]
    """Times ``step`` (phase ``env_step``) and ``reset`` with a live Profiler of this process."""

    def __init__(self, env: gym.Env, name: str) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.prof = gp.Profiler(["env_step", "reset"], live=name, label=name)
        self._step_id = self.prof.id("env_step")
        self._reset_timer = self.prof.phase("reset")

    def step(self, action: Any) -> Any:
        prof = self.prof
        prof.begin()
        out = self.env.step(action)
        prof.lap(self._step_id)
        prof.end()
        if out[2] or out[3]:
            prof.count("episodes")
        return out

    def reset(self, **kwargs: Any) -> Any:
        with self._reset_timer:
            return self.env.reset(**kwargs)

    def close(self) -> None:
        self.prof.live.close()  # remove the segment now; the worker exits right after
        super().close()


def make_env(index: int) -> gym.Env:  # type: ignore[type-arg]
    return LiveStepTiming(gym.make("CartPole-v1"), f"env_worker{index}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000, help="vector steps to run")
    ap.add_argument("--json", action="store_true", help="print the collected views as JSON")
    args = ap.parse_args()

    prof = gp.Profiler(["policy", "vec_step"], live="rollout")
    POLICY, VEC_STEP = prof.ids("policy", "vec_step")
    envs = AsyncVectorEnv([functools.partial(make_env, i) for i in range(NUM_WORKERS)])
    worker_pids = [p.pid for p in envs.processes]
    if not args.json:
        print(f"parent pid {os.getpid()}, workers {worker_pids}: try `gyreprof top {os.getpid()}`")
    try:
        envs.reset(seed=0)
        for _ in range(args.steps):
            prof.begin()
            actions = envs.action_space.sample()
            prof.lap(POLICY)
            envs.step(actions)
            prof.lap(VEC_STEP)
        prof.end()

        tree = gp.live.collect(os.getpid())  # parent + workers, one merged Summary
        workers = gp.live.collect(worker_pids)  # the four workers only
    finally:
        envs.close()
        prof.live.close()

    env_step = workers.merged.phases["env_step"]
    if args.json:
        out = {
            "parent_pid": os.getpid(),
            "worker_pids": worker_pids,
            "tree_pids": sorted(tree.per_process),
            "missing": {str(k): v for k, v in workers.missing.items()},
            "workers": {
                str(pid): {
                    "name": snap.meta.label,
                    "env_step_count": snap.summary().phases["env_step"].count,
                    "env_step_p50_ns": snap.summary().phases["env_step"].p50,
                    "reset_count": snap.summary().phases["reset"].count,
                    "episodes": snap.counters.get("episodes", 0),
                }
                for pid, snap in workers.per_process.items()
            },
            "merged_env_step_count": env_step.count,
            "merged_env_step_p99_ns": env_step.p99,
            "tree_phases": sorted(tree.merged.phases),
            "parent_vec_step_count": tree.per_process[os.getpid()]
            .summary()
            .phases["vec_step"]
            .count,
        }
        print(json.dumps(out, indent=2))
        return
    for pid, snap in workers.per_process.items():
        st = snap.summary().phases["env_step"]
        print(
            f"worker {pid} ({snap.meta.label}): {st.count} env steps, "
            f"p50 {fmt_ns(st.p50)}, p99 {fmt_ns(st.p99)}, "
            f"{snap.counters.get('episodes', 0)} episodes"
        )
    print(
        f"all {len(workers.per_process)} workers: {env_step.count} env steps, "
        f"p50 {fmt_ns(env_step.p50)}, p99 {fmt_ns(env_step.p99)}, max {fmt_ns(env_step.max)}"
    )
    parent = tree.per_process[os.getpid()].summary()
    print(
        f"parent loop: {fmt_rate(parent.steps_per_s)}, vec_step p50 "
        f"{fmt_ns(parent.phases['vec_step'].p50)} (waiting on the slowest worker each step)"
    )
    print()
    print("merged view of the whole tree:")
    print(tree.merged)


if __name__ == "__main__":
    main()
