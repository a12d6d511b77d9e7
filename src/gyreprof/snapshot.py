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

import json
import lzma
import os
import socket
import statistics
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from gyreprof import _checks, _io, _limits
from gyreprof._block import StatsBlock
from gyreprof._core import decode_counts, encode_counts, layout_info, monotonic_ns
from gyreprof._errors import CorruptDataError
from gyreprof._version import __version__
from gyreprof.histogram import STEP, exact_percentiles, layout_edges
from gyreprof.summary import Summary
from gyreprof.window import Window, WindowStats, rolling_windows, windows_from_events

__all__ = [
    "SNAPSHOT_MAGIC",
    "STEP",
    "Snapshot",
    "Window",
    "WindowStats",
    "as_snapshot",
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
SNAPSHOT_VERSION = 1


# ------------------------------------------------------------------ wall clock


def current_unix_offset_ns() -> int:
    """Unix-epoch ns minus monotonic ns, now (valid for this boot's monotonic clock)."""
    return time.time_ns() - int(monotonic_ns())


def unix_offset_ns(snapshot: Snapshot) -> int | None:
    """Unix-epoch ns minus monotonic ns for the times of ``snapshot``, when known.

    Known when the snapshot records it (``meta["unix_offset_ns"]``) or was taken
    by this process; a snapshot from another process (or host, or a merge of
    several) carries monotonic times we cannot relate to wall time: None.
    """
    meta = snapshot.meta
    recorded = meta.get("unix_offset_ns")
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded
    if meta.get("pid") != os.getpid() or meta.get("host") != socket.gethostname():
        return None
    return current_unix_offset_ns()


def wall_span_ns(sources: Sequence[Mapping[str, Any]]) -> int:
    """Wall-clock ns the steady state of ``sources`` covers, first start to last end.

    Each source's steady interval (``steady_start_ns``..``end_ns``, monotonic) is
    placed on the wall clock by its ``unix_offset_ns``; sources of one host
    without an offset share that host's monotonic clock. When the sources cannot
    be placed on one clock, the longest single source is the answer (a lower
    bound of the span; adding sources' seconds would count parallel time twice).
    """
    spans = []
    for s in sources:
        a, b = s.get("steady_start_ns"), s.get("end_ns")
        if isinstance(a, int) and isinstance(b, int) and b > a >= 0:
            spans.append((s, a, b))
    longest = max((int(s.get("steady_ns", 0)) for s in sources), default=0)
    if not spans or len(spans) < len([s for s in sources if int(s.get("steady_ns", 0)) > 0]):
        return longest
    offs = [s.get("unix_offset_ns") for s, _, _ in spans]
    if all(isinstance(o, int) for o in offs):
        lo = min(a + int(o) for (_, a, _), o in zip(spans, offs, strict=True))  # type: ignore[arg-type]
        hi = max(b + int(o) for (_, _, b), o in zip(spans, offs, strict=True))  # type: ignore[arg-type]
    elif len({s.get("host") for s, _, _ in spans}) == 1:
        lo = min(a for _, a, _ in spans)
        hi = max(b for _, _, b in spans)
    else:
        return longest
    return max(longest, hi - lo)


def source_rates(sources: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each source's own steady steps per second (sources that ran steady steps)."""
    return [float(s.get("rate", 0.0)) for s in sources if float(s.get("rate", 0.0)) > 0]


def rate_spread(sources: Sequence[Mapping[str, Any]]) -> tuple[float, float, float] | None:
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


# ------------------------------------------------------------------- snapshot


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class Snapshot:
    """Immutable copy of what one or more Recorders counted. Mergeable, serialisable.

    Arrays have one row per phase plus a last row for whole steps:
    ``counts`` (steady-state bucket counts), ``stat`` (count, sum, min, max),
    ``warm`` (warm-up count, sum, max), ``first`` (first value recorded, -1 none).
    """

    __slots__ = (
        "phases",
        "config",
        "counts",
        "stat",
        "warm",
        "first",
        "totals",
        "counters",
        "times",
        "rolling",
        "lap_cost_ns",
        "sources",
        "meta",
    )

    phases: tuple[str, ...]
    config: dict[str, Any]
    counts: np.ndarray
    stat: np.ndarray
    warm: np.ndarray
    first: np.ndarray
    totals: dict[str, int]
    counters: dict[str, int]
    times: dict[str, Any]
    rolling: np.ndarray | None
    lap_cost_ns: float
    sources: tuple[dict[str, Any], ...]
    meta: dict[str, Any]

    def __init__(
        self,
        *,
        phases: Sequence[str],
        config: Mapping[str, Any],
        counts: np.ndarray,
        stat: np.ndarray,
        warm: np.ndarray,
        first: np.ndarray,
        totals: Mapping[str, int],
        counters: Mapping[str, int],
        times: Mapping[str, int | float],
        rolling: np.ndarray | None,
        lap_cost_ns: float,
        sources: Sequence[Mapping[str, Any]],
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "phases", tuple(phases))
        object.__setattr__(self, "config", dict(config))
        nh = len(self.phases) + 1
        counts = np.ascontiguousarray(counts, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[0] != nh:
            raise ValueError(f"counts must have {nh} rows, got shape {counts.shape}")
        object.__setattr__(self, "counts", _readonly(counts))
        for name, arr, cols in (("stat", stat, 4), ("warm", warm, 3)):
            arr = np.ascontiguousarray(arr, dtype=np.int64)
            if arr.shape != (nh, cols):
                raise ValueError(f"{name} must have shape {(nh, cols)}, got {arr.shape}")
            object.__setattr__(self, name, _readonly(arr))
        first = np.ascontiguousarray(first, dtype=np.int64)
        if first.shape != (nh,):
            raise ValueError(f"first must have shape {(nh,)}, got {first.shape}")
        object.__setattr__(self, "first", _readonly(first))
        object.__setattr__(self, "totals", {k: int(totals.get(k, 0)) for k in _TOTAL_KEYS})
        object.__setattr__(self, "counters", {str(k): int(v) for k, v in counters.items()})
        object.__setattr__(self, "times", dict(times))
        if rolling is not None:
            rolling = _readonly(np.ascontiguousarray(rolling, dtype=np.int64))
        object.__setattr__(self, "rolling", rolling)
        object.__setattr__(self, "lap_cost_ns", float(lap_cost_ns))
        object.__setattr__(self, "sources", tuple(dict(s) for s in sources))
        object.__setattr__(self, "meta", dict(meta or {}))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Snapshot is immutable")

    def replace(self, **changes: Any) -> Snapshot:
        """A copy with the given fields (constructor keywords) replaced, validated as new."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"Snapshot has no field(s) {sorted(unknown)}")
        return Snapshot(**{**{k: getattr(self, k) for k in self.__slots__}, **changes})

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
        meta: Mapping[str, Any] | None = None,
    ) -> Snapshot:
        """Build a snapshot from a copy of a Recorder's stats block (see recorder.pyx)."""
        block = StatsBlock.from_config(np.asarray(stats, dtype=np.int64), config)
        nphase = block.n_phases
        if len(phases) != nphase:
            raise ValueError(f"{len(phases)} phase names for a recorder of {nphase} phases")
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
        counters_raw = block.counters
        counters = {name: int(counters_raw[i]) for i, name in enumerate(counter_names)}
        rolling = block.window_records()  # closed rolling windows, oldest first
        start = block.start_ns
        steady_start = block.steady_start_ns
        last_step_end = block.last_step_end_ns
        last_write = block.last_activity_ns
        steady_steps = int(stat[nphase, 0])
        end = last_step_end if steady_steps > 0 else last_write
        steady_ns = max(0, end - steady_start) if steady_start >= 0 and end > 0 else 0
        warmup_ns = (
            (steady_start - start)
            if (steady_start >= 0 and start > 0)
            else (max(0, last_write - start) if start > 0 else 0)
        )
        rate = steady_steps / (steady_ns / 1e9) if steady_ns > 0 else 0.0
        events_steady = int(stat[:nphase, 0].sum())
        overhead_ns = overhead_of(
            events_steady,
            steady_steps,
            block.form_events(),
            config.get("form_cost_ns"),
            lap_cost_ns,
        )
        if steady_ns > 0:
            # the costs are what a boundary costs in a real loop, more than in a loop of
            # nothing but boundaries; the profiler cannot take more than all of the time
            overhead_ns = min(overhead_ns, float(steady_ns))
        totals = {
            "steps_begun": block.steps_begun,
            "steps_completed": block.steps_completed,
            "warmup_steps_done": block.warmup_steps_done,
            "events": int(stat[:nphase, 0].sum() + warm[:nphase, 0].sum()),
            "overwritten": int(overwritten),
            "out_of_range": block.out_of_range,
            "negative": block.negative,
            "nonfinite": block.nonfinite,
            "saturated": block.saturated,
        }
        open_phase = block.open_phase
        times = {
            "start_ns": start,
            "steady_start_ns": steady_start,
            "last_step_end_ns": last_step_end,
            "last_write_ns": last_write,
            "taken_ns": int(taken_ns),
            "open_phase": open_phase,
            "open_since_ns": block.open_since_ns,
            "warmup_end_step": block.warmup_end_step,
        }
        source = {
            "steady_ns": steady_ns,
            "warmup_ns": warmup_ns,
            "rate": rate,
            "overhead_ns": overhead_ns,
            "warmup_done": steady_start >= 0,
        }
        if steady_ns > 0:
            source["steady_start_ns"] = steady_start
            source["end_ns"] = end
        if meta:
            source.update(
                {k: meta[k] for k in ("pid", "host", "label", "unix_offset_ns") if k in meta}
            )
        cfg = {
            "significant_figures": int(config["significant_figures"]),
            "lowest_ns": int(config["lowest_ns"]),
            "highest_ns": int(config["highest_ns"]),
            "clock": str(config["clock"]),
            "warmup_steps": int(config["warmup_steps"]),
            "warmup_ns": int(config["warmup_ns"]),
            "window_steps": int(config["window_steps"]),
        }
        return cls(
            phases=phases,
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
            sources=[source],
            meta={**(meta or {}), **exact_meta} if exact_meta else meta,
        )

    # -- convenience -------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Steps completed, warm-up included."""
        return self.totals["steps_completed"]

    @property
    def steady_steps(self) -> int:
        """Steps completed in steady state (warm-up excluded)."""
        return int(self.stat[len(self.phases), 0])

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
        p = int(self.times.get("open_phase", -1))
        return self.phases[p] if 0 <= p < len(self.phases) else None

    @property
    def open_since_ns(self) -> int:
        return int(self.times.get("open_since_ns", -1))

    @property
    def layout(self) -> tuple[int, int, int]:
        c = self.config
        return int(c["lowest_ns"]), int(c["highest_ns"]), int(c["significant_figures"])

    def windows(self) -> list[Window]:
        """The closed rolling windows of this snapshot, oldest first."""
        closed = self.meta.get("windows_closed")
        return rolling_windows(
            self.rolling, self.phases, closed=None if closed is None else int(closed)
        )

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
            raise ValueError(f"compression must be one of {sorted(_CODECS)}, got {compression!r}")
        header = {
            "gyreprof": __version__,
            "phases": list(self.phases),
            "config": self.config,
            "stat": self.stat.tolist(),
            "warm": self.warm.tolist(),
            "first": self.first.tolist(),
            "totals": self.totals,
            "counters": self.counters,
            "times": self.times,
            "lap_cost_ns": self.lap_cost_ns,
            "sources": list(self.sources),
            "meta": self.meta,
            "counts_len": int(self.counts.shape[1]),
        }
        if windows and self.rolling is not None:
            header["rolling"] = self.rolling.tolist()
        hjson = json.dumps(header, separators=(",", ":"), allow_nan=True).encode()
        parts = [struct.pack("<I", len(hjson)), hjson]
        for row in self.counts:
            enc = encode_counts(row)
            parts.append(struct.pack("<I", len(enc)))
            parts.append(enc)
        flag, compress, _ = _CODECS[compression]
        body = compress(b"".join(parts))
        return SNAPSHOT_MAGIC + struct.pack("<BB", SNAPSHOT_VERSION, flag) + body

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Snapshot:
        """Read bytes made by ``to_bytes``; ``CorruptDataError`` (a ValueError) says what is
        wrong with bad input, ``BudgetError`` (a ValueError) when decoding it would need more
        memory than ``GYREPROF_MEMORY_BUDGET`` allows."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"Snapshot.from_bytes needs bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < 6:
            raise CorruptDataError(f"not a gyreprof snapshot: {len(data)} bytes is too short")
        if data[:4] != SNAPSHOT_MAGIC:
            raise CorruptDataError("not a gyreprof snapshot: the magic bytes 'GYRS' are missing")
        version = data[4]
        if version != SNAPSHOT_VERSION:
            raise CorruptDataError(
                f"snapshot format version {version} is not supported (this gyreprof reads "
                f"version {SNAPSHOT_VERSION}); upgrade gyreprof on the reading side"
            )
        codec = next((c for c in _CODECS.values() if c[0] == data[5]), None)
        if codec is None:
            raise CorruptDataError(f"corrupted snapshot: unknown compression flag {data[5]}")
        try:
            body = codec[2](data[6:])
        except (zlib.error, lzma.LZMAError, EOFError) as exc:
            raise CorruptDataError(f"corrupted or truncated snapshot: {exc}") from None
        try:
            return _limits.check_snapshot(cls._from_body(body))
        except _limits.BudgetError:
            raise
        except ValueError as exc:
            raise CorruptDataError(f"corrupted snapshot: {exc}") from None
        except _limits.DECODE_ERRORS as exc:
            raise CorruptDataError(f"corrupted snapshot: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_body(cls, body: bytes) -> Snapshot:
        if len(body) < 4:
            raise ValueError("header length missing")
        (hlen,) = struct.unpack_from("<I", body, 0)
        if 4 + hlen > len(body):
            raise ValueError("header runs past the end")
        header = json.loads(body[4 : 4 + hlen])
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
        phases = header["phases"]
        if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
            raise ValueError("phase names are not a list of strings")
        config = header["config"]
        lowest, highest, sf = (
            int(config["lowest_ns"]),
            int(config["highest_ns"]),
            int(config["significant_figures"]),
        )
        L = int(layout_info(lowest, highest, sf)["counts_len"])
        if int(header["counts_len"]) != L:
            raise ValueError(
                f"counts length {header['counts_len']} does not match the layout ({L})"
            )
        pos = 4 + hlen
        _limits.check_dense(len(phases) + 1, L, what="snapshot")
        counts = np.zeros((len(phases) + 1, L), dtype=np.int64)
        view = memoryview(body)
        for row in counts:
            if pos + 4 > len(body):
                raise ValueError("histogram data truncated")
            (n,) = struct.unpack_from("<I", body, pos)
            pos += 4
            if pos + n > len(body):
                raise ValueError("histogram data truncated")
            decode_counts(view[pos : pos + n], L, row)
            pos += n
        if pos != len(body):
            raise ValueError(f"{len(body) - pos} unexpected bytes after the histograms")
        stat = np.asarray(header["stat"], dtype=np.int64)
        if stat.shape != (len(phases) + 1, 4):
            raise ValueError("stat table has the wrong shape")
        if not np.array_equal(stat[:, 0], counts.sum(axis=1)):
            raise ValueError("histogram counts do not add up to the recorded totals")
        rolling = header.get("rolling")
        rolling_arr = None
        if rolling is not None:
            rolling_arr = np.asarray(rolling, dtype=np.int64)
            if rolling_arr.size == 0:
                rolling_arr = rolling_arr.reshape(0, 0)
            elif rolling_arr.ndim != 2:
                raise ValueError("rolling windows have the wrong shape")
        counters = header["counters"]
        if not isinstance(counters, dict):
            raise ValueError("counters are not a mapping")
        return cls(
            phases=phases,
            config=config,
            counts=counts,
            stat=stat,
            warm=np.asarray(header["warm"], dtype=np.int64),
            first=np.asarray(header["first"], dtype=np.int64),
            totals=header["totals"],
            counters=counters,
            times=header["times"],
            rolling=rolling_arr,
            lap_cost_ns=float(header["lap_cost_ns"]),
            sources=header["sources"],
            meta=header.get("meta") or {},
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        p.write_bytes(self.to_bytes())
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
        raise ValueError("merge needs at least one snapshot")
    for s in snaps:
        if not isinstance(s, Snapshot):
            raise TypeError(f"merge takes Snapshot objects, got {type(s).__name__}")
    layout = snaps[0].layout
    for s in snaps[1:]:
        if s.layout != layout:
            raise ValueError(
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
    sources: list[dict[str, Any]] = []
    starts, taken = [], []
    saturated = 0
    # sums add exactly, in Python ints (None: not known exactly)
    sums: list[int | None] = [0] * nh
    warm_sums: list[int | None] = [0] * nh
    for s in snaps:
        rows = [names.index(p) for p in s.phases] + [nh - 1]
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
            totals[k] += s.totals.get(k, 0)
        for k, v in s.counters.items():
            counters[k] = counters.get(k, 0) + v
        sources.extend(s.sources)
        if s.times.get("start_ns", 0) > 0:
            starts.append(int(s.times["start_ns"]))
        taken.append(int(s.times.get("taken_ns", 0)))
    totals["saturated"] += saturated
    times = {
        "start_ns": min(starts) if starts else 0,
        "steady_start_ns": -1,
        "last_step_end_ns": -1,
        "last_write_ns": -1,
        "taken_ns": max(taken),
        "open_phase": -1,
        "open_since_ns": -1,
        "warmup_end_step": -1,
    }
    # the cost of a boundary, weighted by how many boundaries each source recorded
    weights = [max(1, int(s.stat[:, 0].sum())) for s in snaps]
    lap_cost = float(np.average([s.lap_cost_ns for s in snaps], weights=weights))
    base = snaps[0]
    merged_meta: dict[str, Any] = {"merged": len(sources)}
    _checks.store_exact_sums(stat, merged_meta, sums)
    _checks.store_exact_sums(warm, merged_meta, warm_sums, _checks.EXACT_WARM_SUMS_KEY)
    return Snapshot(
        phases=names,
        config=base.config,
        counts=counts,
        stat=stat,
        warm=warm,
        first=first,
        totals=totals,
        counters=counters,
        times=times,
        rolling=None,
        lap_cost_ns=lap_cost,
        sources=sources,
        meta=merged_meta,
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


def _per_boundary_cost(snap: Snapshot) -> float:
    """A snapshot's profiler cost per boundary (events and steps), its forms mixed in."""
    src_over = sum(float(s.get("overhead_ns", 0.0)) for s in snap.sources)
    n = int(snap.stat[:-1, 0].sum()) + int(snap.stat[-1, 0])
    return src_over / n if src_over > 0 and n > 0 else float(snap.lap_cost_ns)


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
        raise TypeError(
            "interval(before, after) takes two Snapshots (before may be None), got "
            f"{type(before).__name__} and {type(after).__name__}"
        )
    if before is None:
        return after
    pid_before, pid_after = before.meta.get("pid"), after.meta.get("pid")
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
            raise ValueError(problem)
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
    t0 = int(before.times.get("taken_ns", 0))
    t1 = int(after.times.get("taken_ns", 0))
    dt = max(0, t1 - t0)
    steps = int(stat[nh - 1, 0])
    events = int(stat[: nh - 1, 0].sum())
    totals = {k: max(0, after.totals.get(k, 0) - before.totals.get(k, 0)) for k in _TOTAL_KEYS}
    counters = {k: v - before.counters.get(k, 0) for k, v in after.counters.items()}
    src = dict(after.sources[0])
    if len(after.sources) > 1:
        src = {k: src[k] for k in ("pid", "host", "label", "unix_offset_ns") if k in src}
        src["merged"] = len(after.sources)
    src.update(
        steady_ns=dt,
        warmup_ns=0,
        rate=steps / (dt / 1e9) if dt > 0 else 0.0,
        overhead_ns=_per_boundary_cost(after) * (events + steps),
        warmup_done=True,
        steady_start_ns=t0,
        end_ns=t1,
    )
    times = dict(after.times)
    times.update(start_ns=t0, steady_start_ns=t0)
    meta = dict(after.meta)
    meta["interval_ns"] = dt
    meta["windows_closed"] = 0
    meta.pop(_checks.EXACT_WARM_SUMS_KEY, None)  # the interval has no warm-up
    _checks.store_exact_sums(stat, meta, sums)
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
        sources=[src],
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
            raise TypeError(
                f"{what}: {type(source).__name__}.snapshot() gave {type(snap).__name__}"
            )
        return snap
    if isinstance(source, Summary):
        snap = source.snapshot
        if snap is None and not summary_only:
            raise ValueError(
                f"{what} needs the snapshot behind this Summary, and a Summary loaded from "
                "JSON has none; pass the Profiler, or a Snapshot (Snapshot.load(path))"
            )
        return snap
    raise TypeError(f"{what} takes a Profiler, Snapshot or Summary, got {type(source).__name__}")
