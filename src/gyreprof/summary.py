"""Read-side values: Snapshot (raw, mergeable), Summary / PhaseStats (computed), windows.

A ``Snapshot`` is an immutable copy of everything a Recorder counted: the
steady-state histograms of every phase and of whole steps, warm-up totals,
counters and the closed rolling windows. It serialises to compact bytes and
merges with other snapshots of the same layout. A ``Summary`` is what people
read: per-phase percentiles, shares, throughput, warm-up and overhead.

Merging treats its inputs as *parallel* sources (worker processes, threads,
actors): counts and histograms add up, throughput adds up, extremes take the
extreme. Rolling windows belong to one source and are dropped by a merge.
"""

from __future__ import annotations

import base64
import csv
import functools
import io
import json
import lzma
import math
import os
import socket
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gyreprof._core import decode_counts, encode_counts, layout_info, percentiles_from_counts
from gyreprof._format import fmt_ns, fmt_pct, fmt_rate, markdown_table, text_table
from gyreprof._version import __version__

SNAPSHOT_MAGIC = b"GYRS"
SNAPSHOT_VERSION = 1
SUMMARY_FORMAT = "gyreprof.summary/1"
STEP = "(step)"  # display name of the whole-step row


def _lzma_decompress(data: bytes) -> bytes:
    d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    out = d.decompress(data)
    if not d.eof:
        raise EOFError("compressed data ends early")
    return out


def _zlib_decompress(data: bytes) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(data)
    if not d.eof:
        raise EOFError("compressed data ends early")
    return out


# name -> (flag byte, compress, decompress)
_CODECS: dict[str, tuple[int, Any, Any]] = {
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
)


# --------------------------------------------------------------------- values


@dataclass(frozen=True)
class PhaseStats:
    """Steady-state statistics of one phase (durations in ns)."""

    count: int
    mean: float
    min: float
    max: float
    p50: float
    p90: float
    p99: float
    p999: float
    share: float  # fraction of step time (0..1); of all phase time when no steps were marked
    sum_ns: float = 0.0
    _counts: np.ndarray | None = field(default=None, repr=False, compare=False)
    _layout: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)

    def percentile(self, q: float) -> float:
        """Duration (ns) at percentile ``q`` in 0..100 (see gyreprof._core.histogram for the rule)."""
        try:
            qf = float(q)
        except (TypeError, ValueError):
            raise TypeError(f"percentile must be a number in 0..100, got {q!r}") from None
        if not math.isfinite(qf) or not 0.0 <= qf <= 100.0:
            raise ValueError(f"percentile must be in 0..100, got {q!r}")
        if self.count == 0:
            return math.nan
        if self._counts is None or self._layout is None:
            raise ValueError("this PhaseStats carries no histogram (it was built from totals only)")
        lowest, highest, sf = self._layout
        vmin = int(self.min) if not math.isnan(self.min) else -1
        vmax = int(self.max) if not math.isnan(self.max) else -1
        return float(
            percentiles_from_counts(self._counts, [qf], lowest, highest, sf, vmin, vmax)[0]
        )

    def to_dict(self) -> dict[str, float]:
        return {
            "count": self.count,
            "mean": self.mean,
            "min": self.min,
            "max": self.max,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p999": self.p999,
            "share": self.share,
            "sum_ns": self.sum_ns,
        }


@dataclass(frozen=True)
class WindowStats:
    """One phase within one window (ns)."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float
    share: float

    def to_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in ("count", "mean", "p50", "p90", "p99", "max", "share")}


@dataclass(frozen=True)
class Window:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "first_step": self.first_step,
            "steps": self.steps,
            "warmup": self.warmup,
            "source": self.source,
            "steps_per_s": self.steps_per_s,
            "phases": {k: v.to_dict() for k, v in self.phases.items()},
            "step": self.step.to_dict() if self.step else None,
        }


@dataclass(frozen=True)
class WarmupInfo:
    """How warm-up was told apart from steady state, and what it cost."""

    rule: str  # "none", "first 100 steps", "first 2.0 s"
    steps: int  # steps completed during warm-up
    elapsed_ns: int
    done: bool  # False while the run is still warming up
    first_ns: dict[str, float]  # first recorded duration per phase (and STEP)
    mean_ns: dict[str, float]  # warm-up mean per phase (and STEP)
    max_ns: dict[str, float]

    def __str__(self) -> str:
        if self.rule == "none":
            return "warm-up: none excluded (pass warmup_steps= or warmup_s= to exclude it)"
        if not self.done:
            hint = ""
            if self.steps == 0 and "steps" in self.rule:
                hint = "; warm-up counts steps: mark them with prof.begin(), or use warmup_s="
            return f"warm-up: {self.rule}, still warming up ({self.steps} steps so far{hint})"
        return f"warm-up: {self.rule} excluded, {self.steps} steps, {fmt_ns(self.elapsed_ns)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "steps": self.steps,
            "elapsed_ns": self.elapsed_ns,
            "done": self.done,
            "first_ns": self.first_ns,
            "mean_ns": self.mean_ns,
            "max_ns": self.max_ns,
        }


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
        from gyreprof._core import recorder as _rec

        if int(config.get("layout_version", -1)) != _rec.LAYOUT_VERSION:
            raise ValueError(
                f"stats block layout version {config.get('layout_version')} is not "
                f"{_rec.LAYOUT_VERSION}, the one this gyreprof reads"
            )
        off = config["offsets"]
        nphase = int(config["n_phases"])
        if len(phases) != nphase:
            raise ValueError(f"{len(phases)} phase names for a recorder of {nphase} phases")
        nh = nphase + 1
        L = int(config["counts_len"])
        stats = np.asarray(stats, dtype=np.int64)
        if stats.shape[0] < int(off["words"]):
            raise ValueError(f"stats block has {stats.shape[0]} words, {off['words']} needed")
        h = stats[: _rec.HEADER_WORDS]
        counts = stats[off["counts"] : off["counts"] + nh * L].reshape(nh, L).copy()
        hot = hot_lines(stats, off, nh)
        stat = hot[:, _rec.HOT_STAT : _rec.HOT_STAT + 4].copy()
        # counts come from the buckets so a copy taken while the writer runs stays consistent
        stat[:, 0] = counts.sum(axis=1)
        warm = stats[off["warm"] : off["warm"] + 3 * nh].reshape(nh, 3).copy()
        first = hot[:, _rec.HOT_FIRST].copy()
        counters_raw = stats[off["counters"] : off["counters"] + int(config["max_counters"])]
        counters = {name: int(counters_raw[i]) for i, name in enumerate(counter_names)}
        # closed rolling windows, oldest first
        K = int(config["max_windows"])
        stride = _rec.WIN_HEADER + _rec.WIN_FIELDS * nh
        wr = stats[off["wring"] : off["wring"] + K * stride].reshape(K, stride)
        closed = int(h[_rec.H_WINDOWS])
        if closed <= K:
            rolling = wr[:closed].copy()
        else:
            cut = closed % K
            rolling = np.concatenate((wr[cut:], wr[:cut]))
        start = int(h[_rec.H_START])
        steady_start = int(h[_rec.H_STEADY_START])
        last_step_end = int(h[_rec.H_LAST_STEP_END])
        last_write = max(int(h[_rec.H_LAST_WRITE]), int(h[_rec.H_OPEN_SINCE]))
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
        overhead_ns = lap_cost_ns * (events_steady + steady_steps)
        totals = {
            "steps_begun": int(h[_rec.H_STEP]),
            "steps_completed": int(h[_rec.H_STEPS_DONE]),
            "warmup_steps_done": int(h[_rec.H_WARMUP_STEPS]),
            "events": int(stat[:nphase, 0].sum() + warm[:nphase, 0].sum()),
            "overwritten": int(overwritten),
            "out_of_range": int(h[_rec.H_OUT_OF_RANGE]),
            "negative": int(h[_rec.H_NEGATIVE]),
            "nonfinite": int(h[_rec.H_NONFINITE]),
        }
        open_phase = int(h[_rec.H_OPEN_PHASE])
        times = {
            "start_ns": start,
            "steady_start_ns": steady_start,
            "last_step_end_ns": last_step_end,
            "last_write_ns": last_write,
            "taken_ns": int(taken_ns),
            "open_phase": open_phase,
            "open_since_ns": int(h[_rec.H_OPEN_SINCE]),
            "warmup_end_step": int(h[_rec.H_WARMUP_END_STEP]),
        }
        source = {
            "steady_ns": steady_ns,
            "warmup_ns": warmup_ns,
            "rate": rate,
            "overhead_ns": overhead_ns,
            "warmup_done": steady_start >= 0,
        }
        if meta:
            source.update({k: meta[k] for k in ("pid", "host", "label") if k in meta})
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
            meta=meta,
        )

    # -- convenience -------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Steps completed, warm-up included."""
        return self.totals["steps_completed"]

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
        if self.rolling is None or len(self.rolling) == 0:
            return []
        from gyreprof._core import recorder as _rec

        nphase = len(self.phases)
        out = []
        H, F = _rec.WIN_HEADER, _rec.WIN_FIELDS
        total_closed = int(self.meta.get("windows_closed", len(self.rolling)))
        base = total_closed - len(self.rolling)
        names = [*self.phases, STEP]
        nan = math.nan
        for i, row in enumerate(self.rolling.tolist()):  # plain ints: fast to unpack
            step_sum = float(row[H + F * nphase + 1])
            stats = {}
            for p, name in enumerate(names):
                c, tot, mx, p50, p90, p99 = row[H + F * p : H + F * p + F]
                if c:
                    share = tot / step_sum if step_sum > 0 else nan
                    ws = WindowStats(
                        c, tot / c, float(p50), float(p90), float(p99), float(mx), share
                    )
                else:
                    ws = WindowStats(0, nan, nan, nan, nan, nan, nan)
                stats[name] = ws
            step_ws = stats.pop(STEP)
            out.append(
                Window(
                    index=base + i,
                    start_ns=row[0],
                    end_ns=row[1],
                    first_step=row[2],
                    steps=row[3],
                    warmup=bool(row[4]),
                    phases=stats,
                    step=step_ws,
                    source="rolling",
                )
            )
        return out

    def summary(self) -> Summary:
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
        """Read bytes made by ``to_bytes``; ValueError says what is wrong with bad input."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"Snapshot.from_bytes needs bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < 6:
            raise ValueError(f"not a gyreprof snapshot: {len(data)} bytes is too short")
        if data[:4] != SNAPSHOT_MAGIC:
            raise ValueError("not a gyreprof snapshot: the magic bytes 'GYRS' are missing")
        version = data[4]
        if version != SNAPSHOT_VERSION:
            raise ValueError(
                f"snapshot format version {version} is not supported (this gyreprof reads "
                f"version {SNAPSHOT_VERSION}); upgrade gyreprof on the reading side"
            )
        codec = next((c for c in _CODECS.values() if c[0] == data[5]), None)
        if codec is None:
            raise ValueError(f"corrupted snapshot: unknown compression flag {data[5]}")
        try:
            body = codec[2](data[6:])
        except (zlib.error, lzma.LZMAError, EOFError) as exc:
            raise ValueError(f"corrupted or truncated snapshot: {exc}") from None
        try:
            return cls._from_body(body)
        except ValueError as exc:
            raise ValueError(f"corrupted snapshot: {exc}") from None
        except (KeyError, TypeError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"corrupted snapshot: {type(exc).__name__}: {exc}") from None

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
        return cls.from_bytes(Path(path).read_bytes())

    def __repr__(self) -> str:
        return (
            f"Snapshot(phases={list(self.phases)}, steps={self.steps}, sources={len(self.sources)})"
        )


def hot_lines(stats: np.ndarray, offsets: Mapping[str, int], nh: int) -> np.ndarray:
    """View of a stats block's per-histogram lines: shape (nh, 8); columns are
    first value, steady count/sum/min/max, current-window count/sum/max
    (``recorder.HOT_*`` name the columns). Writes go through to ``stats``."""
    width = int(offsets.get("hot_words", 8))
    start = int(offsets["hot"])
    return stats[start : start + width * nh].reshape(nh, width)


def merge(snapshots: Iterable[Snapshot]) -> Snapshot:
    """Merge snapshots of parallel sources (workers, threads, actors) into one.

    Phases are matched by name (the union, in first-seen order); the histogram
    layouts must be equal. Counts, sums and counters add; min/max take the
    extremes; throughput adds. Associative and commutative up to phase order.
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
    for s in snaps:
        rows = [names.index(p) for p in s.phases] + [nh - 1]
        if rows == list(range(nh)):
            np.add(counts, s.counts, out=counts)
        else:
            for src_row, dst in enumerate(rows):
                np.add(counts[dst], s.counts[src_row], out=counts[dst])
        for src_row, dst in enumerate(rows):
            stat[dst, 0] += s.stat[src_row, 0]
            stat[dst, 1] += s.stat[src_row, 1]
            smin, smax = s.stat[src_row, 2], s.stat[src_row, 3]
            if smin >= 0 and (stat[dst, 2] < 0 or smin < stat[dst, 2]):
                stat[dst, 2] = smin
            if smax > stat[dst, 3]:
                stat[dst, 3] = smax
            warm[dst, 0] += s.warm[src_row, 0]
            warm[dst, 1] += s.warm[src_row, 1]
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
        meta={"merged": len(sources)},
    )


# -------------------------------------------------------------------- summary


def _phase_stats(
    counts: np.ndarray, stat: np.ndarray, layout: tuple[int, int, int], denom: float
) -> PhaseStats:
    n, total, vmin, vmax = (int(x) for x in stat)
    if n <= 0:
        return PhaseStats(
            0,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            0.0,
            0.0,
            counts,
            layout,
        )
    lowest, highest, sf = layout
    p50, p90, p99, p999 = percentiles_from_counts(
        counts, [50.0, 90.0, 99.0, 99.9], lowest, highest, sf, vmin, vmax
    )
    return PhaseStats(
        count=n,
        mean=total / n,
        min=float(vmin),
        max=float(vmax),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        p999=float(p999),
        share=(total / denom) if denom > 0 else 0.0,
        sum_ns=float(total),
        _counts=counts,
        _layout=layout,
    )


@dataclass(frozen=True)
class Summary:
    """Steady-state results of a run (durations in ns)."""

    phases: dict[str, PhaseStats]
    step: PhaseStats
    steps: int  # steady-state steps completed
    steps_per_s: float
    warmup: WarmupInfo
    overhead_share: float  # estimated share of wall time the profiler itself took
    overwritten: int
    out_of_range: int
    negative: int
    nonfinite: int
    events: int
    counters: dict[str, int]
    counter_rates: dict[str, float]  # per second of wall time
    elapsed_s: float  # steady-state wall time (sum over merged sources)
    lap_cost_ns: float
    significant_figures: int
    clock: str
    sources: int
    meta: dict[str, Any] = field(default_factory=dict)
    # rolling windows: given as a list, or built on first use from the snapshot
    window_list: list[Window] | None = field(default=None, repr=False, compare=False)
    _snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def windows(self) -> list[Window]:
        """The rolling windows (oldest first), built on first access."""
        if self.window_list is not None:
            return self.window_list
        return self._snapshot.windows() if self._snapshot is not None else []

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> Summary:
        nphase = len(snap.phases)
        layout = snap.layout
        step_total = float(snap.stat[nphase, 1])
        phase_total = float(snap.stat[:nphase, 1].sum())
        denom = step_total if snap.stat[nphase, 0] > 0 else phase_total
        phases = {
            name: _phase_stats(snap.counts[i], snap.stat[i], layout, denom)
            for i, name in enumerate(snap.phases)
        }
        step = _phase_stats(snap.counts[nphase], snap.stat[nphase], layout, step_total)
        steady_ns = sum(float(s.get("steady_ns", 0)) for s in snap.sources)
        rate = sum(float(s.get("rate", 0.0)) for s in snap.sources)
        overhead = sum(float(s.get("overhead_ns", 0.0)) for s in snap.sources)
        warmup_ns = max((int(s.get("warmup_ns", 0)) for s in snap.sources), default=0)
        warm_done = all(bool(s.get("warmup_done", True)) for s in snap.sources)
        cfg = snap.config
        if cfg.get("warmup_steps", 0) > 0:
            rule = f"first {cfg['warmup_steps']} steps"
        elif cfg.get("warmup_ns", 0) > 0:
            rule = f"first {cfg['warmup_ns'] / 1e9:g} s"
        else:
            rule = "none"
        names = [*snap.phases, STEP]
        warmup = WarmupInfo(
            rule=rule,
            steps=snap.totals["warmup_steps_done"],
            elapsed_ns=warmup_ns,
            done=warm_done,
            first_ns={n: float(snap.first[i]) for i, n in enumerate(names) if snap.first[i] >= 0},
            mean_ns={
                n: snap.warm[i, 1] / snap.warm[i, 0]
                for i, n in enumerate(names)
                if snap.warm[i, 0] > 0
            },
            max_ns={n: float(snap.warm[i, 2]) for i, n in enumerate(names) if snap.warm[i, 0] > 0},
        )
        t = snap.times
        wall_ns = 0
        if len(snap.sources) == 1 and t.get("start_ns", 0) > 0:
            end = max(int(t.get("last_write_ns", 0)), int(t.get("last_step_end_ns", 0)))
            wall_ns = max(0, end - int(t["start_ns"]))
        wall_s = wall_ns / 1e9 if wall_ns > 0 else (steady_ns + warmup_ns) / 1e9
        return cls(
            phases=phases,
            step=step,
            steps=int(snap.stat[nphase, 0]),
            steps_per_s=rate,
            warmup=warmup,
            overhead_share=(overhead / steady_ns) if steady_ns > 0 else 0.0,
            overwritten=snap.totals["overwritten"],
            out_of_range=snap.totals["out_of_range"],
            negative=snap.totals["negative"],
            nonfinite=snap.totals["nonfinite"],
            events=snap.totals["events"],
            counters=dict(snap.counters),
            counter_rates={
                k: (v / wall_s if wall_s > 0 else math.nan) for k, v in snap.counters.items()
            },
            elapsed_s=steady_ns / 1e9,
            lap_cost_ns=snap.lap_cost_ns,
            significant_figures=int(cfg["significant_figures"]),
            clock=str(cfg.get("clock", "monotonic")),
            sources=len(snap.sources),
            _snapshot=snap,
            meta=dict(snap.meta),
        )

    # -- views -------------------------------------------------------------------

    def __getitem__(self, name: str) -> PhaseStats:
        try:
            return self.phases[name]
        except KeyError:
            raise KeyError(f"unknown phase {name!r}; known phases: {list(self.phases)}") from None

    def _rows(self) -> list[tuple[str, PhaseStats]]:
        rows = list(self.phases.items())
        if self.step.count:
            rows.append((STEP, self.step))
        return rows

    TABLE_HEADERS = ("phase", "count", "mean", "p50", "p90", "p99", "p99.9", "max", "share")

    def table_rows(self) -> list[list[str]]:
        """The summary table as formatted cells, one row per phase and one for whole steps."""
        return [
            [
                name,
                str(st.count),
                *(fmt_ns(v) for v in (st.mean, st.p50, st.p90, st.p99, st.p999, st.max)),
                fmt_pct(st.share) if name != STEP else "",
            ]
            for name, st in self._rows()
        ]

    def table(self) -> str:
        return text_table(list(self.TABLE_HEADERS), self.table_rows())

    def __str__(self) -> str:
        lines = []
        src = f" from {self.sources} sources" if self.sources > 1 else ""
        if self.steps:
            lines.append(
                f"gyreprof: {self.steps} steady steps in {self.elapsed_s:.3g} s "
                f"({fmt_rate(self.steps_per_s)}){src}"
            )
        else:
            lines.append(f"gyreprof: {self.events} phase events{src} (no steps marked)")
        lines.append(self.table())
        lines.append(str(self.warmup))
        w = self.warmup
        steady = {**{k: v.mean for k, v in self.phases.items()}, STEP: self.step.mean}
        if w.first_ns:
            parts = [
                f"{n} {fmt_ns(v)} (steady mean {fmt_ns(steady.get(n))})"
                for n, v in w.first_ns.items()
            ]
            lines.append("first call: " + ", ".join(parts))
        if w.mean_ns:
            parts = [f"{n} {fmt_ns(v)} -> {fmt_ns(steady.get(n))}" for n, v in w.mean_ns.items()]
            lines.append("warm-up vs steady mean: " + ", ".join(parts))
        lines.append(
            f"profiler overhead: {fmt_pct(self.overhead_share)} of wall time "
            f"(~{self.lap_cost_ns:.0f} ns per boundary, clock={self.clock})"
        )
        issues = []
        if self.overwritten:
            issues.append(
                f"{self.overwritten} events overwritten in the ring (histograms keep them)"
            )
        if self.out_of_range:
            issues.append(f"{self.out_of_range} values above the range (clamped)")
        if self.negative:
            issues.append(f"{self.negative} negative durations ignored")
        if self.nonfinite:
            issues.append(f"{self.nonfinite} NaN/inf durations ignored")
        if issues:
            lines.append("note: " + "; ".join(issues))
        if self.counters:
            lines.append(
                "counters: "
                + ", ".join(
                    f"{k} {v} ({self.counter_rates.get(k, math.nan):.3g}/s)"
                    for k, v in self.counters.items()
                )
            )
        return "\n".join(lines)

    def to_markdown(self) -> str:
        headers = list(self.TABLE_HEADERS)
        rows = self.table_rows()
        head = (
            f"**{self.steps} steady steps, {fmt_rate(self.steps_per_s)}**; {self.warmup}; "
            f"profiler overhead {fmt_pct(self.overhead_share)}"
        )
        return head + "\n\n" + markdown_table(headers, rows) + "\n"

    def to_dict(self, *, histograms: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``histograms=True`` embeds each phase's encoded buckets."""
        out: dict[str, Any] = {
            "format": SUMMARY_FORMAT,
            "gyreprof": __version__,
            "steps": self.steps,
            "steps_per_s": self.steps_per_s,
            "elapsed_s": self.elapsed_s,
            "overhead_share": self.overhead_share,
            "lap_cost_ns": self.lap_cost_ns,
            "overwritten": self.overwritten,
            "out_of_range": self.out_of_range,
            "negative": self.negative,
            "nonfinite": self.nonfinite,
            "events": self.events,
            "counters": self.counters,
            "counter_rates": self.counter_rates,
            "significant_figures": self.significant_figures,
            "clock": self.clock,
            "sources": self.sources,
            "warmup": self.warmup.to_dict(),
            "phases": {k: v.to_dict() for k, v in self.phases.items()},
            "step": self.step.to_dict(),
            "windows": [w.to_dict() for w in self.windows],
            "meta": self.meta,
        }
        if histograms:
            hist = {}
            for name, st in [*self.phases.items(), (STEP, self.step)]:
                if st._counts is not None and st._layout is not None:
                    hist[name] = {
                        "layout": list(st._layout),
                        "counts": base64.b64encode(encode_counts(st._counts)).decode("ascii"),
                    }
            out["histograms"] = hist
        return out

    def to_json(self, path: str | os.PathLike[str] | None = None, *, indent: int | None = 2) -> str:
        """The JSON text; written to ``path`` as well when given."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=True)
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """One row per phase (and the whole step): name, count, mean, min, max, pXX, share."""
        buf = io.StringIO()
        w = csv.writer(buf)
        cols = ["count", "mean", "min", "max", "p50", "p90", "p99", "p999", "share", "sum_ns"]
        w.writerow(["phase", *cols])
        for name, st in self._rows():
            d = st.to_dict()
            w.writerow([name, *(d[c] for c in cols)])
        text = buf.getvalue()
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_metrics(self, prefix: str = "gyreprof/") -> dict[str, float]:
        """Flat ``{name: number}`` for any logger's ``log(dict)`` (TensorBoard, W&B, ...).

        Stable keys (every value a float; NaN where a phase has no data):
        ``{prefix}steps``, ``steps_per_s``, ``elapsed_s``, ``events``, ``warmup_steps``,
        ``overhead_share``, ``overwritten``, ``out_of_range``, ``negative``, ``nonfinite``;
        per phase ``{prefix}phase/{name}/{count|mean_ns|min_ns|p50_ns|p90_ns|p99_ns|p999_ns|
        max_ns|share}``; whole steps ``{prefix}step/{...}`` (no share); counters
        ``{prefix}counter/{name}``. Phases live under ``phase/`` so no phase name can
        collide with the run-level or whole-step keys.
        """
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, got {type(prefix).__name__}")
        out: dict[str, float] = {
            f"{prefix}steps": float(self.steps),
            f"{prefix}steps_per_s": float(self.steps_per_s),
            f"{prefix}elapsed_s": float(self.elapsed_s),
            f"{prefix}events": float(self.events),
            f"{prefix}warmup_steps": float(self.warmup.steps),
            f"{prefix}overhead_share": float(self.overhead_share),
            f"{prefix}overwritten": float(self.overwritten),
            f"{prefix}out_of_range": float(self.out_of_range),
            f"{prefix}negative": float(self.negative),
            f"{prefix}nonfinite": float(self.nonfinite),
        }
        rows = [(f"{prefix}phase/{name}/", st) for name, st in self.phases.items()]
        rows.append((f"{prefix}step/", self.step))
        for base, st in rows:
            out[base + "count"] = float(st.count)
            out[base + "mean_ns"] = float(st.mean)
            out[base + "min_ns"] = float(st.min)
            out[base + "p50_ns"] = float(st.p50)
            out[base + "p90_ns"] = float(st.p90)
            out[base + "p99_ns"] = float(st.p99)
            out[base + "p999_ns"] = float(st.p999)
            out[base + "max_ns"] = float(st.max)
            if st is not self.step:
                out[base + "share"] = float(st.share)
        for k, v in self.counters.items():
            out[f"{prefix}counter/{k}"] = float(v)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Summary:
        """Rebuild a Summary from ``to_dict()`` output; ValueError on anything malformed."""
        try:
            return cls._from_dict(d)
        except ValueError as exc:
            raise ValueError(f"not a valid gyreprof summary: {exc}") from None
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise ValueError(f"not a valid gyreprof summary: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any]) -> Summary:
        if not isinstance(d, Mapping) or d.get("format") != SUMMARY_FORMAT:
            raise ValueError(f"missing format marker {SUMMARY_FORMAT!r}")
        hist = d.get("histograms") or {}

        def phase(name: str, pd: Mapping[str, Any]) -> PhaseStats:
            counts = layout = None
            if name in hist:
                lay = tuple(int(x) for x in hist[name]["layout"])
                if len(lay) != 3:
                    raise ValueError(f"bad histogram layout for {name!r}")
                L = int(layout_info(*lay)["counts_len"])
                counts = decode_counts(base64.b64decode(hist[name]["counts"], validate=True), L)
                if int(counts.sum()) != int(pd["count"]):
                    raise ValueError(f"histogram of {name!r} does not add up to its count")
                layout = lay
            return PhaseStats(
                count=int(pd["count"]),
                mean=float(pd["mean"]),
                min=float(pd["min"]),
                max=float(pd["max"]),
                p50=float(pd["p50"]),
                p90=float(pd["p90"]),
                p99=float(pd["p99"]),
                p999=float(pd["p999"]),
                share=float(pd["share"]),
                sum_ns=float(pd.get("sum_ns", 0.0)),
                _counts=counts,
                _layout=layout,  # type: ignore[arg-type]
            )

        phases = {str(k): phase(k, v) for k, v in d["phases"].items()}
        wd = d["warmup"]
        warmup = WarmupInfo(
            rule=str(wd["rule"]),
            steps=int(wd["steps"]),
            elapsed_ns=int(wd["elapsed_ns"]),
            done=bool(wd["done"]),
            first_ns={str(k): float(v) for k, v in wd["first_ns"].items()},
            mean_ns={str(k): float(v) for k, v in wd["mean_ns"].items()},
            max_ns={str(k): float(v) for k, v in wd.get("max_ns", {}).items()},
        )
        windows = []
        for w in d.get("windows", []):
            windows.append(
                Window(
                    index=int(w["index"]),
                    start_ns=int(w["start_ns"]),
                    end_ns=int(w["end_ns"]),
                    first_step=int(w["first_step"]),
                    steps=int(w["steps"]),
                    warmup=bool(w["warmup"]),
                    phases={k: WindowStats(**v) for k, v in w["phases"].items()},
                    step=WindowStats(**w["step"]) if w.get("step") else None,
                    source=str(w["source"]),
                )
            )
        return cls(
            phases=phases,
            step=phase(STEP, d["step"]),
            steps=int(d["steps"]),
            steps_per_s=float(d["steps_per_s"]),
            warmup=warmup,
            overhead_share=float(d["overhead_share"]),
            overwritten=int(d["overwritten"]),
            out_of_range=int(d["out_of_range"]),
            negative=int(d["negative"]),
            nonfinite=int(d.get("nonfinite", 0)),
            events=int(d.get("events", 0)),
            counters={str(k): int(v) for k, v in d.get("counters", {}).items()},
            counter_rates={str(k): float(v) for k, v in d.get("counter_rates", {}).items()},
            elapsed_s=float(d["elapsed_s"]),
            lap_cost_ns=float(d.get("lap_cost_ns", math.nan)),
            significant_figures=int(d["significant_figures"]),
            clock=str(d.get("clock", "monotonic")),
            sources=int(d.get("sources", 1)),
            window_list=windows,
            meta=dict(d.get("meta", {})),
        )

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> Summary:
        """Parse JSON text, or read a file when given a path."""
        text = str(text_or_path)
        if isinstance(text_or_path, os.PathLike) or not text.lstrip().startswith("{"):
            p = Path(text_or_path)
            try:
                text = p.read_text()
            except UnicodeDecodeError:
                raise ValueError(f"{p} is not a JSON summary (not text)") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a valid gyreprof summary: bad JSON ({exc})") from None
        return cls.from_dict(data)


def load(path: str | os.PathLike[str]) -> Summary:
    """Read a saved summary (JSON) or snapshot (bytes) file into a Summary."""
    p = Path(path)
    data = p.read_bytes()
    if data[:4] == SNAPSHOT_MAGIC:
        return Snapshot.from_bytes(data).summary()
    if data.lstrip()[:1] == b"{":
        return Summary.from_json(p)
    raise ValueError(f"{p} is neither a gyreprof summary (JSON) nor a snapshot (GYRS bytes)")


def default_meta(label: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
    if label:
        meta["label"] = label
    return meta
