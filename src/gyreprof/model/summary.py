"""What people read: Summary and PhaseStats (computed from a Snapshot), and their renderers.

A ``Summary`` holds per-phase percentiles, shares, throughput, warm-up and
overhead; :mod:`gyreprof.render` writes it as text, Markdown, CSV and flat metrics,
and its JSON (format ``gyreprof.summary/2``; ``/1`` still reads) goes through the
generic codec, :mod:`gyreprof.model._serial`, with each histogram in its compact encoding
(``"histograms"``: layout and base64 of the encoded counts).
``PhaseStats.histogram`` is the public, read-only view of a phase's histogram
that exporters read. The raw record, its merge and interval algebra and the
binary format live in ``gyreprof.model.snapshot``; ``Snapshot.summary()`` computes a
Summary, and this module knows a Snapshot by type only (the dependency goes one
way). Reading a saved file of either kind: ``gyreprof.model.files.load``.

A merged Summary (several processes, threads or actors) counts time on the
wall clock: ``elapsed_s`` is the span its sources cover together, and
``steps_per_s`` the steps over that span, the fleet's throughput.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof._core import decode_counts, encode_counts, layout_info, percentiles_from_counts
from gyreprof._support import checks as _checks
from gyreprof._support import forms as _forms
from gyreprof._support import io as _io
from gyreprof._support import limits as _limits
from gyreprof._support.errors import CorruptDataError, InvalidValueError, UnknownPhaseError
from gyreprof._support.format import SUMMARY_HEADERS
from gyreprof.model._serial import Record, decode, encode, plain, serial_format
from gyreprof.model.histogram import STEP, HistogramView, PhaseRow, check_percentile
from gyreprof.model.window import Window

#: the sampler counters the C env-call guard counts its calls in (``libs.gymnasium``):
#: ``<prefix><kind>.timed`` (outermost calls, timed as phase ``<kind>``) and
#: ``<prefix><kind>.inner`` (calls the nesting guard passed through); the form costs
#: hold each one's calibrated ns per call under the same name
#: (``gyreprof.model.snapshot.wrapper_overhead``). A Summary leaves them out of its counters.
WRAPPER_COUNTER_PREFIX = "gyreprof.wrapper."
#: the sampler counters a collector worker keeps of its batches under ``gyreprof run``
#: (``libs.torchrl``: ``<prefix>batches``, ``<prefix>wall_ns``, ``<prefix><phase>_ns``,
#: the phases' ns inside the batches); read per process by the run's report
#: (``analysis.workers``), left out of a Summary's counters like the wrappers'
COLLECT_COUNTER_PREFIX = "gyreprof.collect."

if (
    TYPE_CHECKING
):  # a Summary is computed from a Snapshot; gyreprof.model.snapshot imports this module
    from gyreprof.model.snapshot import Snapshot, SnapshotRecords

__all__ = [
    "SUMMARY_FORMAT",
    "HistogramView",
    "PhaseStats",
    "Summary",
    "WarmupInfo",
    "default_meta",
    "steady_sum_ns",
    "warmup_info",
]


SUMMARY_FORMAT = "gyreprof.summary/2"
#: /1 wrote a missing figure as a bare NaN (not JSON); /2 writes null (gyreprof.model._serial)
SUMMARY_FORMAT_V1 = "gyreprof.summary/1"


# --------------------------------------------------------------------- values


@dataclass(frozen=True)
class PhaseStats(Record):
    """Steady-state statistics of one phase (durations in ns)."""

    count: int
    mean: float
    min: float
    max: float
    p50: float
    p90: float
    p99: float
    p999: float
    # fraction of step time (0..1); of all phase time when no steps were marked or the
    # phases add up to more (durations given to record()): the shares add up to <= 1
    share: float
    sum_ns: float = 0.0
    _counts: np.ndarray | None = field(default=None, repr=False, compare=False)
    _layout: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def histogram(self) -> HistogramView | None:
        """The read-only histogram behind these numbers; None for a summary saved
        without histograms (``to_dict(histograms=False)``)."""
        if self._counts is None or self._layout is None:
            return None
        counts = self._counts
        if counts.flags.writeable:
            counts = counts.view()
            counts.flags.writeable = False
        lowest, highest, sf = self._layout
        return HistogramView(
            counts=counts,
            lowest_ns=int(lowest),
            highest_ns=int(highest),
            significant_figures=int(sf),
            # the extremes are floats here: one near the int64 limit rounds up past it
            min=min(int(self.min), _checks.INT64_MAX) if not math.isnan(self.min) else -1,
            max=min(int(self.max), _checks.INT64_MAX) if not math.isnan(self.max) else -1,
            sum=int(self.sum_ns) if not math.isnan(self.sum_ns) else None,
        )

    def percentile(self, q: float) -> float:
        """Duration (ns) at percentile ``q`` in 0..100 (see gyreprof._core.histogram for the rule)."""
        qf = check_percentile(q)
        if self.count == 0:
            return math.nan
        hist = self.histogram
        if hist is None:
            raise InvalidValueError(
                "this PhaseStats carries no histogram (it was built from totals only)"
            )
        return hist.percentile(qf)

    def __str__(self) -> str:
        return _forms.text("text.phase_stats", self)


@dataclass(frozen=True)
class WarmupInfo(Record):
    """How warm-up was told apart from steady state, and what it cost."""

    rule: str  # "none", "first 100 steps", "first 2.0 s"
    steps: int  # steps completed during warm-up
    elapsed_ns: int
    done: bool  # False while the run is still warming up
    first_ns: dict[str, float]  # first recorded duration per phase (and STEP)
    mean_ns: dict[str, float]  # warm-up mean per phase (and STEP)
    max_ns: dict[str, float]

    def __str__(self) -> str:
        return _forms.text("text.warmup", self)


# -------------------------------------------------------------------- summary


def steady_sum_ns(row: PhaseRow) -> float:
    """A row's steady time as ``PhaseStats.sum_ns`` reads it: 0.0 for no values, NaN for
    a sum held at the int64 limit with nothing exact behind it (unknown, not the limit)."""
    if row.count <= 0:
        return 0.0
    return float(row.sum) if row.sum != _checks.INT64_MAX else math.nan


def warmup_info(snap: SnapshotRecords) -> WarmupInfo:
    """How ``snap``'s warm-up was told apart from its steady state, and what it cost (a
    Snapshot's, or the records of one whose buckets are still encoded)."""
    sources = snap.sources
    cfg = snap.config
    if cfg.warmup_steps > 0:
        rule = "first step" if cfg.warmup_steps == 1 else f"first {cfg.warmup_steps} steps"
    elif cfg.warmup_ns > 0:
        rule = f"first {cfg.warmup_ns / 1e9:g} s"
    else:
        rule = "none"
    return WarmupInfo(
        rule=rule,
        steps=snap.totals.warmup_steps_done,
        elapsed_ns=max((s.warmup_ns for s in sources), default=0),
        done=all(s.warmup_done for s in sources),
        first_ns={r.name: float(r.first) for r in snap.rows if r.first >= 0},
        mean_ns={
            r.name: r.warm_mean if r.warm_sum != _checks.INT64_MAX else math.nan
            for r in snap.rows
            if r.warm_count > 0
        },
        max_ns={r.name: float(r.warm_max) for r in snap.rows if r.warm_count > 0},
    )


def _phase_stats(
    counts: np.ndarray, row: PhaseRow, layout: tuple[int, int, int], denom: float
) -> PhaseStats:
    n, total, vmin, vmax = row.count, row.sum, row.min, row.max
    # a row's sum is exact (past int64 too); one held at the int64 limit with nothing
    # exact behind it is unknown: the figures that need it (mean, share, sum) read as
    # missing rather than as the limit
    known = total != _checks.INT64_MAX
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
        mean=total / n if known else math.nan,
        min=float(vmin),
        max=float(vmax),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        p999=float(p999),
        share=((total / denom) if denom > 0 else 0.0) if known and denom == denom else math.nan,
        sum_ns=steady_sum_ns(row),
        _counts=counts,
        _layout=layout,
    )


@serial_format(SUMMARY_FORMAT, reads=(SUMMARY_FORMAT_V1,), writer="gyreprof")
@dataclass(frozen=True)
class Summary(Record):
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
    elapsed_s: float  # steady-state wall time; merged: the wall-clock span the sources cover
    lap_cost_ns: float
    significant_figures: int
    clock: str
    sources: int
    meta: dict[str, Any] = field(default_factory=dict)
    # of overhead_share, the share the patched env-call wrappers took (gyreprof run)
    wrapper_share: float = 0.0
    # rolling windows: given as a list, or built on first use from the snapshot
    window_list: list[Window] | None = field(
        default=None,
        repr=False,
        compare=False,
        metadata={"serial_key": "windows"},  # written as built: see to_dict
    )
    _snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def windows(self) -> list[Window]:
        """The rolling windows (oldest first), built on first access."""
        if self.window_list is not None:
            return self.window_list
        return self._snapshot.windows() if self._snapshot is not None else []

    @property
    def snapshot(self) -> Snapshot | None:
        """The Snapshot this summary was computed from (None when loaded from JSON)."""
        return self._snapshot

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> Summary:
        layout = snap.layout
        rows, step_row = snap.rows[:-1], snap.rows[-1]

        def total_of(r: PhaseRow) -> float:  # NaN: held at the int64 limit, not known
            return float(r.sum) if r.sum != _checks.INT64_MAX else math.nan

        step_total = total_of(step_row)
        phase_total = float(sum(total_of(r) for r in rows))
        # a share is of step time; of all phase time when no steps were marked, or when
        # the phases add up to more than the steps (durations given to record(), which
        # tile nothing): shares stay in [0, 1] and add up to at most 1
        denom = _checks.share_base(step_total if step_row.count > 0 else 0.0, phase_total)
        phases = {
            r.name: _phase_stats(snap.counts[i], r, layout, denom) for i, r in enumerate(rows)
        }
        step = _phase_stats(snap.counts[-1], step_row, layout, step_total)
        # one source: its own steady time; several: the wall-clock span they cover together
        steady_ns = float(snap.steady_ns)
        steady_steps = step_row.count
        sources = snap.sources
        if len(sources) == 1:
            rate = sources[0].rate
        else:
            rate = steady_steps / (steady_ns / 1e9) if steady_ns > 0 else 0.0
        busy_ns = float(sum(s.steady_ns for s in sources))
        # a source without steady time has no profiler time in it either
        overhead = sum(s.overhead_ns for s in sources if s.steady_ns > 0)
        wrapper = sum(s.wrapper_ns or 0.0 for s in sources if s.steady_ns > 0)
        # the wrappers' call counters are the overhead's input, not the program's counts
        counters = {
            k: v
            for k, v in snap.counters.items()
            if not k.startswith((WRAPPER_COUNTER_PREFIX, COLLECT_COUNTER_PREFIX))
        }
        warmup = warmup_info(snap)
        warmup_ns = warmup.elapsed_ns
        cfg, totals = snap.config, snap.totals
        t = snap.times
        wall_ns = 0
        if len(sources) == 1 and t.start_ns > 0:
            end = max(t.last_write_ns, t.last_step_end_ns)
            wall_ns = max(0, end - t.start_ns)
        wall_s = wall_ns / 1e9 if wall_ns > 0 else (steady_ns + warmup_ns) / 1e9
        spread = snap.rate_spread()
        meta = snap.meta.to_dict()
        if spread is not None:
            meta["source_rates"] = list(spread)
        return cls(
            phases=phases,
            step=step,
            steps=steady_steps,
            steps_per_s=rate,
            warmup=warmup,
            overhead_share=(overhead / busy_ns) if busy_ns > 0 else 0.0,
            wrapper_share=min(overhead, wrapper) / busy_ns if busy_ns > 0 else 0.0,
            overwritten=totals.overwritten,
            out_of_range=totals.out_of_range,
            negative=totals.negative,
            nonfinite=totals.nonfinite,
            events=totals.events,
            counters=counters,
            counter_rates={
                k: (v / wall_s if wall_s > 0 else math.nan) for k, v in counters.items()
            },
            elapsed_s=steady_ns / 1e9,
            lap_cost_ns=snap.lap_cost_ns,
            significant_figures=cfg.significant_figures,
            clock=cfg.clock,
            sources=len(sources),
            _snapshot=snap,
            meta=meta,
        )

    # -- views -------------------------------------------------------------------

    def __getitem__(self, name: str) -> PhaseStats:
        try:
            return self.phases[name]
        except KeyError:
            raise UnknownPhaseError(
                f"unknown phase {name!r}; known phases: {list(self.phases)}"
            ) from None

    # -- renderings (gyreprof.render) ---------------------------------------------

    TABLE_HEADERS = SUMMARY_HEADERS

    def table_rows(self) -> list[list[str]]:
        """The summary table as formatted cells, one row per phase and one for whole steps
        (names through :func:`~gyreprof._support.format.safe_name`: safe to print)."""
        return _forms.rows("text.summary_rows", self)

    def table(self) -> str:
        return _forms.text("text.summary_table", self)

    def __str__(self) -> str:
        return _forms.text("text.summary", self)

    def to_markdown(self) -> str:
        return _forms.text("markdown.summary", self)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """One row per phase (and the whole step): name, count, mean, min, max, pXX, share."""
        return _forms.text("csv.write", _forms.text("csv.summary", self), path)

    def to_metrics(self, prefix: str = "gyreprof/") -> dict[str, float]:
        """Flat ``{name: number}`` for any logger's ``log(dict)`` (TensorBoard, W&B, ...);
        the keys: :func:`gyreprof.render.metrics.summary`."""
        return _forms.metrics("metrics.summary", self, prefix)

    # -- JSON (gyreprof.model._serial) ---------------------------------------------------

    def to_dict(self, *, histograms: bool = True) -> dict[str, Any]:
        """JSON-ready dict, format ``gyreprof.summary/2`` (``null`` for a missing figure);
        ``histograms=True`` adds each phase's encoded buckets under ``"histograms"``."""
        out = encode(self)
        if self.window_list is None:  # built from the snapshot on first use: written so
            out["windows"] = plain(self.windows)
        if histograms:
            hist = {}
            for name, st in [*self.phases.items(), (STEP, self.step)]:
                view = st.histogram
                if view is not None:
                    layout = (view.lowest_ns, view.highest_ns, view.significant_figures)
                    hist[name] = {
                        "layout": list(layout),
                        "counts": base64.b64encode(encode_counts(view.counts)).decode("ascii"),
                    }
            out["histograms"] = hist
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Summary:
        """Rebuild a Summary from ``to_dict()`` output (format ``/2``, or ``/1``);
        ``CorruptDataError`` (a ValueError) on anything malformed, ``BudgetError`` (a
        ValueError) when its histograms would need more memory than
        ``GYREPROF_MEMORY_BUDGET`` allows."""
        try:
            _limits.check_summary_dict(d)
            # sums, extremes and totals against the counts; a /1 file's shares are of its
            # step time, which record() durations could exceed: they are made /2's on
            # reading (_v1_shares), and only then held to /2's bounds
            legacy = hasattr(d, "get") and d.get("format") == SUMMARY_FORMAT_V1
            _checks.check_summary_values(d, shares=not legacy)
            return cls._from_dict(d)
        except _limits.BudgetError:
            raise
        except ValueError as exc:
            raise CorruptDataError(f"not a valid gyreprof summary: {exc}") from None
        except _limits.DECODE_ERRORS as exc:
            raise CorruptDataError(
                f"not a valid gyreprof summary: {type(exc).__name__}: {exc}"
            ) from None

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any]) -> Summary:
        if not isinstance(d, Mapping):
            raise InvalidValueError(f"expected an object (dict), got {type(d).__name__}")
        data = dict(d)
        hist = data.pop("histograms", None) or {}
        if not isinstance(hist, Mapping):
            raise InvalidValueError("'histograms' is not an object")
        if data.get("format") == SUMMARY_FORMAT_V1:
            data = _v1_defaults(data)
        summary = decode(cls, data)
        phases = {name: _with_histogram(name, st, hist) for name, st in summary.phases.items()}
        step = _with_histogram(STEP, summary.step, hist)
        return dataclasses.replace(summary, phases=phases, step=step)

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> Summary:
        """Parse JSON text, or read a file when given a path."""
        text = str(text_or_path)
        if isinstance(text_or_path, os.PathLike) or not text.lstrip().startswith(("{", "[")):
            p = Path(text_or_path)
            try:
                text = _io.read_text(p, "summary")
            except UnicodeDecodeError:
                raise CorruptDataError(f"{p} is not a JSON summary (not text)") from None
        try:
            data = json.loads(text)  # a /1 file may hold bare NaN: json.loads reads it
        except (json.JSONDecodeError, RecursionError) as exc:
            raise CorruptDataError(f"not a valid gyreprof summary: bad JSON ({exc})") from None
        return cls.from_dict(data)


def _with_histogram(name: str, st: PhaseStats, hist: Mapping[str, Any]) -> PhaseStats:
    """``st`` with the histogram ``hist`` holds for ``name`` (compact encoding), checked."""
    if name not in hist:
        return st
    h = hist[name]
    if not isinstance(h, Mapping):
        raise InvalidValueError(f"histogram of {name!r} is not an object")
    lay = tuple(int(x) for x in h["layout"])
    if len(lay) != 3:
        raise InvalidValueError(f"bad histogram layout for {name!r}")
    length = int(layout_info(*lay)["counts_len"])
    counts = decode_counts(base64.b64decode(h["counts"], validate=True), length)
    if int(counts.sum()) != st.count:
        raise InvalidValueError(f"histogram of {name!r} does not add up to its count")
    return dataclasses.replace(st, _counts=counts, _layout=lay)


#: what a gyreprof.summary/1 file may leave out (written by older versions)
_V1_OPTIONAL: dict[str, Any] = {
    "nonfinite": 0,
    "events": 0,
    "counters": {},
    "counter_rates": {},
    "lap_cost_ns": math.nan,
    "clock": "monotonic",
    "sources": 1,
    "windows": [],
    "meta": {},
}


def _v1_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """A ``/1`` summary dict with the fields older writers left out filled in, and its
    shares as ``/2`` has them (see :func:`_v1_shares`)."""
    out = {**_V1_OPTIONAL, **data}
    warm = out.get("warmup")
    if isinstance(warm, Mapping):
        out["warmup"] = {"max_ns": {}, **warm}
    if isinstance(out.get("phases"), Mapping):
        out["phases"] = _v1_shares(out["phases"])
    windows = out.get("windows")
    if isinstance(windows, list):
        out["windows"] = [
            {**w, "phases": _v1_shares(w["phases"])}
            if isinstance(w, Mapping) and isinstance(w.get("phases"), Mapping)
            else w
            for w in windows
        ]
    return out


def _v1_shares(phases: Mapping[str, Any]) -> dict[str, Any]:
    """A ``/1`` file's shares were of the step time alone, which ``record()`` durations
    could exceed; ``/2``'s are of the step time or all phase time, whichever is larger
    (``checks.share_base``). Where the shares add up past 1, the phase time was the
    larger, and each share over their sum is the ``/2`` share."""
    shares = [
        float(pd["share"])
        for pd in phases.values()
        if isinstance(pd, Mapping)
        and isinstance(pd.get("share"), (int, float))
        and not isinstance(pd.get("share"), bool)
        and math.isfinite(float(pd["share"]))
        and pd["share"] >= 0
    ]
    total = sum(shares)
    if total <= 1.0:
        return dict(phases)
    return {
        name: {**pd, "share": float(pd["share"]) / total}
        if isinstance(pd, Mapping)
        and isinstance(pd.get("share"), (int, float))
        and not isinstance(pd.get("share"), bool)
        and math.isfinite(float(pd["share"]))
        else pd
        for name, pd in phases.items()
    }


def default_meta(label: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
    if label:
        meta["label"] = label
    return meta
