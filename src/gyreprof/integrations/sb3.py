"""stable-baselines3 from code: the numbers ``gyreprof run`` gives, without the wrapper command.

::

    from gyreprof.integrations import sb3

    model = PPO("MlpPolicy", venv)
    with sb3.profile(model) as run:
        model.learn(100_000)
    print(run.report())              # sampler phases, wait ratio, verdict
    run.sampler, run.trainer         # the Profilers (phases below)

Trainer phases: ``wait`` (``collect_rollouts``) and ``compute`` (``train``).
Sampler phases: ``env_step``/``env_reset`` (envs stepped in this process, as by
``DummyVecEnv``), ``step_async``/``step_wait`` (a ``SubprocVecEnv``, whose
workers are already running and are not instrumented from here: use
``gyreprof run`` to include them) and ``fwd`` (the policy forward during
rollouts). The patches stay installed; only the session's span is reported.
"""

from __future__ import annotations

from typing import Any

from gyreprof._support.errors import ArgumentTypeError, MissingExtraError
from gyreprof.integrations._auto.session import Session
from gyreprof.integrations.libs import gymnasium as gym_lib
from gyreprof.integrations.libs import sb3 as sb3_lib

__all__ = ["Session", "profile"]


def profile(model: Any) -> Session:
    """Start profiling ``model`` (a stable-baselines3 algorithm) in this process."""
    try:
        from stable_baselines3.common.base_class import BaseAlgorithm
    except ImportError as exc:
        raise MissingExtraError(
            "gyreprof.integrations.sb3", "stable-baselines3", extra="sb3"
        ) from exc
    if not isinstance(model, BaseAlgorithm):
        raise ArgumentTypeError(
            f"model must be a stable-baselines3 algorithm (PPO, SAC, ...), got "
            f"{type(model).__name__}; for a TorchRL collector use "
            "gyreprof.integrations.torchrl.profile(collector)"
        )
    gym_lib.instrument()
    sb3_lib.instrument()
    return Session(f"stable-baselines3 {type(model).__name__}", "sync")
