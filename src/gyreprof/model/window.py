"""Windows: stretches of a run and their per-phase stats.

Two kinds, one type (:class:`Window`):

- *rolling* windows, closed by the recorder every ``window_steps`` steps in
  fixed memory (percentiles at ~3% resolution): :func:`rolling_windows` reads
  them from the records a snapshot keeps;
- *ring* windows, exact, cut from the raw events still in the ring:
  :func:`windows_from_events`. Their percentiles follow the one rule
  (``gyreprof.model.histogram.exact_percentiles``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gyreprof._support import checks as _checks
from gyreprof._support import forms as _forms
from gyreprof._support.block import decode_windows
from gyreprof._support.errors import InvalidValueError
from gyreprof.model._serial import Record, serial_derived
from gyreprof.model.histogram import STEP, exact_percentiles

__all__ = ["Window", "WindowStats", "rolling_windows", "windows_from_events"]


@dataclass(frozen=True)
class WindowStats(Record):
    """One phase within one window (ns)."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float
    share: float


@serial_derived("steps_per_s")
@dataclass(frozen=True)
class Window(Record):
    """A stretch of the run: its steps, whether it was warm-up, and per-phase stats.

    ``source`` is ``"rolling"`` for the fixed-memory windows the recorder closes
    every ``window_steps`` steps (percentiles at ~3% resolution), or ``"ring"``
    for exact windows computed from the raw events still in the ring.
    """

    index: int
    start_ns: int
    end_ns: int
    first_step: int
    steps: int
    warmup: bool
    phases: dict[str, WindowStats]
    step: WindowStats | None
    source: str

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    @property
    def steps_per_s(self) -> float:
        d = self.duration_s
        return self.steps / d if d > 0 else math.nan

    def __str__(self) -> str:
        return _forms.text("text.window", self)


def rolling_windows(
    rolling: np.ndarray | None, phases: Sequence[str], *, closed: int | None = None
) -> list[Window]:
    """The closed rolling windows in ``rolling`` (records as a snapshot keeps them), oldest
    first; ``closed`` is how many windows the recorder closed in all (the records are the
    last of them), so each window keeps its index in the run."""
    if rolling is None or len(rolling) == 0:
        return []
    nphase = len(phases)
    total_closed = len(rolling) if closed is None else int(closed)
    base = total_closed - len(rolling)
    names = [*phases, STEP]
    nan = math.nan
    out = []
    for i, rec in enumerate(decode_windows(rolling, nphase)):
        # shares of the step time, or of all phase time where that is more (record())
        step_sum = _checks.share_base(
            float(rec.histograms[nphase].sum) if rec.histograms[nphase].count else 0.0,
            float(sum(hw.sum for hw in rec.histograms[:nphase])),
        )
        stats = {}
        for name, hw in zip(names, rec.histograms, strict=True):
            if hw.count:
                share = hw.sum / step_sum if step_sum > 0 else nan
                ws = WindowStats(
                    hw.count,
                    hw.sum / hw.count,
                    float(hw.p50),
                    float(hw.p90),
                    float(hw.p99),
                    float(hw.max),
                    share,
                )
            else:
                ws = WindowStats(0, nan, nan, nan, nan, nan, nan)
            stats[name] = ws
        step_ws = stats.pop(STEP)
        out.append(
            Window(
                index=base + i,
                start_ns=rec.start_ns,
                end_ns=rec.end_ns,
                first_step=rec.first_step,
                steps=rec.steps,
                warmup=rec.warmup,
                phases=stats,
                step=step_ws,
                source="rolling",
            )
        )
    return out


_MAX_WINDOW_STEPS = 2**62
_MAX_WINDOW_S = 4e9  # ~127 years: 4e18 ns still fits an int64


def windows_from_events(
    events: np.ndarray,
    phases: Sequence[str],
    *,
    steps: int | None = None,
    seconds: float | None = None,
    warmup_end_step: int = -1,
    still_warming: bool = False,
) -> list[Window]:
    """Exact per-window stats from raw events (as returned by ``Profiler.events``)."""
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise InvalidValueError(f"steps must be a positive int, got {steps!r}")
        if steps > _MAX_WINDOW_STEPS:  # the step counter is an int64
            raise InvalidValueError(f"steps must be at most {_MAX_WINDOW_STEPS}, got {steps}")
    elif seconds is not None:
        try:
            sec = float(seconds)
        except (TypeError, ValueError):
            raise InvalidValueError(f"seconds must be a positive number, got {seconds!r}") from None
        if not math.isfinite(sec) or sec <= 0:
            raise InvalidValueError(f"seconds must be a positive number, got {seconds!r}")
        if sec > _MAX_WINDOW_S:  # in ns it must fit an int64
            raise InvalidValueError(f"seconds must be at most {_MAX_WINDOW_S:g}, got {seconds!r}")
    if len(events) == 0:
        return []
    if steps is not None:
        ev = events[events["step"] >= 1]
        keys = (ev["step"] - 1) // int(steps)
    else:
        ev = events
        t0 = int(ev["start_ns"].min())
        keys = (ev["start_ns"] - t0) // int(float(seconds) * 1e9)  # type: ignore[arg-type]
    if len(ev) == 0:
        return []
    order = np.argsort(keys, kind="stable")
    ev, keys = ev[order], keys[order]
    bounds = np.flatnonzero(np.diff(keys)) + 1
    out = []
    for chunk_keys, chunk in zip(np.split(keys, bounds), np.split(ev, bounds), strict=True):
        k = int(chunk_keys[0])
        is_step = chunk["phase"] == -1
        step_d = chunk["duration_ns"][is_step].astype(np.float64)
        per_phase = [
            chunk["duration_ns"][chunk["phase"] == i].astype(np.float64) for i in range(len(phases))
        ]
        # shares of the step time, or of all phase time where that is more (record())
        step_sum = _checks.share_base(
            float(step_d.sum()), float(sum(float(d.sum()) for d in per_phase))
        )
        stats: dict[str, WindowStats] = {}
        for name, d in zip(phases, per_phase, strict=True):
            stats[name] = _window_stats(d, step_sum)
        first_step = int(chunk["step"].min()) if len(chunk) else 0
        warm = still_warming or (warmup_end_step >= 0 and first_step <= warmup_end_step)
        out.append(
            Window(
                index=k,
                start_ns=int(chunk["start_ns"].min()),
                end_ns=int((chunk["start_ns"] + chunk["duration_ns"]).max()),
                first_step=first_step,
                steps=int(is_step.sum()),
                warmup=bool(warm),
                phases=stats,
                step=_window_stats(step_d, step_sum) if len(step_d) else None,
                source="ring",
            )
        )
    return out


def _window_stats(d: np.ndarray, step_sum: float) -> WindowStats:
    if len(d) == 0:
        return WindowStats(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
    p50, p90, p99 = exact_percentiles(d, (50.0, 90.0, 99.0))
    s = float(d.sum())
    return WindowStats(
        count=int(len(d)),
        mean=s / len(d),
        p50=p50,
        p90=p90,
        p99=p99,
        max=float(d.max()),
        share=s / step_sum if step_sum > 0 else math.nan,
    )
