"""Sweep the batch size (or the number of environments) of a real CartPole vector-env sampler.

The sampler collects ``batch_size`` transitions per call from ``num_envs``
synchronous CartPole copies, choosing actions with a two-layer numpy policy.
Like most actor loops it first pulls the learner's latest weights, once per
call. It records four phases — ``sync`` (copying the weights), ``policy`` (the
forward pass, batched over the environments), ``env`` (``envs.step``) and
``store`` (writing the transitions and the policy's activations into a rollout
buffer sized to the batch) — so the sweep shows where the time moves as the
batch grows: the fixed per-call sync is shared by more samples, while the
environment cost per sample stays put, so throughput rises and then flattens.

``sample()`` returns the number of transitions it collected (an int), which
``gyreprof sweep`` and ``gyreprof selfcheck`` both read as that many samples::

    cd examples && gyreprof selfcheck sweep_cartpole:make_sampler --kwargs '{"batch_size": 8}'

Each value runs in a fresh process (the factory below is re-imported there
from this file; the ``__main__`` block does not run again), and the result is
a controlled statement: only the swept setting changed. The recommendation is
the smallest value whose throughput is not distinguishable from the best (the
report states the test), so reruns agree where the curve is flat.

Run it::

    python examples/sweep_cartpole.py                                  # batch_size 8..256, num_envs=8
    python examples/sweep_cartpole.py --param num_envs --values 1,2,4,8,16 --fixed batch_size=64
    python examples/sweep_cartpole.py --json sweep.json --plot sweep.png

The same sweep from the command line, with this file's folder on the path::

    cd examples && gyreprof sweep sweep_cartpole:make_sampler --param batch_size \\
        --values 8,16,32,64,128,256 --fixed num_envs=8 --plot sweep.png
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import gymnasium as gym
import numpy as np

import gyreprof as gp


def _limit_blas_threads(n: int) -> None:
    """One BLAS thread per actor, as actor loops usually run (threadpoolctl, if installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(n)


class CartPoleSampler:
    """``batch_size`` transitions per call from ``num_envs`` synchronous CartPole copies."""

    def __init__(
        self,
        batch_size: int,
        num_envs: int,
        hidden: int = 256,
        env_id: str = "CartPole-v1",
        seed: int = 0,
        blas_threads: int | None = 1,
        prof: Any = None,
    ) -> None:
        if blas_threads is not None:
            _limit_blas_threads(blas_threads)
        self.blas_threads = blas_threads
        self.batch_size = int(batch_size)
        self.num_envs = int(num_envs)
        self.envs = gym.make_vec(env_id, num_envs=self.num_envs, vectorization_mode="sync")
        self.obs, _ = self.envs.reset(seed=seed)
        obs_dim = int(np.prod(self.envs.single_observation_space.shape))
        n_actions = int(self.envs.single_action_space.n)
        rng = np.random.default_rng(seed)
        # the learner's weights (a real actor would read them from shared memory or a queue)
        self.learner = [
            rng.standard_normal((obs_dim, hidden)) / np.sqrt(obs_dim),
            rng.standard_normal((hidden, hidden)) / np.sqrt(hidden),
            rng.standard_normal((hidden, n_actions)) / np.sqrt(hidden),
        ]
        self.weights = [np.empty_like(w) for w in self.learner]
        self.steps_per_call = -(-self.batch_size // self.num_envs)
        rows = self.steps_per_call * self.num_envs
        self.buf_obs = np.zeros((rows, obs_dim), dtype=np.float32)
        self.buf_hidden = np.zeros((rows, hidden), dtype=np.float32)
        self.buf_act = np.zeros(rows, dtype=np.int64)
        self.buf_rew = np.zeros(rows, dtype=np.float32)
        self.prof = prof if prof is not None else gp.Profiler(list(make_sampler.phases))
        self.rng = rng

    def sample(self) -> int:
        """One call: ``steps_per_call`` vector steps; returns the transitions collected."""
        phase = self.prof.phase
        n = self.num_envs
        with phase("sync"):
            for dst, src in zip(self.weights, self.learner):  # noqa: B905
                np.copyto(dst, src)
        w1, w2, w3 = self.weights
        for t in range(self.steps_per_call):
            with phase("policy"):
                h = np.tanh(np.tanh(self.obs @ w1) @ w2)
                logits = h @ w3
                noise = self.rng.gumbel(size=logits.shape)
                actions = np.argmax(logits + noise, axis=1)
            with phase("env"):
                obs, reward, _term, _trunc, _info = self.envs.step(actions)
            with phase("store"):
                rows = slice(t * n, (t + 1) * n)
                self.buf_obs[rows] = self.obs
                self.buf_hidden[rows] = h
                self.buf_act[rows] = actions
                self.buf_rew[rows] = reward
            self.obs = obs
        return self.steps_per_call * n

    def close(self) -> None:
        self.envs.close()


def make_sampler(
    batch_size: int = 64,
    num_envs: int = 8,
    hidden: int = 256,
    blas_threads: int | None = 1,
    prof: Any = None,
) -> CartPoleSampler:
    """The factory the sweep calls once per value (and repeat)."""
    return CartPoleSampler(
        batch_size, num_envs, hidden=hidden, blas_threads=blas_threads, prof=prof
    )


make_sampler.phases = ("sync", "policy", "env", "store")  # type: ignore[attr-defined]


def _fixed(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--param", default="batch_size", choices=["batch_size", "num_envs", "hidden"])
    ap.add_argument("--values", default="8,16,32,64,128,256")
    ap.add_argument(
        "--fixed",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="settings kept constant (default: num_envs=8, or batch_size=64 when "
        "sweeping num_envs)",
    )
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--flat-within", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--json", default=None, metavar="PATH")
    ap.add_argument("--plot", default=None, metavar="PATH")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    values = [int(v) for v in args.values.split(",")]
    if args.fixed is None:
        fixed = {"batch_size": 64} if args.param == "num_envs" else {"num_envs": 8}
    else:
        fixed = _fixed(args.fixed)
    result = gp.sweep(
        make_sampler,
        args.param,
        values,
        fixed=fixed,
        steps=args.steps,
        warmup=args.warmup,
        repeats=args.repeats,
        flat_within=args.flat_within,
        timeout_s=args.timeout,
        progress=not args.no_progress,
    )
    print(result)
    if args.json:
        result.to_json(args.json)
    if args.plot:
        result.to_plot(args.plot)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
