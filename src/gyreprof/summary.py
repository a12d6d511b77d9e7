"""What people read: Summary and PhaseStats (computed from a Snapshot), and their renderers.

A ``Summary`` holds per-phase percentiles, shares, throughput, warm-up and
overhead, and renders them as text, Markdown, JSON, CSV and flat metrics.
``PhaseStats.histogram`` is the public, read-only view of a phase's histogram
that exporters read. The raw record, its merge and interval algebra and the
binary format live in ``gyreprof.snapshot``; ``Snapshot.summary()`` computes a
Summary, and this module knows a Snapshot by type only (the dependency goes one
way). Reading a saved file of either kind: ``gyreprof.files.load``.

A merged Summary (several processes, threads or actors) counts time on the
wall clock: ``elapsed_s`` is the span its sources cover together, and
``steps_per_s`` the steps over that span, the fleet's throughput.
"""

from __future__ import annotations

import base64
import csv
import functools
import io
import json
import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof import _checks, _io, _limits, _notes
from gyreprof._core import decode_counts, encode_counts, layout_info, percentiles_from_counts
from gyreprof._errors import CorruptDataError, UnknownPhaseError
from gyreprof._format import fmt_ns, fmt_pct, fmt_rate, markdown_table, safe_name, text_table
from gyreprof._version import __version__
from gyreprof.histogram import STEP, HistogramView, PhaseRow, check_percentile
from gyreprof.window import Window, WindowStats

if TYPE_CHECKING:  # a Summary is computed from a Snapshot; snapshot.py imports this module
    from gyreprof.snapshot import Snapshot

__all__ = [
    "SUMMARY_FORMAT",
    "HistogramView",
    "PhaseStats",
    "Summary",
    "WarmupInfo",
    "default_meta",
]


SUMMARY_FORMAT = "gyreprof.summary/1"


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
            min=int(self.min) if not math.isnan(self.min) else -1,
            max=int(self.max) if not math.isnan(self.max) else -1,
            sum=int(self.sum_ns) if not math.isnan(self.sum_ns) else None,
        )

    def percentile(self, q: float) -> float:
        """Duration (ns) at percentile ``q`` in 0..100 (see gyreprof._core.histogram for the rule)."""
        qf = check_percentile(q)
        if self.count == 0:
            return math.nan
        hist = self.histogram
        if hist is None:
            raise ValueError("this PhaseStats carries no histogram (it was built from totals only)")
        return hist.percentile(qf)

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


# -------------------------------------------------------------------- summary


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
        sum_ns=float(total) if known else math.nan,
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
    elapsed_s: float  # steady-state wall time; merged: the wall-clock span the sources cover
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
        denom = step_total if step_row.count > 0 else phase_total
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
        warmup_ns = max((s.warmup_ns for s in sources), default=0)
        warm_done = all(s.warmup_done for s in sources)
        cfg = snap.config
        if cfg.warmup_steps > 0:
            rule = f"first {cfg.warmup_steps} steps"
        elif cfg.warmup_ns > 0:
            rule = f"first {cfg.warmup_ns / 1e9:g} s"
        else:
            rule = "none"
        totals = snap.totals
        warmup = WarmupInfo(
            rule=rule,
            steps=totals.warmup_steps_done,
            elapsed_ns=warmup_ns,
            done=warm_done,
            first_ns={r.name: float(r.first) for r in snap.rows if r.first >= 0},
            mean_ns={
                r.name: r.warm_mean if r.warm_sum != _checks.INT64_MAX else math.nan
                for r in snap.rows
                if r.warm_count > 0
            },
            max_ns={r.name: float(r.warm_max) for r in snap.rows if r.warm_count > 0},
        )
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
            overwritten=totals.overwritten,
            out_of_range=totals.out_of_range,
            negative=totals.negative,
            nonfinite=totals.nonfinite,
            events=totals.events,
            counters=dict(snap.counters),
            counter_rates={
                k: (v / wall_s if wall_s > 0 else math.nan) for k, v in snap.counters.items()
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

    def _rows(self) -> list[tuple[str, PhaseStats]]:
        rows = list(self.phases.items())
        if self.step.count:
            rows.append((STEP, self.step))
        return rows

    TABLE_HEADERS = ("phase", "count", "mean", "p50", "p90", "p99", "p99.9", "max", "share")

    def table_rows(self) -> list[list[str]]:
        """The summary table as formatted cells, one row per phase and one for whole steps
        (names through :func:`~gyreprof._format.safe_name`: safe to print)."""
        return [
            [
                safe_name(name),
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
            spread = self.meta.get("source_rates")
            if self.sources > 1 and isinstance(spread, list) and len(spread) == 3:
                lo, med, hi = (float(x) for x in spread)
                lines.append(
                    f"per source: {fmt_rate(lo)} min, {fmt_rate(med)} median, "
                    f"{fmt_rate(hi)} max (wall-clock span of all sources above)"
                )
        else:
            lines.append(f"gyreprof: {self.events} phase events{src} (no steps marked)")
        lines.append(self.table())
        lines.append(str(self.warmup))
        w = self.warmup
        steady = {**{k: v.mean for k, v in self.phases.items()}, STEP: self.step.mean}
        if w.first_ns:
            parts = [
                f"{safe_name(n)} {fmt_ns(v)} (steady mean {fmt_ns(steady.get(n))})"
                for n, v in w.first_ns.items()
            ]
            lines.append("first call: " + ", ".join(parts))
        if w.mean_ns:
            parts = [
                f"{safe_name(n)} {fmt_ns(v)} -> {fmt_ns(steady.get(n))}"
                for n, v in w.mean_ns.items()
            ]
            lines.append("warm-up vs steady mean: " + ", ".join(parts))
        lines.append(
            f"profiler overhead: {fmt_pct(self.overhead_share)} of wall time "
            f"(~{self.lap_cost_ns:.0f} ns per boundary, clock={self.clock})"
        )
        issues = _notes.data_quality(self)
        inexact = [
            safe_name(n)
            for n, p in {**self.phases, STEP: self.step}.items()
            if p.count > 0 and math.isnan(p.mean)
        ]
        if inexact:  # a sum held at the int64 limit with no exact value (an older record)
            issues.append(
                "sums past the int64 range with no exact value: the mean, share and total "
                f"of {', '.join(inexact)} are missing"
            )
        if issues:
            lines.append("note: " + "; ".join(issues))
        if self.counters:
            lines.append(
                "counters: "
                + ", ".join(
                    f"{safe_name(k)} {v} ({self.counter_rates.get(k, math.nan):.3g}/s)"
                    for k, v in self.counters.items()
                )
            )
        return "\n".join(lines)

    def to_markdown(self) -> str:
        headers = list(self.TABLE_HEADERS)
        # a '|' in a name would split its cell
        rows = [[c.replace("|", "\\|") for c in r] for r in self.table_rows()]
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
        """Rebuild a Summary from ``to_dict()`` output; ``CorruptDataError`` (a ValueError) on
        anything malformed, ``BudgetError`` (a ValueError) when its histograms would need more
        memory than ``GYREPROF_MEMORY_BUDGET`` allows."""
        try:
            _limits.check_summary_dict(d)
            _checks.check_summary_values(d)  # sums, extremes and totals against the counts
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
        if isinstance(text_or_path, os.PathLike) or not text.lstrip().startswith(("{", "[")):
            p = Path(text_or_path)
            try:
                text = _io.read_text(p, "summary")
            except UnicodeDecodeError:
                raise CorruptDataError(f"{p} is not a JSON summary (not text)") from None
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise CorruptDataError(f"not a valid gyreprof summary: bad JSON ({exc})") from None
        return cls.from_dict(data)


def default_meta(label: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
    if label:
        meta["label"] = label
    return meta
