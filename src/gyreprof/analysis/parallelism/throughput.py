"""Did env-step throughput move when the worker count changed?"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, UnknownPhaseError
from gyreprof.model._serial import Record

if TYPE_CHECKING:
    from gyreprof.model.summary import Summary

__all__ = ["ThroughputComparison", "compare_throughput"]


@dataclass(frozen=True)
class ThroughputComparison(Record):
    """Env-step throughput at two worker counts.

    ``rate_a_per_s`` / ``rate_b_per_s`` are env steps per second: env steps per
    ``phase`` call divided by the phase's mean duration (or the rates given
    directly). ``change`` is ``rate_b / rate_a - 1``; ``ideal_change`` is what
    linear scaling with the worker count would give; ``scaling_efficiency`` is
    the achieved speed-up over the ideal one (``None`` when the worker count
    did not change). ``changed`` is ``|change| > tolerance``; ``ok`` is whether
    throughput moved in the direction of the worker change (or stayed put when
    the worker count did not change).
    """

    phase: str
    workers: tuple[int, int]
    rate_a_per_s: float
    rate_b_per_s: float
    change: float
    ideal_change: float
    scaling_efficiency: float | None
    tolerance: float
    min_efficiency: float
    changed: bool
    ok: bool
    loop_steps_per_s: tuple[float | None, float | None]
    message: str

    def __str__(self) -> str:
        return self.message


def _as_summary(run: object, which: str) -> Summary:
    """A run's Summary: as given, or computed from a Snapshot or a Profiler (resolved
    once, ``gyreprof.recording.source.resolve``)."""
    from gyreprof.recording.source import resolve  # only here: census needs no compiled core

    what = f"run {which}"
    try:
        return resolve(run, what=what, paths=False).summary
    except TypeError:
        raise ArgumentTypeError(
            f"{what} must be a Summary, Snapshot or Profiler (or an env-steps/s number), "
            f"got {type(run).__name__}"
        ) from None


def _rate(run: Any, which: str, phase: str, per_call: float) -> tuple[float, float | None]:
    """(env steps/s, loop steps/s or None) of one run."""
    if isinstance(run, bool):
        raise ArgumentTypeError(f"run {which} must be a Summary or a number, got a bool")
    if isinstance(run, (int, float)):
        if not math.isfinite(run) or run <= 0:
            raise InvalidValueError(
                f"run {which}: env steps/s must be a positive number, got {run!r}"
            )
        return float(run), None
    summary = _as_summary(run, which)
    phases = summary.phases
    if phase not in phases:
        raise UnknownPhaseError(
            f"run {which} has no phase {phase!r}; its phases are {sorted(phases)} "
            "(pass phase= the name of the env-step phase)"
        )
    stats = phases[phase]
    mean_ns = float(getattr(stats, "mean", 0.0) or 0.0)
    if getattr(stats, "count", 0) <= 0 or mean_ns <= 0:
        raise InvalidValueError(f"run {which} has no {phase!r} samples to compare")
    loop = getattr(summary, "steps_per_s", None)
    loop_rate = float(loop) * per_call if isinstance(loop, (int, float)) and loop > 0 else None
    return per_call * 1e9 / mean_ns, loop_rate


def _pair(name: str, value: Any, kind: type) -> tuple[Any, Any]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise InvalidValueError(f"{name} must be one value or a pair (run a, run b), got {value!r}")
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise InvalidValueError(f"{name} must hold positive numbers, got {value!r}")
        if kind is int and not isinstance(v, int):
            raise InvalidValueError(f"{name} must hold positive integers, got {value!r}")
    return pair[0], pair[1]


def compare_throughput(
    a: Any,
    b: Any,
    *,
    workers: tuple[int, int] | Sequence[int],
    phase: str = "env",
    env_steps_per_call: float | tuple[float, float] = 1,
    tolerance: float = 0.10,
    min_efficiency: float = 0.5,
) -> ThroughputComparison:
    """Did env-step throughput change between two runs taken at different worker counts?

    ``a`` and ``b`` are Summaries (or Snapshots / Profilers, summarised here)
    of the same loop at ``workers=(workers_a, workers_b)``, or their env
    steps/s as plain numbers. The rate of a run is ``env_steps_per_call``
    (env steps one ``phase`` call performs: the vector env's ``num_envs``,
    one value or a pair) divided by the phase's mean duration — pass the pair
    when ``num_envs`` changed with the worker count, or the comparison reads a
    4× bigger batch as no change. ``tolerance`` is the relative change still
    called "did not move" (default 10%). More workers must also give at least
    ``min_efficiency`` of linear scaling (default 50%): 1→8 workers for +14% is a
    change, but the extra workers mostly wait, and it is not called ok.

    The classic symptom this catches: "changed the worker count 1→4, env steps/s
    did not move: 1020→1040 (+2%)".
    """
    wa, wb = _pair("workers", workers, int)
    per_a, per_b = _pair("env_steps_per_call", env_steps_per_call, float)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise InvalidValueError(f"tolerance must be a fraction >= 0 (0.1 = 10%), got {tolerance!r}")
    if (
        isinstance(min_efficiency, bool)
        or not isinstance(min_efficiency, (int, float))
        or not 0 <= min_efficiency <= 1
    ):
        raise InvalidValueError(f"min_efficiency must be a fraction 0..1, got {min_efficiency!r}")
    rate_a, loop_a = _rate(a, "a", phase, float(per_a))
    rate_b, loop_b = _rate(b, "b", phase, float(per_b))
    change = rate_b / rate_a - 1.0
    ideal = wb / wa - 1.0
    efficiency = (rate_b / rate_a) / (wb / wa) if wa != wb else None
    changed = abs(change) > tolerance
    if wa == wb:
        ok = not changed
    elif wb > wa:
        assert efficiency is not None
        ok = change > tolerance and efficiency >= min_efficiency
    else:  # fewer workers: a drop is expected; no drop means the removed ones did nothing
        ok = change < -tolerance
    msg = _message(phase, wa, wb, rate_a, rate_b, changed, change, efficiency, min_efficiency)
    if loop_a is not None and loop_b is not None:
        msg += f"; whole loop {loop_a:,.0f}→{loop_b:,.0f} env steps/s ({loop_b / loop_a - 1:+.0%})"
    return ThroughputComparison(
        phase=phase,
        workers=(wa, wb),
        rate_a_per_s=rate_a,
        rate_b_per_s=rate_b,
        change=change,
        ideal_change=ideal,
        scaling_efficiency=efficiency,
        tolerance=float(tolerance),
        min_efficiency=float(min_efficiency),
        changed=changed,
        ok=ok,
        loop_steps_per_s=(loop_a, loop_b),
        message=msg,
    )


def _message(
    phase: str,
    wa: int,
    wb: int,
    rate_a: float,
    rate_b: float,
    changed: bool,
    change: float,
    efficiency: float | None,
    min_efficiency: float,
) -> str:
    """The plain-words verdict on the rates at two worker counts."""
    figures = f"{rate_a:,.0f}→{rate_b:,.0f} ({change:+.0%})"
    what = f"{phase} steps/s"
    if wa == wb:
        return f"same worker count ({wa}); {what} {figures}"
    elif not changed:
        return (
            f"changed the worker count {wa}→{wb}, {what} did not move: {figures}; "
            f"linear scaling would give {rate_a * wb / wa:,.0f} — the extra workers do no useful "
            "work (check `gyreprof check PID`: fewer worker processes than configured, "
            "oversubscribed cores, or a bottleneck outside the workers)"
        )
    elif (change > 0) == (wb > wa):
        assert efficiency is not None
        said = (
            f"changed the worker count {wa}→{wb}: {what} {figures}, "
            f"{efficiency:.0%} of linear scaling"
        )
        if wb > wa and efficiency < min_efficiency:
            said += (
                f" — below {min_efficiency:.0%}: most of the added workers wait (a shared "
                "bottleneck: the main process stepping or batching, the transfer, or cores)"
            )
        return said
    else:
        return (
            f"changed the worker count {wa}→{wb}: {what} moved the wrong way, {figures} — "
            "more workers made it slower (oversubscription or inter-process overhead)"
            if wb > wa
            else f"changed the worker count {wa}→{wb}: {what} rose, {figures} — the removed "
            "workers were costing throughput"
        )
