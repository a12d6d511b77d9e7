"""Result values of a sweep: runs, points, the whole result and its JSON form.

Private helper of :mod:`gyreprof.analysis.sweep` (which re-exports the public
names and documents the JSON schema).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyreprof._version import __version__

FORMAT = "gyreprof.sweep/1"

FIGURE_NAMES = (
    "samples_per_s",
    "call_mean_ns",
    "call_p50_ns",
    "call_p99_ns",
    "call_max_ns",
    "samples_per_call",
    "sample_time_ns",
    "warmup_call_mean_ns",
    "first_call_ns",
    "peak_rss_bytes",
    "baseline_rss_bytes",
    "children_rss_bytes",
    "peak_gpu_bytes",
)
PHASE_FIELDS = ("per_call_ns", "share", "p50_ns", "p99_ns", "count_per_call")


# ------------------------------------------------------------------ values


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


@dataclass(frozen=True)
class Figure:
    """One figure over the repeats of a value: median and spread (min..max) of ``n`` runs."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Iterable[Any]) -> Figure:
        vals = [v for v in (_num(x) for x in values if x is not None) if not math.isnan(v)]
        if not vals:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(float(statistics.median(vals)), min(vals), max(vals), len(vals))

    @property
    def spread(self) -> float:
        """max - min (0 with one run; NaN with none)."""
        return self.max - self.min

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Figure:
        return cls(_num(d["median"]), _num(d["min"]), _num(d["max"]), int(d["n"]))


_NO_FIGURE = Figure(math.nan, math.nan, math.nan, 0)


@dataclass(frozen=True)
class PhaseFigures:
    """A sampler phase at one value: time per call (ns), share of call time, event p50/p99."""

    per_call_ns: Figure
    share: Figure
    p50_ns: Figure
    p99_ns: Figure
    count_per_call: Figure

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {k: getattr(self, k).to_dict() for k in PHASE_FIELDS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PhaseFigures:
        return cls(**{k: Figure.from_dict(d[k]) for k in PHASE_FIELDS})


def _opt_int(x: Any) -> int | None:
    if x is None:
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class SweepRun:
    """One run: one value, one repeat. Times in ns, memory in bytes.

    ``status`` is ``"ok"``, ``"error"`` (factory or sampler raised), ``"invalid"``
    (no sampler, or a call returned no positive sample count), ``"crash"`` (the
    run's process died) or ``"timeout"``; ``stage`` says how far it got.
    """

    value: int | float
    repeat: int
    status: str
    error: str | None = None
    stage: str = ""
    samples: int = 0
    calls: int = 0
    warmup_calls: int = 0
    sample_time_ns: float = math.nan
    samples_per_s: float = math.nan
    samples_per_call_min: int = 0
    samples_per_call_max: int = 0
    call: dict[str, float] = field(default_factory=dict)
    warmup: dict[str, float] = field(default_factory=dict)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    peak_rss_bytes: int | None = None
    baseline_rss_bytes: int | None = None
    children_rss_bytes: int | None = None
    peak_gpu_bytes: int | None = None
    rss_seen_bytes: int | None = None
    threads: dict[str, int] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    exit_code: int | None = None
    wall_s: float = math.nan
    output: str = ""
    stacks: str | None = None
    traceback: str | None = None
    summary_data: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def summary(self) -> Any:
        """The run's gyreprof ``Summary`` (per-call histogram, phases, warm-up), or None."""
        if self.summary_data is None:
            return None
        from gyreprof.summary import Summary

        return Summary.from_dict(self.summary_data)

    def figure(self, name: str) -> float | None:
        """This run's value of figure ``name`` (see ``FIGURE_NAMES``)."""
        if not self.ok:
            return None
        table: dict[str, Any] = {
            "samples_per_s": self.samples_per_s,
            "call_mean_ns": self.call.get("mean_ns"),
            "call_p50_ns": self.call.get("p50_ns"),
            "call_p99_ns": self.call.get("p99_ns"),
            "call_max_ns": self.call.get("max_ns"),
            "samples_per_call": (self.samples / self.calls) if self.calls else None,
            "sample_time_ns": self.sample_time_ns,
            "warmup_call_mean_ns": self.warmup.get("mean_ns"),
            "first_call_ns": self.warmup.get("first_ns"),
            "peak_rss_bytes": self.peak_rss_bytes,
            "baseline_rss_bytes": self.baseline_rss_bytes,
            "children_rss_bytes": self.children_rss_bytes,
            "peak_gpu_bytes": self.peak_gpu_bytes,
        }
        v = table[name]
        return None if v is None else _num(v)

    @classmethod
    def from_raw(cls, value: int | float, repeat: int, raw: Mapping[str, Any]) -> SweepRun:
        """Build from a run result dict (``_sweep_runner.run_once`` plus launcher fields)."""
        return cls(
            value=value,
            repeat=int(repeat),
            status=str(raw.get("status", "error")),
            error=raw.get("error"),
            stage=str(raw.get("stage", "")),
            samples=int(raw.get("samples", 0)),
            calls=int(raw.get("calls", 0)),
            warmup_calls=int(raw.get("warmup_calls", 0)),
            sample_time_ns=_num(raw.get("sample_time_ns", math.nan)),
            samples_per_s=_num(raw.get("samples_per_s", math.nan)),
            samples_per_call_min=int(raw.get("samples_per_call_min", 0)),
            samples_per_call_max=int(raw.get("samples_per_call_max", 0)),
            call={str(k): _num(v) for k, v in (raw.get("call") or {}).items()},
            warmup={str(k): _num(v) for k, v in (raw.get("warmup") or {}).items()},
            phases={
                str(p): {str(k): _num(v) for k, v in d.items()}
                for p, d in (raw.get("phases") or {}).items()
            },
            peak_rss_bytes=_opt_int(raw.get("peak_rss_bytes")),
            baseline_rss_bytes=_opt_int(raw.get("baseline_rss_bytes")),
            children_rss_bytes=_opt_int(raw.get("children_rss_bytes")),
            peak_gpu_bytes=_opt_int(raw.get("peak_gpu_bytes")),
            rss_seen_bytes=_opt_int(raw.get("rss_seen_bytes")),
            threads={str(k): int(v) for k, v in (raw.get("threads") or {}).items()},
            observed=dict(raw.get("observed") or {}),
            notes=tuple(str(n) for n in raw.get("notes") or ()),
            exit_code=_opt_int(raw.get("exit_code")),
            wall_s=_num(raw.get("wall_s", math.nan)),
            output=str(raw.get("output") or ""),
            stacks=raw.get("stacks"),
            traceback=raw.get("traceback"),
            summary_data=raw.get("summary"),
        )

    def to_dict(self, *, summary: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": self.value,
            "repeat": self.repeat,
            "status": self.status,
            "error": self.error,
            "stage": self.stage,
            "samples": self.samples,
            "calls": self.calls,
            "warmup_calls": self.warmup_calls,
            "sample_time_ns": self.sample_time_ns,
            "samples_per_s": self.samples_per_s,
            "samples_per_call_min": self.samples_per_call_min,
            "samples_per_call_max": self.samples_per_call_max,
            "call": self.call,
            "warmup": self.warmup,
            "phases": self.phases,
            "peak_rss_bytes": self.peak_rss_bytes,
            "baseline_rss_bytes": self.baseline_rss_bytes,
            "children_rss_bytes": self.children_rss_bytes,
            "peak_gpu_bytes": self.peak_gpu_bytes,
            "rss_seen_bytes": self.rss_seen_bytes,
            "threads": self.threads,
            "observed": {k: _jsonable(v) for k, v in self.observed.items()},
            "notes": list(self.notes),
            "exit_code": self.exit_code,
            "wall_s": self.wall_s,
            "output": self.output,
            "stacks": self.stacks,
            "traceback": self.traceback,
        }
        if summary and self.summary_data is not None:
            out["summary"] = self.summary_data
        return out


@dataclass(frozen=True)
class SweepPoint:
    """One value of the swept setting, over its repeats.

    ``samples_per_s`` and ``peak_rss_bytes`` are medians over the runs that
    succeeded, ``spread`` the (min, max) samples/s; ``figures`` holds every
    figure as a :class:`Figure`, ``phases`` the sampler's phases (with
    ``(other)``). ``error`` says what went wrong when ``status`` is not ``"ok"``
    (figures of the runs that did succeed are kept). ``gain`` is the throughput
    change from the previous measured value (a fraction), and
    ``not_distinguishable_from`` the neighbour values its spread cannot be
    told apart from.
    """

    value: int | float
    status: str
    error: str | None
    samples_per_s: float
    spread: tuple[float, float]
    peak_rss_bytes: int | None
    phases: dict[str, PhaseFigures]
    figures: dict[str, Figure]
    runs: tuple[SweepRun, ...]
    gain: float | None = None
    not_distinguishable_from: tuple[int | float, ...] = ()
    over_memory_limit: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def measured(self) -> bool:
        """At least one run produced figures."""
        return any(r.ok for r in self.runs)

    @property
    def distinguishable(self) -> bool:
        return not self.not_distinguishable_from

    @property
    def peak_gpu_bytes(self) -> int | None:
        f = self.figures.get("peak_gpu_bytes", _NO_FIGURE)
        return None if math.isnan(f.median) else int(f.median)

    def figure(self, name: str) -> Figure:
        return self.figures.get(name, _NO_FIGURE)

    @classmethod
    def from_runs(cls, value: int | float, runs: Sequence[SweepRun]) -> SweepPoint:
        good = [r for r in runs if r.ok]
        failed = next((r for r in runs if not r.ok), None)
        figures = {name: Figure.of(r.figure(name) for r in good) for name in FIGURE_NAMES}
        names: list[str] = []
        for r in good:
            for p in r.phases:
                if p not in names:
                    names.append(p)
        phases = {
            p: PhaseFigures(
                **{
                    k: Figure.of(r.phases[p].get(k) for r in good if p in r.phases)
                    for k in PHASE_FIELDS
                }
            )
            for p in names
        }
        sps = figures["samples_per_s"]
        rss = figures["peak_rss_bytes"]
        error = None
        if failed is not None:
            error = failed.error or failed.status
            if len(runs) > 1 or good:
                error = f"run {failed.repeat + 1}: {error}"
        return cls(
            value=value,
            status="ok" if failed is None else failed.status,
            error=error,
            samples_per_s=sps.median,
            spread=(sps.min, sps.max),
            peak_rss_bytes=None if math.isnan(rss.median) else int(rss.median),
            phases=phases,
            figures=figures,
            runs=tuple(runs),
        )

    def to_dict(self, *, summaries: bool = False) -> dict[str, Any]:
        return {
            "value": self.value,
            "status": self.status,
            "error": self.error,
            "samples_per_s": self.samples_per_s,
            "spread": list(self.spread),
            "peak_rss_bytes": self.peak_rss_bytes,
            "gain": self.gain,
            "not_distinguishable_from": list(self.not_distinguishable_from),
            "over_memory_limit": self.over_memory_limit,
            "figures": {k: v.to_dict() for k, v in self.figures.items()},
            "phases": {k: v.to_dict() for k, v in self.phases.items()},
            "runs": [r.to_dict(summary=summaries) for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepPoint:
        runs = tuple(SweepRun.from_raw(r["value"], r["repeat"], r) for r in d.get("runs", []))
        spread = d["spread"]
        return cls(
            value=d["value"],
            status=str(d["status"]),
            error=d.get("error"),
            samples_per_s=_num(d["samples_per_s"]),
            spread=(_num(spread[0]), _num(spread[1])),
            peak_rss_bytes=_opt_int(d.get("peak_rss_bytes")),
            phases={str(k): PhaseFigures.from_dict(v) for k, v in d.get("phases", {}).items()},
            figures={str(k): Figure.from_dict(v) for k, v in d.get("figures", {}).items()},
            runs=runs,
            gain=None if d.get("gain") is None else _num(d["gain"]),
            not_distinguishable_from=tuple(d.get("not_distinguishable_from", ())),
            over_memory_limit=bool(d.get("over_memory_limit", False)),
        )


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    item = getattr(v, "item", None)
    if callable(item):
        try:
            return _jsonable(item())
        except Exception:  # noqa: BLE001
            pass
    return repr(v)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep measured and decided. ``str(result)`` is the table and the report."""

    param: str
    values: tuple[int | float, ...]
    fixed: dict[str, Any]
    points: tuple[SweepPoint, ...]
    stop_reason: str  # "flat", "memory_limit" or "end"
    stop_detail: str
    stopped_at: int | float | None
    flat_from: int | float | None
    recommended: int | float | None
    skipped: tuple[int | float, ...]
    warnings: tuple[str, ...]
    factory: str
    settings: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)

    # -- lookups ---------------------------------------------------------------

    def point(self, value: int | float) -> SweepPoint:
        """The point of ``value``; KeyError listing the measured values otherwise."""
        for p in self.points:
            if p.value == value:
                return p
        raise KeyError(
            f"{self.param}={value!r} was not measured; measured: {[p.value for p in self.points]}"
        )

    @property
    def measured(self) -> tuple[SweepPoint, ...]:
        """Points that produced figures (ascending)."""
        return tuple(p for p in self.points if p.measured)

    @property
    def failed(self) -> tuple[SweepPoint, ...]:
        return tuple(p for p in self.points if not p.ok)

    # -- text -------------------------------------------------------------------

    def report(self) -> str:
        """The result in plain words, phrased as a controlled result."""
        from gyreprof.analysis._sweep_report import report_text

        return report_text(self)

    def headline(self) -> str:
        """The one-sentence summary (first line of ``report()``)."""
        from gyreprof.analysis._sweep_report import headline

        return headline(self)

    def table(self) -> str:
        """Aligned text table: one row per value, then the phase breakdown if any."""
        from gyreprof.analysis._sweep_report import table_text

        return table_text(self)

    def __str__(self) -> str:
        return self.table() + "\n\n" + self.report()

    # -- machine-readable ----------------------------------------------------------

    def to_dict(self, *, summaries: bool = False) -> dict[str, Any]:
        """JSON-ready dict (schema in this module's docstring); ``summaries=True`` adds
        each run's gyreprof Summary."""
        return {
            "format": FORMAT,
            "gyreprof": __version__,
            "factory": self.factory,
            "param": self.param,
            "values": list(self.values),
            "fixed": {k: _jsonable(v) for k, v in self.fixed.items()},
            "settings": _jsonable(self.settings),
            "environment": _jsonable(self.environment),
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "stopped_at": self.stopped_at,
            "flat_from": self.flat_from,
            "recommended": self.recommended,
            "skipped": list(self.skipped),
            "warnings": list(self.warnings),
            "report": self.report(),
            "points": [p.to_dict(summaries=summaries) for p in self.points],
        }

    def to_json(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        indent: int | None = 2,
        summaries: bool = False,
    ) -> str:
        """The JSON text; written to ``path`` as well when given."""
        text = json.dumps(self.to_dict(summaries=summaries), indent=indent, allow_nan=True)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepResult:
        """Rebuild from ``to_dict()`` output; ValueError on anything malformed."""
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            raise ValueError(f"not a gyreprof sweep result: missing format marker {FORMAT!r}")
        try:
            return cls(
                param=str(d["param"]),
                values=tuple(d["values"]),
                fixed=dict(d["fixed"]),
                points=tuple(SweepPoint.from_dict(p) for p in d["points"]),
                stop_reason=str(d["stop_reason"]),
                stop_detail=str(d["stop_detail"]),
                stopped_at=d.get("stopped_at"),
                flat_from=d.get("flat_from"),
                recommended=d.get("recommended"),
                skipped=tuple(d.get("skipped", ())),
                warnings=tuple(str(w) for w in d.get("warnings", ())),
                factory=str(d.get("factory", "")),
                settings=dict(d.get("settings", {})),
                environment=dict(d.get("environment", {})),
            )
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ValueError(
                f"not a valid gyreprof sweep result: {type(exc).__name__}: {exc}"
            ) from None

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> SweepResult:
        """Parse JSON text, or read a file when given a path."""
        text = str(text_or_path)
        if isinstance(text_or_path, os.PathLike) or not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a valid gyreprof sweep result: bad JSON ({exc})") from None
        return cls.from_dict(data)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """One row per value: medians and spreads of every figure, then per-phase columns."""
        from gyreprof.analysis._sweep_report import csv_text

        text = csv_text(self)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_plot(self, path: str | os.PathLike[str]) -> Path:
        """Write a PNG: samples/s (median, min-max bars) and peak memory against the value,
        the stop point and the recommendation marked. Needs matplotlib (``gyreprof[plot]``)."""
        from gyreprof.analysis._sweep_report import plot

        return plot(self, path)


# ------------------------------------------------------------------ sizes


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value: int | float | str) -> int:
    """A memory size in bytes from an int or text such as ``'2GiB'``, ``'1.5 GB'``, ``'512M'``.

    Decimal units (kB, MB, GB) are powers of 1000; binary units (KiB, MiB, GiB)
    powers of 1024. ValueError names the accepted forms.
    """
    if isinstance(value, bool):
        raise ValueError(f"a memory size must be bytes or text like '2GiB', got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"a memory size must be a positive number of bytes, got {value!r}")
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _BYTE_UNITS:
            n = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
            if n > 0:
                return int(n)
    raise ValueError(
        f"a memory size must be bytes or text like '2GiB', '1.5GB', '512MiB', got {value!r}"
    )
