"""Snapshot: the raw, mergeable record of a run, and its algebra.

A ``Snapshot`` is an immutable copy of everything a Recorder counted: the
steady-state histograms of every phase and of whole steps, warm-up totals,
counters and the closed rolling windows. This module holds what is done with
snapshots:

- building one from a stats block (through ``gyreprof._block``);
- ``merge``: parallel sources (worker processes, threads, actors) combined:
  counts and histograms add up, extremes take the extreme, and time is the
  wall-clock span the sources cover (see ``wall_span_ns``). Rolling windows
  belong to one source and are dropped by a merge;
- ``interval``: what one source recorded between two of its snapshots;
- the binary format (``to_bytes`` / ``from_bytes``);
- ``as_snapshot``: a Profiler, Snapshot or Summary input, as a Snapshot;
- ``Snapshot.summary()``: the Summary computed from it (``gyreprof.summary``,
  which knows a Snapshot by type only: the dependency goes one way).

Windows (``Window``, ``windows_from_events``) live in ``gyreprof.window`` and the
histogram layout, the percentile rule and ``STEP`` in ``gyreprof.histogram``;
they are re-exported here. Percentiles everywhere follow one rule, documented in
``gyreprof._core.histogram``: the inverted-CDF rank; rank 1 and rank N are the
exact minimum and maximum, other ranks read as their bucket's midpoint clamped
to them.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import lzma
import math
import os
import socket
import statistics
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar, overload

import numpy as np

from gyreprof import _checks, _io, _limits
from gyreprof._block import StatsBlock, warmup_windows
from gyreprof._core import decode_counts_into, encode_counts, layout_info, monotonic_ns
from gyreprof._errors import ArgumentTypeError, CorruptDataError, InvalidValueError, MissingKeyError
from gyreprof._serial import from_plain, plain
from gyreprof._version import __version__
from gyreprof.histogram import STEP, PhaseRow, exact_percentiles, layout_edges
from gyreprof.summary import WRAPPER_COUNTER_PREFIX, Summary
from gyreprof.window import Window, WindowStats, rolling_windows, windows_from_events

__all__ = [
    "SNAPSHOT_MAGIC",
    "STEP",
    "Meta",
    "PhaseRow",
    "ProfilerIdentity",
    "Snapshot",
    "SnapshotConfig",
    "SourceRecord",
    "Times",
    "Totals",
    "Window",
    "WindowStats",
    "as_snapshot",
    "build_snapshot",
    "current_unix_offset_ns",
    "exact_percentiles",
    "interval",
    "layout_edges",
    "merge",
    "rate_spread",
    "source_rates",
    "unix_offset_ns",
    "wall_span_ns",
    "windows_from_events",
]

SNAPSHOT_MAGIC = b"GYRS"
SNAPSHOT_VERSION = 2
# the versions from_bytes reads: 1 kept the rolling windows in the JSON header, 2 keeps
# them after the histograms (a u32-length-prefixed block of little-endian int64 in byte
# planes, its shape in the header as "rolling_shape")
_READ_VERSIONS = (1, 2)


# ------------------------------------------------------------------ wall clock


def current_unix_offset_ns() -> int:
    """Unix-epoch ns minus monotonic ns, now (valid for this boot's monotonic clock)."""
    return time.time_ns() - int(monotonic_ns())


def unix_offset_ns(snapshot: Snapshot) -> int | None:
    """Unix-epoch ns minus monotonic ns for the times of ``snapshot``, when known.

    Known when the snapshot records it (``meta.unix_offset_ns``) or was taken
    by this process; a snapshot from another process (or host, or a merge of
    several) carries monotonic times we cannot relate to wall time: None.
    """
    meta = snapshot.meta
    if meta.unix_offset_ns is not None:
        return meta.unix_offset_ns
    if meta.pid != os.getpid() or meta.host != socket.gethostname():
        return None
    return current_unix_offset_ns()


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


def _lzma_decompress(data: bytes) -> bytes:
    return _limits.inflate_lzma(data, what="snapshot")


def _zlib_decompress(data: bytes) -> bytes:
    return _limits.inflate(data, what="snapshot")


# name -> (flag byte, compress, decompress)
_CODECS: dict[str, tuple[int, Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
    "zlib": (0, lambda b: zlib.compress(b, 9), _zlib_decompress),
    "lzma": (1, lambda b: lzma.compress(b, format=lzma.FORMAT_XZ, preset=6), _lzma_decompress),
}

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


def _sat_add(a: int, b: int) -> tuple[int, bool]:
    """``a + b`` in Python ints, held at the int64 limit; (sum, whether it was held)."""
    total = int(a) + int(b)
    if total > _INT64_MAX:
        return _INT64_MAX, True
    return total, False


# ------------------------------------------------------------------- records
#
# The records inside a Snapshot, declared once: each field's type is its schema, read
# and written by the generic codec (``gyreprof._serial``). A field's narrower range than
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
    # tables, which then hold INT64_MAX for them (``gyreprof._checks.exact_sums``)
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


# ------------------------------------------------------------------- snapshot

# columns of the packed ``stat`` (steady) and ``warm`` (warm-up) tables
_COUNT, _SUM, _MIN, _MAX = range(4)
_WCOUNT, _WSUM, _WMAX = range(3)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _table(a: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=np.int64)
    if arr.shape != shape:
        raise InvalidValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if arr.flags.writeable:
        arr = _readonly(arr if arr is not a else arr.copy())
    return arr


def _check_rows(
    names: Sequence[str], stat: np.ndarray, warm: np.ndarray, first: np.ndarray
) -> None:
    """Each histogram's sums and extremes agree with its counts (ValueError saying where)."""
    for name, (n, total, vmin, vmax), (wn, wsum, wmax), f in zip(
        names, stat.tolist(), warm.tolist(), first.tolist(), strict=True
    ):
        where = f"histogram {name!r}"
        if n < 0 or total < 0 or wn < 0 or wsum < 0:
            raise InvalidValueError(f"{where}: negative count or sum ({n}, {total}, {wn}, {wsum})")
        if vmin < -1 or vmax < -1 or f < -1 or wmax < -1:
            raise InvalidValueError(f"{where}: min {vmin} and max {vmax} are impossible")
        if n == 0:
            if total != 0 or vmin != -1 or vmax != -1:
                raise InvalidValueError(
                    f"{where}: no values, yet sum {total}, min {vmin} and max {vmax}"
                )
        else:
            if vmin < 0 or vmax < 0 or vmin > vmax:
                raise InvalidValueError(f"{where}: min {vmin} and max {vmax} are impossible")
            # a sum held at the int64 limit (totals.saturated) is below the true one
            if total != _INT64_MAX and not n * vmin <= total <= n * vmax:
                raise InvalidValueError(
                    f"{where}: sum {total} of {n} values is outside [{n} x min {vmin}, "
                    f"{n} x max {vmax}]"
                )
        if wn == 0:
            if wsum != 0:
                raise InvalidValueError(f"{where}: no warm-up values, yet warm-up sum {wsum}")
        elif wmax < 0 or (wsum != _INT64_MAX and wsum > wn * wmax):
            raise InvalidValueError(
                f"{where}: warm-up sum {wsum} of {wn} values is above {wn} x max {wmax}"
            )


def _rolling_block(body: bytes, pos: int, shape: Any, dense: int) -> tuple[np.ndarray, int]:
    """The rolling windows a version-2 snapshot keeps at ``pos`` of ``body`` (a 4-byte
    length, as each histogram has, then ``rows x width`` little-endian int64 in byte
    planes: ``_window_planes``) and the position after them; the
    declared shape is bounded by the memory budget (on top of ``dense`` bytes of counts)
    before anything is allocated."""
    if (
        type(shape) is not list
        or len(shape) != 2
        or not all(type(n) is int and 0 <= n <= _INT64_MAX for n in shape)
    ):
        raise InvalidValueError(f"rolling window shape {shape!r} is not two sizes")
    rows, width = shape
    _limits.check_dense(rows, width, what="snapshot rolling windows", already=dense)
    if pos + 4 > len(body):
        raise InvalidValueError("rolling windows truncated")
    (n,) = struct.unpack_from("<I", body, pos)
    pos += 4
    if n != 8 * rows * width:
        raise InvalidValueError(
            f"rolling windows take {n} bytes; {rows} x {width} int64 need {8 * rows * width}"
        )
    if pos + n > len(body):
        raise InvalidValueError("rolling windows truncated")
    planes = np.frombuffer(body, dtype=np.uint8, count=n, offset=pos).reshape(8, rows * width)
    table = np.ascontiguousarray(planes.T).view("<i8").reshape(rows, width)
    return table.astype(np.int64), pos + n


def _window_planes(rolling: np.ndarray) -> bytes:
    """The rolling windows as a version-2 snapshot stores them: their little-endian int64
    bytes in 8 planes (every value's lowest byte, then every value's next byte, ...), so
    the mostly-zero high bytes make long runs that zlib compresses fast (the plain int64
    bytes took level 9 twice as long as the JSON lists of version 1)."""
    raw = np.ascontiguousarray(rolling, dtype="<i8").reshape(-1).view(np.uint8)
    return np.ascontiguousarray(raw.reshape(-1, 8).T).tobytes()


def _rolling_table(v: Any) -> np.ndarray:
    """The decoded rolling windows (a list of equal-length lists of integers) as an int64
    table, read flat (twice as fast as ``np.asarray`` of the nested lists)."""
    if not isinstance(v, list):
        raise InvalidValueError("rolling windows have the wrong shape")
    if not v:
        return np.zeros((0, 0), dtype=np.int64)
    # every row a list, all of one length (checked at C speed: no Python loop per row)
    if set(map(type, v)) != {list} or len(set(map(len, v))) != 1:
        raise InvalidValueError("rolling windows have the wrong shape")
    width = len(v[0])
    if width == 0:
        return np.zeros((0, 0), dtype=np.int64)
    flat = itertools.chain.from_iterable(v)
    return np.fromiter(flat, dtype=np.int64, count=len(v) * width).reshape(len(v), width)


def _int_table(v: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """A decoded JSON table as int64, refusing what is not integers of ``shape``."""
    arr = np.asarray(v)
    if arr.shape != shape:
        raise InvalidValueError(f"{what} has the wrong shape")
    if arr.size and arr.dtype.kind not in "iu":
        raise InvalidValueError(f"{what} holds values that are not 64-bit integers")
    # read-only: the Snapshot it goes into takes it as it is, without a copy of its own
    return _readonly(np.ascontiguousarray(arr, dtype=np.int64))


def _check_counts(
    decoded: Sequence[tuple[int, int, int]], stat: np.ndarray, lo: np.ndarray
) -> None:
    """All decoded histograms against their stat records: no negative bucket (the decoder
    writes none), the buckets adding up to the count (at most ``COUNT_CAP``), and the
    extremes inside the buckets that hold values. Read from what the decoder found in
    its one pass (``decode_counts_into``): each row's exact total and its first and last
    bucket holding a count, so the counts are not walked again. ``lo`` holds each bucket's lowest value (increasing), so the bucket of a value ``v``
    is the last with ``lo <= v``: bucket ``i1`` lies above the max's when
    ``lo[i1] > vmax``, and bucket ``i0`` below the min's when ``lo[i0 + 1] <= vmin``."""
    if not len(decoded):
        return
    last = len(lo) - 1
    for h, ((total, i0, i1), (n, _, vmin, vmax)) in enumerate(
        zip(decoded, stat.tolist(), strict=True)
    ):
        if n > COUNT_CAP:
            raise InvalidValueError(
                "a histogram counts more than the 2^62 - 1 values a snapshot holds"
            )
        if total != n:
            raise InvalidValueError("histogram counts do not add up to the recorded totals")
        if n <= 0 or vmin < 0 or vmin > vmax:
            continue  # the constructor judges the extremes
        if (i0 < last and int(lo[i0 + 1]) <= vmin) or int(lo[i1]) > vmax:
            raise InvalidValueError(
                f"histogram {h}: min {vmin} / max {vmax} lie outside the buckets that hold "
                "its values"
            )


def _settle(
    counts: np.ndarray, stat: np.ndarray, warm: np.ndarray, layout: tuple[int, int, int]
) -> None:
    """Settle, in place, what a copy of a stats block taken while its writer ran may hold:
    the buckets were counted and the sum or an extreme not yet (or the other way
    round). Extremes widen to the buckets that hold values, sums stay between
    count x min and count x max, and empty rows read as empty."""
    lo = width = None
    for h in range(stat.shape[0]):
        n = int(stat[h, _COUNT])
        if n <= 0:
            stat[h, _SUM] = 0
            stat[h, _MIN] = stat[h, _MAX] = -1
        else:
            vmin, vmax = int(stat[h, _MIN]), int(stat[h, _MAX])
            if lo is None or width is None:
                lo, width = layout_edges(*layout)
            nz = np.flatnonzero(counts[h])
            i0, i1 = int(nz[0]), int(nz[-1])
            if vmin < 0 or vmin > int(lo[i0] + width[i0] - 1):
                vmin = int(lo[i0])
            if vmax < int(lo[i1]):
                vmax = max(min(int(lo[i1] + width[i1] - 1), layout[1]), vmin)
            vmax = max(vmax, vmin)
            stat[h, _MIN], stat[h, _MAX] = vmin, vmax
            total = int(stat[h, _SUM])
            if total != _INT64_MAX:
                stat[h, _SUM] = min(max(total, n * vmin), n * vmax, _INT64_MAX)
        wn, wmax = int(warm[h, _WCOUNT]), max(0, int(warm[h, _WMAX]))
        warm[h, _WMAX] = wmax
        if wn <= 0:
            warm[h, _WSUM] = 0
        elif int(warm[h, _WSUM]) != _INT64_MAX:
            warm[h, _WSUM] = min(int(warm[h, _WSUM]), wn * wmax, _INT64_MAX)


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """Immutable copy of what one or more Recorders counted. Mergeable, serialisable.

    Arrays have one row per phase plus a last row for whole steps (``STEP``):
    ``counts`` holds the steady-state bucket counts. The scalar record of each
    row (steady count, sum, min, max; warm-up count, sum, max; first value) is
    read by name through ``rows`` / ``row(name)``; ``stat``, ``warm`` and
    ``first`` are their packed storage. Every field is read-only; construction
    checks that the records agree with each other (ValueError otherwise).
    """

    phases: tuple[str, ...]
    config: SnapshotConfig
    counts: np.ndarray
    stat: np.ndarray
    warm: np.ndarray
    first: np.ndarray
    totals: Totals
    counters: Mapping[str, int]
    times: Times
    rolling: np.ndarray | None
    lap_cost_ns: float
    sources: tuple[SourceRecord, ...]
    meta: Meta = Meta()
    _rows: tuple[PhaseRow, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        phases = tuple(self.phases)
        if not all(isinstance(p, str) for p in phases):
            raise ArgumentTypeError("phase names must be strings")
        if len(set(phases)) != len(phases) or STEP in phases:
            raise InvalidValueError("phase names repeat")
        put(self, "phases", phases)
        nh = len(phases) + 1
        if not isinstance(self.config, SnapshotConfig):
            raise ArgumentTypeError(
                f"config must be a SnapshotConfig, got {type(self.config).__name__}"
            )
        counts = np.ascontiguousarray(self.counts, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[0] != nh:
            raise InvalidValueError(f"counts must have {nh} rows, got shape {counts.shape}")
        put(self, "counts", _readonly(counts) if counts.flags.writeable else counts)
        stat = _table(self.stat, (nh, 4), "stat")
        warm = _table(self.warm, (nh, 3), "warm")
        first = _table(self.first, (nh,), "first")
        put(self, "stat", stat)
        put(self, "warm", warm)
        put(self, "first", first)
        names = (*phases, STEP)
        _check_rows(names, stat, warm, first)
        for name, rec, typ in (
            ("totals", self.totals, Totals),
            ("times", self.times, Times),
            ("meta", self.meta, Meta),
        ):
            if not isinstance(rec, typ):
                raise ArgumentTypeError(
                    f"{name} must be a {typ.__name__}, got {type(rec).__name__}"
                )
        # a row's sums are the exact ones: past the int64 range of the table they come
        # from the meta's exact sums (INT64_MAX stays where none is known)
        stat_rows, warm_rows = stat.tolist(), warm.tolist()
        if self.meta.exact_sums is None and self.meta.exact_warm_sums is None:
            # the common case: every sum fits the table (INT64_MAX, where held, is
            # what the row reads too)
            rows = tuple(
                PhaseRow(nm, s[0], s[1], s[2], s[3], w[0], w[1], w[2], f)
                for nm, s, w, f in zip(names, stat_rows, warm_rows, first.tolist(), strict=True)
            )
        else:
            sums = _checks.exact_sums(stat, self.meta)
            warm_sums = _checks.exact_sums(warm, self.meta, _checks.EXACT_WARM_SUMS_KEY)
            rows = tuple(
                PhaseRow(
                    nm,
                    s[0],
                    _INT64_MAX if t is None else t,
                    s[2],
                    s[3],
                    w[0],
                    _INT64_MAX if wt is None else wt,
                    w[2],
                    f,
                )
                for nm, s, w, f, t, wt in zip(
                    names, stat_rows, warm_rows, first.tolist(), sums, warm_sums, strict=True
                )
            )
        put(self, "_rows", rows)
        counters = {str(k): _as_int(v, f"counter {k!r}") for k, v in self.counters.items()}
        put(self, "counters", MappingProxyType(counters))
        sources = tuple(self.sources)
        if not all(isinstance(s, SourceRecord) for s in sources):
            raise ArgumentTypeError("sources must be SourceRecord records")
        put(self, "sources", sources)
        rolling = self.rolling
        if rolling is not None:
            rolling = np.ascontiguousarray(rolling, dtype=np.int64)
            put(self, "rolling", _readonly(rolling) if rolling.flags.writeable else rolling)
        lap = float(self.lap_cost_ns)
        if not (math.isfinite(lap) or math.isnan(lap)) or lap < 0:
            raise InvalidValueError(f"lap cost {lap} is not a number >= 0")
        put(self, "lap_cost_ns", lap)

    def replace(self, **changes: Any) -> Snapshot:
        """A copy with the given fields (constructor keywords) replaced, validated as new."""
        unknown = set(changes) - {f.name for f in fields(self) if f.init}
        if unknown:
            raise ArgumentTypeError(f"Snapshot has no field(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    # -- the per-histogram records -------------------------------------------------

    @property
    def rows(self) -> tuple[PhaseRow, ...]:
        """Each histogram's scalar record: one per phase, then ``STEP``."""
        return self._rows

    def row(self, name: str) -> PhaseRow:
        """The record of phase ``name`` (``STEP``: whole steps); KeyError if there is none."""
        if name == STEP:
            return self._rows[-1]
        try:
            return self._rows[self.phases.index(name)]
        except ValueError:
            raise MissingKeyError(
                f"no phase {name!r} in this snapshot (phases: {list(self.phases)})"
            ) from None

    # -- building from a recorder's stats block ---------------------------------

    @classmethod
    def from_stats(
        cls,
        stats: np.ndarray,
        config: Mapping[str, Any],
        phases: Sequence[str],
        counter_names: Sequence[str],
        *,
        lap_cost_ns: float,
        taken_ns: int,
        overwritten: int = 0,
        meta: Meta | None = None,
    ) -> Snapshot:
        """Build a snapshot from a copy of a Recorder's stats block (see recorder.pyx).

        A copy taken while the writer runs may have a sum or an extreme one value
        behind the buckets: those are settled against the buckets (see ``_settle``).
        """
        block = StatsBlock.from_config(np.asarray(stats, dtype=np.int64), config)
        nphase = block.n_phases
        if len(phases) != nphase:
            raise InvalidValueError(f"{len(phases)} phase names for a recorder of {nphase} phases")
        cfg = SnapshotConfig.of(config)
        counts = block.counts.copy()
        # counts come from the buckets so a copy taken while the writer runs stays consistent
        stat = block.stat_table()
        warm = block.warm.copy()
        exact_meta: dict[str, Any] = {}  # sums past int64, exact (``_checks.exact_sums``)
        _checks.store_exact_sums(stat, exact_meta, list(block.exact_sums()))
        _checks.store_exact_sums(
            warm, exact_meta, list(block.exact_warm_sums()), _checks.EXACT_WARM_SUMS_KEY
        )
        first = block.first.copy()
        _settle(counts, stat, warm, cfg.layout)
        counters_raw = block.counters
        counters = {name: int(counters_raw[i]) for i, name in enumerate(counter_names)}
        rolling = block.window_records()  # closed rolling windows, oldest first
        start = block.start_ns
        steady_start = block.steady_start_ns
        last_step_end = block.last_step_end_ns
        last_write = block.last_activity_ns
        steady_steps = int(stat[nphase, _COUNT])
        end = last_step_end if steady_steps > 0 else last_write
        steady_ns = max(0, end - steady_start) if steady_start >= 0 and end > 0 else 0
        warmup_ns = (
            (steady_start - start)
            if (steady_start >= 0 and start > 0)
            else (max(0, last_write - start) if start > 0 else 0)
        )
        rate = steady_steps / (steady_ns / 1e9) if steady_ns > 0 else 0.0
        events_steady = int(stat[:nphase, _COUNT].sum())
        costs = config.get("form_cost_ns")
        form_events = dict(block.form_events())
        wrapper_ns, wrapper_events = wrapper_overhead(
            phases, stat[:nphase, _COUNT], warm[:nphase, _WCOUNT], counters, costs
        )
        # the wrappers' timed calls are priced with the wrapper: not again as ``with``
        form_events["with"] = max(0, int(form_events.get("with", 0)) - wrapper_events)
        overhead_ns = wrapper_ns + overhead_of(
            events_steady - wrapper_events, steady_steps, form_events, costs, lap_cost_ns
        )
        # the costs are what a boundary costs in a real loop, more than in a loop of
        # nothing but boundaries; the profiler cannot take more than all of the time
        if overhead_ns > steady_ns:
            wrapper_ns *= float(steady_ns) / overhead_ns
            overhead_ns = float(steady_ns)
        wrapper_ns = min(wrapper_ns, overhead_ns)
        totals = Totals(
            steps_begun=block.steps_begun,
            steps_completed=block.steps_completed,
            warmup_steps_done=block.warmup_steps_done,
            events=int(stat[:nphase, _COUNT].sum() + warm[:nphase, _WCOUNT].sum()),
            overwritten=int(overwritten),
            out_of_range=block.out_of_range,
            negative=block.negative,
            nonfinite=block.nonfinite,
            saturated=block.saturated,
        )
        times = Times(
            start_ns=start,
            steady_start_ns=steady_start,
            last_step_end_ns=last_step_end,
            last_write_ns=last_write,
            taken_ns=int(taken_ns),
            open_phase=block.open_phase,
            open_since_ns=block.open_since_ns,
            warmup_end_step=block.warmup_end_step,
        )
        meta = meta or Meta()
        source = SourceRecord(
            steady_ns=steady_ns,
            warmup_ns=warmup_ns,
            rate=rate,
            overhead_ns=overhead_ns,
            wrapper_ns=wrapper_ns if wrapper_ns > 0 else None,
            warmup_done=steady_start >= 0,
            steady_start_ns=steady_start if steady_ns > 0 else None,
            end_ns=end if steady_ns > 0 else None,
            **{k: getattr(meta, k) for k in _IDENTITY},
        )
        return cls(
            phases=tuple(phases),
            config=cfg,
            counts=counts,
            stat=stat,
            warm=warm,
            first=first,
            totals=totals,
            counters=counters,
            times=times,
            rolling=rolling,
            lap_cost_ns=lap_cost_ns,
            sources=(source,),
            meta=meta.replace(**exact_meta) if exact_meta else meta,
        )

    # -- convenience -------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Steps completed, warm-up included."""
        return self.totals.steps_completed

    @property
    def steady_steps(self) -> int:
        """Steps completed in steady state (warm-up excluded)."""
        return self._rows[-1].count

    @property
    def steady_ns(self) -> int:
        """Steady-state wall ns: the span the sources cover (see ``wall_span_ns``)."""
        return wall_span_ns(self.sources)

    @property
    def steady_s(self) -> float:
        """Steady-state wall seconds: the span the sources cover (see ``wall_span_ns``)."""
        return self.steady_ns / 1e9

    def rate_spread(self) -> tuple[float, float, float] | None:
        """(min, median, max) of the sources' own steady rates; None with fewer than two."""
        return rate_spread(self.sources)

    @property
    def open_phase(self) -> str | None:
        """The phase open when the snapshot was taken (single-source snapshots only)."""
        p = self.times.open_phase
        return self.phases[p] if 0 <= p < len(self.phases) else None

    @property
    def open_since_ns(self) -> int:
        return self.times.open_since_ns

    @property
    def layout(self) -> tuple[int, int, int]:
        return self.config.layout

    def windows(self) -> list[Window]:
        """The closed rolling windows of this snapshot, oldest first."""
        return rolling_windows(self.rolling, self.phases, closed=self.meta.windows_closed)

    def first_step_as_warmup(self) -> Snapshot:
        """A copy with the first step counted as warm-up, as ``warmup_steps=1`` would have
        recorded it: each row's first value moves from the steady buckets and sums to the
        warm-up record, the steady state starts one step later, and a rolling window that
        holds the first step is marked warm-up. Where the first value was the steady
        maximum, the new one is read from the rolling windows (exact when they hold every
        step, one a window, as ``gyreprof run``'s trainer closes them), else from the
        buckets left (to the histogram's resolution), and so is a minimum.

        Only a snapshot of one source stepping, with no warm-up rule, whose rows each hold
        one value a step (a trainer's ``wait``, ``compute`` and the step itself; one more
        for a step still open) can say what its first step held; any other raises ``InvalidValueError`` saying why
        (``gyreprof.analysis.startup`` decides when to ask)."""
        cfg, totals, times = self.config, self.totals, self.times
        if cfg.warmup_steps or cfg.warmup_ns or totals.warmup_steps_done:
            raise InvalidValueError("it has a warm-up rule of its own")
        if self.meta.exact_sums is not None or self.meta.exact_warm_sums is not None:
            raise InvalidValueError("its sums are past the int64 range")
        stepping = [i for i, src in enumerate(self.sources) if src.steady_ns > 0]
        if len(stepping) != 1:
            raise InvalidValueError(f"{len(stepping)} of its sources step, not one")
        steps = self._rows[-1].count
        if steps < 2 or times.steady_start_ns < 0:
            raise InvalidValueError(f"it holds {steps} steady step(s)")
        counts, stat, warm = self.counts.copy(), self.stat.copy(), self.warm.copy()
        lo, width = layout_edges(*cfg.layout)
        later_max = self._later_maxima(steps)
        # a step still open when the snapshot was taken (a process killed mid-step, read
        # from its live segment) may hold a value of a row already
        open_step = 1 if totals.steps_begun == totals.steps_completed + 1 else 0
        for h, r in enumerate(self._rows):
            if r.count == 0:
                continue
            if not steps <= r.count <= steps + open_step or r.first < 0:
                raise InvalidValueError(f"{r.name!r} holds {r.count} values in {steps} steps")
            v = int(r.first)
            b = int(np.searchsorted(lo, v, side="right")) - 1
            if b < 0 or b >= counts.shape[1] or counts[h, b] <= 0:
                raise InvalidValueError(f"the first {r.name!r} is not in its buckets")
            counts[h, b] -= 1
            nz = np.flatnonzero(counts[h])
            i0, i1 = int(nz[0]), int(nz[-1])
            stat[h, _COUNT] -= 1
            stat[h, _SUM] -= v
            if v <= r.min:
                stat[h, _MIN] = max(r.min, int(lo[i0]))
            if v >= r.max:
                top = later_max[h] if later_max is not None else int(lo[i1] + width[i1] - 1)
                stat[h, _MAX] = max(int(stat[h, _MIN]), min(r.max, top))
            warm[h] = (1, v, v)
        first_ns = int(self._rows[-1].first)
        src = self.sources[stepping[0]]
        steady = max(0, src.steady_ns - first_ns)
        overhead = min(src.overhead_ns, float(steady))
        sources = list(self.sources)
        sources[stepping[0]] = src.replace(
            steady_ns=steady,
            warmup_ns=src.warmup_ns + first_ns,
            rate=(steps - 1) / (steady / 1e9) if steady > 0 else 0.0,
            overhead_ns=overhead,
            wrapper_ns=None if src.wrapper_ns is None else min(src.wrapper_ns, overhead),
            warmup_done=True,
            steady_start_ns=None if src.steady_start_ns is None else src.steady_start_ns + first_ns,
        )
        return self.replace(
            counts=counts,
            stat=stat,
            warm=warm,
            config=dataclasses.replace(cfg, warmup_steps=1),
            totals=dataclasses.replace(totals, warmup_steps_done=1),
            times=dataclasses.replace(
                times, steady_start_ns=times.steady_start_ns + first_ns, warmup_end_step=1
            ),
            sources=tuple(sources),
            rolling=None if self.rolling is None else warmup_windows(self.rolling, 1),
        )

    def _later_maxima(self, steps: int) -> list[int] | None:
        """Each row's largest value after the first step, exact, from the rolling windows
        when they hold every step and the first step alone in its window; else None."""
        wins = self.windows()
        if not wins or sum(w.steps for w in wins) != steps:
            return None
        if wins[0].first_step != 1 or wins[0].steps != 1:
            return None
        top = [-1] * (len(self.phases) + 1)
        for w in wins[1:]:
            stats = [w.phases[name] for name in self.phases] + [w.step]
            for h, ws in enumerate(stats):
                if ws is not None and ws.count > 0:
                    top[h] = max(top[h], int(ws.max))
        return top

    def summary(self) -> Summary:
        """The Summary computed from this snapshot (percentiles, shares, throughput)."""
        return Summary.from_snapshot(self)

    # -- serialisation -----------------------------------------------------------

    def to_bytes(self, *, windows: bool = True, compression: str = "zlib") -> bytes:
        """Compact bytes: magic, version, codec flag, compressed(JSON header + varint counts).

        ``compression="lzma"`` is ~20% smaller and several times slower than the
        default ``"zlib"``; ``from_bytes`` reads both.
        """
        if compression not in _CODECS:
            raise InvalidValueError(
                f"compression must be one of {sorted(_CODECS)}, got {compression!r}"
            )
        header = {
            "gyreprof": __version__,
            "phases": list(self.phases),
            "config": _plain(self.config),
            "stat": self.stat.tolist(),
            "warm": self.warm.tolist(),
            "first": self.first.tolist(),
            "totals": _plain(self.totals),
            "counters": dict(self.counters),
            "times": _plain(self.times),
            "lap_cost_ns": self.lap_cost_ns,
            "sources": [_plain(s) for s in self.sources],
            "meta": _plain(self.meta),
            "counts_len": int(self.counts.shape[1]),
        }
        rolling = self.rolling if windows else None
        if rolling is not None:
            header["rolling_shape"] = [int(n) for n in rolling.shape]
        hjson = json.dumps(header, separators=(",", ":"), allow_nan=True).encode()
        parts = [struct.pack("<I", len(hjson)), hjson]
        for row in self.counts:
            enc = encode_counts(row)
            parts.append(struct.pack("<I", len(enc)))
            parts.append(enc)
        if rolling is not None:
            block = _window_planes(rolling)
            parts.append(struct.pack("<I", len(block)))
            parts.append(block)
        flag, compress, _ = _CODECS[compression]
        body = compress(b"".join(parts))
        return SNAPSHOT_MAGIC + struct.pack("<BB", SNAPSHOT_VERSION, flag) + body

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Snapshot:
        """Read bytes made by ``to_bytes``; ``CorruptDataError`` (a ValueError) says what is
        wrong with bad input, ``BudgetError`` (a ValueError) when decoding it would need more
        memory than ``GYREPROF_MEMORY_BUDGET`` allows."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ArgumentTypeError(f"Snapshot.from_bytes needs bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < 6:
            raise CorruptDataError(f"not a gyreprof snapshot: {len(data)} bytes is too short")
        if data[:4] != SNAPSHOT_MAGIC:
            raise CorruptDataError("not a gyreprof snapshot: the magic bytes 'GYRS' are missing")
        version = data[4]
        if version not in _READ_VERSIONS:
            raise CorruptDataError(
                f"snapshot format version {version} is not supported (this gyreprof reads "
                f"versions {', '.join(map(str, _READ_VERSIONS))}); upgrade gyreprof on the "
                "reading side"
            )
        codec = next((c for c in _CODECS.values() if c[0] == data[5]), None)
        if codec is None:
            raise CorruptDataError(f"corrupted snapshot: unknown compression flag {data[5]}")
        try:
            body = codec[2](data[6:])
        except (zlib.error, lzma.LZMAError, EOFError) as exc:
            raise CorruptDataError(f"corrupted or truncated snapshot: {exc}") from None
        try:
            return _limits.check_snapshot(cls._from_body(body, version))
        except _limits.BudgetError:
            raise
        except ValueError as exc:
            raise CorruptDataError(f"corrupted snapshot: {exc}") from None
        except _limits.DECODE_ERRORS as exc:
            raise CorruptDataError(f"corrupted snapshot: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_body(cls, body: bytes, version: int = 1) -> Snapshot:
        if len(body) < 4:
            raise InvalidValueError("header length missing")
        (hlen,) = struct.unpack_from("<I", body, 0)
        if 4 + hlen > len(body):
            raise InvalidValueError("header runs past the end")
        header = json.loads(body[4 : 4 + hlen])
        if not isinstance(header, dict):
            raise InvalidValueError("header is not an object")
        phases = header["phases"]
        if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
            raise InvalidValueError("phase names are not a list of strings")
        config = _record(SnapshotConfig, header["config"], "config")
        lowest, highest, sf = config.layout
        L = int(layout_info(lowest, highest, sf)["counts_len"])
        if header["counts_len"] != L:
            raise InvalidValueError(
                f"counts length {header['counts_len']} does not match the layout ({L})"
            )
        pos = 4 + hlen
        nh = len(phases) + 1
        dense = _limits.check_dense(nh, L, what="snapshot")
        stat = _int_table(header["stat"], (nh, 4), "stat table")
        counts = np.zeros((nh, L), dtype=np.int64)
        view = memoryview(body)
        lo = layout_edges(lowest, highest, sf)[0]
        decoded = []  # (total, first, last non-empty bucket) of each row, from its decoding
        for row in counts:
            if pos + 4 > len(body):
                raise InvalidValueError("histogram data truncated")
            (n,) = struct.unpack_from("<I", body, pos)
            pos += 4
            if pos + n > len(body):
                raise InvalidValueError("histogram data truncated")
            decoded.append(decode_counts_into(view[pos : pos + n], L, row))
            pos += n
        rolling_arr = None
        if version >= 2:
            if "rolling" in header:
                raise InvalidValueError("rolling windows in the header of a version 2 snapshot")
            shape = header.get("rolling_shape")
            if shape is not None:
                rolling_arr, pos = _rolling_block(body, pos, shape, dense)
        if pos != len(body):
            raise InvalidValueError(f"{len(body) - pos} unexpected bytes after the histograms")
        _check_counts(decoded, stat, lo)
        warm = _int_table(header["warm"], (nh, 3), "warm-up table")
        if version < 2:
            rolling = header.get("rolling")
            rolling_arr = None if rolling is None else _rolling_table(rolling)
        counters = header["counters"]
        if not isinstance(counters, dict):
            raise InvalidValueError("counters are not a mapping")
        sources = header["sources"]
        if not isinstance(sources, list):
            raise InvalidValueError("sources are not a list")
        lap = header["lap_cost_ns"]
        if not isinstance(lap, (int, float)) or isinstance(lap, bool):
            raise InvalidValueError(f"lap cost {lap!r} is not a number")
        return cls(
            phases=tuple(phases),
            config=config,
            counts=counts,
            stat=stat,
            warm=warm,
            first=_int_table(header["first"], (nh,), "first values"),
            totals=_record(Totals, header["totals"], "totals"),
            counters=counters,
            times=_record(Times, header["times"], "times"),
            rolling=rolling_arr,
            lap_cost_ns=float(lap),
            sources=tuple(
                _record(SourceRecord, src, f"sources[{i}]") for i, src in enumerate(sources)
            ),
            meta=_record(Meta, header.get("meta") or {}, "meta"),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_bytes` to ``path`` atomically (``gyreprof._io.write_atomic``: a
        fresh temp file renamed into place, never through a planted link)."""
        p = Path(path)
        _io.write_atomic(p, self.to_bytes())
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Snapshot:
        return cls.from_bytes(_io.read_bytes(path, "snapshot"))

    def __repr__(self) -> str:
        return (
            f"Snapshot(phases={list(self.phases)}, steps={self.steps}, sources={len(self.sources)})"
        )


def merge(snapshots: Iterable[Snapshot]) -> Snapshot:
    """Merge snapshots of parallel sources (workers, threads, actors) into one.

    Phases are matched by name (the union, in first-seen order); the histogram
    layouts must be equal. Counts, sums and counters add; min/max take the
    extremes; the times span the sources, so steps_per_s is the fleet's throughput
    over that span. Associative and commutative up to phase order.
    Merging several sources drops their rolling windows (they belong to one
    source each); merging a single snapshot returns it unchanged.
    """
    snaps = list(snapshots)
    if not snaps:
        raise InvalidValueError("merge needs at least one snapshot")
    for s in snaps:
        if not isinstance(s, Snapshot):
            raise ArgumentTypeError(f"merge takes Snapshot objects, got {type(s).__name__}")
    layout = snaps[0].layout
    for s in snaps[1:]:
        if s.layout != layout:
            raise InvalidValueError(
                f"cannot merge snapshots with different histogram layouts {layout} and {s.layout} "
                "(lowest_ns, highest_ns, significant_figures)"
            )
    if len(snaps) == 1:
        return snaps[0]
    names: list[str] = []
    for s in snaps:
        for p in s.phases:
            if p not in names:
                names.append(p)
    nh = len(names) + 1
    L = snaps[0].counts.shape[1]
    _limits.check_dense(nh, L, what="merge")
    counts = np.zeros((nh, L), dtype=np.int64)
    stat = np.zeros((nh, 4), dtype=np.int64)
    stat[:, 2] = -1
    stat[:, 3] = -1
    warm = np.zeros((nh, 3), dtype=np.int64)
    warm[:, 2] = 0
    first = np.full(nh, -1, dtype=np.int64)
    totals = dict.fromkeys(_TOTAL_KEYS, 0)
    counters: dict[str, int] = {}
    sources: list[SourceRecord] = []
    starts, taken = [], []
    saturated = 0
    row_maps = [[names.index(p) for p in s.phases] + [nh - 1] for s in snaps]
    # bucket counts add in int64: a row that would count past the int64 limit is refused
    # (before any add, so nothing wraps); sums add exactly, in Python ints (None: not
    # known exactly), and are stored below
    row_total = [0] * nh
    for s, rows in zip(snaps, row_maps, strict=True):
        for src_row, dst in enumerate(rows):
            row_total[dst] += s.rows[src_row].count
    if max(row_total) > _INT64_MAX:
        raise InvalidValueError(
            f"merge: the merged histograms would count {max(row_total)} values, more than "
            "the 2^63 - 1 an int64 bucket holds"
        )
    sums: list[int | None] = [0] * nh
    warm_sums: list[int | None] = [0] * nh
    for s, rows in zip(snaps, row_maps, strict=True):
        for acc, got in (
            (sums, _checks.exact_sums(s.stat, s.meta)),
            (warm_sums, _checks.exact_sums(s.warm, s.meta, _checks.EXACT_WARM_SUMS_KEY)),
        ):
            for src_row, total in enumerate(got):
                have = acc[rows[src_row]]
                acc[rows[src_row]] = None if have is None or total is None else have + total
        if rows == list(range(nh)):
            np.add(counts, s.counts, out=counts)
        else:
            for src_row, dst in enumerate(rows):
                np.add(counts[dst], s.counts[src_row], out=counts[dst])
        for src_row, dst in enumerate(rows):
            # sums add in Python ints and saturate (counted) instead of wrapping
            stat[dst, 0], held0 = _sat_add(stat[dst, 0], s.stat[src_row, 0])
            saturated += held0  # the sums: exact in ``sums``, stored below
            smin, smax = s.stat[src_row, 2], s.stat[src_row, 3]
            if smin >= 0 and (stat[dst, 2] < 0 or smin < stat[dst, 2]):
                stat[dst, 2] = smin
            if smax > stat[dst, 3]:
                stat[dst, 3] = smax
            warm[dst, 0], held0 = _sat_add(warm[dst, 0], s.warm[src_row, 0])
            saturated += held0
            warm[dst, 2] = max(warm[dst, 2], s.warm[src_row, 2])
            f = s.first[src_row]
            if f >= 0 and (first[dst] < 0 or f > first[dst]):
                first[dst] = f  # the slowest first call across sources
        for k in _TOTAL_KEYS:
            totals[k] += getattr(s.totals, k)
        for k, v in s.counters.items():
            counters[k] = counters.get(k, 0) + v
        sources.extend(s.sources)
        if s.times.start_ns > 0:
            starts.append(s.times.start_ns)
        taken.append(s.times.taken_ns)
    for table in (totals, counters):
        for k, v in table.items():
            if v > _INT64_MAX:  # held at the limit, and counted
                table[k] = _INT64_MAX
                saturated += 1
    totals["saturated"] = min(_INT64_MAX, totals["saturated"] + saturated)
    times = Times(start_ns=min(starts) if starts else 0, taken_ns=max(taken))
    # the cost of a boundary, weighted by how many boundaries each source recorded
    weights = [max(1, sum(r.count for r in s.rows)) for s in snaps]
    lap_cost = float(np.average([s.lap_cost_ns for s in snaps], weights=weights))
    base = snaps[0]
    merged_meta: dict[str, Any] = {"merged": len(sources)}
    _checks.store_exact_sums(stat, merged_meta, sums)
    _checks.store_exact_sums(warm, merged_meta, warm_sums, _checks.EXACT_WARM_SUMS_KEY)
    return Snapshot(
        phases=tuple(names),
        config=base.config,
        counts=counts,
        stat=stat,
        warm=warm,
        first=first,
        totals=Totals(**totals),
        counters=counters,
        times=times,
        rolling=None,
        lap_cost_ns=lap_cost,
        sources=tuple(sources),
        meta=Meta(**merged_meta),
    )


# ----------------------------------------------------------------------- interval


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


def _per_boundary_cost(snap: Snapshot) -> float:
    """A snapshot's profiler cost per boundary (events and steps), its forms mixed in."""
    src_over = sum(s.overhead_ns for s in snap.sources)
    n = sum(r.count for r in snap.rows)
    return src_over / n if src_over > 0 and n > 0 else float(snap.lap_cost_ns)


def _wrapper_part(snap: Snapshot) -> float:
    """The share of a snapshot's profiler time its env-call wrappers took."""
    over = sum(s.overhead_ns for s in snap.sources)
    wrapped = sum(s.wrapper_ns or 0.0 for s in snap.sources)
    return min(1.0, wrapped / over) if over > 0 else 0.0


def interval(before: Snapshot | None, after: Snapshot, *, strict: bool = True) -> Snapshot:
    """What a source recorded between two of its snapshots (exact histograms).

    ``before`` and ``after`` are in time order. Buckets and counters only grow,
    so ``after - before`` is the histogram of the values recorded in between;
    the interval's min/max are exact where a new extreme was set, else bounded
    by the outermost non-empty buckets. Its ``steady_s`` is the time between
    the two snapshots and ``steady_steps`` the steps completed in between.

    ``after`` itself (everything so far) is returned when there is no
    ``before`` (None), or when the source restarted in between: another
    process (pid), fewer steps, a shrinking bucket. Two snapshots that are not
    of the same source(s) (phases, layout or number of sources differ) raise
    ValueError, or with ``strict=False`` count as a restart too. A merged
    snapshot (e.g. a ``per_thread`` profiler) pairs with a merge of the same
    sources; its interval reads as one source.
    """
    if not isinstance(after, Snapshot) or not isinstance(before, (Snapshot, type(None))):
        raise ArgumentTypeError(
            "interval(before, after) takes two Snapshots (before may be None), got "
            f"{type(before).__name__} and {type(after).__name__}"
        )
    if before is None:
        return after
    pid_before, pid_after = before.meta.pid, after.meta.pid
    if pid_before is not None and pid_after is not None and pid_before != pid_after:
        return after  # the source restarted as another process
    problem = None
    if len(before.sources) != len(after.sources):
        problem = (
            f"interval needs two snapshots of the same source(s), got {len(before.sources)} "
            f"and {len(after.sources)} sources: pair a single-source snapshot with one of "
            "the same source, a merge with a merge of the same sources"
        )
    elif before.phases != after.phases or before.layout != after.layout:
        problem = "interval needs two snapshots of the same profiler (phases or layout differ)"
    if problem is not None:
        if strict:
            raise InvalidValueError(problem)
        return after
    counts = after.counts - before.counts
    if (counts < 0).any() or after.steps < before.steps:
        return after
    nh = counts.shape[0]
    lo, width = layout_edges(*after.layout)
    stat = np.zeros((nh, 4), dtype=np.int64)
    stat[:, 2] = -1
    stat[:, 3] = -1
    sums_a = _checks.exact_sums(after.stat, after.meta)
    sums_b = _checks.exact_sums(before.stat, before.meta)
    sums: list[int | None] = [0] * nh
    for h in range(nh):
        n = int(counts[h].sum())
        stat[h, 0] = n
        if n == 0:
            continue
        sa, sb = sums_a[h], sums_b[h]
        sums[h] = max(0, sa - sb) if sa is not None and sb is not None else None
        nz = np.flatnonzero(counts[h])
        i0, i1 = int(nz[0]), int(nz[-1])
        a_min, b_min = int(after.stat[h, 2]), int(before.stat[h, 2])
        a_max, b_max = int(after.stat[h, 3]), int(before.stat[h, 3])
        stat[h, 2] = a_min if (b_min < 0 or a_min < b_min) else max(int(lo[i0]), a_min)
        top = int(lo[i1] + width[i1] - 1)
        stat[h, 3] = a_max if a_max > b_max else min(top, a_max)
        d = sums[h]
        if d is not None and not n * int(stat[h, 2]) <= d <= n * int(stat[h, 3]):
            # the two sums and the buckets were not copied at one moment (a reader racing
            # a writer's fold): the interval's sum is not known, and reads as missing
            sums[h] = None
    t0 = before.times.taken_ns
    t1 = after.times.taken_ns
    dt = max(0, t1 - t0)
    steps = int(stat[nh - 1, 0])
    events = int(stat[: nh - 1, 0].sum())
    totals = Totals(
        **{k: max(0, getattr(after.totals, k) - getattr(before.totals, k)) for k in _TOTAL_KEYS}
    )
    counters = {k: v - before.counters.get(k, 0) for k, v in after.counters.items()}
    src = after.sources[0]
    if len(after.sources) > 1:
        src = SourceRecord(**{k: getattr(src, k) for k in _IDENTITY}, merged=len(after.sources))
    interval_over = min(float(dt), _per_boundary_cost(after) * (events + steps))
    src = src.replace(
        steady_ns=dt,
        warmup_ns=0,
        rate=steps / (dt / 1e9) if dt > 0 else 0.0,
        overhead_ns=interval_over,
        wrapper_ns=(interval_over * _wrapper_part(after)) or None,
        warmup_done=True,
        steady_start_ns=t0,
        end_ns=t1,
    )
    times = dataclasses.replace(after.times, start_ns=t0, steady_start_ns=t0)
    # the exact sums subtract (the table's column is written from them); the interval
    # has no warm-up
    exact: dict[str, Any] = {}
    _checks.store_exact_sums(stat, exact, sums)
    meta = after.meta.replace(
        interval_ns=dt,
        windows_closed=0,
        exact_sums=exact.get(_checks.EXACT_SUMS_KEY),
        exact_warm_sums=None,
    )
    return Snapshot(
        phases=after.phases,
        config=after.config,
        counts=counts,
        stat=stat,
        warm=np.zeros((nh, 3), dtype=np.int64),
        first=np.full(nh, -1, dtype=np.int64),
        totals=totals,
        counters=counters,
        times=times,
        rolling=None,
        lap_cost_ns=after.lap_cost_ns,
        sources=(src,),
        meta=meta,
    )


# ------------------------------------------------------------------------ inputs


@overload
def as_snapshot(
    source: Any, *, what: str = ..., summary_only: Literal[False] = ...
) -> Snapshot: ...


@overload
def as_snapshot(
    source: Any, *, what: str = ..., summary_only: Literal[True]
) -> Snapshot | None: ...


def as_snapshot(source: Any, *, what: str = "this", summary_only: bool = False) -> Snapshot | None:
    """A Profiler, Snapshot or Summary input as a Snapshot.

    A Profiler gives its snapshot now; a Summary the snapshot it was computed
    from. A Summary loaded from JSON has none: ValueError, or None with
    ``summary_only=True`` (for callers that can work from the Summary alone).
    ``what`` names the caller in the errors; TypeError for any other input.
    """
    if isinstance(source, Snapshot):
        return source
    take = getattr(source, "snapshot", None)
    if callable(take) and hasattr(source, "recorders"):  # a Profiler (no import: no cycle)
        snap = take()
        if not isinstance(snap, Snapshot):
            raise ArgumentTypeError(
                f"{what}: {type(source).__name__}.snapshot() gave {type(snap).__name__}"
            )
        return snap
    if isinstance(source, Summary):
        snap = source.snapshot
        if snap is None and not summary_only:
            raise InvalidValueError(
                f"{what} needs the snapshot behind this Summary, and a Summary loaded from "
                "JSON has none; pass the Profiler, or a Snapshot (Snapshot.load(path))"
            )
        return snap
    raise ArgumentTypeError(
        f"{what} takes a Profiler, Snapshot or Summary, got {type(source).__name__}"
    )


# ----------------------------------------------------------------------- building


@dataclass(frozen=True, slots=True)
class ProfilerIdentity:
    """What a snapshot of one Profiler's recorders says about who took it: the phases,
    the label and the calibrated cost of a boundary. The counter names grow as the
    program counts new ones, so they are passed with each stats block instead."""

    phases: tuple[str, ...]
    label: str | None
    lap_cost_ns: float


def build_snapshot(
    stats: np.ndarray,
    config: Mapping[str, Any],
    identity: ProfilerIdentity,
    counter_names: Sequence[str],
    *,
    taken_ns: int,
    pid: int | None = None,
    host: str | None = None,
    label: str | None = None,
    live_path: str | None = None,
    windows_closed: int | None = None,
    windows_dropped: int = 0,
    overwritten: int | None = None,
) -> Snapshot:
    """The one builder of a Snapshot from a copy of a stats block (profiler, thread
    retirement, autosave and the live reader all call it), so their meta agrees.

    ``pid`` / ``host`` default to this process's (a live reader passes the writer's);
    ``label`` to the identity's. The Unix offset is this boot's, valid for any process
    of this host (CLOCK_MONOTONIC is per boot); ``overwritten`` comes from the block's
    own ring head, and ``windows_closed`` from the block unless the caller hid them.
    """
    block = StatsBlock.from_config(np.asarray(stats, dtype=np.int64), config)
    here = socket.gethostname()
    host = here if host is None else host
    meta = Meta(
        pid=os.getpid() if pid is None else int(pid),
        host=host,
        label=identity.label if label is None else label,
        unix_offset_ns=current_unix_offset_ns() if host == here else None,
        windows_closed=block.windows_closed if windows_closed is None else windows_closed,
        autosave_windows_dropped=windows_dropped or None,
        live_path=live_path,
    )
    return Snapshot.from_stats(
        stats,
        config,
        identity.phases,
        counter_names,
        lap_cost_ns=identity.lap_cost_ns,
        taken_ns=taken_ns,
        overwritten=(
            max(0, block.ring_head - int(config["capacity"]))
            if overwritten is None
            else overwritten
        ),
        meta=meta,
    )
