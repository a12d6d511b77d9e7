"""The profiler's own time in a run: each recorded event priced at the form that
recorded it, and the patched env-call wrappers' calls at their calibrated costs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gyreprof.model.summary import WRAPPER_COUNTER_PREFIX

__all__ = ["overhead_of", "wrapper_overhead"]


def overhead_of(
    events: int,
    steps: int,
    form_events: Mapping[str, int],
    form_cost_ns: Mapping[str, float] | None,
    lap_cost_ns: float,
) -> float:
    """Profiler time (ns) behind ``events`` steady phase events and ``steps`` steps.

    Each event is priced at the form that recorded it (``form_cost_ns``: ``lap``,
    ``begin``, ``with``, ``timed``, ``record``, calibrated by the Profiler); laps
    are the events no slower form counted. Without costs, every boundary costs
    ``lap_cost_ns``.
    """
    if not form_cost_ns:
        return lap_cost_ns * (events + steps)
    lap = float(form_cost_ns.get("lap", lap_cost_ns))
    slow = {k: int(form_events.get(k, 0)) for k in ("with", "timed", "record")}
    laps = max(0, events - sum(slow.values()))
    total = lap * laps + float(form_cost_ns.get("begin", lap)) * steps
    for form, n in slow.items():
        total += float(form_cost_ns.get(form, lap)) * n
    return total


def wrapper_overhead(
    phases: Sequence[str],
    steady_counts: Any,
    warm_counts: Any,
    counters: Mapping[str, int],
    form_cost_ns: Mapping[str, float] | None,
) -> tuple[float, int]:
    """(ns, timed events) of the patched wrappers' calls within the steady state.

    A wrapper kind is a phase (``env_step``...); its counted calls (timed and inner) are
    priced at their calibrated costs, scaled to the steady share of the phase's events
    (the counters also count the warm-up's calls). The timed calls' events are the
    second number: the wrapper's price includes its timer, which the caller does not
    price again as a ``with`` event.
    """
    if not form_cost_ns or not counters:
        return 0.0, 0
    total = 0.0
    timed_steady = 0
    for i, name in enumerate(phases):
        timed = int(counters.get(f"{WRAPPER_COUNTER_PREFIX}{name}.timed", 0))
        inner = int(counters.get(f"{WRAPPER_COUNTER_PREFIX}{name}.inner", 0))
        if timed <= 0 and inner <= 0:
            continue
        steady, warm = int(steady_counts[i]), int(warm_counts[i])
        frac = steady / (steady + warm) if steady + warm > 0 else 0.0
        c_timed = float(form_cost_ns.get(f"{WRAPPER_COUNTER_PREFIX}{name}.timed", 0.0))
        c_inner = float(form_cost_ns.get(f"{WRAPPER_COUNTER_PREFIX}{name}.inner", 0.0))
        if not (math.isfinite(c_timed) and math.isfinite(c_inner)):
            continue
        total += frac * (max(0, timed) * max(0.0, c_timed) + max(0, inner) * max(0.0, c_inner))
        timed_steady += min(steady, round(frac * max(0, timed)))
    return total, timed_steady
