"""``gyreprof demo``: profile a real CartPole sampler loop (env / fwd / xfer) and print the summary."""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from typing import Any, cast

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="profile a gymnasium CartPole loop with a numpy policy and a queue transfer",
        description="Runs a real sampler loop: gymnasium CartPole-v1 steps (env), a small numpy "
        "MLP policy (fwd) and a queue.Queue hand-off to a consumer thread (xfer), timed with "
        "one clock read per phase boundary. Prints the per-phase percentiles, the warm-up "
        "line and the profiler's own overhead.",
    )
    p.add_argument("--steps", type=int, default=20000, help="steady-state steps (default 20000)")
    p.add_argument("--warmup", type=int, default=500, help="warm-up steps excluded (default 500)")
    p.add_argument("--env", default="CartPole-v1", help="gymnasium env id (default CartPole-v1)")
    p.add_argument("--hidden", type=int, default=64, help="policy hidden width (default 64)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--save", metavar="PATH", help="also save (.json: summary, else snapshot bytes)")
    p.set_defaults(func=run)


def run_demo(
    steps: int = 20000,
    warmup: int = 500,
    env_id: str = "CartPole-v1",
    hidden: int = 64,
    seed: int = 0,
) -> Any:
    """Run the demo loop and return its Profiler."""
    import numpy as np

    import gyreprof as gp

    try:
        import gymnasium as gym
    except ImportError:
        raise UsageError("the demo needs gymnasium: pip install 'gyreprof[gym]'") from None
    try:
        env = gym.make(env_id)
    except Exception as exc:  # gymnasium raises several types for unknown ids
        raise UsageError(f"cannot make env {env_id!r}: {exc}") from None
    obs_dim = int(np.prod(env.observation_space.shape or (1,)))
    n_actions = int(getattr(env.action_space, "n", 0))
    if n_actions <= 0:
        raise UsageError(f"the demo needs a discrete-action env; {env_id} is not")
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((obs_dim, hidden)).astype(np.float32) / np.sqrt(obs_dim)
    w2 = rng.standard_normal((hidden, n_actions)).astype(np.float32) / np.sqrt(hidden)

    q: queue.Queue[Any] = queue.Queue(maxsize=1024)
    stop = object()

    def consume() -> None:
        while q.get() is not stop:
            pass

    consumer = threading.Thread(target=consume, name="gyreprof-demo-consumer", daemon=True)
    consumer.start()

    prof = gp.Profiler(["env", "fwd", "xfer"], warmup_steps=warmup, capacity=1 << 17)
    ENV, FWD, XFER = prof.ids("env", "fwd", "xfer")
    lap, begin = prof.lap, prof.begin
    obs, _ = env.reset(seed=seed)
    action = 0
    total = steps + warmup
    for _ in range(total):
        begin()
        obs, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
        lap(ENV)
        h = np.tanh(np.asarray(obs, dtype=np.float32) @ w1)
        action = int(np.argmax(h @ w2))
        lap(FWD)
        q.put((obs, action, reward))
        lap(XFER)
    prof.end()
    q.put(stop)
    consumer.join(timeout=5)
    cast(Any, env).close()  # untyped in some gymnasium versions (1.2)
    return prof


def run(args: argparse.Namespace) -> int:
    if args.steps < 1:
        raise UsageError("--steps must be >= 1")
    if args.warmup < 0:
        raise UsageError("--warmup must be >= 0")
    if args.hidden < 1:
        raise UsageError("--hidden must be >= 1")
    from gyreprof.commands._args import require_extra

    require_extra("the demo", "gymnasium", "gym")
    if not args.json:
        print(
            f"gyreprof demo: {args.env}, numpy MLP policy ({args.hidden} hidden), queue.Queue "
            f"transfer; {args.warmup} warm-up + {args.steps} steps",
            flush=True,
        )
    prof = run_demo(args.steps, args.warmup, args.env, args.hidden, args.seed)
    summary = prof.summary()
    if args.save:
        if args.save.lower().endswith(".json"):
            summary.to_json(args.save, indent=2)
        else:
            prof.snapshot().save(args.save)
    if args.json:
        json.dump(summary.to_dict(histograms=False), sys.stdout, indent=2)
        print()
    else:
        print(safe_text(summary))
        if args.save:
            print(f"saved to {args.save} (read it back with: gyreprof report {args.save})")
    return 0
