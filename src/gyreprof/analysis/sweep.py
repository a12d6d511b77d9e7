"""Controlled sweeps: change one setting of a sampler, keep the rest fixed, measure.

``sweep(factory, "batch_size", [8, 16, 32, 64], fixed={"num_envs": 8})`` builds
the sampler once per value and repeat with ``factory(**fixed, batch_size=value)``
and measures, per value:

* **samples per second from sampling time only** — the time spent inside the
  sampler calls (one gyreprof step per call), not the harness around them;
  the first ``warmup`` calls are excluded and reported apart (warm-up mean
  and first call);
* per-call mean, p50 and p99, and — when the sampler records its own phases —
  the per-phase time per call and share, plus ``(other)``: call time no
  declared phase covered;
* the peak resident memory (RSS) of the process that ran it, and the peak
  CUDA memory torch allocated when the sampler uses torch with CUDA (torch is
  never imported by the sweep itself);
* every figure as the median and min–max over ``repeats`` runs; a value whose
  spread is wider than its throughput difference to a neighbour is marked
  *not distinguishable* from it.

The sampler
-----------
``factory(**fixed, **{param: value})`` returns a *sampler*: an object with a
``.sample()`` method, or a callable, that makes one sampling call and returns
how many samples it produced (a positive int). A sampler with a ``close()``
method is closed after its run. To see where the time goes inside a call, the
factory takes a ``prof`` keyword and declares its phase names::

    def make_sampler(batch_size, num_envs, prof=None):
        return Sampler(batch_size, num_envs, prof)
    make_sampler.phases = ("policy", "env", "store")   # or sweep(..., phases=[...])

The sweep builds a :class:`~gyreprof.Profiler` with those phases and passes it
in; the sampler times its phases with ``prof.phase(name)``, ``prof.lap(id)``
or ``prof.record(name, ns)`` inside each call. The sweep itself marks one step
per call (``prof.begin()``/``prof.end()``), so the sampler must not.

Isolation
---------
``isolate=True`` (the default) runs **every repeat of every value in a fresh
interpreter** (``python -c`` starting ``gyreprof.analysis._sweep_worker``), so
memory peaks, caches, thread pools and allocator state do not bleed from one
run into the next, and a crash, an out-of-memory kill or a hang is reported
for that value while the sweep goes on. The factory must then be importable by
name: a ``'module:name'`` string, or a module-level function or class (one
defined in a script's ``__main__`` works: the script is re-imported without
running its ``if __name__ == "__main__":`` block). Lambdas and nested functions
are refused with a message saying so. ``fixed`` values must be picklable.

``timeout_s`` bounds each run (start-up, build, warm-up and measured calls);
a run past it is killed together with any processes it started, and its
error says where it was. The first failed run of a value ends that value
(its other repeats are skipped). ``isolate=False`` runs everything in this
process: faster to start, but peak RSS is this process's high-water mark so
far (it can never fall from one value to the next) and a hung run can only
be abandoned, not killed; the result says so.

Decisions
---------
Values are tried in ascending order. The sweep **stops** growing the value
when the throughput gain from the previous value is within ``flat_within``
(or negative) while peak memory (RSS, or CUDA memory) keeps rising — "flat
from" the previous value — or when a run's peak RSS crosses
``memory_limit``. The **recommended** value is the smallest one whose median
throughput is within ``flat_within`` of the best median among the values that
ran cleanly and stayed under the memory limit. The report states this as a
controlled result for the fixed settings it names, never as a universal
optimum, and warns when a fixed setting did not stay fixed (the sampler
reports a different value for a setting it was given, or observable thread and
process counts changed across values).

JSON schema (``SweepResult.to_dict()``, format ``"gyreprof.sweep/1"``)
----------------------------------------------------------------------
Top level: ``format``, ``gyreprof`` (version), ``factory`` (``"module:name"``),
``param``, ``values`` (asked, ascending), ``fixed`` (name → value; values JSON
cannot hold are their ``repr``), ``settings`` (``steps``, ``warmup``,
``repeats``, ``isolate``, ``flat_within``, ``memory_limit_bytes``,
``timeout_s``, ``phases``), ``environment`` (host, platform, python, cpu
counts, thread environment variables), ``stop_reason`` (``"flat"``,
``"memory_limit"`` or ``"end"``), ``stop_detail`` (plain words),
``stopped_at``, ``flat_from``, ``recommended`` (a value or null), ``skipped``
(values not tried), ``warnings`` (list of strings), ``report`` (the plain-words
report) and ``points``.

Each point: ``value``, ``status`` (``"ok"``, ``"error"``, ``"invalid"``,
``"crash"``, ``"timeout"``), ``error``, ``samples_per_s`` (median),
``spread`` (``[min, max]`` samples/s), ``peak_rss_bytes`` (median),
``gain`` (fraction vs the previous measured point, or null),
``not_distinguishable_from`` (neighbour values), ``over_memory_limit``,
``figures`` (name → ``{"median", "min", "max", "n"}`` for ``samples_per_s``,
``call_mean_ns``, ``call_p50_ns``, ``call_p99_ns``, ``call_max_ns``,
``samples_per_call``, ``sample_time_ns``, ``warmup_call_mean_ns``,
``first_call_ns``, ``peak_rss_bytes``, ``baseline_rss_bytes``,
``children_rss_bytes``, ``peak_gpu_bytes``), ``phases`` (phase → figure
dicts ``per_call_ns``, ``share``, ``p50_ns``, ``p99_ns``, ``count_per_call``)
and ``runs`` (one object per run with the raw figures of that run, its
``status``, ``error``, ``stage``, ``exit_code``, ``wall_s``, ``threads``,
``observed`` settings and ``notes``; ``summary`` holds the run's gyreprof
Summary dict when ``to_dict(summaries=True)``). Times are in ns, memory in
bytes, rates per second; missing numbers are ``NaN`` or null.
"""

from __future__ import annotations

import gc
import json
import math
import os
import pickle
import platform
import re
import socket
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gyreprof._version import __version__
from gyreprof.analysis._sweep_runner import (
    RESERVED,
    STAGE_WORDS,
    FactoryInfo,
    SweepUsageError,
    describe_target,
    factory_name,
    inspect_factory,
    load_target,
    parse_target,
    run_once,
)

__all__ = [
    "FORMAT",
    "Figure",
    "PhaseFigures",
    "SweepPoint",
    "SweepResult",
    "SweepRun",
    "SweepUsageError",
    "parse_bytes",
    "sweep",
]

FORMAT = "gyreprof.sweep/1"

# Peak memory "keeps rising" when it grows by more than both of these.
_MEM_RISE_FRACTION = 0.02
_MEM_RISE_MIN_BYTES = 1 << 20
# A run whose measured calls took less than this in total gives shaky figures.
_SHORT_RUN_NS = 20e6

_THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TORCH_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
)

_FIGURE_NAMES = (
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
_PHASE_FIELDS = ("per_call_ns", "share", "p50_ns", "p99_ns", "count_per_call")


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
        return {k: getattr(self, k).to_dict() for k in _PHASE_FIELDS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PhaseFigures:
        return cls(**{k: Figure.from_dict(d[k]) for k in _PHASE_FIELDS})


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
        """This run's value of figure ``name`` (see ``_FIGURE_NAMES``)."""
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
        figures = {name: Figure.of(r.figure(name) for r in good) for name in _FIGURE_NAMES}
        names: list[str] = []
        for r in good:
            for p in r.phases:
                if p not in names:
                    names.append(p)
        phases = {
            p: PhaseFigures(
                **{
                    k: Figure.of(r.phases[p].get(k) for r in good if p in r.phases)
                    for k in _PHASE_FIELDS
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
        runs = tuple(
            SweepRun.from_raw(r["value"], r["repeat"], r) for r in d.get("runs", [])
        )
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


# ------------------------------------------------------------------ validation


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


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    v = int(value.__index__())
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def _check_values(param: str, values: Any) -> tuple[int | float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(
            f"values must be a list of numbers for {param}, such as [8, 16, 32], got {values!r}"
        )
    out: list[int | float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "item"):
            raise ValueError(f"values must be numbers; {v!r} ({type(v).__name__}) is not")
        if not isinstance(v, (int, float)):
            v = v.item()
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"values must be numbers; {v!r} is not")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"values must be finite numbers, got {v!r}")
        out.append(v)
    if not out:
        raise ValueError(f"values is empty: give the {param} values to try, e.g. [8, 16, 32, 64]")
    for a, b in zip(out, out[1:]):  # noqa: B905 - py3.10 target
        if b == a:
            raise ValueError(f"values must not repeat; {a!r} appears twice in {out}")
        if b < a:
            raise ValueError(
                f"values must be sorted ascending (the sweep grows {param} and stops when it "
                f"stops paying off), but {b!r} comes after {a!r}; use {sorted(set(out))}"
            )
    return tuple(out)


def _check_fixed(param: str, fixed: Any) -> dict[str, Any]:
    if fixed is None:
        return {}
    if not isinstance(fixed, Mapping):
        raise ValueError(
            f"fixed must be a dict of the settings kept constant, e.g. {{'num_envs': 8}}, "
            f"got {type(fixed).__name__}"
        )
    out = {}
    for k, v in fixed.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"fixed keys must be keyword names, got {k!r}")
        if k in RESERVED:
            raise ValueError(
                f"{k!r} is reserved: the sweep passes its own Profiler as prof=; remove it "
                "from fixed"
            )
        out[k] = v
    if param in out:
        raise ValueError(
            f"{param!r} is both the swept parameter and in fixed={out!r}; a sweep changes "
            f"exactly one setting, so remove {param!r} from fixed"
        )
    return out


def _environment() -> dict[str, Any]:
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "thread_env": {k: os.environ[k] for k in _THREAD_ENV if k in os.environ},
    }


# ------------------------------------------------------------------ in-process runs


def _thread_frame(thread: threading.Thread) -> str | None:
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return None
    stack = traceback.extract_stack(frame)
    if not stack:
        return None
    last = stack[-1]
    return f"{last.name} ({os.path.basename(last.filename)}:{last.lineno})"


def _run_in_process(
    fn: Callable[..., Any],
    info: FactoryInfo,
    kwargs: Mapping[str, Any],
    *,
    param: str,
    steps: int,
    warmup: int,
    timeout_s: float | None,
) -> dict[str, Any]:
    state = {"stage": "build"}
    holder: dict[str, Any] = {}

    def stage(name: str) -> None:
        state["stage"] = name

    t0 = time.monotonic()
    common = dict(param=param, steps=steps, warmup=warmup, stage=stage, in_process=True)
    if timeout_s is None:
        raw = run_once(fn, info, kwargs, holder=holder, **common)  # type: ignore[arg-type]
    else:
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["raw"] = run_once(fn, info, kwargs, holder=holder, **common)  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["exc"] = exc

        th = threading.Thread(
            target=work, name=f"gyreprof-sweep {param}={kwargs.get(param)!r}", daemon=True
        )
        th.start()
        th.join(timeout_s)
        if th.is_alive():
            where = STAGE_WORDS.get(state["stage"], state["stage"])
            prof = holder.get("prof")
            at = ""
            if prof is not None and state["stage"] in ("warmup", "measure"):
                at = f" (call {prof.progress().step})"
            frame = _thread_frame(th)
            in_frame = f"; it was in {frame}" if frame else ""
            return {
                "status": "timeout",
                "stage": state["stage"],
                "error": (
                    f"timed out after {timeout_s:g} s during {where}{at}{in_frame}; the "
                    "in-process run was abandoned (a thread cannot be killed: it may still "
                    "be running; isolate=True kills hung runs)"
                ),
                "notes": [],
                "abandoned": True,
                "wall_s": time.monotonic() - t0,
            }
        if "exc" in box:
            raise box["exc"]
        raw = box["raw"]
    raw["wall_s"] = time.monotonic() - t0
    raw["exit_code"] = None
    gc.collect()
    return raw


# ------------------------------------------------------------------ decisions


def _mem_rising(prev: SweepPoint, cur: SweepPoint) -> bool:
    for name in ("peak_rss_bytes", "peak_gpu_bytes"):
        a, b = prev.figure(name).median, cur.figure(name).median
        if math.isnan(a) or math.isnan(b):
            continue
        if b - a > max(_MEM_RISE_MIN_BYTES, _MEM_RISE_FRACTION * a):
            return True
    return False


def _fmt_v(v: Any) -> str:
    from gyreprof.analysis._sweep_report import fmt_value

    return fmt_value(v)


def _stop_check(
    param: str,
    points: Sequence[SweepPoint],
    flat_within: float,
    memory_limit: int | None,
) -> tuple[str, str, int | float | None] | None:
    """(reason, detail, flat_from) when the sweep should stop after the last point."""
    from gyreprof.analysis._sweep_report import fmt_bytes, fmt_gain

    cur = points[-1]
    if not cur.measured:
        return None
    if memory_limit is not None:
        peak = cur.figure("peak_rss_bytes").max
        if not math.isnan(peak) and peak > memory_limit:
            return (
                "memory_limit",
                f"stopped at {param}={_fmt_v(cur.value)}: peak RSS {fmt_bytes(peak)} crossed "
                f"memory_limit={fmt_bytes(memory_limit)}",
                None,
            )
    if not cur.ok:
        return None
    prev = next((p for p in reversed(points[:-1]) if p.ok), None)
    if prev is None or not prev.samples_per_s > 0:
        return None
    gain = cur.samples_per_s / prev.samples_per_s - 1.0
    if gain <= flat_within and _mem_rising(prev, cur):
        a, b = prev.figure("peak_rss_bytes").median, cur.figure("peak_rss_bytes").median
        what = "fell" if gain < 0 else "changed"
        mem = (
            f"peak RSS rose {fmt_bytes(a)} -> {fmt_bytes(b)}"
            if b > a
            else "peak GPU memory rose"
        )
        return (
            "flat",
            f"stopped after {param}={_fmt_v(cur.value)}: throughput {what} {fmt_gain(gain)} from "
            f"{_fmt_v(prev.value)} (within flat_within={flat_within:.0%}) while {mem}",
            prev.value,
        )
    return None


def _recommend(points: Sequence[SweepPoint], flat_within: float) -> int | float | None:
    eligible = [p for p in points if p.ok and not p.over_memory_limit and p.samples_per_s > 0]
    if not eligible:
        return None
    best = max(p.samples_per_s for p in eligible)
    for p in eligible:
        if p.samples_per_s >= best * (1.0 - flat_within):
            return p.value
    return None  # pragma: no cover - the best itself always qualifies


def _finish_points(
    points: list[SweepPoint], memory_limit: int | None
) -> list[SweepPoint]:
    """Fill in gains, distinguishability and the memory-limit marks."""
    measured = [p for p in points if p.measured and not math.isnan(p.samples_per_s)]
    out = []
    for p in points:
        gain = None
        nd: list[int | float] = []
        if p in measured:
            i = measured.index(p)
            prev = measured[i - 1] if i > 0 else None
            nxt = measured[i + 1] if i + 1 < len(measured) else None
            if prev is not None and prev.samples_per_s > 0:
                gain = p.samples_per_s / prev.samples_per_s - 1.0
            spread = p.spread[1] - p.spread[0]
            for n in (prev, nxt):
                if n is not None and spread > abs(p.samples_per_s - n.samples_per_s):
                    nd.append(n.value)
        over = False
        if memory_limit is not None:
            peak = p.figure("peak_rss_bytes").max
            over = not math.isnan(peak) and peak > memory_limit
        out.append(replace(p, gain=gain, not_distinguishable_from=tuple(nd), over_memory_limit=over))
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return bool(a == b)


def _warnings(
    param: str,
    fixed: Mapping[str, Any],
    points: Sequence[SweepPoint],
    *,
    isolate: bool,
    repeats: int,
    abandoned: int,
) -> list[str]:
    out: list[str] = []
    fv = _fmt_v
    # settings the sampler reports about itself
    keys: list[str] = []
    for p in points:
        for r in p.runs:
            for k in r.observed:
                if k not in keys:
                    keys.append(k)
    for key in keys:
        mismatches = []
        seen: dict[Any, Any] = {}
        for p in points:
            passed = p.value if key == param else fixed.get(key)
            for r in p.runs:
                if key in r.observed:
                    obs = r.observed[key]
                    seen.setdefault(p.value, obs)
                    if not _same(obs, passed):
                        mismatches.append((p.value, passed, obs))
                        break
        if mismatches:
            shown = ", ".join(
                f"{key}={fv(o)} at {param}={fv(v)}" + ("" if key == param else f" (passed {fv(pa)})")
                for v, pa, o in mismatches[:4]
            )
            more = f" and {len(mismatches) - 4} more" if len(mismatches) > 4 else ""
            if key == param:
                out.append(
                    f"the sampler reports a different {param} than the sweep passed: {shown}"
                    f"{more}; the figures are labelled with the values passed"
                )
            else:
                out.append(
                    f"fixed setting {key} did not stay fixed: the sampler reports {shown}{more}; "
                    "the factory changed a setting it was given"
                )
        elif key != param and len({repr(v) for v in seen.values()}) > 1:
            shown = ", ".join(f"{fv(v)}: {fv(o)}" for v, o in seen.items())
            out.append(f"fixed setting {key} changed across values ({param} {shown})")
    # observable parallelism
    tkeys: list[str] = []
    for p in points:
        for r in p.runs:
            for k in r.threads:
                if k not in tkeys:
                    tkeys.append(k)
    for key in tkeys:
        per_value: dict[int | float, list[int]] = {}
        for p in points:
            vals = sorted({r.threads[key] for r in p.runs if r.ok and key in r.threads})
            if vals:
                per_value[p.value] = vals
        distinct = {v for vals in per_value.values() for v in vals}
        if len(distinct) > 1:
            shown = ", ".join(
                f"{fv(v)}: {'/'.join(str(x) for x in vals)}" for v, vals in per_value.items()
            )
            out.append(
                f"{key.replace('_', ' ')} changed across values ({param} {shown}): expected if "
                f"{param} sets how many workers run; otherwise something besides {param} "
                "changed the parallelism"
            )
    if not isolate:
        out.append(
            "isolate=False: every value ran in this process, so peak RSS is this process's "
            "high-water mark so far (it cannot fall from one value to the next, and includes "
            "earlier values and whatever ran before the sweep); use isolate=True for "
            "per-value peaks"
        )
    if abandoned:
        out.append(
            f"{abandoned} in-process run(s) timed out and were abandoned; their threads may "
            "still run and slow the runs measured after them"
        )
    if repeats == 1:
        out.append(
            "repeats=1: there is no spread, so differences between values cannot be judged "
            "against run-to-run noise; use repeats=3 or more"
        )
    short = [
        p.value
        for p in points
        if p.measured and p.figure("sample_time_ns").median < _SHORT_RUN_NS
    ]
    if short:
        out.append(
            f"the measured calls took less than {_SHORT_RUN_NS / 1e6:.0f} ms per run at "
            f"{param}={', '.join(fv(v) for v in short)}: raise steps for steadier figures"
        )
    for p in points:
        notes: list[str] = []
        for r in p.runs:
            for n in r.notes:
                if n not in notes:
                    notes.append(n)
        for n in notes:
            out.append(f"{param}={fv(p.value)}: {n}")
    return out


# ------------------------------------------------------------------ sweep


def sweep(
    factory: Callable[..., Any] | str,
    param: str,
    values: Sequence[int | float],
    *,
    fixed: Mapping[str, Any] | None = None,
    steps: int = 200,
    warmup: int = 20,
    repeats: int = 3,
    isolate: bool = True,
    memory_limit: int | float | str | None = None,
    flat_within: float = 0.05,
    timeout_s: float | None = None,
    progress: bool = True,
    phases: Sequence[str] | None = None,
) -> SweepResult:
    """Sweep ``param`` over ``values`` with everything in ``fixed`` held constant.

    Parameters
    ----------
    factory: builds the sampler: ``factory(**fixed, **{param: value})`` (plus
        ``prof=`` when it takes one). A callable, or ``'module:name'``.
    param: the one setting that changes (a keyword of the factory).
    values: the values to try, ascending, no repeats.
    fixed: settings passed unchanged to every build; the report names them.
    steps: measured sampler calls per run. warmup: calls before them, excluded
        from the figures and reported apart.
    repeats: runs per value; figures are the median and min..max over them.
    isolate: run every repeat of every value in a fresh interpreter (see the
        module docstring); False runs them in this process.
    memory_limit: stop once a run's peak RSS exceeds this (bytes, or text such
        as ``'8GiB'``). It is a stop rule on the measured peak, not a hard cap.
    flat_within: relative throughput gain (0.05 = 5%) below which growing the
        value no longer pays, when memory keeps rising.
    timeout_s: seconds each run may take (isolate=True: the process is killed).
    progress: show progress on stderr (a rich bar when rich is installed and
        stderr is a terminal, plain lines otherwise).
    phases: the phase names the sampler records, when the factory does not
        declare them itself (``factory.phases``).

    Returns a :class:`SweepResult`. Bad arguments raise ValueError/TypeError
    before anything runs; a factory that cannot be imported raises ValueError
    naming it. Everything that goes wrong while building or running the
    sampler for a value is reported for that value, and the sweep goes on.
    """
    if not isinstance(param, str) or not param.isidentifier():
        raise ValueError(f"param must be the factory's keyword name as text, got {param!r}")
    if param in RESERVED:
        raise ValueError(f"{param!r} is reserved (the sweep passes its Profiler as prof=)")
    vals = _check_values(param, values)
    fixed_d = _check_fixed(param, fixed)
    steps = _check_int("steps", steps, 1)
    warmup = _check_int("warmup", warmup, 0)
    repeats = _check_int("repeats", repeats, 1)
    try:
        fw = float(flat_within)
    except (TypeError, ValueError):
        raise TypeError(f"flat_within must be a fraction such as 0.05, got {flat_within!r}") from None
    if not 0.0 <= fw < 1.0:
        raise ValueError(f"flat_within must be a fraction in [0, 1) such as 0.05, got {flat_within!r}")
    mem_limit = None if memory_limit is None else parse_bytes(memory_limit)
    if timeout_s is not None:
        try:
            timeout_s = float(timeout_s)
        except (TypeError, ValueError):
            raise TypeError(f"timeout_s must be seconds or None, got {timeout_s!r}") from None
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    phases_override = None if phases is None else list(phases)

    name = factory_name(factory)
    fn: Callable[..., Any] | None = None
    info: FactoryInfo | None = None
    target: dict[str, Any] | None = None
    if isinstance(factory, str):
        parse_target(factory)
        if isolate:
            target = describe_target(factory)
        else:
            module, qualname = parse_target(factory)
            fn = load_target({"module": module, "qualname": qualname})
    else:
        if not callable(factory):
            raise TypeError(
                f"factory must be a callable or 'module:name', got {type(factory).__name__}"
            )
        fn = factory
        if isolate:
            target = describe_target(factory)
    if fn is not None:
        info = inspect_factory(fn, param, list(fixed_d), phases_override)
    if isolate:
        try:
            pickle.dumps(fixed_d)
        except Exception as exc:  # noqa: BLE001 - any pickling failure means the same
            raise ValueError(
                f"isolate=True sends fixed settings to a fresh process, but they cannot be "
                f"pickled ({type(exc).__name__}: {exc}); pass plain values, or use isolate=False"
            ) from None

    from gyreprof.analysis._sweep_progress import SweepProgress

    bar = SweepProgress(
        enabled=bool(progress), total=len(vals) * repeats, title=f"sweep {param}"
    )
    points: list[SweepPoint] = []
    skipped: tuple[int | float, ...] = ()
    stop: tuple[str, str, int | float | None] | None = None
    stopped_at: int | float | None = None
    abandoned = 0
    try:
        for idx, value in enumerate(vals):
            runs: list[SweepRun] = []
            kwargs = {**fixed_d, param: value}
            for r in range(repeats):
                bar.start(f"{param}={_fmt_v(value)}" + (f" run {r + 1}/{repeats}" if repeats > 1 else ""))
                if target is not None:
                    from gyreprof.analysis._sweep_isolate import run_isolated

                    raw = run_isolated(
                        target,
                        kwargs,
                        param=param,
                        steps=steps,
                        warmup=warmup,
                        phases=phases_override,
                        timeout_s=timeout_s,
                    )
                else:
                    assert fn is not None and info is not None
                    raw = _run_in_process(
                        fn, info, kwargs, param=param, steps=steps, warmup=warmup,
                        timeout_s=timeout_s,
                    )
                    abandoned += bool(raw.get("abandoned"))
                if raw.get("status") == "usage":
                    raise SweepUsageError(str(raw.get("error")))
                run = SweepRun.from_raw(value, r, raw)
                runs.append(run)
                bar.done(_run_line(run))
                if not run.ok:
                    bar.skip(repeats - r - 1)
                    break
            points.append(SweepPoint.from_runs(value, runs))
            stop = _stop_check(param, points, fw, mem_limit)
            if stop is not None:
                stopped_at = value
                skipped = vals[idx + 1 :]
                break
    finally:
        bar.close()
    done = _finish_points(points, mem_limit)
    if stop is None:
        reason = "end"
        detail = f"ran every value ({', '.join(_fmt_v(v) for v in vals)})"
        last = [p for p in done if p.ok]
        if len(last) >= 2 and last[-1].gain is not None and last[-1].gain > fw:
            from gyreprof.analysis._sweep_report import fmt_gain

            detail += (
                f"; throughput was still rising at the largest value ({fmt_gain(last[-1].gain)} "
                f"from {_fmt_v(last[-2].value)}): larger values may pay off"
            )
        flat_from = None
    else:
        reason, detail, flat_from = stop
        if skipped:
            detail += f"; not tried: {', '.join(_fmt_v(v) for v in skipped)}"
    settings = {
        "steps": steps,
        "warmup": warmup,
        "repeats": repeats,
        "isolate": bool(isolate),
        "flat_within": fw,
        "memory_limit_bytes": mem_limit,
        "timeout_s": timeout_s,
        "phases": list(info.phases) if info is not None else phases_override,
    }
    if info is None:  # isolated 'module:name': the runs saw the phase names
        for p in done:
            for r in p.runs:
                names = [n for n in r.phases if n != "(other)"]
                if names:
                    settings["phases"] = names
                    break
    return SweepResult(
        param=param,
        values=vals,
        fixed=fixed_d,
        points=tuple(done),
        stop_reason=reason,
        stop_detail=detail,
        stopped_at=stopped_at,
        flat_from=flat_from,
        recommended=_recommend(done, fw),
        skipped=tuple(skipped),
        warnings=tuple(
            _warnings(param, fixed_d, done, isolate=isolate, repeats=repeats, abandoned=abandoned)
        ),
        factory=name,
        settings=settings,
        environment=_environment(),
    )


def _run_line(run: SweepRun) -> str:
    from gyreprof._format import fmt_rate

    if run.ok:
        return f"{fmt_rate(run.samples_per_s)} samples"
    return f"{run.status}: {run.error}"
