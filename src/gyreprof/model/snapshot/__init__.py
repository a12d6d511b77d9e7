"""Snapshot: the raw, mergeable record of a run, and its algebra.

A ``Snapshot`` is an immutable copy of everything a Recorder counted: the
steady-state histograms of every phase and of whole steps, warm-up totals,
counters and the closed rolling windows. This package holds what is done with
snapshots, one job a module:

- ``records``: the records inside a snapshot (``SnapshotConfig``, ``Times``,
  ``Totals``, ``SourceRecord``, ``Meta``), read and written by the generic codec
  (``gyreprof.model._serial``), and the wall-clock span of its sources (``wall_span_ns``);
- ``model``: the ``Snapshot`` record itself (its ``SnapshotRecords`` and its buckets),
  its checks, ``from_stats`` (built from a stats block, through ``gyreprof._support.block``)
  and its views; ``Snapshot.summary()`` is the Summary computed from it
  (``gyreprof.model.summary``, which knows a Snapshot by type only: the dependency goes
  one way); and ``EncodedSnapshot``, one read with its histograms left encoded (a merge
  decodes them straight into its sums);
- ``binary``: the binary format (``to_bytes`` / ``from_bytes``);
- ``algebra``: ``merge``, parallel sources (worker processes, threads, actors)
  combined: counts and histograms add up, extremes take the extreme, and time is the
  wall-clock span the sources cover (see ``wall_span_ns``); rolling windows belong to
  one source and are dropped by a merge; and ``interval``, what one source recorded
  between two of its snapshots;
- ``overhead``: the profiler's own time, priced per recorded event;
- ``build``: ``build_snapshot`` (the one builder from a stats block) and
  ``as_snapshot`` (a Profiler, Snapshot or Summary input, as a Snapshot).

Every name is importable from ``gyreprof.model.snapshot`` itself. Windows (``Window``,
``windows_from_events``) live in ``gyreprof.model.window`` and the histogram layout, the
percentile rule and ``STEP`` in ``gyreprof.model.histogram``; they are re-exported here.
Percentiles everywhere follow one rule, documented in ``gyreprof._core.histogram``:
the inverted-CDF rank; rank 1 and rank N are the exact minimum and maximum, other
ranks read as their bucket's midpoint clamped to them.
"""

from __future__ import annotations

from gyreprof.model.histogram import STEP, PhaseRow, exact_percentiles, layout_edges
from gyreprof.model.snapshot.algebra import interval, merge
from gyreprof.model.snapshot.binary import SNAPSHOT_MAGIC, SNAPSHOT_VERSION
from gyreprof.model.snapshot.build import ProfilerIdentity, as_snapshot, build_snapshot
from gyreprof.model.snapshot.model import (
    EncodedSnapshot,
    Snapshot,
    SnapshotRecords,
    unix_offset_ns,
)
from gyreprof.model.snapshot.overhead import overhead_of, wrapper_overhead
from gyreprof.model.snapshot.records import (
    COUNT_CAP,
    Meta,
    SnapshotConfig,
    SourceRecord,
    Times,
    Totals,
    current_unix_offset_ns,
    rate_spread,
    source_rates,
    wall_span_ns,
)
from gyreprof.model.window import Window, WindowStats, windows_from_events

__all__ = [
    "COUNT_CAP",
    "EncodedSnapshot",
    "SNAPSHOT_MAGIC",
    "SNAPSHOT_VERSION",
    "STEP",
    "Meta",
    "PhaseRow",
    "ProfilerIdentity",
    "Snapshot",
    "SnapshotConfig",
    "SnapshotRecords",
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
    "overhead_of",
    "rate_spread",
    "source_rates",
    "unix_offset_ns",
    "wall_span_ns",
    "windows_from_events",
    "wrapper_overhead",
]
