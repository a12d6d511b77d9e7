"""The ``gyreprof run`` options that reach every process of the run, through its
environment: the warm-up of the automatic profilers.

``--warmup-steps N`` (``$GYREPROF_RUN_WARMUP_STEPS``): the trainer's first N steps
(one collect-and-update each) are warm-up. The sampler marks no steps, so a warm-up
in steps would never end there: it is left out of the sampler's profilers.
``--warmup-s S`` (``$GYREPROF_RUN_WARMUP_S``): the first S seconds of each automatic
profiler (sampler and trainer, per thread) are warm-up. The launcher checks the
values; a process that reads one it cannot use (set by hand) ignores it.
``--server-metrics URL[,URL...]`` (``$GYREPROF_SERVER_METRICS``; ``off``: none): the
rollout servers' metrics pages, read by ``integrations.http.server_metrics`` (by
default each rollout endpoint's ``/metrics``).

``--stacks-hz N`` / ``--no-stacks`` (``$GYREPROF_RUN_STACKS_HZ``, ``0``: off): the
rate of the stack sampler each process runs (``stacks.py``), :data:`DEFAULT_STACKS_HZ`
when unset; a value it cannot use (set by hand) means the default.
"""

from __future__ import annotations

import math
import os
from typing import Any

ENV_WARMUP_STEPS = "GYREPROF_RUN_WARMUP_STEPS"
ENV_WARMUP_S = "GYREPROF_RUN_WARMUP_S"
#: ``--server-metrics URL[,URL...]|off``: the rollout servers' metrics pages
#: (``integrations.http.server_metrics``, which reads it)
ENV_SERVER_METRICS = "GYREPROF_SERVER_METRICS"
ENV_STACKS_HZ = "GYREPROF_RUN_STACKS_HZ"
DEFAULT_STACKS_HZ = 25.0  # <= 1% of CPU on a bare CartPole loop (BENCHMARKS.md, issue 38)
MAX_STACKS_HZ = 1000.0


def warmup_kwargs(side: str) -> dict[str, Any]:
    """``Profiler(...)`` warm-up keywords of an automatic profiler of ``side``
    (``"sampler"`` or ``"trainer"``) from the environment; empty when none is set."""
    seconds = os.environ.get(ENV_WARMUP_S)
    if seconds:
        try:
            s = float(seconds)
        except ValueError:
            return {}
        return {"warmup_s": s} if math.isfinite(s) and s > 0 else {}
    steps = os.environ.get(ENV_WARMUP_STEPS)
    if steps and side == "trainer":
        try:
            n = int(steps)
        except ValueError:
            return {}
        return {"warmup_steps": n} if n > 0 else {}
    return {}


def stacks_hz() -> float:
    """The stack sampler's rate from the environment (0: off)."""
    text = os.environ.get(ENV_STACKS_HZ)
    if not text:
        return DEFAULT_STACKS_HZ
    try:
        hz = float(text)
    except ValueError:
        return DEFAULT_STACKS_HZ
    if hz == 0:
        return 0.0
    return hz if math.isfinite(hz) and 0 < hz <= MAX_STACKS_HZ else DEFAULT_STACKS_HZ


def environment(
    warmup_steps: int | None,
    warmup_s: float | None,
    server_metrics: str | None = None,
    stacks_hz: float | None = None,
) -> dict[str, str]:
    """The variables that carry the options to the run's processes (``stacks_hz``: None
    for the default rate, 0 for no stack sampler)."""
    env = {}
    if warmup_steps:
        env[ENV_WARMUP_STEPS] = str(warmup_steps)
    if warmup_s:
        env[ENV_WARMUP_S] = repr(float(warmup_s))
    if server_metrics:
        env[ENV_SERVER_METRICS] = server_metrics
    if stacks_hz is not None:
        env[ENV_STACKS_HZ] = repr(float(stacks_hz))
    return env
