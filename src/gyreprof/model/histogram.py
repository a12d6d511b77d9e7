"""The read side of a histogram: its bucket layout, the view exporters read, and
the percentile rule on exact values.

The native histogram (``gyreprof._core.histogram``) counts; this module is what
Python reads of one: :class:`HistogramView` owns a steady-state histogram's
counts, layout, exact min/max/sum and its percentiles, so exporters take the
view, never a tuple of its parts. :class:`PhaseRow` is one histogram's scalar
record in a snapshot (steady count, sum and extremes, warm-up count, sum and
max, first value), read by name instead of by column. ``STEP`` names the whole-step histogram (the
last row of every snapshot and summary) everywhere.

Percentiles everywhere follow one rule, documented in ``gyreprof._core.histogram``:
the inverted-CDF rank; rank 1 and rank N are the exact minimum and maximum,
other ranks read as their bucket's midpoint clamped to them.
:func:`exact_percentiles` applies the same rank to exact values (each value its
own bucket).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gyreprof._core import bucket_edges, percentiles_from_counts
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof._support.format import STEP  # re-exported: the name of the whole-step row

__all__ = [
    "STEP",
    "HistogramView",
    "PhaseRow",
    "check_percentile",
    "exact_percentiles",
    "layout_edges",
]


@functools.lru_cache(maxsize=32)
def layout_edges(
    lowest: int, highest: int, significant_figures: int
) -> tuple[np.ndarray, np.ndarray]:
    """(lowest value, width) of every bucket of a layout; read-only arrays, built once."""
    lo, width = bucket_edges(lowest, highest, significant_figures)
    lo.flags.writeable = False
    width.flags.writeable = False
    return lo, width


def exact_percentiles(values: np.ndarray, qs: Sequence[float]) -> list[float]:
    """The percentile rule on exact values: the value of rank ``max(1, ceil(q/100 N))``."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = len(v)
    out = []
    for q in qs:
        rank = min(n, max(1, math.ceil(q / 100.0 * n)))
        out.append(float(v[rank - 1]))
    return out


def check_percentile(q: float) -> float:
    """``q`` as a float in 0..100; TypeError or ValueError naming the percentile otherwise."""
    try:
        qf = float(q)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"percentile must be a number in 0..100, got {q!r}") from None
    if not math.isfinite(qf) or not 0.0 <= qf <= 100.0:
        raise InvalidValueError(f"percentile must be in 0..100, got {q!r}")
    return qf


@dataclass(frozen=True, eq=False)
class HistogramView:
    """A read-only view of one steady-state histogram (durations in ns).

    ``counts`` is the HdrHistogram-layout bucket array (read-only numpy);
    bucket ``i`` holds the integers ``lows[i] .. lows[i] + widths[i] - 1``.
    ``min``/``max``/``sum`` are exact (-1 / -1 / 0 when empty); ``sum`` is None where
    it is not known (held at the int64 limit by a merge, with nothing exact behind it).
    """

    counts: np.ndarray
    lowest_ns: int
    highest_ns: int
    significant_figures: int
    min: int
    max: int
    sum: int | None

    @property
    def layout(self) -> tuple[int, int, int]:
        """(lowest_ns, highest_ns, significant_figures)."""
        return self.lowest_ns, self.highest_ns, self.significant_figures

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    @property
    def lows(self) -> np.ndarray:
        """Lowest value of every bucket (read-only)."""
        return layout_edges(*self.layout)[0]

    @property
    def widths(self) -> np.ndarray:
        """Width of every bucket (read-only)."""
        return layout_edges(*self.layout)[1]

    @property
    def midpoints(self) -> np.ndarray:
        """The value each bucket reads as: ``lows + (widths - 1) // 2``."""
        lo, width = layout_edges(*self.layout)
        mid: np.ndarray = lo + (width - 1) // 2
        return mid

    def percentiles(self, qs: Sequence[float]) -> np.ndarray:
        """Durations (ns) at several percentiles (float64; NaN when empty)."""
        q = [check_percentile(x) for x in qs]
        lo, hi, sf = self.layout
        out: np.ndarray = percentiles_from_counts(self.counts, q, lo, hi, sf, self.min, self.max)
        return out

    def percentile(self, q: float) -> float:
        """Duration (ns) at percentile ``q`` (0..100); the rule is in gyreprof._core.histogram."""
        return float(self.percentiles([q])[0])


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """One histogram's scalar record in a snapshot (durations in ns).

    Steady state: ``count``, ``sum``, ``min``, ``max`` (-1 / -1 when empty);
    warm-up: ``warm_count``, ``warm_sum``, ``warm_max``; ``first``: the first
    value recorded (-1 none). ``name`` is the phase, or ``STEP`` for whole steps.
    """

    name: str
    count: int
    sum: int
    min: int
    max: int
    warm_count: int
    warm_sum: int
    warm_max: int
    first: int

    @property
    def mean(self) -> float:
        """Steady mean (ns); NaN when empty."""
        return self.sum / self.count if self.count > 0 else math.nan

    @property
    def warm_mean(self) -> float:
        """Warm-up mean (ns); NaN when no warm-up value was recorded."""
        return self.warm_sum / self.warm_count if self.warm_count > 0 else math.nan
