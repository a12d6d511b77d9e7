"""The data-quality notes, worded once: what may make a profile's numbers mislead.

The summary's table, the wait report's notes and the verdict's caveats all say
these things; they take the words from here so that one problem reads the same
everywhere. Each function returns the note without a prefix (the caller adds
``"note: "`` or the side it speaks of) and nothing for a count of zero.

This module imports only :mod:`gyreprof._support.format` and :mod:`gyreprof._support.advice` (the
advice at the end of a note, worded for where it is read), so any layer may use it.
"""

from __future__ import annotations

from typing import Protocol

from gyreprof._support import advice as _advice
from gyreprof._support.format import fmt_pct

__all__ = [
    "DataCounts",
    "data_quality",
    "overhead",
    "ring_overwritten",
    "WARMUP_NOT_EXCLUDED",
    "warmup_not_excluded",
]


class DataCounts(Protocol):
    """What :func:`data_quality` reads: a Summary's counters of lost or altered values."""

    @property
    def overwritten(self) -> int: ...
    @property
    def out_of_range(self) -> int: ...
    @property
    def negative(self) -> int: ...
    @property
    def nonfinite(self) -> int: ...


def data_quality(counts: DataCounts, *, overwritten: bool = True) -> list[str]:
    """One note per counter that is not zero: events overwritten in the ring, values
    above the range, negative and NaN/inf durations (``overwritten=False`` leaves the
    first out, for readers that only use the histograms, which keep those events)."""
    notes: list[str] = []
    if overwritten and counts.overwritten:
        notes.append(f"{counts.overwritten} events overwritten in the ring (histograms keep them)")
    if counts.out_of_range:
        notes.append(f"{counts.out_of_range} values above the range (clamped)")
    if counts.negative:
        notes.append(f"{counts.negative} negative durations ignored")
    if counts.nonfinite:
        notes.append(f"{counts.nonfinite} NaN/inf durations ignored")
    return notes


def inexact_sums(names: list[str]) -> str:
    """Sums held at the int64 limit with no exact value behind them (an older record)."""
    return (
        "sums past the int64 range with no exact value: the mean, share and total "
        f"of {', '.join(names)} are missing"
    )


def ring_overwritten(n: int) -> str:
    """Windows cut from the ring after it wrapped: they cover the latest part only."""
    return (
        f"the ring overwrote {n} old events: per-window numbers cover only the latest part "
        f"of the run (overall numbers cover all of it); {_advice.ring_capacity()}"
    )


def overhead(share: float, limit: float | None = None) -> str:
    """The profiler's own share of wall time; with ``limit``, the advice for going over it."""
    text = f"the profiler itself took {fmt_pct(share)} of the wall time"
    if limit is None:
        return text
    return f"{text} (above {fmt_pct(limit)}): {_advice.overhead()}"


#: how :func:`warmup_not_excluded` starts: a renderer that says the warm-up once finds
#: the other places that would say it again by it
WARMUP_NOT_EXCLUDED = "warm-up was not excluded"


def warmup_not_excluded(
    detail: str = "", *, steps_marked: bool = True, side: str | None = None
) -> str:
    """Warm-up left in the numbers; ``detail`` (e.g. the slowest first call) is appended.
    ``steps_marked`` / ``side``: the profile marks steps, which side it is (see
    :func:`gyreprof._support.advice.warmup`)."""
    return (
        f"{WARMUP_NOT_EXCLUDED}, so start-up costs (imports, JIT, allocator, first env "
        f"resets) are in its numbers{detail}; {_advice.warmup(steps_marked, side)}"
    )
