"""The algebra of snapshots: ``merge`` (parallel sources combined) and ``interval``
(what one source recorded between two of its snapshots)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from gyreprof._support import checks as _checks
from gyreprof._support import limits as _limits
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof.model.histogram import layout_edges
from gyreprof.model.snapshot.model import EncodedSnapshot, Snapshot
from gyreprof.model.snapshot.records import (
    _IDENTITY,
    _INT64_MAX,
    _TOTAL_KEYS,
    Meta,
    SourceRecord,
    Times,
    Totals,
)

__all__ = ["interval", "merge"]


def _sat_add(a: int, b: int) -> tuple[int, bool]:
    """``a + b`` in Python ints, held at the int64 limit; (sum, whether it was held)."""
    total = int(a) + int(b)
    if total > _INT64_MAX:
        return _INT64_MAX, True
    return total, False


def merge(snapshots: Iterable[Snapshot | EncodedSnapshot]) -> Snapshot:
    """Merge snapshots of parallel sources (workers, threads, actors) into one.

    Phases are matched by name (the union, in first-seen order); the histogram
    layouts must be equal. Counts, sums and counters add; min/max take the
    extremes; the times span the sources, so steps_per_s is the fleet's throughput
    over that span. Associative and commutative up to phase order.
    Merging several sources drops their rolling windows (they belong to one
    source each); merging a single snapshot returns it unchanged. An
    ``EncodedSnapshot`` (read with its histograms still encoded) is merged as the
    Snapshot it holds, its buckets decoded straight into the sums.
    """
    snaps = list(snapshots)
    if not snaps:
        raise InvalidValueError("merge needs at least one snapshot")
    for s in snaps:
        if not isinstance(s, (Snapshot, EncodedSnapshot)):
            raise ArgumentTypeError(f"merge takes Snapshot objects, got {type(s).__name__}")
    layout = snaps[0].layout
    for s in snaps[1:]:
        if s.layout != layout:
            raise InvalidValueError(
                f"cannot merge snapshots with different histogram layouts {layout} and {s.layout} "
                "(lowest_ns, highest_ns, significant_figures)"
            )
    if len(snaps) == 1:
        return snaps[0] if isinstance(snaps[0], Snapshot) else snaps[0].snapshot()
    names: list[str] = []
    for s in snaps:
        for p in s.phases:
            if p not in names:
                names.append(p)
    nh = len(names) + 1
    L = len(layout_edges(*layout)[0])
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
        if isinstance(s, EncodedSnapshot):
            s.add_counts_into(counts, rows)  # each row checked, then added
        elif rows == list(range(nh)):
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
