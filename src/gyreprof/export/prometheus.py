"""OpenMetrics 1.0 text (and a prometheus_client collector) from a run's histograms.

Families (``gyreprof`` is the default namespace):

- ``gyreprof_phase_seconds`` histogram, label ``phase``: steady-state phase durations;
- ``gyreprof_step_seconds`` histogram: whole steps;
- counters ``gyreprof_steps_total``, ``gyreprof_overwritten_events_total``,
  ``gyreprof_out_of_range_events_total``, ``gyreprof_ignored_durations_total{reason}``
  and ``gyreprof_counter_total{name}`` (the ``prof.count`` counters);
- gauges ``gyreprof_steps_per_second``, ``gyreprof_overhead_ratio``,
  ``gyreprof_warmup_steps``; info ``gyreprof_build_info{version}``.

Bucket counts come from the HDR histogram: a histogram bucket counts under a
bound when its midpoint -- the value percentiles report -- is at or below the
bound, so ``percentile(q) <= le`` exactly when the cumulative count reaches the
rank of ``q``. Bounds not on a bucket edge are thus exact to the histogram's
precision (0.05% at 3 significant figures). Default bounds are a 1-2-5 series in
seconds that spans the recorded data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gyreprof._support.errors import InvalidValueError
from gyreprof._version import __version__
from gyreprof.export._source import Resolved, require_histograms, resolve
from gyreprof.model.summary import PhaseStats, Summary
from gyreprof.recording.source import is_profiler

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

_METRIC_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED_LABELS = {"le", "phase", "reason", "name", "version"}


@dataclass
class Family:
    """One metric family: its samples are (full sample name, labels, value)."""

    name: str
    type: str  # "histogram", "counter", "gauge" or "info"
    help: str
    unit: str = ""
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


# --------------------------------------------------------------------- buckets


def _one_two_five(lo_s: float, hi_s: float) -> list[float]:
    """1-2-5 series from the largest value <= lo_s to the smallest value >= hi_s."""
    e_lo = math.floor(math.log10(lo_s))
    e_hi = math.ceil(math.log10(hi_s))
    series = [float(f"{m}e{e}") for e in range(e_lo - 1, e_hi + 1) for m in (1, 2, 5)]
    start = max(i for i, v in enumerate(series) if v <= lo_s)
    stop = min(i for i, v in enumerate(series) if v >= hi_s)
    return series[start : stop + 1]


def default_buckets_s(summary: Summary, *, include_step: bool = True) -> list[float]:
    """Default upper bounds (seconds): a 1-2-5 series spanning every recorded min..max."""
    lows, highs = [], []
    rows: list[PhaseStats] = list(summary.phases.values())
    if include_step:
        rows.append(summary.step)
    for st in rows:
        if st.count and not math.isnan(st.min):
            lows.append(max(st.min, 1.0))
            highs.append(max(st.max, 1.0))
    if not lows:
        return [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]
    return _one_two_five(min(lows) / 1e9, max(highs) / 1e9)


def check_buckets(buckets_s: Iterable[float]) -> list[float]:
    """Validate upper bounds in seconds: finite, positive, strictly increasing."""
    try:
        out = [float(b) for b in buckets_s]
    except (TypeError, ValueError):
        raise InvalidValueError(
            f"buckets_s must be numbers of seconds, got {buckets_s!r}"
        ) from None
    if not out:
        raise InvalidValueError(
            "buckets_s needs at least one bound (seconds); +Inf is added for you"
        )
    for b in out:
        if not math.isfinite(b) or b <= 0:
            raise InvalidValueError(f"bucket bounds must be finite positive seconds, got {b!r}")
    if any(b2 <= b1 for b1, b2 in zip(out, out[1:], strict=False)):
        raise InvalidValueError(f"bucket bounds must be strictly increasing, got {out}")
    return out


def bucket_counts(stats: PhaseStats, buckets_s: Sequence[float]) -> list[int]:
    """Cumulative counts at each bound (seconds) of one phase; the +Inf count is ``stats.count``.

    A histogram bucket counts under a bound when its midpoint is at or below the bound.
    """
    if stats.count == 0:
        return [0] * len(buckets_s)
    hist = stats.histogram
    if hist is None:
        raise InvalidValueError("these PhaseStats carry no histogram; bucket counts need one")
    mid = hist.midpoints
    cum = np.cumsum(hist.counts)
    bounds_ns = np.asarray(buckets_s, dtype=np.float64) * 1e9
    # floating point: 5e-06 s * 1e9 is 4999.999..., so allow a relative hair
    idx = np.searchsorted(mid, bounds_ns * (1 + 1e-12), side="right")
    return [int(cum[i - 1]) if i > 0 else 0 for i in idx.tolist()]


# -------------------------------------------------------------------- families


def _check_names(namespace: str, labels: Mapping[str, str] | None) -> dict[str, str]:
    if not isinstance(namespace, str) or not _METRIC_RE.match(namespace):
        raise InvalidValueError(
            f"namespace must be a metric name prefix like 'gyreprof' "
            f"([a-zA-Z_:][a-zA-Z0-9_:]*), got {namespace!r}"
        )
    const = {}
    for k, v in (labels or {}).items():
        if not isinstance(k, str) or not _LABEL_RE.match(k) or k.startswith("__"):
            raise InvalidValueError(f"label names must match [a-zA-Z_][a-zA-Z0-9_]*, got {k!r}")
        if k in _RESERVED_LABELS:
            raise InvalidValueError(
                f"label {k!r} is used by gyreprof's own series; pick another name"
            )
        const[k] = str(v)
    return const


def _created_s(res: Resolved) -> float | None:
    off = res.unix_offset_ns
    start = res.steady_start_ns or res.start_ns
    if off is None or start is None:
        return None
    return (start + off) / 1e9


# suffix -> (type, help, unit): every family gyreprof may emit
_SPECS: dict[str, tuple[str, str, str]] = {
    "phase_seconds": (
        "histogram",
        "Steady-state duration of each phase of a step (warm-up excluded).",
        "seconds",
    ),
    "step_seconds": (
        "histogram",
        "Steady-state duration of whole steps (begin to next begin/end).",
        "seconds",
    ),
    "steps": ("counter", "Steady-state steps completed.", ""),
    "overwritten_events": (
        "counter",
        "Events overwritten in the ring buffer (histograms still count them).",
        "",
    ),
    "out_of_range_events": (
        "counter",
        "Durations above the histogram range (clamped into the top bucket).",
        "",
    ),
    "ignored_durations": (
        "counter",
        "Durations not recorded because they were negative or not finite.",
        "",
    ),
    "counter": ("counter", "Event counters of the profiled loop (Profiler.count).", ""),
    "steps_per_second": ("gauge", "Steady-state steps per second.", ""),
    "overhead_ratio": ("gauge", "Estimated share of wall time the profiler took.", ""),
    "warmup_steps": ("gauge", "Steps excluded as warm-up.", ""),
    "build": ("info", "gyreprof version that produced these metrics.", ""),
}


def _family(namespace: str, suffix: str) -> Family:
    typ, help_, unit = _SPECS[suffix]
    return Family(f"{namespace}_{suffix}", typ, help_, unit)


def families(
    summary: Summary,
    *,
    buckets_s: Sequence[float] | None = None,
    namespace: str = "gyreprof",
    labels: Mapping[str, str] | None = None,
    created_s: float | None = None,
    include_step: bool = True,
) -> list[Family]:
    """The metric families of a Summary (shared by :func:`openmetrics` and the collector)."""
    const = _check_names(namespace, labels)
    bounds = (
        check_buckets(buckets_s)
        if buckets_s is not None
        else default_buckets_s(summary, include_step=include_step)
    )
    out: list[Family] = []

    def hist(fam: Family, st: PhaseStats, lab: dict[str, str]) -> None:
        base = fam.name
        for b, c in zip(bounds, bucket_counts(st, bounds), strict=True):
            fam.samples.append((base + "_bucket", {**lab, "le": _fmt(b)}, c))
        fam.samples.append((base + "_bucket", {**lab, "le": "+Inf"}, st.count))
        fam.samples.append((base + "_count", lab, st.count))
        fam.samples.append((base + "_sum", lab, st.sum_ns / 1e9))
        if created_s is not None:
            fam.samples.append((base + "_created", lab, created_s))

    ph = _family(namespace, "phase_seconds")
    for name, st in summary.phases.items():
        if st.count:
            hist(ph, st, {**const, "phase": name})
    out.append(ph)
    if include_step and summary.step.count:
        step = _family(namespace, "step_seconds")
        hist(step, summary.step, dict(const))
        out.append(step)

    def counter(suffix: str, values: Iterable[tuple[dict[str, str], float]]) -> None:
        fam = _family(namespace, suffix)
        for lab, v in values:
            fam.samples.append((fam.name + "_total", {**const, **lab}, v))
            if created_s is not None:
                fam.samples.append((fam.name + "_created", {**const, **lab}, created_s))
        out.append(fam)

    counter("steps", [({}, summary.steps)])
    counter("overwritten_events", [({}, summary.overwritten)])
    counter("out_of_range_events", [({}, summary.out_of_range)])
    counter(
        "ignored_durations",
        [({"reason": "negative"}, summary.negative), ({"reason": "nonfinite"}, summary.nonfinite)],
    )
    if summary.counters:
        counter("counter", [({"name": k}, v) for k, v in summary.counters.items()])
    for suffix, value in (
        ("steps_per_second", summary.steps_per_s),
        ("overhead_ratio", summary.overhead_share),
        ("warmup_steps", summary.warmup.steps),
    ):
        fam = _family(namespace, suffix)
        fam.samples.append((fam.name, dict(const), float(value)))
        out.append(fam)
    info = _family(namespace, "build")
    info.samples.append((info.name + "_info", {**const, "version": __version__}, 1))
    out.append(info)
    return out


# ------------------------------------------------------------------------ text


def _fmt(v: float) -> str:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f.is_integer() and abs(f) < 1e15:
        return f"{f:.1f}"
    return repr(f)


# control characters (C0 but the line feed, DEL, C1), lone surrogates and the Unicode
# line separators: never written raw (a terminal escape in a phase name reached the
# scraper and whoever reads the text)
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _esc_control(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\\\x{c:02x}" if c < 0x100 else f"\\\\u{c:04x}"


def _esc(v: str) -> str:
    """A label value or HELP text as OpenMetrics writes it: backslash, double quote and
    line feed escaped (the spec's three escapes); any other control character written
    as the text ``\\xNN`` / ``\\uNNNN`` (an escaped backslash, so a parser reads the
    same printable text: ``"\\x1b[31m"``)."""
    out = v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return _CONTROL.sub(_esc_control, out)


def render(fams: Sequence[Family]) -> str:
    """OpenMetrics text of some families, ending with ``# EOF``."""
    lines = []
    for fam in fams:
        lines.append(f"# TYPE {fam.name} {fam.type}")
        if fam.unit:
            lines.append(f"# UNIT {fam.name} {fam.unit}")
        lines.append(f"# HELP {fam.name} {_esc(fam.help)}")
        for sname, lab, value in fam.samples:
            if lab:
                body = ",".join(f'{k}="{_esc(v)}"' for k, v in lab.items())
                lines.append(f"{sname}{{{body}}} {_fmt(value)}")
            else:
                lines.append(f"{sname} {_fmt(value)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def openmetrics(
    source: Any,
    *,
    buckets_s: Sequence[float] | None = None,
    namespace: str = "gyreprof",
    labels: Mapping[str, str] | None = None,
    include_step: bool = True,
) -> str:
    """OpenMetrics 1.0 text (``CONTENT_TYPE``) of a Profiler, Snapshot, Summary or saved file.

    ``buckets_s``: histogram upper bounds in seconds (default: a 1-2-5 series
    spanning the data). ``labels``: constant labels added to every series
    (e.g. ``{"worker": "3"}``). Raises ValueError when nothing was recorded.
    """
    res = resolve(source, what="OpenMetrics")
    require_histograms(res.summary, "OpenMetrics")
    fams = families(
        res.summary,
        buckets_s=buckets_s,
        namespace=namespace,
        labels=labels,
        created_s=_created_s(res),
        include_step=include_step,
    )
    return render(fams)


class GyreprofCollector:
    """A prometheus_client collector: ``REGISTRY.register(GyreprofCollector(prof))``.

    Every scrape takes a fresh snapshot of ``source`` (a Profiler, or any
    callable returning a Snapshot or Summary). Needs the ``prom`` extra.
    A profiler that recorded nothing yet scrapes as zero counters, not an error.
    """

    def __init__(
        self,
        source: Any,
        *,
        buckets_s: Sequence[float] | None = None,
        namespace: str = "gyreprof",
        labels: Mapping[str, str] | None = None,
        include_step: bool = True,
    ) -> None:
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise ImportError(
                "GyreprofCollector needs prometheus_client: pip install 'gyreprof[prom]'"
            ) from None
        self._source = source
        self._buckets = check_buckets(buckets_s) if buckets_s is not None else None
        self._namespace = namespace
        self._labels = _check_names(namespace, labels)
        self._include_step = include_step

    def _resolved(self) -> Resolved | None:
        src = self._source
        if not is_profiler(src) and callable(src):
            src = src()
        res = resolve(src, what="a Prometheus scrape", allow_empty=True)
        return None if res.nothing_to_read else res  # per_thread=True, no thread wrote yet

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import Metric

        res = self._resolved()
        if res is None:
            return
        fams = families(
            res.summary,
            buckets_s=self._buckets,
            namespace=self._namespace,
            labels=self._labels,
            created_s=_created_s(res),
            include_step=self._include_step,
        )
        for fam in fams:
            m = Metric(fam.name, fam.help, fam.type, fam.unit)
            for sname, lab, value in fam.samples:
                m.add_sample(sname, lab, float(value))
            yield m

    def describe(self) -> Iterable[Any]:
        """The families this collector may emit, without taking a snapshot."""
        from prometheus_client.core import Metric

        for suffix in _SPECS:
            fam = _family(self._namespace, suffix)
            yield Metric(fam.name, fam.help, fam.type, fam.unit)


__all__ = [
    "CONTENT_TYPE",
    "Family",
    "GyreprofCollector",
    "bucket_counts",
    "check_buckets",
    "default_buckets_s",
    "families",
    "openmetrics",
    "render",
]
