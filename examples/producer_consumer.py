"""Producer/consumer: is the trainer waiting for the sampler?

A sampler thread steps a gymnasium vector env of CartPole-v1 with a small
policy (numpy by default, torch with --torch) and puts batches of transitions
on a queue; the trainer (the main thread) takes batches and "trains" on them.
Both sides are profiled; at the end the script prints both summaries, the
trainer's wait report and the verdict.

Two settings give opposite verdicts:

    python examples/producer_consumer.py --slow trainer   # -> trainer-bound
    python examples/producer_consumer.py --slow env       # -> sampler-bound, env step dominates

The sampler thread works while the trainer computes, so the verdict detects an
overlapped pipeline from the two profiles' timestamps (``verdict.loop ==
"overlapped"``, ``verdict.loop_source == "detected"``): any sustained wait of the
trainer then means the sampler cannot keep up.

``--slow trainer`` makes each train step take 100 ms while the env is fast;
``--slow env`` makes every env step take 2 ms while a train step takes 4 ms.
``--json`` prints one JSON object (verdict, wait report, both summaries)
instead of text. Runs for ``--seconds`` (default 3) of trainer time.
"""

from __future__ import annotations

import argparse
import functools
import json
import queue
import sys
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np

import gyreprof as gp
from gyreprof.analysis.verdict import diagnose
from gyreprof.integrations.gym import ProfiledVectorEnv, phase_names

SETTINGS: dict[str, dict[str, float]] = {
    # per-env step delay (s), train step time (s)
    "trainer": {"env_delay_s": 0.0, "train_s": 0.100},
    "env": {"env_delay_s": 0.002, "train_s": 0.004},
}


class SlowStep(gym.Wrapper):  # type: ignore[type-arg]
    """An env whose every step also takes ``delay_s`` seconds (a stand-in for a heavy simulator)."""

    def __init__(self, env: gym.Env, delay_s: float) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.delay_s = delay_s

    def step(self, action: Any) -> Any:
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        return self.env.step(action)


def make_env(delay_s: float) -> gym.Env:  # type: ignore[type-arg]
    return SlowStep(gym.make("CartPole-v1"), delay_s)


class NumpyPolicy:
    """A 4-64-2 MLP with random weights; acts greedily."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.w1 = rng.standard_normal((4, 64)).astype(np.float32) * 0.5
        self.w2 = rng.standard_normal((64, 2)).astype(np.float32) * 0.5

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        h = np.maximum(obs.astype(np.float32) @ self.w1, 0.0)
        return np.argmax(h @ self.w2, axis=1)


def torch_policy() -> Any:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1).numpy()

    return act


def sampler_loop(
    venv: ProfiledVectorEnv,
    prof: gp.Profiler,
    policy: Any,
    out: queue.Queue[dict[str, np.ndarray]],
    batch_size: int,
    stop: threading.Event,
    use_torch: bool,
) -> None:
    """Step the vector env, act, and put a batch on the queue every ``batch_size`` transitions."""
    if use_torch:
        from gyreprof.integrations.torch import cuda_phase

        fwd = cuda_phase(prof, "fwd")
    else:
        fwd = prof.phase("fwd")
    put = prof.phase("put")
    obs, _ = venv.reset(seed=0)
    buf_obs: list[np.ndarray] = []
    buf_rew: list[np.ndarray] = []
    n = 0
    while not stop.is_set():
        prof.begin()
        with fwd:
            actions = policy(obs)
        obs, rew, _term, _trunc, _ = venv.step(actions)
        buf_obs.append(obs)
        buf_rew.append(rew)
        n += len(rew)
        if n >= batch_size:
            batch = {"obs": np.concatenate(buf_obs), "rew": np.concatenate(buf_rew)}
            buf_obs, buf_rew, n = [], [], 0
            with put:
                while not stop.is_set():
                    try:
                        out.put(batch, timeout=0.05)
                        break
                    except queue.Full:
                        continue
    prof.end()


def train_step(batch: dict[str, np.ndarray], train_s: float, w: np.ndarray) -> float:
    """Pretend to train: a little real arithmetic, then sleep to the step's set duration."""
    t0 = time.perf_counter()
    loss = float(np.mean((batch["obs"] @ w) ** 2))
    rest = train_s - (time.perf_counter() - t0)
    if rest > 0:
        time.sleep(rest)
    return loss


def run(
    slow: str, seconds: float, num_envs: int, batch_size: int, sync: bool, use_torch: bool
) -> dict[str, Any]:
    cfg = SETTINGS[slow]
    fns = [functools.partial(make_env, cfg["env_delay_s"]) for _ in range(num_envs)]
    raw = gym.vector.SyncVectorEnv(fns) if sync else gym.vector.AsyncVectorEnv(fns)
    try:
        sp = gp.Profiler(["fwd", *phase_names(raw), "put"], warmup_steps=20, label="sampler")
        tp = gp.Profiler(["wait", "compute"], warmup_steps=3, label="trainer")
        venv = ProfiledVectorEnv(raw, sp)
        policy = torch_policy() if use_torch else NumpyPolicy()
        q: queue.Queue[dict[str, np.ndarray]] = queue.Queue(maxsize=8)
        stop = threading.Event()
        sampler = threading.Thread(
            target=sampler_loop,
            args=(venv, sp, policy, q, batch_size, stop, use_torch),
            name="sampler",
            daemon=True,
        )
        sampler.start()
        w = np.ones((4, 1), dtype=np.float32)
        deadline = time.perf_counter() + seconds
        wait, compute = tp.phase("wait"), tp.phase("compute")
        try:
            while time.perf_counter() < deadline and sampler.is_alive():
                tp.begin()
                with wait:
                    batch = q.get(timeout=10.0)
                with compute:
                    train_step(batch, cfg["train_s"], w)
            tp.end()
        finally:
            stop.set()
            sampler.join(timeout=10.0)
        verdict = diagnose(sampler=sp, trainer=tp)  # gp.diagnose
        return {
            "setting": slow,
            "sampler": sp.summary(),
            "trainer": tp.summary(),
            "verdict": verdict,
        }
    finally:
        raw.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--slow",
        choices=sorted(SETTINGS),
        default="env",
        help="which side is slow: 'trainer' (slow train step) or 'env' (slow env step)",
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="trainer run time in s (default 3)")
    ap.add_argument("--num-envs", type=int, default=2, help="vector env size (default 2)")
    ap.add_argument("--batch-size", type=int, default=32, help="transitions per batch (default 32)")
    ap.add_argument(
        "--sync",
        action="store_true",
        help="SyncVectorEnv instead of AsyncVectorEnv (no send/wait split)",
    )
    ap.add_argument("--torch", action="store_true", help="a torch policy instead of numpy")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.num_envs < 1 or args.batch_size < 1:
        ap.error("--seconds, --num-envs and --batch-size must be positive")
    res = run(args.slow, args.seconds, args.num_envs, args.batch_size, args.sync, args.torch)
    verdict = res["verdict"]
    if args.json:
        out = {
            "setting": res["setting"],
            "verdict": verdict.to_dict(),
            "sampler": res["sampler"].to_dict(histograms=False),
            "trainer": res["trainer"].to_dict(histograms=False),
        }
        json.dump(out, sys.stdout, indent=2, allow_nan=True)
        print()
        return 0
    print(f"== setting: slow {res['setting']} ==\n")
    print("-- sampler --")
    print(res["sampler"])
    print("\n-- trainer --")
    print(res["trainer"])
    print("\n-- wait report --")
    print(verdict.wait_report)
    print("\n-- verdict --")
    print(verdict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
