"""RLlib PPO (new API stack) on CartPole with 2 env runners, with its own clocks.

    python rllib_ppo.py MODE ITERS [ENV_SLEEP_S] [EPOCHS] [LEARNERS]

MODE ``env``: each env step sleeps ENV_SLEEP_S in a gymnasium wrapper (the
sampling is slow); MODE ``train``: the learner runs EPOCHS SGD epochs over a
wider model (the update is slow). LEARNERS 0 (the default) updates in the driver,
1 in a learner actor of its own. With ``RLLIB_PPO_ADDRESS`` set, it joins that cluster
(``ray.init(address=...)``) instead of starting one. Prints one line ``STACK_JSON {...}`` with
what the script measured itself: the wall time of each ``algo.train()``, the
env steps RLlib counted, the env-runner actors' own env-step clock, and
RLlib's timers from the result dicts (sampling vs the learner update).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import gymnasium as gym
import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo import ppo as ppo_module
from ray.tune.registry import register_env


class SlowStep(gym.Wrapper):  # type: ignore[type-arg]
    """Sleeps ``delay`` s in every step; counts its steps and the time they took (on the
    instance: the class reaches the env runners pickled by value, one copy per use)."""

    def __init__(self, env: Any, delay: float) -> None:
        super().__init__(env)
        self.delay = delay
        self.clock_steps = 0
        self.clock_step_s = 0.0

    def step(self, action: Any) -> Any:
        t0 = time.perf_counter()
        if self.delay > 0:
            time.sleep(self.delay)
        out = self.env.step(action)
        self.clock_steps += 1
        self.clock_step_s += time.perf_counter() - t0
        return out


def make_env(config: dict[str, Any]) -> Any:
    return SlowStep(gym.make("CartPole-v1"), float(config.get("delay", 0.0)))


def _find(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _probe(runner: Any) -> dict[str, Any]:
    """In an env-runner actor: its pid and its envs' own count and time of env steps."""
    steps, step_s = 0, 0.0
    todo, seen = [getattr(runner, "env", None)], set()
    while todo:  # down the vector env and the wrapper stacks to each SlowStep
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(getattr(e, "__dict__", {}).get("clock_steps"), int):
            steps += e.clock_steps
            step_s += e.clock_step_s
            continue
        todo += list(getattr(e, "envs", None) or []) + [getattr(e, "env", None)]
    return {"pid": os.getpid(), "steps": steps, "step_s": step_s}


class Clock:
    """The driver's own clock around PPO's sampling and learner-update calls."""

    def __init__(self) -> None:
        self.sample_s = 0.0
        self.update_s = 0.0
        self.samples = 0
        self.updates = 0

    def wrap(self, fn: Any, what: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(self, what + "_s", getattr(self, what + "_s") + time.perf_counter() - t0)
                setattr(self, what + "s", getattr(self, what + "s") + 1)

        return timed


def main() -> int:
    mode = sys.argv[1]
    iters = int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    epochs = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    learners = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    if mode not in ("env", "train"):
        raise SystemExit(f"MODE must be env or train, got {mode!r}")
    address = os.environ.get("RLLIB_PPO_ADDRESS")  # a cluster started before the job
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    register_env("slow_cartpole", make_env)
    hidden = [256, 256] if mode == "train" else [16]
    config = (
        PPOConfig()
        .environment("slow_cartpole", env_config={"delay": delay if mode == "env" else 0.0})
        .env_runners(num_env_runners=2, num_envs_per_env_runner=1, rollout_fragment_length=100)
        .learners(num_learners=learners, num_cpus_per_learner=1 if learners else "auto")
        .training(
            train_batch_size_per_learner=200,
            minibatch_size=50 if mode == "train" else 200,
            num_epochs=epochs,
        )
        .rl_module(model_config={"fcnet_hiddens": hidden})
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=0)
        .debugging(log_level="ERROR")
    )
    algo = config.build_algo()
    clock = Clock()
    ppo_module.synchronous_parallel_sample = clock.wrap(
        ppo_module.synchronous_parallel_sample, "sample"
    )
    algo.learner_group.update = clock.wrap(algo.learner_group.update, "update")
    train_s: list[float] = []
    result: dict[str, Any] = {}
    sample_s: list[float] = []
    learn_s: list[float] = []
    t_all = time.perf_counter()
    for _ in range(iters):
        t0 = time.perf_counter()
        result = algo.train()
        train_s.append(time.perf_counter() - t0)
        # RLlib's own per-iteration timers (new API stack): timers/env_runner_sampling_timer
        # and timers/learner_update_timer
        s = _find(result, "timers", "env_runner_sampling_timer")
        u = _find(result, "timers", "learner_update_timer")
        sample_s.append(float(s) if s is not None else float("nan"))
        learn_s.append(float(u) if u is not None else float("nan"))
    wall = time.perf_counter() - t_all
    runners = algo.env_runner_group.foreach_env_runner(_probe, local_env_runner=False)
    learner_pids = []
    if learners:
        learner_pids = [
            int(r.get() if hasattr(r, "get") else r)
            for r in algo.learner_group.foreach_learner(lambda learner: os.getpid())
        ]
    lifetime = _find(result, "env_runners", "num_env_steps_sampled_lifetime")
    timers = {k: v for k, v in (result.get("timers") or {}).items() if isinstance(v, float)}
    out = {
        "stack": "rllib_ppo",
        "mode": mode,
        "iters": iters,
        "epochs": epochs,
        "learners": learners,
        "driver_pid": os.getpid(),
        "learner_pids": learner_pids,
        "wall_s": wall,
        "train_s": sum(train_s),
        # the driver's own clock: time in PPO's sampling call and in the learner update
        "sample_s": clock.sample_s,
        "update_s": clock.update_s,
        "samples": clock.samples,
        "updates": clock.updates,
        "wait_ratio": clock.sample_s / sum(train_s),
        # RLlib's own timers, per iteration (as the result dict reports them: smoothed)
        "rllib_sample_s": sample_s,
        "rllib_update_s": learn_s,
        "env_steps": int(lifetime) if lifetime is not None else None,
        "runners": runners,
        "runner_step_s": sum(r["step_s"] for r in runners),
        "runner_steps": sum(r["steps"] for r in runners),
        "timers_last": timers,
    }
    algo.stop()
    ray.shutdown()
    print("STACK_JSON " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
