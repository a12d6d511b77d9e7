"""A rolling window's row for a phase timed several times per step (or not every step).

Its count is the phase's events, not the window's steps; mean, max and percentiles
are over those events. Compared with the exact windows cut from the ring.
"""

from __future__ import annotations

import numpy as np
import pytest

import gyreprof as gp

STEPS = 8
# env is timed a varying number of times per step (vectorised sub-steps, a reset step
# without any), policy once per step
ENV_PER_STEP = [3, 0, 1, 5, 2, 2, 0, 4]


def _run() -> tuple[gp.Profiler, list[int]]:
    prof = gp.Profiler(["env", "policy"], window_steps=STEPS, max_windows=8)
    env: list[int] = []
    v = 50_000
    for k in ENV_PER_STEP:
        prof.begin()
        for _ in range(k):
            prof.record("env", v)
            env.append(v)
            v += 37_000
        prof.record("policy", 1_000)
    prof.begin()  # closes the last step of the window
    prof.end()
    return prof, env


def test_window_count_is_the_phase_events_not_the_steps() -> None:
    prof, env = _run()
    vals = np.asarray(env, dtype=np.int64)
    (rolling,) = prof.windows()
    exact = prof.windows(steps=STEPS)[0]
    for w in (rolling, exact):
        assert w.steps == STEPS
        e = w.phases["env"]
        assert e.count == sum(ENV_PER_STEP) == len(vals)
        assert e.mean == pytest.approx(float(vals.mean()), rel=1e-12)
        assert e.max == vals.max()
        assert w.phases["policy"].count == STEPS
    # within the rolling window's ~3% buckets of the exact order statistics
    want = np.percentile(vals, (50, 90, 99), method="inverted_cdf")
    got = (rolling.phases["env"].p50, rolling.phases["env"].p90, rolling.phases["env"].p99)
    for g, w in zip(got, want, strict=True):
        assert abs(g - w) <= 0.07 * w
