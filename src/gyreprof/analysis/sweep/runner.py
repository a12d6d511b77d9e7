"""One measured run of a sweep: build the sampler for one value, warm it up, time its calls.

The same code runs inside the fresh subprocess of an isolated sweep (see
``worker``) and in the calling process when ``isolate=False``, so both modes
measure exactly the same way:

* a :class:`~gyreprof.recording.profiler.Profiler` marks one *step* per sampler call
  (``begin()`` right before the call, ``end()`` right after it), so the step
  histogram holds the time spent inside the sampler and nothing else;
* the first ``warmup`` calls are the profiler's warm-up steps (reported apart);
* a factory that takes a ``prof`` keyword gets that Profiler, built with the
  phase names the factory declares, and records its own phases inside each call;
* each call's return value is read as a sample count by
  :func:`gyreprof._support.sample_count.count_samples` (the rule ``selfcheck`` uses too);
* the sampler's worker processes are polled for memory while it runs.

The result is one :class:`~gyreprof.analysis.sweep.record.RunResult`.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gyreprof._support.sample_count import NotACount, count_samples
from gyreprof.analysis.sweep.factory import FactoryInfo, describe_exc, user_traceback
from gyreprof.analysis.sweep.probe import (
    WorkerMemoryWatch,
    gpu_peak_bytes,
    observe_settings,
    observe_threads,
    peak_rss_bytes,
    reset_gpu_peak,
)
from gyreprof.analysis.sweep.record import RunResult
from gyreprof.model.histogram import STEP


class _Stop(Exception):
    """A run ended early; ``result`` says how."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(result.error)
        self.result = result


@dataclass
class _Calls:
    """What the calls returned, read as sample counts."""

    samples: int = 0
    per_call_min: float = math.inf
    per_call_max: int = 0
    rules: dict[str, str] = field(default_factory=dict)  # rule -> detail, in order seen

    def rule_text(self) -> str:
        return "; ".join(self.rules.values())


def _where(i: int, warmup: int) -> str:
    return f"call {i + 1}" + (" (warm-up)" if i < warmup else "")


def _stage_of(i: int, warmup: int) -> str:
    return "warmup" if i < warmup else "measure"


def _build(
    factory: Callable[..., Any], kwargs: Mapping[str, Any], info: FactoryInfo, prof: Any
) -> tuple[Any, Callable[[], Any]]:
    """Call the factory; return the sampler object and the callable making one call."""
    call_kwargs = dict(kwargs)
    if info.accepts_prof:
        call_kwargs["prof"] = prof
    try:
        obj = factory(**call_kwargs)
    except (Exception, SystemExit) as exc:
        raise _Stop(
            RunResult(
                status="error",
                stage="build",
                error=f"the factory raised {describe_exc(exc)}",
                traceback=user_traceback(exc),
            )
        ) from None
    sample = getattr(obj, "sample", None)
    if obj is not None and callable(sample):
        return obj, sample
    if obj is not None and callable(obj):
        return obj, obj
    what = "None" if obj is None else f"a {type(obj).__name__}"
    raise _Stop(
        RunResult(
            status="invalid",
            stage="build",
            error=(
                f"the factory returned {what}, which is neither callable nor has a .sample() "
                "method; it must return the sampler (a function, or an object with .sample(), "
                "that makes one sampling call and returns how many samples it produced)"
            ),
        )
    )


def _slow_count(n: Any, i: int, warmup: int, calls: _Calls) -> int:
    """Read a return value that is not a plain positive int (the fast path)."""
    hint = (
        "a sampler call must return how many samples it produced: a positive int, or the "
        "batch itself (see gyreprof._support.sample_count for the rules)"
    )
    try:
        count = count_samples(n)
    except NotACount as exc:
        raise _Stop(
            RunResult(
                status="invalid",
                stage=_stage_of(i, warmup),
                error=(
                    f"the sampler returned {type(n).__name__} {reprlib.repr(n)} at "
                    f"{_where(i, warmup)}: {exc}; {hint}"
                ),
            )
        ) from None
    if count.n <= 0:
        raise _Stop(
            RunResult(
                status="invalid",
                stage=_stage_of(i, warmup),
                error=(
                    f"the sampler returned {count.n} samples at {_where(i, warmup)} (read as "
                    f"{count.detail}); {hint}"
                ),
            )
        )
    calls.rules.setdefault(count.rule, count.detail)
    return count.n


def _call_loop(
    call: Callable[[], Any], prof: Any, warmup: int, steps: int, stage: Callable[[str], None]
) -> _Calls:
    """Make ``warmup + steps`` timed calls; count the steady calls' samples."""
    begin, end = prof.begin, prof.end
    calls = _Calls()
    fast = 0
    i = 0
    try:
        stage("warmup" if warmup else "measure")
        for i in range(warmup + steps):
            if i == warmup and warmup:
                stage("measure")
            begin()
            n = call()
            end()
            if type(n) is int and n > 0:
                fast += 1
            else:
                n = _slow_count(n, i, warmup, calls)
            if i >= warmup:
                calls.samples += n
                if n < calls.per_call_min:
                    calls.per_call_min = n
                if n > calls.per_call_max:
                    calls.per_call_max = n
    except _Stop:
        raise
    except (Exception, SystemExit) as exc:
        raise _Stop(
            RunResult(
                status="error",
                stage=_stage_of(i, warmup),
                error=f"the sampler raised {describe_exc(exc)} at {_where(i, warmup)}",
                traceback=user_traceback(exc),
            )
        ) from None
    if fast:
        calls.rules = {"int": "an int: the number of samples", **calls.rules}
    return calls


def _phase_figures(summary: Any, phases: tuple[str, ...], sample_ns: float) -> dict[str, Any]:
    """Per phase: per_call_ns, share, p50_ns, p99_ns, count_per_call; plus ``(other)``."""
    out: dict[str, dict[str, float]] = {}
    if not phases or not summary.steps:
        return out
    covered = 0.0
    for name in phases:
        st = summary.phases[name]
        covered += st.sum_ns
        out[name] = {
            "per_call_ns": st.sum_ns / summary.steps,
            "share": st.share,
            "p50_ns": st.p50,
            "p99_ns": st.p99,
            "count_per_call": st.count / summary.steps,
        }
    other = max(0.0, sample_ns - covered)
    out["(other)"] = {
        "per_call_ns": other / summary.steps,
        "share": other / sample_ns if sample_ns > 0 else math.nan,
        "p50_ns": math.nan,
        "p99_ns": math.nan,
        "count_per_call": math.nan,
    }
    return out


def _measured(summary: Any, calls: _Calls, info: FactoryInfo) -> dict[str, Any]:
    """The timing figures of a clean run, from the profiler's summary."""
    step = summary.step
    sample_ns = float(step.sum_ns)
    return {
        "samples": calls.samples,
        "calls": int(summary.steps),
        "warmup_calls": int(summary.warmup.steps),
        "sample_time_ns": sample_ns,
        "samples_per_s": calls.samples / (sample_ns / 1e9) if sample_ns > 0 else math.nan,
        "samples_per_call_min": int(calls.per_call_min) if calls.samples else 0,
        "samples_per_call_max": int(calls.per_call_max),
        "count_rule": calls.rule_text(),
        "call": {
            "mean_ns": step.mean,
            "p50_ns": step.p50,
            "p99_ns": step.p99,
            "min_ns": step.min,
            "max_ns": step.max,
        },
        "warmup": {
            "calls": int(summary.warmup.steps),
            "mean_ns": float(summary.warmup.mean_ns.get(STEP, math.nan)),
            "first_ns": float(summary.warmup.first_ns.get(STEP, math.nan)),
        },
        "phases": _phase_figures(summary, info.phases, sample_ns),
        "summary_data": summary.to_dict(),
    }


def _notes(summary: Any, total: int, kwargs: Mapping[str, Any], given: dict[str, str]) -> list[str]:
    notes = []
    if summary.steps + summary.warmup.steps != total:
        notes.append(
            f"the profiler counted {summary.steps + summary.warmup.steps} calls, not {total}: "
            "the sampler seems to call prof.begin()/prof.end() itself; record phases with "
            "prof.phase(name), prof.lap(id) or prof.record() only"
        )
    for k, v in kwargs.items():
        now = _safe_repr(v)
        if now != given[k]:
            notes.append(
                f"the sampler changed setting {k} in place ({given[k]} -> {now}); the sweep "
                "hands every run its own copy, but the figures reflect the changed value"
            )
    return notes


def run_once(
    factory: Callable[..., Any],
    info: FactoryInfo,
    kwargs: Mapping[str, Any],
    *,
    param: str,
    steps: int,
    warmup: int,
    stage: Callable[[str], None],
    in_process: bool,
    holder: dict[str, Any] | None = None,
) -> RunResult:
    """Build the sampler with ``kwargs``, make ``warmup`` + ``steps`` calls, report.

    ``stage(name)`` is told where the run is (see ``factory.STAGE_WORDS``);
    ``holder`` (in-process runs) receives the Profiler so a watcher can read its
    progress. Everything that goes wrong in the factory or the sampler is a
    result (``status`` ``"error"`` or ``"invalid"``), never an exception.
    """
    from gyreprof.recording.profiler import Profiler

    if in_process:
        reset_gpu_peak()
    prof = Profiler(
        info.phases or ("sample",),
        capacity=4096,
        warmup_steps=warmup,
        label=f"{param}={kwargs.get(param)!r}",
    )
    if holder is not None:
        holder["prof"] = prof
    baseline = peak_rss_bytes()
    given = {k: _safe_repr(v) for k, v in kwargs.items()}
    obj: Any = None
    with WorkerMemoryWatch() as workers:
        try:
            stage("build")
            obj, call = _build(factory, kwargs, info, prof)
            observed = observe_settings(obj, [param, *[k for k in kwargs if k != param]])
            calls = _call_loop(call, prof, warmup, steps, stage)
        except _Stop as stop:
            notes = _close(obj) if obj is not None else []
            return stop.result.replace(baseline_rss_bytes=baseline, notes=tuple(notes))
        stage("report")
        summary = prof.summary()
        own_peak = peak_rss_bytes()
        threads = observe_threads()
        workers.poll()
    notes = _notes(summary, warmup + steps, kwargs, given)
    notes += _close(obj)
    return RunResult(
        status="ok",
        stage="done",
        baseline_rss_bytes=baseline,
        peak_rss_bytes=own_peak,
        children_rss_bytes=workers.peak_bytes,
        peak_tree_rss_bytes=None if own_peak is None else own_peak + workers.peak_bytes,
        peak_gpu_bytes=gpu_peak_bytes(),
        threads=threads,
        observed=observed,
        notes=tuple(notes),
        **_measured(summary, calls, info),
    )


def _safe_repr(v: Any) -> str:
    try:
        return reprlib.repr(v)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not fail the run
        return object.__repr__(v)


def _close(obj: Any) -> list[str]:
    """Close the sampler if it can be closed; a note when closing raised."""
    close = getattr(obj, "close", None)
    if close is None:
        owner = getattr(obj, "__self__", None)
        close = getattr(owner, "close", None) if owner is not None else None
    if not callable(close):
        return []
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - reported, the measurement stands
        return [f"sampler.close() raised {describe_exc(exc)}"]
    return []
