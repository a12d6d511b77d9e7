"""Metrics: flat ``{name: number}`` dicts for any logger's ``log(dict)`` (TensorBoard, W&B).

Every value is a float; NaN where a figure is missing (a logger drops or plots it as a
gap), so the keys stay the same from one call to the next.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gyreprof._support import forms as _forms
from gyreprof._support.errors import ArgumentTypeError

if TYPE_CHECKING:
    from gyreprof.analysis.verdict import Verdict
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.model.summary import Summary

__all__ = ["summary", "verdict", "wait_report"]


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise ArgumentTypeError(f"prefix must be a string, got {type(prefix).__name__}")
    return prefix


def summary(s: Summary, prefix: str = "gyreprof/") -> dict[str, float]:
    """Stable keys (every value a float; NaN where a phase has no data):
    ``{prefix}steps``, ``steps_per_s``, ``elapsed_s``, ``events``, ``warmup_steps``,
    ``overhead_share``, ``overwritten``, ``out_of_range``, ``negative``, ``nonfinite``;
    per phase ``{prefix}phase/{name}/{count|mean_ns|min_ns|p50_ns|p90_ns|p99_ns|p999_ns|
    max_ns|share}``; whole steps ``{prefix}step/{...}`` (no share); counters
    ``{prefix}counter/{name}``. Phases live under ``phase/`` so no phase name can
    collide with the run-level or whole-step keys.
    """
    prefix = _check_prefix(prefix)
    out: dict[str, float] = {
        f"{prefix}steps": float(s.steps),
        f"{prefix}steps_per_s": float(s.steps_per_s),
        f"{prefix}elapsed_s": float(s.elapsed_s),
        f"{prefix}events": float(s.events),
        f"{prefix}warmup_steps": float(s.warmup.steps),
        f"{prefix}overhead_share": float(s.overhead_share),
        f"{prefix}overwritten": float(s.overwritten),
        f"{prefix}out_of_range": float(s.out_of_range),
        f"{prefix}negative": float(s.negative),
        f"{prefix}nonfinite": float(s.nonfinite),
    }
    rows = [(f"{prefix}phase/{name}/", st) for name, st in s.phases.items()]
    rows.append((f"{prefix}step/", s.step))
    for base, st in rows:
        out[base + "count"] = float(st.count)
        out[base + "mean_ns"] = float(st.mean)
        out[base + "min_ns"] = float(st.min)
        out[base + "p50_ns"] = float(st.p50)
        out[base + "p90_ns"] = float(st.p90)
        out[base + "p99_ns"] = float(st.p99)
        out[base + "p999_ns"] = float(st.p999)
        out[base + "max_ns"] = float(st.max)
        if st is not s.step:
            out[base + "share"] = float(st.share)
    for k, v in s.counters.items():
        out[f"{prefix}counter/{k}"] = float(v)
    return out


def wait_report(r: WaitReport, prefix: str = "gyreprof/") -> dict[str, float]:
    """``{prefix}wait/{ratio|steps|wait_p50_ns|wait_p99_ns|spikes|window_p50|window_p90}``."""
    prefix = _check_prefix(prefix)
    base = f"{prefix}wait/"
    return {
        base + "ratio": float(r.ratio),
        base + "steps": float(r.steps),
        base + "wait_p50_ns": float(r.wait_per_step.get("p50", math.nan)),
        base + "wait_p99_ns": float(r.wait_per_step.get("p99", math.nan)),
        base + "spikes": float(len(r.spikes)),
        base + "window_p50": float(r.window_distribution.get("p50", math.nan)),
        base + "window_p90": float(r.window_distribution.get("p90", math.nan)),
    }


def verdict(v: Verdict, prefix: str = "gyreprof/") -> dict[str, float]:
    """``{prefix}verdict/{sampler_bound|trainer_bound|wait_ratio|coverage}`` and the
    sampler's shares as ``{prefix}verdict/share/{phase}``."""
    prefix = _check_prefix(prefix)
    base = f"{prefix}verdict/"
    out = {
        base + "sampler_bound": 1.0 if v.bound == "sampler" else 0.0,
        base + "trainer_bound": 1.0 if v.bound == "trainer" else 0.0,
        base + "wait_ratio": math.nan if v.wait_ratio is None else float(v.wait_ratio),
        base + "coverage": math.nan if v.coverage is None else float(v.coverage),
    }
    for name, share in v.sampler_shares.items():
        out[f"{base}share/{name}"] = float(share)
    return out


# the result classes find these by name (gyreprof._support.forms): they sit below this floor
_forms.register("metrics", summary, verdict, wait_report)
