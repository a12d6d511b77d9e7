"""The Snapshot record: an immutable copy of what one or more Recorders counted.

Its packed tables (one row per phase, then ``STEP``) are checked against each other when
it is built; ``from_stats`` builds one from a copy of a Recorder's stats block (settling
what a copy taken while the writer ran may hold), and the views (``rows``, ``windows``,
``summary``, ``first_step_as_warmup``) read it. The binary format is
:mod:`gyreprof.model.snapshot.binary`; the records inside it :mod:`gyreprof.model.snapshot.records`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from gyreprof._support import checks as _checks
from gyreprof._support import io as _io
from gyreprof._support.block import StatsBlock, warmup_windows
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, MissingKeyError
from gyreprof.model.histogram import STEP, PhaseRow, layout_edges
from gyreprof.model.snapshot import binary
from gyreprof.model.snapshot.overhead import overhead_of, wrapper_overhead
from gyreprof.model.snapshot.records import (
    _IDENTITY,
    _INT64_MAX,
    Meta,
    SnapshotConfig,
    SourceRecord,
    Times,
    Totals,
    _as_int,
    current_unix_offset_ns,
    rate_spread,
    wall_span_ns,
)
from gyreprof.model.summary import Summary
from gyreprof.model.window import Window, rolling_windows

__all__ = ["EncodedSnapshot", "Snapshot", "SnapshotRecords", "unix_offset_ns"]


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
class SnapshotRecords:
    """What a snapshot records besides its histograms' buckets: the phases, the scalar
    record of each histogram (one row per phase plus a last row for whole steps,
    ``STEP``: steady count, sum, min, max; warm-up count, sum, max; first value, read
    by name through ``rows`` / ``row(name)``, stored packed in ``stat``, ``warm`` and
    ``first``), the totals, counters, times, sources, rolling windows and meta. Every
    field is read-only; construction checks that the records agree with each other
    (ValueError otherwise). A :class:`Snapshot` is these records and its buckets; an
    :class:`EncodedSnapshot` these records and its buckets still encoded.
    """

    phases: tuple[str, ...]
    config: SnapshotConfig
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


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot(SnapshotRecords):
    """Immutable copy of what one or more Recorders counted. Mergeable, serialisable.

    Its records (:class:`SnapshotRecords`: one row per phase plus a last row for whole
    steps, ``STEP``) and ``counts``, the steady-state bucket counts of each row. Every
    field is read-only; construction checks that the records agree with each other
    (ValueError otherwise).
    """

    counts: np.ndarray = field(kw_only=True)

    def __post_init__(self) -> None:
        SnapshotRecords.__post_init__(self)  # (no bare super(): a slots dataclass)
        nh = len(self.phases) + 1
        counts = np.ascontiguousarray(self.counts, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[0] != nh:
            raise InvalidValueError(f"counts must have {nh} rows, got shape {counts.shape}")
        object.__setattr__(self, "counts", _readonly(counts) if counts.flags.writeable else counts)

    def replace(self, **changes: Any) -> Snapshot:
        """A copy with the given fields (constructor keywords) replaced, validated as new."""
        unknown = set(changes) - {f.name for f in fields(self) if f.init}
        if unknown:
            raise ArgumentTypeError(f"Snapshot has no field(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

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

    # -- serialisation (gyreprof.model.snapshot.binary) ---------------------------------

    def to_bytes(self, *, windows: bool = True, compression: str = "zlib") -> bytes:
        """Compact bytes: magic, version, codec flag, compressed(JSON header + varint counts).

        ``compression="lzma"`` is ~20% smaller and several times slower than the
        default ``"zlib"``; ``from_bytes`` reads both.
        """
        return binary.write(self, windows=windows, compression=compression)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Snapshot:
        """Read bytes made by ``to_bytes``; ``CorruptDataError`` (a ValueError) says what is
        wrong with bad input, ``BudgetError`` (a ValueError) when decoding it would need more
        memory than ``GYREPROF_MEMORY_BUDGET`` allows."""
        return binary.read(data, cls)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_bytes` to ``path`` atomically (``gyreprof._support.io.write_atomic``: a
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


@dataclass(frozen=True, slots=True, eq=False)
class EncodedSnapshot(SnapshotRecords):
    """A snapshot read from its bytes with its histograms left encoded: its records
    (:class:`SnapshotRecords`) read and checked as ``Snapshot.from_bytes`` checks them,
    and ``encoded``, each row's counts in the format's encoding. Its buckets are checked
    when they are decoded: into a Snapshot (:meth:`snapshot`), or straight into the sums
    of a merge (``merge`` takes it as it takes a Snapshot), so that merging many reads no
    dense copy of each (a Ray job's workers, ``integrations.ray.job``)."""

    encoded: tuple[bytes, ...] = field(kw_only=True)

    def __post_init__(self) -> None:
        SnapshotRecords.__post_init__(self)  # (no bare super(): a slots dataclass)
        encoded = tuple(self.encoded)
        if len(encoded) != len(self.phases) + 1 or not all(isinstance(e, bytes) for e in encoded):
            raise InvalidValueError(f"encoded must hold {len(self.phases) + 1} rows of bytes")
        object.__setattr__(self, "encoded", encoded)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> EncodedSnapshot:
        """Read bytes made by ``Snapshot.to_bytes``, the histograms left encoded; bad
        records raise as ``Snapshot.from_bytes`` does, bad buckets when decoded."""
        return binary.read_encoded(data, cls)

    def add_counts_into(self, counts: np.ndarray, rows: Sequence[int]) -> None:
        """Add this snapshot's histogram ``h`` to row ``rows[h]`` of ``counts`` (see
        ``binary.add_counts``: each checked first; ``CorruptDataError`` if it is bad)."""
        binary.add_counts(self.encoded, self.stat, self.layout, counts, rows)

    def snapshot(self) -> Snapshot:
        """The Snapshot these bytes hold (as ``Snapshot.from_bytes`` reads it)."""
        nh = len(self.phases) + 1
        counts = np.zeros((nh, len(layout_edges(*self.layout)[0])), dtype=np.int64)
        self.add_counts_into(counts, range(nh))
        records = {f.name: getattr(self, f.name) for f in fields(SnapshotRecords) if f.init}
        return Snapshot(**records, counts=counts)

    def __repr__(self) -> str:
        return (
            f"EncodedSnapshot(phases={list(self.phases)}, steps={self.steps}, "
            f"sources={len(self.sources)})"
        )
