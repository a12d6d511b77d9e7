"""A worker's own batches: what a thread collects on order and hands over whole (a
synchronous TorchRL collector's batch, iterated in a multi-process collector's worker;
a Ray actor's method call that the driver waits on), kept in the thread's sampler
counters for the run's report (``analysis.workers``).

:class:`Batches` counts them (``model.summary.COLLECT_COUNTER_PREFIX``): how many, their
wall time, and the ns of env_step, env_reset and fwd recorded inside them (the phases'
running totals read at each batch's start and end; a few reads per batch, none per env
step). :func:`collecting` is the whole of one batch on a thread that does not train:
counted, marked ``in_rollout`` for the stack sampler (whose samples inside it are the
sampler's wall time, their sites named when no phase is timed) and reported as the
thread's own sampling (``state.own_sampling``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gyreprof.integrations._auto import records as rec
from gyreprof.integrations._auto import state as st

_ENV_STEP = (rec.SAMPLER_PHASES.index("env_step"),)
_ENV_RESET = (rec.SAMPLER_PHASES.index("env_reset"),)
_FWD = (rec.SAMPLER_PHASES.index("fwd"),)


class Batches:
    """One thread's own batches, in its sampler's counters (see the module doc)."""

    __slots__ = ("t", "block", "start", "step0", "reset0", "fwd0", "names")

    def __init__(self, t: Any) -> None:
        from gyreprof._support.block import StatsBlock
        from gyreprof.model.summary import COLLECT_COUNTER_PREFIX as P

        self.t = t
        self.block = StatsBlock.of(t.srec)
        self.names = tuple(
            f"{P}{n}" for n in ("batches", "wall_ns", "env_step_ns", "env_reset_ns", "fwd_ns")
        )
        self.start = self.step0 = self.reset0 = self.fwd0 = 0

    def begin(self, now_ns: int) -> None:
        self.t.srec.flush()  # a private block folds its events in batches: fold them now
        b = self.block
        self.start = now_ns
        self.step0, self.reset0, self.fwd0 = (
            b.phase_ns(_ENV_STEP),
            b.phase_ns(_ENV_RESET),
            b.phase_ns(_FWD),
        )

    def end(self, now_ns: int) -> None:
        self.t.srec.flush()
        b, count = self.block, self.t.sampler.count
        batches, wall, step, reset, fwd = self.names
        count(batches)
        count(wall, max(0, now_ns - self.start))
        count(step, max(0, b.phase_ns(_ENV_STEP) - self.step0))
        count(reset, max(0, b.phase_ns(_ENV_RESET) - self.reset0))
        count(fwd, max(0, b.phase_ns(_FWD) - self.fwd0))


def collecting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as one batch of the calling thread (see the module doc).
    A call inside another batch or wait, or on a thread that trains (a learner's
    update: no batch), is only called; so is the first call during which the thread
    stepped an optimizer (it is no batch either)."""
    t = st.thread_state()
    if t.trains or t.in_rollout or t.in_wait:
        return fn(*args, **kwargs)
    b = t.batches
    if b is None:
        b = t.batches = Batches(t)
    start = t.now()
    b.begin(start)
    t.in_wait = True  # a wait inside it is part of it
    t.in_rollout = t.rolled = True
    try:
        return fn(*args, **kwargs)
    finally:
        t.in_wait = False
        t.in_rollout = False
        if not t.trains:
            end = t.now()
            b.end(end)
            st.own_sampling(t, start, end)
