"""What a sweep measured: runs, points, the whole result and its JSON form.

Every type here lists its fields once; ``to_dict``/``from_dict`` go through the
project's codec, :mod:`gyreprof.model._serial` (the JSON schema is in the package
docstring; see :mod:`gyreprof.analysis.sweep.record` for what the sweep adds).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gyreprof._support import forms as _forms
from gyreprof._support import io as _io
from gyreprof._support.errors import InvalidValueError, MissingKeyError
from gyreprof.analysis.sweep.record import (
    FIGURE_NAMES,
    RunResult,
    as_json_value,
    drop_summaries,
)
from gyreprof.model._serial import (
    Record,
    SerialError,
    decode,
    encode,
    from_plain,
    plain,
    serial_format,
)

FORMAT = "gyreprof.sweep/2"
#: /1 wrote a missing figure as the string "nan"; /2 writes null (gyreprof.model._serial)
FORMAT_V1 = "gyreprof.sweep/1"
READABLE_FORMATS = (FORMAT, FORMAT_V1)

PHASE_FIELDS = ("per_call_ns", "share", "p50_ns", "p99_ns", "count_per_call")


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


@dataclass(frozen=True)
class Figure(Record, ignore_unknown=True):
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


_NO_FIGURE = Figure(math.nan, math.nan, math.nan, 0)


@dataclass(frozen=True)
class PhaseFigures(Record, ignore_unknown=True):
    """A sampler phase at one value: time per call (ns), share of call time, event p50/p99."""

    per_call_ns: Figure
    share: Figure
    p50_ns: Figure
    p99_ns: Figure
    count_per_call: Figure


@dataclass(frozen=True)
class SweepRun(RunResult, Record, ignore_unknown=True):
    """One run of a sweep: a :class:`RunResult` labelled with its value and repeat."""

    value: int | float = 0
    repeat: int = 0

    @classmethod
    def of(cls, value: int | float, repeat: int, run: RunResult) -> SweepRun:
        return cls(
            value=value,
            repeat=int(repeat),
            **{f.name: getattr(run, f.name) for f in fields(RunResult)},
        )

    @property
    def summary(self) -> Any:
        """The run's gyreprof ``Summary`` (per-call histogram, phases, warm-up), or None."""
        if self.summary_data is None:
            return None
        from gyreprof.model.summary import Summary

        return Summary.from_dict(self.summary_data)

    def to_dict(self, *, summary: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = plain(self, default=as_json_value)
        return out if summary else drop_summaries(out)


@dataclass(frozen=True)
class SweepPoint(Record):
    """One value of the swept setting, over its repeats.

    ``samples_per_s`` and ``peak_rss_bytes`` (the measuring process alone; see
    ``peak_tree_rss_bytes`` for the whole sampler, worker processes included) are
    medians over the runs that succeeded, ``spread`` the (min, max) samples/s;
    ``figures`` holds every
    figure as a :class:`Figure`, ``phases`` the sampler's phases (with
    ``(other)``). ``error`` says what went wrong when ``status`` is not ``"ok"``
    (figures of the runs that did succeed are kept). ``gain`` is the throughput
    change from the previous measured value (a fraction), and
    ``not_distinguishable_from`` the neighbour values it cannot be told apart
    from by the sweep's distinguishability test (``decide.distinguishable``).
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

    @property
    def peak_tree_rss_bytes(self) -> int | None:
        """Median peak RSS of the whole sampler: the measuring process and its workers."""
        f = self.figures.get("peak_tree_rss_bytes", _NO_FIGURE)
        return None if math.isnan(f.median) else int(f.median)

    def memory_figure(self) -> Figure:
        """The memory the stop rule and ``memory_limit`` judge: the whole sampler's peak
        RSS (falls back to the measuring process's for results read from older files)."""
        tree = self.figure("peak_tree_rss_bytes")
        return tree if tree.n else self.figure("peak_rss_bytes")

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
        out: dict[str, Any] = plain(self, default=as_json_value)
        return out if summaries else drop_summaries(out)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepPoint:
        return from_plain(cls, d, where="point", ignore_unknown=True)


@serial_format(FORMAT, reads=(FORMAT_V1,), writer="gyreprof")
@dataclass(frozen=True)
class SweepResult(Record):
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
        raise MissingKeyError(
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
        return _forms.text("sweep.report_text", self)

    def headline(self) -> str:
        """The one-sentence summary (first line of ``report()``)."""
        return _forms.text("sweep.headline", self)

    def table(self) -> str:
        """Aligned text table: one row per value, then the phase breakdown if any."""
        return _forms.text("sweep.table_text", self)

    def __str__(self) -> str:
        return _forms.text("sweep.text", self)

    # -- machine-readable ----------------------------------------------------------

    def to_dict(self, *, summaries: bool = False) -> dict[str, Any]:
        """JSON-ready dict (schema in this module's docstring); ``summaries=True`` adds
        each run's gyreprof Summary."""
        out = encode(self, default=as_json_value)
        if not summaries:
            drop_summaries(out)
        out["report"] = self.report()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepResult:
        """Rebuild from ``to_dict()`` output; ValueError on anything malformed."""
        if not isinstance(d, Mapping) or d.get("format") not in READABLE_FORMATS:
            got = d.get("format") if isinstance(d, Mapping) else type(d).__name__
            raise SerialError(
                f"not a gyreprof sweep result: format {got!r}, expected one of "
                f"{list(READABLE_FORMATS)}"
            )
        try:  # "gyreprof" (the writer's version), "report" and newer fields are skipped
            return decode(cls, d, ignore_unknown=True)
        except SerialError as exc:
            raise SerialError(f"not a valid gyreprof sweep result: {exc}") from None

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> SweepResult:
        """Parse JSON text, or read a file when given a path."""
        text = str(text_or_path)
        if isinstance(text_or_path, os.PathLike) or not text.lstrip().startswith("{"):
            text = _io.read_text(text_or_path, "summary", what="sweep result file")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SerialError(f"not a valid gyreprof sweep result: bad JSON ({exc})") from None
        return cls.from_dict(data)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """One row per value: medians and spreads of every figure, then per-phase columns."""
        return _forms.text("csv.write", _forms.text("sweep.csv_text", self), path)

    def to_plot(self, path: str | os.PathLike[str]) -> Path:
        """Write a PNG: samples/s (median, min-max bars) and peak memory against the value,
        the stop point and the recommendation marked. Needs matplotlib (``gyreprof[plot]``)."""
        return _forms.path("sweep.plot", self, path)


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
        raise InvalidValueError(f"a memory size must be bytes or text like '2GiB', got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value <= 0:
            raise InvalidValueError(
                f"a memory size must be a positive number of bytes, got {value!r}"
            )
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _BYTE_UNITS:
            n = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
            if n > 0:
                return int(n)
    raise InvalidValueError(
        f"a memory size must be bytes or text like '2GiB', '1.5GB', '512MiB', got {value!r}"
    )
