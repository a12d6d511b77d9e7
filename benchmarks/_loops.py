"""The real loops the hot-path benchmarks share.

``CartPoleLoop``: the unwrapped gymnasium CartPole with a linear policy (every
run replays the same episodes from ``seed=0``). ``NumpyLoop``: a C-speed batched
step, linearised CartPole for 64 envs (a 4x4 matmul and a few in-place numpy
ufuncs). A step has four boundaries: the loop top, after the env step, after
the policy, after handing the action on. Each class builds its loop in these
forms, each a function that runs ``steps`` steps:

* ``bare_loop()``: no timing;
* ``boundary_loop(f)``: ``f(0)`` .. ``f(3)`` at the four boundaries (the floor, a
  loop of laps with a phase covering the loop top);
* ``step_loop(begin, lap)``: ``begin()`` at the top and ``lap(0)``, ``lap(1)``,
  ``lap(2)`` at the others (the documented sampler idiom);
* ``with_loop(timers, begin)``: ``begin()`` at the top and the three regions
  inside ``with`` blocks of three pre-made timers;
* ``rawlist_loop()``: ``ts.append(perf_counter_ns())`` at the four boundaries
  (the hand-rolled pattern gyreprof replaces).

The loop bodies are written out so that the timed calls are the only
difference between forms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Loop = Callable[[], None]


class CartPoleLoop:
    """One unwrapped ``CartPole-v1`` and the loops over it (``steps`` steps a run)."""

    def __init__(self, steps: int) -> None:
        import gymnasium as gym

        self.env = gym.make("CartPole-v1").unwrapped
        self.w = np.array([0.1, 0.5, 1.0, 0.7])
        self.out: list[int] = []
        self.steps = steps

    def boundary_loop(self, f: Callable[[int], Any]) -> Loop:
        env, w, out, rng = self.env, self.w, self.out, range(self.steps)

        def run() -> None:
            obs, _ = env.reset(seed=0)
            a = 0
            for _ in rng:
                f(0)
                obs, r, term, trunc, _i = env.step(a)
                if term:
                    obs, _ = env.reset(seed=0)
                f(1)
                a = 1 if float(obs @ w) > 0 else 0
                f(2)
                out.append(a)
                f(3)
            out.clear()

        return run

    def step_loop(self, begin: Callable[[], Any], lap: Callable[[int], Any]) -> Loop:
        env, w, out, rng = self.env, self.w, self.out, range(self.steps)

        def run() -> None:
            obs, _ = env.reset(seed=0)
            a = 0
            for _ in rng:
                begin()
                obs, r, term, trunc, _i = env.step(a)
                if term:
                    obs, _ = env.reset(seed=0)
                lap(0)
                a = 1 if float(obs @ w) > 0 else 0
                lap(1)
                out.append(a)
                lap(2)
            out.clear()

        return run

    def bare_loop(self) -> Loop:
        env, w, out, rng = self.env, self.w, self.out, range(self.steps)

        def run() -> None:
            obs, _ = env.reset(seed=0)
            a = 0
            for _ in rng:
                obs, r, term, trunc, _i = env.step(a)
                if term:
                    obs, _ = env.reset(seed=0)
                a = 1 if float(obs @ w) > 0 else 0
                out.append(a)
            out.clear()

        return run

    def rawlist_loop(self) -> Loop:
        env, w, out, rng = self.env, self.w, self.out, range(self.steps)
        ts: list[int] = []
        pc = time.perf_counter_ns

        def run() -> None:
            obs, _ = env.reset(seed=0)
            a = 0
            app = ts.append
            for _ in rng:
                app(pc())
                obs, r, term, trunc, _i = env.step(a)
                if term:
                    obs, _ = env.reset(seed=0)
                app(pc())
                a = 1 if float(obs @ w) > 0 else 0
                app(pc())
                out.append(a)
                app(pc())
            out.clear()
            ts.clear()

        return run

    def with_loop(self, timers: Sequence[Any], begin: Callable[[], Any]) -> Loop:
        env, w, out, rng = self.env, self.w, self.out, range(self.steps)
        env_t, fwd_t, xfer_t = timers

        def run() -> None:
            obs, _ = env.reset(seed=0)
            a = 0
            for _ in rng:
                begin()
                with env_t:
                    obs, r, term, trunc, _i = env.step(a)
                    if term:
                        obs, _ = env.reset(seed=0)
                with fwd_t:
                    a = 1 if float(obs @ w) > 0 else 0
                with xfer_t:
                    out.append(a)
            out.clear()

        return run


class NumpyLoop:
    """A batched linearised-CartPole step for ``n_envs`` envs in numpy (a few ufuncs)."""

    def __init__(self, steps: int, n_envs: int = 64) -> None:
        gen = np.random.default_rng(0)
        tau = 0.02
        # linearised CartPole about the upright pole: s' = A s + B u, u = +-10 N
        a_mat = np.eye(4) + tau * np.array(
            [[0, 1, 0, 0], [0, 0, -0.717, 0], [0, 0, 0, 1], [0, 0, 15.76, 0]]
        )
        b_push = (tau * np.array([0.0, 0.976, 0.0, -1.46]) * 10.0)[:, None]
        self.s0 = gen.uniform(-0.05, 0.05, (4, n_envs))
        s = self.s = self.s0.copy()
        s2 = np.empty_like(s)
        w = np.array([0.1, 0.5, 1.0, 0.7])
        logits = np.empty(n_envs)
        act = np.zeros(n_envs, dtype=bool)
        sign = np.empty(n_envs)
        buf = np.empty(n_envs, dtype=bool)

        def physics() -> None:
            np.matmul(a_mat, s, out=s2)
            np.subtract(np.multiply(act, 2.0, out=sign), 1.0, out=sign)
            np.add(s2, b_push * sign, out=s)
            np.clip(s, -2.4, 2.4, out=s)

        def policy() -> None:
            np.dot(w, s, out=logits)
            np.greater(logits, 0.0, out=act)

        def xfer() -> None:
            np.copyto(buf, act)

        self.physics, self.policy, self.xfer = physics, policy, xfer
        self.steps = steps

    def bare_loop(self) -> Loop:
        s, s0, rng = self.s, self.s0, range(self.steps)
        physics, policy, xfer = self.physics, self.policy, self.xfer

        def run() -> None:
            s[:] = s0
            for _ in rng:
                physics()
                policy()
                xfer()

        return run

    def boundary_loop(self, f: Callable[[int], Any]) -> Loop:
        s, s0, rng = self.s, self.s0, range(self.steps)
        physics, policy, xfer = self.physics, self.policy, self.xfer

        def run() -> None:
            s[:] = s0
            for _ in rng:
                f(0)
                physics()
                f(1)
                policy()
                f(2)
                xfer()
                f(3)

        return run

    def step_loop(self, begin: Callable[[], Any], lap: Callable[[int], Any]) -> Loop:
        s, s0, rng = self.s, self.s0, range(self.steps)
        physics, policy, xfer = self.physics, self.policy, self.xfer

        def run() -> None:
            s[:] = s0
            for _ in rng:
                begin()
                physics()
                lap(0)
                policy()
                lap(1)
                xfer()
                lap(2)

        return run

    def rawlist_loop(self) -> Loop:
        s, s0, rng = self.s, self.s0, range(self.steps)
        physics, policy, xfer = self.physics, self.policy, self.xfer
        ts: list[int] = []
        pc = time.perf_counter_ns

        def run() -> None:
            s[:] = s0
            app = ts.append
            for _ in rng:
                app(pc())
                physics()
                app(pc())
                policy()
                app(pc())
                xfer()
                app(pc())
            ts.clear()

        return run

    def with_loop(self, timers: Sequence[Any], begin: Callable[[], Any]) -> Loop:
        s, s0, rng = self.s, self.s0, range(self.steps)
        physics, policy, xfer = self.physics, self.policy, self.xfer
        env_t, fwd_t, xfer_t = timers

        def run() -> None:
            s[:] = s0
            for _ in rng:
                begin()
                with env_t:
                    physics()
                with fwd_t:
                    policy()
                with xfer_t:
                    xfer()

        return run
