"""The sweep's decisions: when to stop, what to recommend, what to warn about.

The recommendation rule and the distinguishability test are in ``rule``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gyreprof._support.format import fmt_bytes, fmt_change_pct
from gyreprof.analysis.sweep.result import SweepPoint
from gyreprof.analysis.sweep.rule import distinguishable, noise
from gyreprof.analysis.sweep.words import fmt_value

# Peak memory "keeps rising" when it grows by more than both of these.
MEM_RISE_FRACTION = 0.02
MEM_RISE_MIN_BYTES = 1 << 20
# A run whose measured calls took less than this in total gives shaky figures.
SHORT_RUN_NS = 20e6


def mem_rising(prev: SweepPoint, cur: SweepPoint) -> bool:
    """Peak memory of the whole sampler (RSS of the process tree, or CUDA) rose."""
    for a, b in (
        (prev.memory_figure().median, cur.memory_figure().median),
        (prev.figure("peak_gpu_bytes").median, cur.figure("peak_gpu_bytes").median),
    ):
        if math.isnan(a) or math.isnan(b):
            continue
        if b - a > max(MEM_RISE_MIN_BYTES, MEM_RISE_FRACTION * a):
            return True
    return False


def stop_check(
    param: str,
    points: Sequence[SweepPoint],
    flat_within: float,
    memory_limit: int | None,
) -> tuple[str, str, int | float | None] | None:
    """(reason, detail, flat_from) when the sweep should stop after the last point."""
    cur = points[-1]
    if memory_limit is not None and not cur.measured:
        # a run that died (often the out-of-memory killer) after its process tree had
        # crossed the limit: larger values would only die too
        seen = max((r.rss_seen_bytes or 0 for r in cur.runs), default=0)
        if seen > memory_limit:
            return (
                "memory_limit",
                f"stopped at {param}={fmt_value(cur.value)}: the run failed after its processes "
                f"reached {fmt_bytes(seen)}, above memory_limit={fmt_bytes(memory_limit)}",
                None,
            )
    if not cur.measured:
        return None
    if memory_limit is not None:
        peak = cur.memory_figure().max
        if not math.isnan(peak) and peak > memory_limit:
            own = cur.figure("peak_rss_bytes").max
            workers = (
                f" (the measuring process {fmt_bytes(own)}, the rest its worker processes)"
                if not math.isnan(own) and peak - own > max(MEM_RISE_MIN_BYTES, 0.02 * peak)
                else ""
            )
            return (
                "memory_limit",
                f"stopped at {param}={fmt_value(cur.value)}: peak RSS of the sampler's process "
                f"tree {fmt_bytes(peak)}{workers} crossed memory_limit={fmt_bytes(memory_limit)}",
                None,
            )
    if not cur.ok:
        return None
    prev = next((p for p in reversed(points[:-1]) if p.ok), None)
    if prev is None or not prev.samples_per_s > 0:
        return None
    gain = cur.samples_per_s / prev.samples_per_s - 1.0
    if gain <= flat_within and mem_rising(prev, cur):
        a, b = prev.memory_figure().median, cur.memory_figure().median
        what = (
            f"fell {fmt_change_pct(-gain)[1:]}" if gain < 0 else f"changed {fmt_change_pct(gain)}"
        )
        mem = f"peak RSS rose {fmt_bytes(a)} -> {fmt_bytes(b)}" if b > a else "peak GPU memory rose"
        return (
            "flat",
            f"stopped after {param}={fmt_value(cur.value)}: throughput {what} from "
            f"{fmt_value(prev.value)} (within flat_within={flat_within:.0%}) while {mem}",
            prev.value,
        )
    return None


def _eligible(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    return [p for p in points if p.ok and not p.over_memory_limit and p.samples_per_s > 0]


def best(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The eligible point with the largest median throughput (argmax, for reference)."""
    eligible = _eligible(points)
    return max(eligible, key=lambda p: p.samples_per_s) if eligible else None


def recommend(points: Sequence[SweepPoint], flat_within: float) -> int | float | None:
    """The smallest value not distinguishable from the best (module docstring)."""
    top = best(points)
    if top is None:
        return None
    nz = noise(points)
    # the first that is not distinguishable from the best: at the latest, the best itself
    return next(
        p.value
        for p in _eligible(points)
        if not distinguishable(p.samples_per_s, top.samples_per_s, flat_within, nz)
    )


def still_rising(points: Sequence[SweepPoint], flat_within: float) -> SweepPoint | None:
    """The largest clean point when it is the recommendation and distinguishably
    better than the clean value before it (so a larger value may pay off); else None."""
    clean = [p for p in points if p.ok and p.samples_per_s > 0]
    if len(clean) < 2 or recommend(points, flat_within) != clean[-1].value:
        return None
    prev, last = clean[-2], clean[-1]
    nz = noise(points)
    if last.samples_per_s > prev.samples_per_s and distinguishable(
        prev.samples_per_s, last.samples_per_s, flat_within, nz
    ):
        return last
    return None


def finish_points(
    points: list[SweepPoint], memory_limit: int | None, flat_within: float = 0.05
) -> list[SweepPoint]:
    """Fill in gains, the neighbours each value is not distinguishable from (among the
    values that ran cleanly, by ``distinguishable``) and the memory-limit marks."""
    clean = [i for i, p in enumerate(points) if p.ok and not math.isnan(p.samples_per_s)]
    nz = noise(points)
    out = []
    for i, p in enumerate(points):
        gain = None
        nd: list[int | float] = []
        if i in clean:
            k = clean.index(i)
            prev = points[clean[k - 1]] if k > 0 else None
            nxt = points[clean[k + 1]] if k + 1 < len(clean) else None
            if prev is not None and prev.samples_per_s > 0:
                gain = p.samples_per_s / prev.samples_per_s - 1.0
            for n in (prev, nxt):
                if n is not None and not distinguishable(
                    p.samples_per_s, n.samples_per_s, flat_within, nz
                ):
                    nd.append(n.value)
        over = False
        if memory_limit is not None:
            peak = p.memory_figure().max
            over = not math.isnan(peak) and peak > memory_limit
        out.append(
            replace(p, gain=gain, not_distinguishable_from=tuple(nd), over_memory_limit=over)
        )
    return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return bool(a == b)


def sweep_warnings(
    param: str,
    fixed: Mapping[str, Any],
    points: Sequence[SweepPoint],
    *,
    isolate: bool,
    repeats: int,
    abandoned: int,
) -> list[str]:
    """Everything the reader should doubt: settings that moved, parallelism that changed,
    the set-up's limits, short runs, and the runs' own notes."""
    return [
        *_settings_warnings(param, fixed, points),
        *_parallelism_warnings(param, points),
        *_setup_warnings(isolate=isolate, repeats=repeats, abandoned=abandoned),
        *_run_warnings(param, points),
    ]


def _in_order(items: Iterable[str]) -> list[str]:
    """Each distinct item once, in the order first seen."""
    return list(dict.fromkeys(items))


def _settings_warnings(
    param: str, fixed: Mapping[str, Any], points: Sequence[SweepPoint]
) -> list[str]:
    """Settings the sampler reports about itself that differ from what was passed."""
    out: list[str] = []
    fv = fmt_value
    for key in _in_order(k for p in points for r in p.runs for k in r.observed):
        mismatches = []
        seen: dict[Any, Any] = {}
        for p in points:
            passed = p.value if key == param else fixed.get(key)
            for r in p.runs:
                if key in r.observed:
                    obs = r.observed[key]
                    seen.setdefault(p.value, obs)
                    if not same(obs, passed):
                        mismatches.append((p.value, passed, obs))
                        break
        if mismatches:
            shown = ", ".join(
                f"{key}={fv(o)} at {param}={fv(v)}"
                + ("" if key == param else f" (passed {fv(pa)})")
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
    return out


def _parallelism_warnings(param: str, points: Sequence[SweepPoint]) -> list[str]:
    """Thread and process counts that changed across values."""
    out: list[str] = []
    fv = fmt_value
    for key in _in_order(k for p in points for r in p.runs for k in r.threads):
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
    return out


def _setup_warnings(*, isolate: bool, repeats: int, abandoned: int) -> list[str]:
    out: list[str] = []
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
    return out


def _run_warnings(param: str, points: Sequence[SweepPoint]) -> list[str]:
    """Values whose runs were too short, and each run's own notes."""
    out: list[str] = []
    fv = fmt_value
    short = [
        p.value for p in points if p.measured and p.figure("sample_time_ns").median < SHORT_RUN_NS
    ]
    if short:
        out.append(
            f"the measured calls took less than {SHORT_RUN_NS / 1e6:.0f} ms per run at "
            f"{param}={', '.join(fv(v) for v in short)}: raise steps for steadier figures"
        )
    for p in points:
        for n in _in_order(n for r in p.runs for n in r.notes):
            out.append(f"{param}={fv(p.value)}: {n}")
    return out
