"""Profile a fleet of Ray rollout actors stepping CartPole, from the driver.

N actors each step a gymnasium CartPole with a small numpy policy and time two
phases per env step (``policy``, ``env``). The driver is the learner: it asks
every actor for a batch (lockstep, like a synchronous PPO sampler), then fits
the policy to the batch; it times ``wait`` and ``compute``. A FleetMonitor
collects every second while all of this runs and prints one line per second;
at the end the driver prints the full fleet summary.

Actor 0 is a simulated straggler (an extra 1 ms sleep every 10th step) so the
fleet view has something to find; ``--no-straggler`` turns it off.

    python examples/ray_fleet.py --actors 4 --seconds 10
    python examples/ray_fleet.py --address auto      # an already running cluster

Needs ``pip install gyreprof[ray,gym]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

try:
    import gymnasium as gym
    import ray
except ImportError as exc:
    sys.exit(f"this example needs Ray and gymnasium: pip install gyreprof[ray,gym] ({exc})")

import gyreprof as gp
from gyreprof.integrations import ray as gpray


def act(weights: np.ndarray, obs: np.ndarray, rng: np.random.Generator) -> int:
    """Softmax over a linear score of the observation: 2 actions."""
    logits = obs @ weights
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return int(rng.random() < p[1])


@gpray.profiled_remote(num_cpus=0)
class RolloutActor(gpray.ProfiledActor):
    """Steps CartPole with a numpy policy; phases ``policy`` and ``env`` per step."""

    def __init__(self, seed: int, straggler: bool = False) -> None:
        self.env = gym.make("CartPole-v1")
        self.obs, _ = self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.straggler = straggler
        self.prof = gpray.attach_profiler(
            self, ["policy", "env"], warmup_steps=50, label=f"rollout-{seed}"
        )
        self.POLICY, self.ENV = self.prof.ids("policy", "env")

    def sample(self, weights: np.ndarray, n_steps: int) -> dict[str, np.ndarray]:
        """``n_steps`` env steps with ``weights``; returns observations, actions, rewards."""
        prof, lap, rng = self.prof, self.prof.lap, self.rng
        obs_buf = np.empty((n_steps, 4), dtype=np.float32)
        act_buf = np.empty(n_steps, dtype=np.int64)
        rew_buf = np.empty(n_steps, dtype=np.float32)
        for t in range(n_steps):
            prof.begin()
            a = act(weights, self.obs, rng)
            lap(self.POLICY)
            obs_buf[t], act_buf[t] = self.obs, a
            self.obs, r, terminated, truncated, _ = self.env.step(a)
            if self.straggler and t % 10 == 0:
                time.sleep(0.001)  # the simulated straggler
            if terminated or truncated:
                self.obs, _ = self.env.reset()
            lap(self.ENV)
            rew_buf[t] = r
        prof.end()
        return {"obs": obs_buf, "act": act_buf, "rew": rew_buf}


def update(weights: np.ndarray, batch: list[dict[str, np.ndarray]]) -> np.ndarray:
    """A stand-in learner step: least-squares fit of the actions taken to the observations."""
    obs = np.concatenate([b["obs"] for b in batch]).astype(np.float64)
    target = np.concatenate([b["act"] for b in batch]).astype(np.float64) * 2 - 1
    coef, *_ = np.linalg.lstsq(obs, target, rcond=None)
    new = weights.copy()
    new[:, 1] = 0.9 * weights[:, 1] + 0.1 * coef
    return new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--actors", type=int, default=4, help="number of rollout actors")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to train")
    ap.add_argument("--steps", type=int, default=200, help="env steps per actor per batch")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between collections")
    ap.add_argument("--address", default=None, help="Ray cluster address (default: start one)")
    ap.add_argument("--no-straggler", action="store_true", help="no simulated straggler")
    ap.add_argument("--json", action="store_true", help="print the final summary as JSON")
    args = ap.parse_args(argv)
    if args.actors < 1 or args.seconds <= 0 or args.steps < 1 or args.interval <= 0:
        ap.error("--actors and --steps must be >= 1, --seconds and --interval > 0")

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False)
    try:
        actors = [
            RolloutActor.remote(  # type: ignore[attr-defined]
                seed=i, straggler=(i == 0 and not args.no_straggler)
            )
            for i in range(args.actors)
        ]
        learner = gp.Profiler(["wait", "compute"], warmup_steps=2, window_steps=5)
        weights = np.zeros((4, 2))

        def show(point: gpray.FleetPoint, fleet: gpray.FleetSummary) -> None:
            print(point, flush=True)

        monitor = gpray.FleetMonitor(
            actors, interval_s=args.interval, phase="env", learner=learner, on_update=show
        )
        rounds = 0
        with monitor:
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                learner.begin()
                with learner.phase("wait"):
                    wref = ray.put(weights)
                    batch: list[Any] = ray.get([a.sample.remote(wref, args.steps) for a in actors])
                with learner.phase("compute"):
                    weights = update(weights, batch)
                rounds += 1
            learner.end()
        fleet = gpray.collect(actors, timeout_s=10, phase="env", learner=learner)
        if args.json:
            print(json.dumps(fleet.to_dict(), indent=2, default=str))
        else:
            print()
            print(f"{rounds} learner rounds of {args.actors} x {args.steps} env steps")
            print(fleet)
        for err in monitor.errors:
            print(f"monitor error: {err}", file=sys.stderr)
        return 0 if fleet.answered == args.actors else 1
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
