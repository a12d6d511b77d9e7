"""TorchRL from code: the numbers ``gyreprof run`` gives, without the wrapper command.

::

    from gyreprof.integrations import torchrl as gtrl

    with gtrl.profile(collector) as run:
        for batch in collector:
            update(batch)
    print(run.report())              # sampler phases, wait ratio, verdict
    run.sampler, run.trainer         # the Profilers

Trainer phases: ``wait`` (until the collector hands over the next batch) and
``compute`` (the loop body). Sampler phases: ``env_step``/``env_reset`` of the
gymnasium envs stepped in this process (``GymEnv``, ``SerialEnv``); envs in
worker processes (``ParallelEnv``, multi-process collectors) need
``gyreprof run``.
"""

from __future__ import annotations

from typing import Any

from gyreprof._support.errors import ArgumentTypeError, MissingExtraError
from gyreprof.integrations._auto.session import Session
from gyreprof.integrations.libs import gymnasium as gym_lib
from gyreprof.integrations.libs import torchrl as torchrl_lib

__all__ = ["Session", "profile"]


def profile(collector: Any) -> Session:
    """Start profiling the loop over ``collector`` (a TorchRL collector) in this process."""
    try:
        import torchrl.collectors as collectors
    except ImportError as exc:
        raise MissingExtraError(
            "gyreprof.integrations.torchrl", "torchrl", extra="torchrl"
        ) from exc
    base = torchrl_lib._base_collector(collectors)
    if base is None or not isinstance(collector, base):
        raise ArgumentTypeError(
            f"collector must be a TorchRL collector (torchrl.collectors.Collector, ...), got "
            f"{type(collector).__name__}; for stable-baselines3 use "
            "gyreprof.integrations.sb3.profile(model)"
        )
    gym_lib.instrument()
    torchrl_lib.instrument()
    sync = type(collector).__name__ in torchrl_lib.SYNC_COLLECTORS
    return Session(f"TorchRL {type(collector).__name__}", "sync" if sync else None)
