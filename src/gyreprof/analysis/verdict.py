"""What to tune next: the bottleneck verdict, in plain words, with the numbers behind it.

``gp.diagnose(sampler=prof, trainer=tp)`` follows a fixed order:

1. Is the trainer waiting? The trainer's wait ratio (see
   :func:`gyreprof.analysis.wait.wait_report`) below ``trainer_bound_below``
   (default 0.10) means training is trainer-bound: a faster sampler will not
   speed it up; look at compute and the optimizer.
2. If it waits, which sampler phase takes the largest share of the sampler
   step? An env-stepping phase (by name: ``env_phases``, or a name starting
   with ``env``) means: look at how the env is called and whether the
   parallelism took effect; a bigger batch helps little. Any other phase
   (forward, transfer, ...) means: sweep batch size and parallelism.
3. Caveats: warm-up not excluded, too few steady samples for the percentiles
   quoted (< ``min_samples_p99`` = 100 for p99, < ``min_samples_p999`` = 1000
   for p99.9), profiler overhead above ``overhead_limit`` (5%), and GPU-looking
   phases timed without CUDA synchronisation while CUDA is in use.

Either side may be missing; the verdict then says what can and cannot be
concluded (``bound="unknown"`` without a trainer profile).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from gyreprof._format import fmt_ns, fmt_pct
from gyreprof.analysis.wait import (
    WaitReport,
    _is_profiler,
    _summary_and_snapshot,
    fmt_gain,
    wait_report,
)
from gyreprof.summary import Snapshot, Summary

if TYPE_CHECKING:
    from gyreprof.profiler import Profiler

    Source = Union[Profiler, Snapshot, Summary]

VERDICT_FORMAT = "gyreprof.verdict/1"

#: phase names that mean "stepping the environment" (compared in lower case);
#: a name starting with "env" counts as well.
DEFAULT_ENV_PHASES: tuple[str, ...] = (
    "env",
    "env_step",
    "env_reset",
    "step",
    "step_async",
    "step_wait",
    "reset",
    "reset_wait",
    "sim",
    "simulate",
    "simulation",
    "physics",
)
#: substrings of phase names that suggest GPU work (checked for CUDA synchronisation).
DEFAULT_GPU_HINTS: tuple[str, ...] = (
    "fwd",
    "forward",
    "bwd",
    "backward",
    "policy",
    "infer",
    "gpu",
    "cuda",
    "optim",
    "train",
    "compute",
    "learn",
    "update",
    "model",
    "loss",
    "grad",
    "xfer",
    "transfer",
    "h2d",
    "d2h",
)
#: phase names that mean "handing a batch over" (a queue put, a send to the learner).
DEFAULT_HANDOFF_PHASES: tuple[str, ...] = ("put", "queue", "enqueue", "push", "handoff", "send")
DEFAULT_TRAINER_BOUND_BELOW = 0.10
DEFAULT_OVERHEAD_LIMIT = 0.05
DEFAULT_MIN_SAMPLES_P99 = 100
DEFAULT_MIN_SAMPLES_P999 = 1000

BOUNDS = ("trainer", "sampler", "unknown")


@dataclass(frozen=True)
class Verdict:
    """The bottleneck, in plain words.

    ``bound`` is ``"trainer"`` (the trainer hardly waits: tune compute),
    ``"sampler"`` (the trainer waits for batches: tune the sampler) or
    ``"unknown"`` (no trainer profile to tell). ``dominant_phase`` is the phase
    to look at first (the sampler's largest phase when sampler-bound, the
    trainer's largest non-wait phase when trainer-bound). ``reasons`` are the
    steps taken, each with its numbers; ``advice`` what to do next;
    ``unknowns`` what cannot be concluded from the profiles given;
    ``caveats`` what may make the numbers mislead.
    """

    bound: str
    dominant_phase: str | None
    reasons: list[str]
    caveats: list[str]
    advice: list[str] = field(default_factory=list)
    unknowns: list[str] = field(default_factory=list)
    wait_ratio: float | None = None
    sampler_shares: dict[str, float] = field(default_factory=dict)
    dominant_kind: str | None = None  # "env", "forward/transfer", "trainer" or None
    wait_report: WaitReport | None = None
    thresholds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": VERDICT_FORMAT,
            "bound": self.bound,
            "dominant_phase": self.dominant_phase,
            "dominant_kind": self.dominant_kind,
            "reasons": list(self.reasons),
            "advice": list(self.advice),
            "unknowns": list(self.unknowns),
            "caveats": list(self.caveats),
            "wait_ratio": self.wait_ratio,
            "sampler_shares": dict(self.sampler_shares),
            "thresholds": dict(self.thresholds),
            "wait_report": self.wait_report.to_dict() if self.wait_report else None,
        }

    def to_json(self, path: str | os.PathLike[str] | None = None, *, indent: int | None = 2) -> str:
        """The JSON text; written to ``path`` as well when given."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=True)
        if path is not None:
            Path(path).write_text(text)
        return text

    @property
    def headline(self) -> str:
        if self.bound == "trainer":
            head = "trainer-bound: the trainer hardly waits; tune compute, not the sampler"
        elif self.bound == "sampler":
            head = "sampler-bound: the trainer waits for batches; tune the sampler"
        else:
            head = "unknown: no trainer profile, so whether the trainer waits cannot be told"
        if self.dominant_phase is not None:
            head += f" (look first at {self.dominant_phase!r})"
        return head

    def __str__(self) -> str:
        lines = [f"verdict: {self.headline}"]
        lines += [f"  {i}. {r}" for i, r in enumerate(self.reasons, 1)]
        if self.advice:
            lines.append("next:")
            lines += [f"  - {a}" for a in self.advice]
        if self.unknowns:
            lines.append("cannot tell:")
            lines += [f"  - {u}" for u in self.unknowns]
        if self.caveats:
            lines.append("caveats:")
            lines += [f"  - {c}" for c in self.caveats]
        return "\n".join(lines)


# ------------------------------------------------------------------ helpers


def _is_env_phase(name: str, env_phases: Sequence[str]) -> bool:
    low = name.lower()
    return low in {p.lower() for p in env_phases} or low.startswith("env")


def _cuda_in_use() -> bool:
    """True when this process imported torch and initialised CUDA (never imports torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        # initialised, not merely available: the analysing process on a GPU machine may be
        # looking at a CPU-only run
        return bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken CUDA setup is "not in use" here
        return False


def _synced_phases(source: object) -> frozenset[str]:
    mod = sys.modules.get("gyreprof.integrations.torch")
    if mod is None or not _is_profiler(source):
        return frozenset()
    return frozenset(mod.synchronized_phases(source))


def _side_caveats(
    side: str,
    source: object,
    summary: Summary,
    quoted: Sequence[str],
    *,
    overhead_limit: float,
    min_p99: int,
    min_p999: int,
    gpu: bool,
    gpu_hints: Sequence[str],
) -> list[str]:
    out: list[str] = []
    w = summary.warmup
    if w.rule == "none":
        first = ""
        slow = [
            (n, v)
            for n, v in w.first_ns.items()
            if n in summary.phases and summary.phases[n].count and v > 3 * summary.phases[n].p50
        ]
        if slow:
            n, v = max(slow, key=lambda kv: kv[1] / max(1.0, summary.phases[kv[0]].p50))
            first = (
                f"; e.g. the first {n!r} took {fmt_ns(v)} against a steady p50 of "
                f"{fmt_ns(summary.phases[n].p50)}"
            )
        out.append(
            f"{side}: warm-up was not excluded, so start-up costs (imports, JIT, allocator, "
            f"first env resets) are in its numbers{first}; pass Profiler(warmup_steps=...) "
            "or warmup_s=..."
        )
    elif not w.done:
        out.append(f"{side}: still in warm-up ({w.rule}); its steady-state numbers are partial")
    counts = {n: summary.phases[n].count for n in quoted if n in summary.phases}
    if counts:
        fewest, k = min(counts.items(), key=lambda kv: kv[1])
        if k < min_p99:
            out.append(
                f"{side}: only {k} steady sample{'' if k == 1 else 's'} of {fewest!r}: its p99 "
                f"(and p99.9) rest on "
                f"fewer than {min_p99} samples and are little more than its max; run longer"
            )
        elif k < min_p999:
            out.append(
                f"{side}: {k} steady samples of {fewest!r}: enough for p99, but p99.9 needs at "
                f"least {min_p999}"
            )
    if summary.overhead_share > overhead_limit:
        out.append(
            f"{side}: the profiler itself took {fmt_pct(summary.overhead_share)} of the wall "
            f"time (above {fmt_pct(overhead_limit)}): time fewer, coarser phases or use "
            "prof.lap() instead of context managers"
        )
    if gpu:
        names = [
            n
            for n, st in summary.phases.items()
            if st.count and any(h in n.lower() for h in gpu_hints)
        ]
        if _is_profiler(source):
            synced = _synced_phases(source)
            names = [n for n in names if n not in synced]
            if names:
                out.append(
                    f"{side}: CUDA is in use but {names} were timed without synchronising it; "
                    "GPU work is asynchronous, so its time lands in whichever phase next waits "
                    "for the GPU. Time them with gyreprof.integrations.torch.cuda_phase(prof, "
                    "name) or synchronized(prof)"
                )
        elif names:
            out.append(
                f"{side}: CUDA is in use and this profile is a {type(source).__name__}, so "
                f"whether {names} were timed with CUDA synchronised is unknown"
            )
    return out


def _check_fraction(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number in 0..1, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be in 0..1, got {value!r}")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


# ---------------------------------------------------------------------- entry


def diagnose(
    sampler: Source | None = None,
    trainer: Source | None = None,
    *,
    wait: str = "wait",
    compute: str = "compute",
    env_phases: Sequence[str] = DEFAULT_ENV_PHASES,
    trainer_bound_below: float = DEFAULT_TRAINER_BOUND_BELOW,
    overhead_limit: float = DEFAULT_OVERHEAD_LIMIT,
    min_samples_p99: int = DEFAULT_MIN_SAMPLES_P99,
    min_samples_p999: int = DEFAULT_MIN_SAMPLES_P999,
    gpu: bool | None = None,
    gpu_hints: Sequence[str] = DEFAULT_GPU_HINTS,
    **wait_kwargs: Any,
) -> Verdict:
    """Where the time goes and what to tune next, in plain words (see the module doc).

    Parameters
    ----------
    sampler / trainer: Profiler, Snapshot or Summary of each side (either may
        be None, not both).
    wait / compute: the trainer's phase names (see ``wait_report``).
    env_phases: sampler phase names that mean env stepping (lower case;
        names starting with "env" count too).
    trainer_bound_below: a wait ratio below this is trainer-bound.
    overhead_limit: profiler overhead share above this is a caveat.
    min_samples_p99 / min_samples_p999: fewer steady samples than this make
        the p99 / p99.9 a caveat.
    gpu: whether the profiled run used CUDA; None: this process imported
        torch and CUDA is available.
    wait_kwargs: passed on to ``wait_report`` (window_steps=, other=, ...).
    """
    if sampler is None and trainer is None:
        raise ValueError(
            "diagnose needs at least one profile: diagnose(sampler=prof, trainer=tp) "
            "(a Profiler, Snapshot or Summary for each side)"
        )
    _check_fraction("trainer_bound_below", trainer_bound_below)
    _check_fraction("overhead_limit", overhead_limit)
    _check_count("min_samples_p99", min_samples_p99)
    _check_count("min_samples_p999", min_samples_p999)
    if isinstance(env_phases, str):
        raise TypeError("env_phases must be a list of names, not one string")
    if isinstance(gpu_hints, str):
        raise TypeError("gpu_hints must be a list of substrings, not one string")
    use_gpu = _cuda_in_use() if gpu is None else bool(gpu)

    reasons: list[str] = []
    advice: list[str] = []
    unknowns: list[str] = []
    caveats: list[str] = []
    bound = "unknown"
    dominant: str | None = None
    kind: str | None = None
    report: WaitReport | None = None
    thresholds = {
        "trainer_bound_below": float(trainer_bound_below),
        "overhead_limit": float(overhead_limit),
        "min_samples_p99": float(min_samples_p99),
        "min_samples_p999": float(min_samples_p999),
    }
    side_kw: dict[str, Any] = dict(
        overhead_limit=float(overhead_limit),
        min_p99=int(min_samples_p99),
        min_p999=int(min_samples_p999),
        gpu=use_gpu,
        gpu_hints=tuple(gpu_hints),
    )

    # 1. is the trainer waiting?
    if trainer is not None:
        t_summary, _ = _summary_and_snapshot(trainer, "trainer")
        report = wait_report(trainer, wait, compute, **wait_kwargs)
        r = report.ratio
        ws, cs = report.wait_per_step, report.compute_per_step
        spread = ""
        if report.window_ratios:
            d = report.window_distribution
            spread = (
                f"; per window (of {report.window_size}) p10 {fmt_pct(d['p10'])}, "
                f"p90 {fmt_pct(d['p90'])}"
            )
        measured = (
            f"the trainer spends {fmt_pct(r)} of its time waiting for batches ({wait!r} p50 "
            f"{fmt_ns(ws['p50'])}, p99 {fmt_ns(ws['p99'])} per step, against {compute!r} p50 "
            f"{fmt_ns(cs['p50'])}{spread})"
        )
        others = {n: st.share for n, st in t_summary.phases.items() if n != wait and st.count > 0}
        if r < trainer_bound_below:
            bound = "trainer"
            dominant = max(others, key=lambda n: others[n]) if others else compute
            kind = "trainer"
            reasons.append(
                f"{measured}: below the {fmt_pct(trainer_bound_below)} threshold, so training "
                f"is trainer-bound; even an infinitely fast sampler would make it at most "
                f"{fmt_gain(report.speedup_bound)}"
            )
            if report.spikes:
                worst = max(report.spikes, key=lambda s: s.wait_per_step_ns)
                reasons.append(
                    f"the waits come in bursts: {len(report.spikes)} window(s) spike, the worst "
                    f"at t=+{worst.start_s:.3g} s with {fmt_ns(worst.wait_per_step_ns)} per step "
                    f"({fmt_pct(worst.ratio)} of that window)"
                )
            advice.append(
                f"sampler tuning will not speed training up; look at {dominant!r}: the compute "
                "itself, the optimizer step, data movement inside the train step"
            )
        else:
            bound = "sampler"
            reasons.append(
                f"{measured}: at or above the {fmt_pct(trainer_bound_below)} threshold, so "
                f"the trainer is held back by the sampler; a sampler fast enough to remove "
                f"the wait would make training up to {fmt_gain(report.speedup_bound)}"
            )
            if report.spikes:
                co = sum(1 for s in report.spikes if s.coincident)
                reasons.append(
                    f"{len(report.spikes)} window(s) spike to at least "
                    f"{report.thresholds['spike_factor']:g}x the median wait"
                    + (f", {co} of them together with {sorted(report.other)}" if co else "")
                )
        caveats += _side_caveats("trainer", trainer, t_summary, [wait, compute], **side_kw)
    else:
        unknowns.append(
            "whether the trainer waits for the sampler: without a trainer profile (phases "
            f"{wait!r} around the batch fetch and {compute!r} around the train step) a faster "
            "sampler may or may not speed training up"
        )

    # 2. which sampler phase dominates?
    if sampler is not None:
        s_summary, _ = _summary_and_snapshot(sampler, "sampler")
        live = {n: st for n, st in s_summary.phases.items() if st.count > 0}
        if not live:
            raise ValueError(
                "the sampler profile has no steady-state samples in any phase (phases: "
                f"{list(s_summary.phases)}); time its loop first"
            )
        shares = {n: float(st.share) for n, st in live.items()}
        order = sorted(shares, key=lambda n: shares[n], reverse=True)
        top = order[0]
        st = live[top]
        top_kind = "env" if _is_env_phase(top, env_phases) else "forward/transfer"
        rest = ", ".join(f"{n!r} {fmt_pct(shares[n])}" for n in order[1:4])
        lead = "the largest" if shares[top] < 0.5 else "dominant"
        seen = (
            f"sampler: {top!r} takes {fmt_pct(shares[top])} of the sampler step ({lead}; p50 "
            f"{fmt_ns(st.p50)}, p99 {fmt_ns(st.p99)})" + (f", then {rest}" if rest else "")
        )
        if top_kind == "env":
            what = "it is env stepping"
            if top.lower() == "step_wait" and "step_async" in shares:
                what += (
                    " - waiting for the slowest vector-env worker (step_async, the send, takes "
                    f"{fmt_pct(shares['step_async'])})"
                )
            tune = [
                "look at how the env is called (per-step Python overhead, observation copies, "
                "resets) and whether the parallelism took effect: "
                "gp.check_parallelism(pid, expected={'env_worker': N})",
                "a bigger batch will help little while env stepping dominates",
            ]
        else:
            what = "it is not env stepping (forward pass / transfer / other)"
            tune = [
                "sweep batch size and parallelism: gp.sweep(make_sampler, 'batch_size', "
                "[8, 16, 32, 64], ...)"
            ]
        if bound == "sampler":
            dominant, kind = top, top_kind
            reasons.append(f"{seen}; {what}")
            advice += tune
        elif bound == "trainer":
            reasons.append(f"{seen}; this does not matter until the trainer waits for the sampler")
        else:
            dominant, kind = top, top_kind
            reasons.append(f"{seen}; {what}")
            advice += [f"if the trainer turns out to wait for the sampler: {t}" for t in tune]
            if top.lower() in DEFAULT_HANDOFF_PHASES:
                reasons.append(
                    f"{top!r} looks like handing batches over: if it blocks on a full queue, "
                    "the sampler is waiting for its consumer, which points to a trainer-bound run"
                )
            unknowns.append(
                "whether tuning the sampler pays off at all: profile the trainer as well and "
                "call diagnose(sampler=..., trainer=...)"
            )
        caveats += _side_caveats("sampler", sampler, s_summary, [top], **side_kw)
        sampler_shares = shares
    else:
        sampler_shares = {}
        if bound == "sampler":
            unknowns.append(
                "which sampler phase to tune: no sampler profile; time the sampler loop with "
                "phases such as 'env', 'fwd', 'xfer' and pass it as sampler="
            )
        elif bound == "trainer":
            unknowns.append(
                "how the sampler spends its time (no sampler profile); it does not limit "
                "training now"
            )

    return Verdict(
        bound=bound,
        dominant_phase=dominant,
        reasons=reasons,
        caveats=caveats,
        advice=advice,
        unknowns=unknowns,
        wait_ratio=report.ratio if report is not None else None,
        sampler_shares=sampler_shares,
        dominant_kind=kind,
        wait_report=report,
        thresholds=thresholds,
    )
