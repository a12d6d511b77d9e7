"""``sweep()``: check the arguments, run every value and repeat, decide, build the result.

The steps, one function each: ``_Plan.make`` (validate everything before
anything runs), ``_Target`` (how a run gets the factory: in this process or in
a fresh one), ``_run_value`` (the repeats of one value), ``_conclude`` (stop
words, recommendation, warnings) and ``_settings``.
"""

from __future__ import annotations

import copy
import gc
import math
import os
import pickle
import platform
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof._support.format import fmt_change_pct, fmt_count
from gyreprof._support.subproc import sigterm_unwinds
from gyreprof._support.validate import check_int, check_positive_number
from gyreprof.analysis.sweep.decide import (
    finish_points,
    recommend,
    still_rising,
    stop_check,
    sweep_warnings,
)
from gyreprof.analysis.sweep.factory import (
    RESERVED,
    STAGE_WORDS,
    FactoryInfo,
    SweepUsageError,
    describe_target,
    factory_name,
    inspect_factory,
    load_target,
    parse_target,
    where_it_was,
)
from gyreprof.analysis.sweep.isolate import run_isolated
from gyreprof.analysis.sweep.progress import SweepProgress
from gyreprof.analysis.sweep.record import RunResult
from gyreprof.analysis.sweep.result import SweepPoint, SweepResult, SweepRun, parse_bytes
from gyreprof.analysis.sweep.runner import run_once
from gyreprof.analysis.sweep.words import fmt_value

_THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TORCH_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
)


# ------------------------------------------------------------------ validation


def _check_int(name: str, value: Any, minimum: int) -> int:
    return check_int(name, value, minimum=minimum)


def _check_values(param: str, values: Any) -> tuple[int | float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidValueError(
            f"values must be a list of numbers for {param}, such as [8, 16, 32], got {values!r}"
        )
    out: list[int | float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "item"):
            raise InvalidValueError(f"values must be numbers; {v!r} ({type(v).__name__}) is not")
        if not isinstance(v, (int, float)):
            v = v.item()
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InvalidValueError(f"values must be numbers; {v!r} is not")
        if isinstance(v, float) and not math.isfinite(v):
            raise InvalidValueError(f"values must be finite numbers, got {v!r}")
        out.append(v)
    if not out:
        raise InvalidValueError(
            f"values is empty: give the {param} values to try, e.g. [8, 16, 32, 64]"
        )
    for a, b in zip(out, out[1:]):  # noqa: B905 - py3.10 target
        if b == a:
            raise InvalidValueError(f"values must not repeat; {a!r} appears twice in {out}")
        if b < a:
            raise InvalidValueError(
                f"values must be sorted ascending (the sweep grows {param} and stops when it "
                f"stops paying off), but {b!r} comes after {a!r}; use {sorted(set(out))}"
            )
    return tuple(out)


def _check_fixed(param: str, fixed: Any) -> dict[str, Any]:
    if fixed is None:
        return {}
    if not isinstance(fixed, Mapping):
        raise InvalidValueError(
            f"fixed must be a dict of the settings kept constant, e.g. {{'num_envs': 8}}, "
            f"got {type(fixed).__name__}"
        )
    out = {}
    for k, v in fixed.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise InvalidValueError(f"fixed keys must be keyword names, got {k!r}")
        if k in RESERVED:
            raise InvalidValueError(
                f"{k!r} is reserved: the sweep passes its own Profiler as prof=; remove it "
                "from fixed"
            )
        out[k] = v
    if param in out:
        raise InvalidValueError(
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
    return where_it_was([(f.filename, f.lineno or 0, f.name) for f in reversed(stack)])


def _abandoned(
    thread: threading.Thread, stage: str, prof: Any, timeout_s: float, wall_s: float
) -> RunResult:
    where = STAGE_WORDS.get(stage, stage)
    at = (
        f" (call {prof.progress().step})"
        if prof is not None and stage in ("warmup", "measure")
        else ""
    )
    frame = _thread_frame(thread)
    in_frame = f"; it was in {frame}" if frame else ""
    return RunResult(
        status="timeout",
        stage=stage,
        error=(
            f"timed out after {timeout_s:g} s during {where}{at}{in_frame}; the in-process "
            "run was abandoned (a thread cannot be killed: it may still be running; "
            "isolate=True kills hung runs)"
        ),
        abandoned=True,
        wall_s=wall_s,
    )


def _run_in_process(
    fn: Callable[..., Any],
    info: FactoryInfo,
    kwargs: Mapping[str, Any],
    *,
    param: str,
    steps: int,
    warmup: int,
    timeout_s: float | None,
) -> RunResult:
    state = {"stage": "build"}
    holder: dict[str, Any] = {}

    def stage(name: str) -> None:
        state["stage"] = name

    try:  # every run gets its own copy, so a factory that mutates a setting cannot leak it
        kwargs = copy.deepcopy(dict(kwargs))
    except Exception:  # noqa: BLE001 - uncopyable values are passed as they are
        kwargs = dict(kwargs)
    t0 = time.monotonic()

    def once() -> RunResult:
        return run_once(
            fn, info, kwargs, param=param, steps=steps, warmup=warmup, stage=stage,
            in_process=True, holder=holder,
        )  # fmt: skip

    if timeout_s is None:
        res = once()
    else:
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["res"] = once()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["exc"] = exc

        th = threading.Thread(
            target=work, name=f"gyreprof-sweep {param}={kwargs.get(param)!r}", daemon=True
        )
        th.start()
        th.join(timeout_s)
        if th.is_alive():
            return _abandoned(
                th, state["stage"], holder.get("prof"), timeout_s, time.monotonic() - t0
            )
        if "exc" in box:
            raise box["exc"]
        res = box["res"]
    gc.collect()
    return res.replace(wall_s=time.monotonic() - t0, exit_code=None)


# ------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class _Plan:
    """Every argument of a sweep, checked."""

    param: str
    values: tuple[int | float, ...]
    fixed: dict[str, Any]
    steps: int
    warmup: int
    repeats: int
    isolate: bool
    memory_limit: int | None
    flat_within: float
    timeout_s: float | None
    phases: list[str] | None


def _check_fraction(flat_within: Any) -> float:
    try:
        fw = float(flat_within)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"flat_within must be a fraction such as 0.05, got {flat_within!r}"
        ) from None
    if not 0.0 <= fw < 1.0:
        raise InvalidValueError(
            f"flat_within must be a fraction in [0, 1) such as 0.05, got {flat_within!r}"
        )
    return fw


def _check_timeout(timeout_s: Any) -> float | None:
    if timeout_s is None:
        return None
    return check_positive_number("timeout_s", timeout_s, unit="seconds")


def _check_param(param: Any) -> str:
    if not isinstance(param, str) or not param.isidentifier():
        raise InvalidValueError(f"param must be the factory's keyword name as text, got {param!r}")
    if param in RESERVED:
        raise InvalidValueError(f"{param!r} is reserved (the sweep passes its Profiler as prof=)")
    return param


# ------------------------------------------------------------------ the target


class _Target:
    """How each run reaches the factory: a fresh process (``isolated``) or a call here."""

    def __init__(self, factory: Callable[..., Any] | str, plan: _Plan) -> None:
        self.plan = plan
        self.name = factory_name(factory)
        self.fn: Callable[..., Any] | None = None
        self.info: FactoryInfo | None = None
        self.isolated: dict[str, Any] | None = None
        if isinstance(factory, str):
            module, qualname = parse_target(factory)
            if plan.isolate:
                self.isolated = describe_target(factory)
            else:
                self.fn = load_target({"module": module, "qualname": qualname})
        else:
            if not callable(factory):
                raise ArgumentTypeError(
                    f"factory must be a callable or 'module:name', got {type(factory).__name__}"
                )
            self.fn = factory
            if plan.isolate:
                self.isolated = describe_target(factory)
        if self.fn is not None:
            self.info = inspect_factory(self.fn, plan.param, list(plan.fixed), plan.phases)
        if plan.isolate:
            try:
                pickle.dumps(plan.fixed)
            except Exception as exc:  # noqa: BLE001 - any pickling failure means the same
                raise InvalidValueError(
                    f"isolate=True sends fixed settings to a fresh process, but they cannot be "
                    f"pickled ({type(exc).__name__}: {exc}); pass plain values, or use "
                    "isolate=False"
                ) from None

    def run(self, value: int | float) -> RunResult:
        plan = self.plan
        kwargs = {**plan.fixed, plan.param: value}
        if self.isolated is not None:
            res = run_isolated(
                self.isolated,
                kwargs,
                param=plan.param,
                steps=plan.steps,
                warmup=plan.warmup,
                phases=plan.phases,
                timeout_s=plan.timeout_s,
            )
        else:
            assert self.fn is not None and self.info is not None
            res = _run_in_process(
                self.fn,
                self.info,
                kwargs,
                param=plan.param,
                steps=plan.steps,
                warmup=plan.warmup,
                timeout_s=plan.timeout_s,
            )
        if res.status == "usage":
            raise SweepUsageError(str(res.error))
        return res


# ------------------------------------------------------------------ sweep

#: why a sweep stopped: (reason, words, the value it was flat from)
Stop = tuple[str, str, int | float | None]


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
        package docstring); False runs them in this process.
    memory_limit: stop once a run's peak RSS of the whole sampler (the measuring
        process plus its worker processes) exceeds this (bytes, or text such as
        ``'8GiB'``). It is a stop rule on the measured peak, not a hard cap.
    flat_within: relative throughput difference (0.05 = 5%) below which growing
        the value no longer pays (when memory keeps rising), and the tolerance of
        the recommendation rule (see the package docstring).
    timeout_s: seconds each run may take (isolate=True: the process is killed).
    progress: show progress on stderr: a line per finished run.
    phases: the phase names the sampler records, when the factory does not
        declare them itself (``factory.phases``).

    Interrupted (KeyboardInterrupt, SIGTERM where it has its default action) or
    killed, an isolated sweep leaves no process and no temporary folder behind.

    Returns a :class:`SweepResult`. Bad arguments raise ValueError/TypeError
    before anything runs; a factory that cannot be imported raises ValueError
    naming it. Everything that goes wrong while building or running the
    sampler for a value is reported for that value, and the sweep goes on.
    """
    plan = _Plan(
        param=_check_param(param),
        values=_check_values(param, values),
        fixed=_check_fixed(param, fixed),
        steps=_check_int("steps", steps, 1),
        warmup=_check_int("warmup", warmup, 0),
        repeats=_check_int("repeats", repeats, 1),
        isolate=bool(isolate),
        memory_limit=None if memory_limit is None else parse_bytes(memory_limit),
        flat_within=_check_fraction(flat_within),
        timeout_s=_check_timeout(timeout_s),
        phases=None if phases is None else list(phases),
    )
    target = _Target(factory, plan)
    points, stop, stopped_idx = run_values(
        plan.param,
        plan.values,
        target.run,
        repeats=plan.repeats,
        flat_within=plan.flat_within,
        memory_limit=plan.memory_limit,
        progress=progress,
    )
    return conclude(plan, target.name, _settings(plan, target, points), points, stop, stopped_idx)


def run_values(
    param: str,
    values: Sequence[int | float],
    run: Callable[[int | float], RunResult],
    *,
    repeats: int,
    flat_within: float,
    memory_limit: int | None,
    progress: bool,
) -> tuple[list[SweepPoint], Stop | None, int | None]:
    """Run every value (``repeats`` runs of ``run(value)`` each) in ascending order until
    the stop rule (:func:`~gyreprof.analysis.sweep.decide.stop_check`) ends the sweep:
    the points, the stop (reason, words, flat_from) or None, and the index of the value
    it stopped at. What the factory sweep and the script sweep share."""
    bar = SweepProgress(enabled=bool(progress), total=len(values) * repeats, title=f"sweep {param}")
    points: list[SweepPoint] = []
    stop: Stop | None = None
    stopped_idx: int | None = None
    # SIGTERM unwinds like Ctrl-C: the current run's processes and folder go first
    with sigterm_unwinds():
        try:
            for idx, value in enumerate(values):
                points.append(_run_value(param, repeats, run, value, bar))
                stop = stop_check(param, points, flat_within, memory_limit)
                if stop is not None:
                    stopped_idx = idx
                    break
        finally:
            bar.close()
    return points, stop, stopped_idx


def _run_value(
    param: str,
    repeats: int,
    run_one: Callable[[int | float], RunResult],
    value: int | float,
    bar: SweepProgress,
) -> SweepPoint:
    """The repeats of one value; the first failed run ends the value."""
    runs: list[SweepRun] = []
    for r in range(repeats):
        rep = f" run {r + 1}/{repeats}" if repeats > 1 else ""
        bar.start(f"{param}={fmt_value(value)}{rep}")
        run = SweepRun.of(value, r, run_one(value))
        runs.append(run)
        bar.done(_run_line(run))
        if not run.ok:
            bar.skip(repeats - r - 1)
            break
    return SweepPoint.from_runs(value, runs)


def conclude(
    plan: Any,
    name: str,
    settings: dict[str, Any],
    points: list[SweepPoint],
    stop: Stop | None,
    stopped_idx: int | None,
) -> SweepResult:
    """Decide: stop words, recommendation, warnings; build the result. ``plan`` has the
    sweep's ``param``, ``values``, ``fixed``, ``repeats``, ``isolate``, ``flat_within``
    and ``memory_limit``; ``name`` is what was swept (the factory, or the command)."""
    done = finish_points(points, plan.memory_limit, plan.flat_within)
    skipped = plan.values[stopped_idx + 1 :] if stopped_idx is not None else ()
    if stop is None:
        reason = "end"
        detail = f"ran every value ({', '.join(fmt_value(v) for v in plan.values)})"
        rising = still_rising(done, plan.flat_within)
        if rising is not None and rising.gain is not None:
            detail += (
                f"; throughput was still rising at the largest value ({fmt_change_pct(rising.gain)} "
                f"from the value before, more than the noise): larger values may pay off"
            )
        flat_from = None
    else:
        reason, detail, flat_from = stop
        if skipped:
            detail += f"; not tried: {', '.join(fmt_value(v) for v in skipped)}"
    abandoned = sum(r.abandoned for p in done for r in p.runs)
    return SweepResult(
        param=plan.param,
        values=plan.values,
        fixed=plan.fixed,
        points=tuple(done),
        stop_reason=reason,
        stop_detail=detail,
        stopped_at=plan.values[stopped_idx] if stopped_idx is not None else None,
        flat_from=flat_from,
        recommended=recommend(done, plan.flat_within),
        skipped=tuple(skipped),
        warnings=tuple(
            sweep_warnings(
                plan.param,
                plan.fixed,
                done,
                isolate=plan.isolate,
                repeats=plan.repeats,
                abandoned=abandoned,
            )
        ),
        factory=name,
        settings=settings,
        environment=_environment(),
    )


def _settings(plan: _Plan, target: _Target, points: Sequence[SweepPoint]) -> dict[str, Any]:
    phases = list(target.info.phases) if target.info is not None else plan.phases
    if target.info is None:  # isolated 'module:name': the runs saw the phase names
        names = next(
            (
                [n for n in run.phases if n != "(other)"]
                for pt in points
                for run in pt.runs
                if any(n != "(other)" for n in run.phases)
            ),
            None,
        )
        if names:
            phases = names
    return {
        "steps": plan.steps,
        "warmup": plan.warmup,
        "repeats": plan.repeats,
        "isolate": plan.isolate,
        "flat_within": plan.flat_within,
        "memory_limit_bytes": plan.memory_limit,
        "timeout_s": plan.timeout_s,
        "phases": phases,
    }


def _run_line(run: SweepRun) -> str:
    if run.ok:
        return f"{fmt_count(run.samples_per_s)} samples/s"
    return f"{run.status}: {run.error}"
