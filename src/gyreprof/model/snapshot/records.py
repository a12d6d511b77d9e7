"""The records inside a Snapshot (config, times, totals, sources, meta), declared once,
and the wall-clock span of its sources.

Each record is a frozen dataclass whose field types are its schema: the generic codec
(``gyreprof.model._serial``) reads and writes them, and a field's narrower range than its
Python type (a 64-bit integer, a finite float) is declared in the type itself.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from gyreprof._core import monotonic_ns
from gyreprof._support import checks as _checks
from gyreprof._support.errors import InvalidValueError
from gyreprof.model._serial import from_plain, plain

__all__ = [
    "COUNT_CAP",
    "Meta",
    "SnapshotConfig",
    "SourceRecord",
    "Times",
    "Totals",
    "current_unix_offset_ns",
    "rate_spread",
    "source_rates",
    "wall_span_ns",
]


def current_unix_offset_ns() -> int:
    """Unix-epoch ns minus monotonic ns, now (valid for this boot's monotonic clock)."""
    return time.time_ns() - int(monotonic_ns())


def wall_span_ns(sources: Sequence[SourceRecord]) -> int:
    """Wall-clock ns the steady state of ``sources`` covers, first start to last end.

    Each source's steady interval (``steady_start_ns``..``end_ns``, monotonic) is
    placed on the wall clock by its ``unix_offset_ns``; sources of one host
    without an offset share that host's monotonic clock. When the sources cannot
    be placed on one clock, the longest single source is the answer (a lower
    bound of the span; adding sources' seconds would count parallel time twice).
    """
    spans = []
    for s in sources:
        a, b = s.steady_start_ns, s.end_ns
        if a is not None and b is not None and b > a >= 0:
            spans.append((s, a, b))
    longest = max((s.steady_ns for s in sources), default=0)
    if not spans or len(spans) < len([s for s in sources if s.steady_ns > 0]):
        return longest
    offs = [s.unix_offset_ns for s, _, _ in spans]
    if all(o is not None for o in offs):
        lo = min(a + int(o or 0) for (_, a, _), o in zip(spans, offs, strict=True))
        hi = max(b + int(o or 0) for (_, _, b), o in zip(spans, offs, strict=True))
    elif len({s.host for s, _, _ in spans}) == 1:
        lo = min(a for _, a, _ in spans)
        hi = max(b for _, _, b in spans)
    else:
        return longest
    return max(longest, hi - lo)


def source_rates(sources: Sequence[SourceRecord]) -> list[float]:
    """Each source's own steady steps per second (sources that ran steady steps)."""
    return [s.rate for s in sources if s.rate > 0]


def rate_spread(sources: Sequence[SourceRecord]) -> tuple[float, float, float] | None:
    """(min, median, max) of the sources' own rates; None with fewer than two."""
    r = source_rates(sources)
    if len(r) < 2:
        return None
    return min(r), float(statistics.median(r)), max(r)


_TOTAL_KEYS = (
    "steps_begun",
    "steps_completed",
    "warmup_steps_done",
    "events",
    "overwritten",
    "out_of_range",
    "negative",
    "nonfinite",
    "saturated",  # sums / counters held at the int64 limit instead of wrapping
)

_INT64_MAX = (1 << 63) - 1


# ------------------------------------------------------------------- records
#
# The records inside a Snapshot, declared once: each field's type is its schema, read
# and written by the generic codec (``gyreprof.model._serial``). A field's narrower range than
# its Python type (a 64-bit integer, a finite float) is declared in its type
# (``Annotated[int, _int64]``...). The binary format reads them with ``from_plain``
# (missing fields take their default, unknown keys are skipped so older and newer
# writers read) and writes them with ``_plain`` (fields that are None left out, as the
# format always did).

_INT64_MIN = -(1 << 63)
# the most a decoded histogram (or warm-up) may count: a merge of two such inputs still
# fits an int64 without wrapping, so ``merge([s, s])`` of an accepted snapshot works
COUNT_CAP = _checks.COUNT_CAP


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int64(v: Any) -> int:
    """``v`` as a 64-bit integer (an integral float reads as one); ValueError if not."""
    if type(v) is int and _INT64_MIN <= v <= _INT64_MAX:
        return v  # the common case, without building a message
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if not _is_int(v) or not _INT64_MIN <= v <= _INT64_MAX:
        raise InvalidValueError(f"{v!r} is not a 64-bit integer")
    return int(v)


def _as_int(v: Any, what: str) -> int:
    try:
        return _int64(v)
    except ValueError as exc:
        raise InvalidValueError(f"{what}: {exc}") from None


def _finite(v: Any) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(float(v)):
        raise InvalidValueError(f"{v!r} is not a finite number")
    return float(v)


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise InvalidValueError(f"{v!r} is not a string")
    return v


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise InvalidValueError(f"{v!r} is not true or false")
    return v


def _exact_sums(v: Any) -> tuple[tuple[int, int], ...]:
    """(histogram row, exact sum) pairs for the sums past the int64 range of the table."""
    if not isinstance(v, (list, tuple)):
        raise InvalidValueError(f"{v!r} is not a list of (row, sum) pairs")
    out = []
    for pair in v:
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not all(_is_int(x) and x >= 0 for x in pair)
        ):
            raise InvalidValueError(f"it holds {pair!r}, not a (row, sum) pair of integers")
        out.append((int(pair[0]), int(pair[1])))
    return tuple(out)


# the field types of the records, with the range the binary format reads
I64 = Annotated[int, _int64]
F64 = Annotated[float, _finite]
Text = Annotated[str, _text]
Flag = Annotated[bool, _flag]
ExactSums = Annotated[tuple[tuple[int, int], ...], _exact_sums]

_R = TypeVar("_R")


def _record(cls: type[_R], d: Any, what: str) -> _R:
    """A ``cls`` record from the decoded mapping ``d``; ValueError naming a bad field.
    Keys that are no field of ``cls`` are skipped (a newer writer's)."""
    return from_plain(cls, d, where=what, ignore_unknown=True)


def _plain(rec: Any) -> dict[str, Any]:
    """A record as the plain mapping the format stores (None fields left out)."""
    return {k: v for k, v in plain(rec).items() if v is not None}


def _check_ints(rec: Any, names: Iterable[str], what: str, *, low: int = 0) -> None:
    for name in names:
        v = getattr(rec, name)
        if v is not None and v < low:
            raise InvalidValueError(f"{what} {name} is {v}, below {low}")


@dataclass(frozen=True, slots=True)
class SnapshotConfig:
    """The histogram layout and warm-up / window rules a snapshot was recorded with."""

    lowest_ns: I64
    highest_ns: I64
    significant_figures: I64
    clock: Text = "monotonic"
    warmup_steps: I64 = 0
    warmup_ns: I64 = 0
    window_steps: I64 = 0

    def __post_init__(self) -> None:
        _check_ints(self, ("warmup_steps", "warmup_ns", "window_steps"), "config")

    @property
    def layout(self) -> tuple[int, int, int]:
        """(lowest_ns, highest_ns, significant_figures)."""
        return self.lowest_ns, self.highest_ns, self.significant_figures

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> SnapshotConfig:
        """The snapshot's part of a Recorder's ``config()`` (which holds more)."""
        return cls(
            lowest_ns=int(config["lowest_ns"]),
            highest_ns=int(config["highest_ns"]),
            significant_figures=int(config["significant_figures"]),
            clock=str(config["clock"]),
            warmup_steps=int(config["warmup_steps"]),
            warmup_ns=int(config["warmup_ns"]),
            window_steps=int(config["window_steps"]),
        )


@dataclass(frozen=True, slots=True)
class Times:
    """When things happened (CLOCK_MONOTONIC ns; -1 / 0: not yet)."""

    start_ns: I64 = 0
    steady_start_ns: I64 = -1
    last_step_end_ns: I64 = -1
    last_write_ns: I64 = -1
    taken_ns: I64 = 0
    open_phase: I64 = -1  # index of the phase open when taken, -1 none
    open_since_ns: I64 = -1
    warmup_end_step: I64 = -1


@dataclass(frozen=True, slots=True)
class Totals:
    """Run-wide counts (steps, events, and the values that could not be counted)."""

    steps_begun: I64 = 0
    steps_completed: I64 = 0
    warmup_steps_done: I64 = 0
    events: I64 = 0
    overwritten: I64 = 0
    out_of_range: I64 = 0
    negative: I64 = 0
    nonfinite: I64 = 0
    saturated: I64 = 0  # sums / counters held at the int64 limit instead of wrapping

    def __post_init__(self) -> None:
        _check_ints(self, _TOTAL_KEYS, "totals")


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One source (process, thread, actor) behind a snapshot: its steady time and rate,
    the profiler's own time in it, and where it sits on the wall clock."""

    steady_ns: I64 = 0
    warmup_ns: I64 = 0
    rate: F64 = 0.0  # the source's own steady steps per second
    overhead_ns: F64 = 0.0  # profiler time within steady_ns
    # of overhead_ns, the patched env-call wrappers' part (wrapper_overhead); None: none
    wrapper_ns: F64 | None = None
    warmup_done: Flag = True
    steady_start_ns: I64 | None = None  # the steady span (monotonic), when it ran steady steps
    end_ns: I64 | None = None
    pid: I64 | None = None
    host: Text | None = None
    label: Text | None = None
    unix_offset_ns: I64 | None = None  # Unix-epoch ns minus monotonic ns
    merged: I64 | None = None  # sources folded into this one (an interval of a merge)
    retired_threads: I64 | None = None  # finished per_thread threads folded into this one
    ray_actor_id: Text | None = None
    ray_node_id: Text | None = None
    node_ip: Text | None = None

    def __post_init__(self) -> None:
        _check_ints(self, ("steady_ns", "warmup_ns", "merged", "retired_threads"), "source")
        if not (self.rate >= 0 and math.isfinite(self.rate)):
            raise InvalidValueError(f"source rate {self.rate} is not a finite number >= 0")
        if not (self.overhead_ns >= 0 and math.isfinite(self.overhead_ns)):
            raise InvalidValueError(
                f"source overhead_ns {self.overhead_ns} is not a finite number >= 0"
            )
        if self.wrapper_ns is not None and not (0 <= self.wrapper_ns <= self.overhead_ns):
            raise InvalidValueError(
                f"source wrapper_ns {self.wrapper_ns} is not a number in 0..overhead_ns "
                f"({self.overhead_ns:g})"
            )
        if self.overhead_ns > self.steady_ns > 0:
            raise InvalidValueError(
                f"source overhead_ns {self.overhead_ns:g} exceeds its steady time "
                f"{self.steady_ns} ns"
            )

    def replace(self, **changes: Any) -> SourceRecord:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Meta:
    """Who took a snapshot and how: the fields are all optional."""

    pid: I64 | None = None
    host: Text | None = None
    label: Text | None = None
    unix_offset_ns: I64 | None = None  # Unix-epoch ns minus monotonic ns for the times
    windows_closed: I64 | None = None  # rolling windows closed so far (more than kept)
    merged: I64 | None = None  # sources merged into this snapshot
    interval_ns: I64 | None = None  # set on an ``interval``
    retired_threads: I64 | None = None
    autosave_windows_dropped: I64 | None = None
    live_path: Text | None = None  # the live segment it was read from
    ray_actor_id: Text | None = None
    ray_node_id: Text | None = None
    node_ip: Text | None = None
    # (histogram row, exact sum) for the sums past the int64 range of the stat / warm
    # tables, which then hold INT64_MAX for them (``gyreprof._support.checks.exact_sums``)
    exact_sums: ExactSums | None = None
    exact_warm_sums: ExactSums | None = None

    def __post_init__(self) -> None:
        _check_ints(
            self,
            (
                "windows_closed",
                "merged",
                "interval_ns",
                "retired_threads",
                "autosave_windows_dropped",
            ),
            "meta",
        )

    def replace(self, **changes: Any) -> Meta:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, as a plain dict."""
        return _plain(self)


# who a source is, copied from the snapshot's meta into its source record
_IDENTITY = ("pid", "host", "label", "unix_offset_ns")
