"""What one call of the C env-call guard costs, with no loop around it to blur it.

    python benchmarks/bench_guard_cost.py

- the calibrated costs ``gyreprof run`` prices the calls with
  (``libs.gymnasium.measure_costs``): the least of 7 runs;
- a 4-deep stack of guarded ``step`` methods (``W(W(W(Inner)))``) in a tight loop,
  against the same stack bare: ns of thread CPU time per outer call, the least of 9
  runs of 20,000 calls.

Run it alternately with ``PYTHONPATH`` pointing at two checkouts to compare two builds
of the guard (``benchmarks/bench_wrapper.py`` measures it inside real loops, where a
loaded machine's noise is larger than the guard).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from gyreprof.integrations._auto import state as st
from gyreprof.integrations.libs import gymnasium as gym_lib

P = "gyreprof.wrapper."
N = 20_000


class Inner(gym.Env):  # type: ignore[misc]
    def step(self, a: Any) -> Any:
        return a

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return 0, {}


class W(gym.Wrapper):  # type: ignore[misc]
    def step(self, a: Any) -> Any:
        return self.env.step(a)


def _loop(step: Callable[[int], Any]) -> float:
    t0 = time.thread_time_ns()
    for i in range(N):
        step(i)
    return (time.thread_time_ns() - t0) / N


def main() -> None:
    gym_lib.instrument()  # Inner and W are patched now (gym.Env's subclass hook)
    runs = [gym_lib.measure_costs() for _ in range(7)]
    for k in ("env_step.timed", "env_step.inner", "step_async.timed"):
        print(f"calibrated {k:18s} {min(r[P + k] for r in runs):7.1f} ns")
    env = W(W(W(Inner())))
    st.thread_state()
    guarded = min(_loop(env.step) for _ in range(9))
    for c in (Inner, W):  # the same stack bare: the original functions
        c.step = c.__dict__["step"].fn
    bare = min(_loop(env.step) for _ in range(9))
    print(
        f"4-deep stack: guarded {guarded:6.0f} ns, bare {bare:6.0f} ns, "
        f"added {guarded - bare:6.0f} ns per step"
    )


if __name__ == "__main__":
    main()
