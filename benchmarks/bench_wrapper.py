"""The env-call wrappers of ``gyreprof run``: what they add per step, and what the
report says they add.

    python benchmarks/bench_wrapper.py            # 60 interleaved rounds per case
    python benchmarks/bench_wrapper.py --quick    # 8 short rounds (a smoke run)
    python benchmarks/bench_wrapper.py --wall     # wall time instead of thread CPU time

Three loops, each run bare, with the C wrappers (``gyreprof._core.guard``, what
``gyreprof run`` installs) and with the tests' Python reference of the same wrappers
(``tests/helpers/gym_reference.py``, never installed by a run), interleaved in one process
(the patched methods are swapped in and out between rounds, so every round runs the
same objects):

- ``cartpole``: a ``gym.make("CartPole-v1")`` env's ``step`` (4 patched ``step``
  methods deep: TimeLimit, OrderEnforcing, PassiveEnvChecker, CartPole);
- ``dummyvec``: an SB3 ``DummyVecEnv`` of 4 Monitor-wrapped CartPoles, per vector step;
- ``cleanrl``: a CleanRL-style loop, ``SyncVectorEnv`` of 4 CartPoles (autoreset) and
  a tiny policy, per vector step: numpy (a 4x2 matmul) by default, with ``--torch`` a
  4-64-2 MLP under ``no_grad`` (CleanRL's own shape; its ~50 us per step make the
  wrappers' ~1 us hard to see on a loaded machine).

Per case: the lower quartile of the rounds' ns per step of each mode (thread CPU
time unless ``--wall``), the measured added cost (the median over rounds of each
round's C - bare and Python - bare, with the interquartile range of C - bare: the
noise), the estimate the report gives for the C rounds (the sampler's
``overhead_ns`` over those rounds' steps; its wrapper part beside it), estimate /
measured (target 0.67-1.5), and patched / bare (target <= 1.05 on CartPole); the
Python reference's rounds are priced at its own calibrated costs (``Py est``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from gyreprof.integrations._auto import state as st
from gyreprof.integrations.libs import gymnasium as gym_lib

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import gym_reference  # noqa: E402  (the Python reference of the wrappers)

#: the clock the loops are timed on: the thread's CPU time (a loaded machine's
#: preemptions are not in it), or the wall clock with --wall
CLOCK: Callable[[], int] = time.thread_time_ns


def _patched_methods() -> list[tuple[type, str, Any]]:
    """(class, name, C wrapper) of every patched env method now installed."""
    from gyreprof._core.guard import Guard

    out = []
    todo: list[type] = [gym.Env]
    seen: set[type] = set()
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        todo.extend(c.__subclasses__())
        for name in ("step", "reset", "step_async", "step_wait"):
            fn = c.__dict__.get(name)
            if isinstance(fn, Guard):
                out.append((c, name, fn))
    return out


class Modes:
    """Swap the patched methods between bare (the originals), C and the Python reference."""

    def __init__(self) -> None:
        self.methods = _patched_methods()
        self.py: dict[tuple[type, str], Any] = {}
        for cls, name, g in self.methods:
            guarded = g.guarded
            self.py[(cls, name)] = gym_reference.wrap(g.fn, g.kind, guarded, gym_lib._thread)

    def set(self, mode: str) -> None:
        for cls, name, g in self.methods:
            fn = {"bare": g.fn, "c": g, "py": self.py[(cls, name)]}[mode]
            setattr(cls, name, fn)


def cartpole(n: int) -> Callable[[], float]:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)

    def run() -> float:
        step, reset = env.step, env.reset
        t0 = CLOCK()
        for i in range(n):
            _, _, term, trunc, _ = step(i & 1)
            if term or trunc:
                reset()
        return (CLOCK() - t0) / n

    return run


def dummyvec(n: int) -> Callable[[], float]:
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1")) for _ in range(4)])
    venv.reset()
    actions = np.zeros(4, dtype=np.int64)

    def run() -> float:
        t0 = CLOCK()
        for i in range(n):
            actions[:] = i & 1
            venv.step(actions)
        return (CLOCK() - t0) / n

    return run


#: the Python reference's calibrated costs (main() measures them), pricing its rounds
PY_COSTS: dict[str, float] = {}

TORCH = False  # --torch: the cleanrl case's policy in torch (numpy by default)


def cleanrl(n: int) -> Callable[[], float]:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    obs, _ = envs.reset(seed=1)
    try:
        if not TORCH:
            raise ImportError("numpy policy")
        import torch

        torch.set_num_threads(1)
        net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))

        def policy(o: Any) -> Any:
            with torch.no_grad():
                return net(torch.as_tensor(o, dtype=torch.float32)).argmax(1).numpy()

    except ImportError:
        w = np.random.default_rng(0).standard_normal((4, 2))

        def policy(o: Any) -> Any:
            return (o @ w).argmax(1)

    state = {"obs": obs}

    def run() -> float:
        o = state["obs"]
        t0 = CLOCK()
        for _ in range(n):
            o, _, _, _, _ = envs.step(policy(o))
        state["obs"] = o
        return (CLOCK() - t0) / n

    return run


CASES = {"cartpole": (cartpole, 2_000), "dummyvec": (dummyvec, 500), "cleanrl": (cleanrl, 300)}


def _overhead(t: Any) -> tuple[float, float]:
    src = t.sampler.snapshot().sources[0]
    return float(src.overhead_ns), float(src.wrapper_ns or 0.0)


def bench(name: str, rounds: int, scale: float) -> dict[str, float]:
    make, n = CASES[name]
    n = max(100, int(n * scale))
    run = make(n)
    modes = Modes()
    t = st.tls.t if hasattr(st.tls, "t") else st.new_thread()
    for mode in ("bare", "c", "py"):  # warm up
        modes.set(mode)
        run()
    times: dict[str, list[float]] = {"bare": [], "c": [], "py": []}
    est = {"c": 0.0, "py": 0.0}
    wrap = 0.0
    steps = {"c": 0, "py": 0}
    c_costs = dict(t.sampler.form_cost_ns)
    order = ["bare", "c", "py"]
    for r in range(rounds):
        for mode in order[r % 3 :] + order[: r % 3]:  # each mode first in turn
            modes.set(mode)
            if mode != "bare":
                # the rounds of each mode priced at its own wrappers' calibrated costs
                t.sampler.form_cost_ns.update(c_costs if mode == "c" else PY_COSTS)
                o0, w0 = _overhead(t)
            times[mode].append(run())
            if mode != "bare":
                o1, w1 = _overhead(t)
                est[mode] += o1 - o0
                if mode == "c":
                    wrap += w1 - w0
                steps[mode] += n
    t.sampler.form_cost_ns.update(c_costs)
    modes.set("c")
    # the lower quartile: a round that was disturbed only ever reads longer; the added
    # costs: the median of each round's own difference (the modes ran side by side)
    med = {m: statistics.quantiles(v, n=4)[0] for m, v in times.items()}
    diffs_c = [c - b for c, b in zip(times["c"], times["bare"], strict=True)]
    added_c = statistics.median(diffs_c)
    q1, _, q3 = statistics.quantiles(diffs_c, n=4)
    added_py = statistics.median(p - b for p, b in zip(times["py"], times["bare"], strict=True))
    est_step = est["c"] / steps["c"]
    est_py = est["py"] / steps["py"]
    return {
        "bare_ns": med["bare"],
        "c_ns": med["c"],
        "py_ns": med["py"],
        "added_c_ns": added_c,
        "added_py_ns": added_py,
        "added_c_iqr_ns": q3 - q1,
        "estimate_ns": est_step,
        "estimate_wrapper_ns": wrap / steps["c"],
        "estimate_over_measured": est_step / added_c if added_c > 0 else float("nan"),
        "estimate_py_ns": est_py,
        "estimate_py_over_measured": est_py / added_py if added_py > 0 else float("nan"),
        "ratio_c": 1.0 + added_c / med["bare"],
        "ratio_py": 1.0 + added_py / med["bare"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few short rounds per case")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--wall", action="store_true", help="time on the wall clock, not CPU")
    ap.add_argument("--torch", action="store_true", help="cleanrl: a torch policy")
    args = ap.parse_args()
    global CLOCK, TORCH
    TORCH = args.torch
    if args.wall:
        CLOCK = time.perf_counter_ns
    rounds, scale = (8, 0.5) if args.quick else (args.rounds, 1.0)
    gym_lib.instrument()
    try:
        import stable_baselines3  # noqa: F401  (its env classes exist before the swap)
    except ImportError:
        CASES.pop("dummyvec", None)
    print(f"wrapper costs (ns per call): {gym_lib.wrapper_costs()}")
    PY_COSTS.update(gym_reference.measure_costs())
    print(f"Python reference costs (ns per call): {PY_COSTS}")
    head = (
        f"{'case':<9} {'bare':>8} {'C':>8} {'Python':>8} {'+C':>7} {'(IQR)':>6} {'+Py':>7} "
        f"{'estimate':>8} {'(wrap)':>7} {'est/meas':>8} {'C/bare':>7} {'Py/bare':>7} "
        f"{'Py est':>7} {'est/meas':>8}"
    )
    print(head)
    for name in args.cases.split(","):
        if name not in CASES:
            continue
        r = bench(name, rounds, scale)
        print(
            f"{name:<9} {r['bare_ns']:8.0f} {r['c_ns']:8.0f} {r['py_ns']:8.0f} "
            f"{r['added_c_ns']:7.0f} {r['added_c_iqr_ns']:6.0f} {r['added_py_ns']:7.0f} "
            f"{r['estimate_ns']:8.0f} "
            f"{r['estimate_wrapper_ns']:7.0f} {r['estimate_over_measured']:8.2f} "
            f"{r['ratio_c']:7.3f} {r['ratio_py']:7.3f} "
            f"{r['estimate_py_ns']:7.0f} {r['estimate_py_over_measured']:8.2f}"
        )


if __name__ == "__main__":
    main()
