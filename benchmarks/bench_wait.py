"""pytest-benchmark: what the wait analysis and the gymnasium wrapper cost.

Full run:  python -m pytest benchmarks/bench_wait.py --benchmark-enable --benchmark-only
CI runs this file once in quick mode (--benchmark-disable is the default in pyproject).

- group "gym-step": 2000 CartPole-v1 steps, plain against ProfiledEnv (the
  wrapper's cost per step is the difference / 2000).
- group "analysis": wait_report and diagnose on a trainer profile whose ring is
  full (65,536 events, ~21,800 steps), i.e. the largest exact-window input.
"""

from __future__ import annotations

from typing import Any

import pytest

import gyreprof as gp
from gyreprof.analysis.verdict import diagnose
from gyreprof.analysis.wait import wait_report

gym = pytest.importorskip("gymnasium")

STEPS = 2000


def _run_env(env: Any) -> None:
    env.reset(seed=0)
    for i in range(STEPS):
        _, _, term, trunc, _ = env.step(i & 1)
        if term or trunc:
            env.reset()


@pytest.mark.benchmark(group="gym-step")
def test_cartpole_plain(benchmark) -> None:
    env = gym.make("CartPole-v1")
    try:
        benchmark(_run_env, env)
    finally:
        env.close()


@pytest.mark.benchmark(group="gym-step")
def test_cartpole_profiled(benchmark) -> None:
    from gyreprof.integrations.gym import ProfiledEnv

    prof = gp.Profiler(["env_step", "env_reset"], capacity=1 << 12)
    env = ProfiledEnv(gym.make("CartPole-v1"), prof)
    try:
        benchmark(_run_env, env)
    finally:
        env.close()
    assert prof.summary().phases["env_step"].count >= STEPS


@pytest.fixture(scope="module")
def full_trainer() -> gp.Profiler:
    tp = gp.Profiler(["wait", "compute", "ckpt"], capacity=1 << 16, window_steps=500)
    for i in range(22_000):
        tp.begin()
        tp.record("wait", 3_000_000 + (i % 7) * 10_000)
        tp.record("compute", 1_000_000)
    tp.end()
    return tp


@pytest.mark.benchmark(group="analysis")
def test_wait_report_full_ring(benchmark, full_trainer) -> None:
    rep = benchmark(wait_report, full_trainer)
    assert 0.7 < rep.ratio < 0.8 and len(rep.windows) >= 19


@pytest.mark.benchmark(group="analysis")
def test_wait_report_rolling(benchmark, full_trainer) -> None:
    snap = full_trainer.snapshot()
    rep = benchmark(wait_report, snap)
    assert rep.window_source == "rolling"


@pytest.mark.benchmark(group="analysis")
def test_diagnose_full_ring(benchmark, full_trainer) -> None:
    v = benchmark(diagnose, trainer=full_trainer)
    assert v.bound == "sampler"
