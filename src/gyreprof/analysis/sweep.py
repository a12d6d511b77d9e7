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
from typing import Any

from gyreprof.analysis._sweep_decide import (
    finish_points,
    recommend,
    stop_check,
    sweep_warnings,
)
from gyreprof.analysis._sweep_report import fmt_count, fmt_gain, fmt_value
from gyreprof.analysis._sweep_result import (
    FORMAT,
    Figure,
    PhaseFigures,
    SweepPoint,
    SweepResult,
    SweepRun,
    parse_bytes,
)
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
    where_it_was,
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
    return where_it_was([(f.filename, f.lineno or 0, f.name) for f in reversed(stack)])


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

    try:  # every run gets its own copy, so a factory that mutates a setting cannot leak it
        kwargs = copy.deepcopy(dict(kwargs))
    except Exception:  # noqa: BLE001 - uncopyable values are passed as they are
        kwargs = dict(kwargs)
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
        raise TypeError(
            f"flat_within must be a fraction such as 0.05, got {flat_within!r}"
        ) from None
    if not 0.0 <= fw < 1.0:
        raise ValueError(
            f"flat_within must be a fraction in [0, 1) such as 0.05, got {flat_within!r}"
        )
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

    bar = SweepProgress(enabled=bool(progress), total=len(vals) * repeats, title=f"sweep {param}")
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
                bar.start(
                    f"{param}={fmt_value(value)}"
                    + (f" run {r + 1}/{repeats}" if repeats > 1 else "")
                )
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
                        fn,
                        info,
                        kwargs,
                        param=param,
                        steps=steps,
                        warmup=warmup,
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
            stop = stop_check(param, points, fw, mem_limit)
            if stop is not None:
                stopped_at = value
                skipped = vals[idx + 1 :]
                break
    finally:
        bar.close()
    done = finish_points(points, mem_limit)
    if stop is None:
        reason = "end"
        detail = f"ran every value ({', '.join(fmt_value(v) for v in vals)})"
        last = [p for p in done if p.ok]
        if len(last) >= 2 and last[-1].gain is not None and last[-1].gain > fw:
            detail += (
                f"; throughput was still rising at the largest value ({fmt_gain(last[-1].gain)} "
                f"from {fmt_value(last[-2].value)}): larger values may pay off"
            )
        flat_from = None
    else:
        reason, detail, flat_from = stop
        if skipped:
            detail += f"; not tried: {', '.join(fmt_value(v) for v in skipped)}"
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
        for pt in done:
            for run in pt.runs:
                names = [n for n in run.phases if n != "(other)"]
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
        recommended=recommend(done, fw),
        skipped=tuple(skipped),
        warnings=tuple(
            sweep_warnings(
                param, fixed_d, done, isolate=isolate, repeats=repeats, abandoned=abandoned
            )
        ),
        factory=name,
        settings=settings,
        environment=_environment(),
    )


def _run_line(run: SweepRun) -> str:
    if run.ok:
        return f"{fmt_count(run.samples_per_s)} samples/s"
    return f"{run.status}: {run.error}"
