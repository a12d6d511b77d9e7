"""One measured run of a sweep: build the sampler for one value, warm it up, time its calls.

Private helper of :mod:`gyreprof.analysis.sweep`. The same code runs inside the
fresh subprocess of an isolated sweep (see ``_sweep_worker``) and in the calling
process when ``isolate=False``, so both modes measure exactly the same way:

* a :class:`~gyreprof.profiler.Profiler` marks one *step* per sampler call
  (``begin()`` right before the call, ``end()`` right after it), so the step
  histogram holds the time spent inside the sampler and nothing else;
* the first ``warmup`` calls are the profiler's warm-up steps (reported apart);
* a factory that takes a ``prof`` keyword gets that Profiler, built with the
  phase names the factory declares, and records its own phases inside each call.

The result is a JSON-ready dict (see ``run_once``), so it crosses the process
boundary unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
import reprlib
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RESERVED = ("prof",)
_IDENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

# Where a run can be, in the words the error messages use.
STAGE_WORDS: dict[str, str] = {
    "start": "starting the worker process",
    "import": "importing the factory",
    "build": "building the sampler (the factory call)",
    "warmup": "the warm-up calls",
    "measure": "the measured calls",
    "close": "closing the sampler",
    "report": "reporting the result",
    "done": "finishing",
}


class SweepUsageError(ValueError):
    """A problem with the factory itself (every value would fail the same way)."""


class _BadReturn(Exception):
    pass


# ------------------------------------------------------------------ the factory


@dataclass(frozen=True)
class FactoryInfo:
    """What the sweep needs to know about a factory before calling it."""

    name: str  # "module:qualname" (or repr) for messages
    accepts_prof: bool
    phases: tuple[str, ...]  # the phase names its sampler records; () when none


def factory_name(factory: Any) -> str:
    if isinstance(factory, str):
        return factory
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None) or getattr(factory, "__name__", None)
    if module and qualname:
        return f"{module}:{qualname}"
    return repr(factory)


def _validate_phase_names(phases: Any, where: str) -> tuple[str, ...]:
    if isinstance(phases, str) or not isinstance(phases, Sequence):
        raise SweepUsageError(
            f"{where} must be a list of phase names such as ('env', 'policy'), got {phases!r}"
        )
    names = tuple(phases)
    for n in names:
        if not isinstance(n, str) or not n.strip():
            raise SweepUsageError(f"{where}: phase names must be non-empty strings, got {n!r}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SweepUsageError(f"{where}: phase names must be unique; repeated: {dup}")
    if "(other)" in names or "(step)" in names:
        raise SweepUsageError(f"{where}: '(other)' and '(step)' are reserved names")
    return names


def inspect_factory(
    factory: Callable[..., Any],
    param: str,
    fixed_keys: Sequence[str],
    phases: Sequence[str] | None = None,
) -> FactoryInfo:
    """Check that ``factory`` can be called with ``param`` and ``fixed_keys``.

    Reads whether it takes a ``prof`` keyword and which phase names it declares
    (``phases`` given to the sweep, else a ``phases`` attribute of the factory).
    Raises ``SweepUsageError`` (a ValueError) naming the problem and the fix.
    """
    name = factory_name(factory)
    if not callable(factory):
        raise SweepUsageError(
            f"factory {name} is not callable; pass a function or class that builds the "
            "sampler, or 'module:name'"
        )
    try:
        sig: inspect.Signature | None = inspect.signature(factory)
    except (TypeError, ValueError):
        sig = None  # builtins and some C callables: nothing to check
    accepts_prof = False
    if sig is not None:
        params = sig.parameters
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        by_kw = {
            n
            for n, p in params.items()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        }
        accepts_prof = "prof" in by_kw
        given = [param, *fixed_keys]
        if not var_kw:
            unknown = [k for k in given if k not in by_kw]
            if unknown:
                raise SweepUsageError(
                    f"factory {name} has no keyword parameter {unknown[0]!r} "
                    f"(its parameters: {', '.join(by_kw) or 'none'}); the sweep calls "
                    f"factory({param}=value, **fixed)"
                )
        missing = [
            n
            for n, p in params.items()
            if p.default is inspect.Parameter.empty
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
            and n not in given
            and n != "prof"
        ]
        if missing:
            raise SweepUsageError(
                f"factory {name} needs {missing[0]!r}, which neither the swept parameter "
                f"{param!r} nor fixed= gives; add it to fixed (fixed={{{missing[0]!r}: ...}})"
            )
    if phases is not None:
        declared = _validate_phase_names(phases, "phases")
    else:
        attr = getattr(factory, "phases", None)
        declared = () if attr is None else _validate_phase_names(attr, f"{name}.phases")
    if accepts_prof and not declared:
        raise SweepUsageError(
            f"factory {name} takes a 'prof' keyword but declares no phase names; set "
            f"{name.rpartition(':')[2]}.phases = ('env', 'policy') on the factory (or pass "
            "phases=[...] to sweep) so the sweep can build the Profiler it passes in"
        )
    if declared and not accepts_prof:
        raise SweepUsageError(
            f"phases {list(declared)} were declared, but factory {name} has no 'prof' "
            "parameter to receive the Profiler that records them; add prof=None to its "
            "signature or drop the phases"
        )
    return FactoryInfo(name=name, accepts_prof=accepts_prof, phases=declared)


# ------------------------------------------------------------------- targets


def parse_target(text: str) -> tuple[str, str]:
    """Split ``'package.module:name'``; SweepUsageError naming the expected form otherwise."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise SweepUsageError(
            f"a factory given as text must look like 'package.module:factory', got {text!r}"
        )
    module, qualname = text.split(":")

    def dotted(s: str) -> bool:
        parts = s.split(".")
        return all(p and p[0] not in "0123456789" and set(p) <= set(_IDENT_CHARS) for p in parts)

    if not dotted(module) or not dotted(qualname):
        raise SweepUsageError(
            f"a factory given as text must look like 'package.module:factory' (Python names), "
            f"got {text!r}"
        )
    return module, qualname


def describe_target(factory: Any) -> dict[str, Any]:
    """How a subprocess finds ``factory``: ``{"module", "qualname", "main_path"}``.

    Text ``'module:name'`` is checked for an importable module (without running
    it); a callable must be reachable by its ``__module__`` and ``__qualname__``.
    """
    if isinstance(factory, str):
        module, qualname = parse_target(factory)
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as exc:
            raise SweepUsageError(
                f"cannot import module {module!r} of factory {factory!r}: {exc}"
            ) from None
        if spec is None:
            raise SweepUsageError(
                f"cannot import module {module!r} of factory {factory!r}: no such module on "
                "sys.path (run from the folder that holds it, or add it to PYTHONPATH)"
            )
        return {"module": module, "qualname": qualname, "main_path": None}
    name = factory_name(factory)
    mod_attr = getattr(factory, "__module__", None)
    qual_attr = getattr(factory, "__qualname__", None)
    if not isinstance(mod_attr, str) or not isinstance(qual_attr, str):
        raise SweepUsageError(
            f"isolate=True needs a factory that a fresh process can import by name; {name} "
            "has no __module__/__qualname__. Pass 'module:name', or use isolate=False"
        )
    module, qualname = mod_attr, qual_attr
    if "<lambda>" in qualname or "<locals>" in qualname:
        what = "a lambda" if "<lambda>" in qualname else "defined inside a function"
        raise SweepUsageError(
            f"isolate=True runs each value in a fresh process, which must import the factory "
            f"by name, but {name} is {what}; define it at module level (or pass "
            "'module:name'), or use isolate=False"
        )
    main_path = None
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and getattr(spec, "name", None) and spec.name != "__main__":
            module = spec.name  # run as `python -m pkg.mod`: importable by that name
        else:
            main_path = getattr(main, "__file__", None)
            if not main_path:
                raise SweepUsageError(
                    f"isolate=True cannot re-create {qualname} in a fresh process: it was "
                    "defined interactively in __main__; move it into a module (or a script "
                    "file), or use isolate=False"
                )
            main_path = os.path.abspath(main_path)
    obj = sys.modules.get(getattr(factory, "__module__", ""), None)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is not factory:
        raise SweepUsageError(
            f"isolate=True needs {name} to be importable under that name, but "
            f"{name} names something else (a decorated or redefined function?); pass "
            "'module:name' of the real factory, or use isolate=False"
        )
    return {"module": module, "qualname": qualname, "main_path": main_path}


def load_target(target: Mapping[str, Any]) -> Callable[..., Any]:
    """Import the factory described by ``describe_target`` (in the subprocess)."""
    module_name = str(target["module"])
    qualname = str(target["qualname"])
    main_path = target.get("main_path")
    shown = f"{module_name}:{qualname}" if not main_path else f"{main_path}:{qualname}"
    if main_path:
        spec = importlib.util.spec_from_file_location("__mp_main__", main_path)
        if spec is None or spec.loader is None:
            raise SweepUsageError(f"cannot load factory {shown}: {main_path} is not a module")
        module = importlib.util.module_from_spec(spec)
        # the script's `if __name__ == "__main__":` block does not run here
        sys.modules["__mp_main__"] = module
        sys.modules["__main__"] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise SweepUsageError(
                f"cannot import module {module_name!r} of factory {shown}: {exc}"
            ) from exc
    obj: Any = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SweepUsageError(
                f"cannot load factory {shown}: {module_name} has no attribute {qualname!r}"
            ) from None
    return obj  # type: ignore[no-any-return]


# ----------------------------------------------------------- what a process sees


def peak_rss_bytes() -> int | None:
    """High-water mark of this process's resident memory, in bytes (None: unknown).

    On Linux this is ``VmHWM`` from ``/proc/self/status``: the peak of this
    process's own address space. ``getrusage().ru_maxrss`` is not used there
    because it carries the parent's peak across fork/exec, which would make a
    fresh subprocess report the (larger) peak of the process that started it.
    """
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        try:
            import psutil

            info = psutil.Process().memory_info()
            return int(getattr(info, "peak_wset", info.rss))
        except Exception:  # noqa: BLE001
            return None
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(ru) if sys.platform == "darwin" else int(ru) * 1024


def children_rss_bytes() -> int:
    """Resident memory of this process's live descendants now (vector-env workers), bytes."""
    import psutil

    total = 0
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for k in kids:
        try:
            total += int(k.memory_info().rss)
        except psutil.Error:
            continue
    return total


def _cuda() -> Any:
    """torch.cuda when torch is already imported and CUDA is initialised, else None.

    Never imports torch and never initialises CUDA itself.
    """
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is None:
        return None
    try:
        if not cuda.is_available() or not cuda.is_initialized():
            return None
    except Exception:  # noqa: BLE001 - a broken torch install must not break the sweep
        return None
    return cuda


def reset_gpu_peak() -> None:
    cuda = _cuda()
    if cuda is None:
        return
    try:
        for d in range(cuda.device_count()):
            cuda.reset_peak_memory_stats(d)
    except Exception:  # noqa: BLE001
        pass


def gpu_peak_bytes() -> int | None:
    """Peak bytes torch allocated on CUDA (summed over devices); None without CUDA in use."""
    cuda = _cuda()
    if cuda is None:
        return None
    try:
        return sum(int(cuda.max_memory_allocated(d)) for d in range(cuda.device_count()))
    except Exception:  # noqa: BLE001
        return None


def observe_threads() -> dict[str, int]:
    """Thread and process counts this process shows now (compared across values)."""
    import psutil

    out: dict[str, int] = {}
    try:
        proc = psutil.Process()
        out["os_threads"] = int(proc.num_threads())
        out["child_processes"] = len(proc.children(recursive=True))
    except psutil.Error:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            out["torch_threads"] = int(torch.get_num_threads())
        except Exception:  # noqa: BLE001
            pass
    if "threadpoolctl" in sys.modules or importlib.util.find_spec("threadpoolctl") is not None:
        try:
            from threadpoolctl import threadpool_info

            for info in threadpool_info():
                key = f"{info.get('user_api', 'pool')}_threads"
                out[key] = max(out.get(key, 0), int(info.get("num_threads", 0)))
        except Exception:  # noqa: BLE001 - optional and best effort
            pass
    return out


_SIMPLE = (bool, int, float, str, type(None))
_MISSING = object()


def _simple(value: Any) -> Any:
    item = getattr(value, "item", None)
    if not isinstance(value, _SIMPLE) and callable(item):
        try:
            value = item()
        except Exception:  # noqa: BLE001
            return _MISSING
    return value if isinstance(value, _SIMPLE) else _MISSING


def observe_settings(sampler: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The settings the built sampler reports about itself, for the keys the sweep passed.

    Looks at attributes of the sampler (and of the object behind a bound
    method), then at a ``config`` mapping on it; only plain scalars count.
    """
    targets = [sampler]
    owner = getattr(sampler, "__self__", None)
    if inspect.ismethod(sampler) and owner is not None:
        targets.append(owner)
    out: dict[str, Any] = {}
    for key in keys:
        for t in targets:
            try:
                val = _simple(getattr(t, key, _MISSING))
            except Exception:  # noqa: BLE001 - a property may raise
                val = _MISSING
            if val is _MISSING:
                try:
                    cfg = getattr(t, "config", None)
                    if isinstance(cfg, Mapping) and key in cfg:
                        val = _simple(cfg[key])
                except Exception:  # noqa: BLE001
                    val = _MISSING
            if val is not _MISSING:
                out[key] = val
                break
    return out


def where_it_was(frames: Sequence[tuple[str, int, str]]) -> str | None:
    """'func (file:line)' for the innermost frame of a stack given innermost first, plus
    the innermost frame of user code when the innermost one is in the standard library."""
    if not frames:
        return None
    import sysconfig

    lib_dirs = tuple(
        os.path.realpath(p)
        for p in {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
        if p
    )
    here = os.path.dirname(os.path.realpath(__file__))

    def is_lib(path: str) -> bool:
        real = os.path.realpath(path)
        return real.startswith(lib_dirs) and "site-packages" not in real

    def show(f: tuple[str, int, str]) -> str:
        return f"{f[2]} ({os.path.basename(f[0])}:{f[1]})"

    inner = frames[0]
    text = show(inner)
    if is_lib(inner[0]):
        user = next(
            (
                f
                for f in frames
                if not is_lib(f[0])
                and not os.path.realpath(f[0]).startswith(here)
                and not f[0].startswith("<")
            ),
            None,
        )
        if user is not None:
            text += f", called from {show(user)}"
    return text


# ------------------------------------------------------------------- the run


def _user_traceback(exc: BaseException) -> str:
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != __file__])
    return "".join(te.format())


def _describe_exc(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): it called sys.exit()"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _count(n: Any, i: int, warmup: int) -> int:
    """Validate a sampler call's return value (called only when it is not a plain int > 0)."""
    where = f"call {i + 1}" + (" (warm-up)" if i < warmup else "")
    hint = (
        "a sampler call must return how many samples it produced, a positive int "
        "(e.g. `return len(batch)`)"
    )
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise _BadReturn(
            f"the sampler returned {type(n).__name__} {reprlib.repr(n)} at {where}; {hint}"
        )
    value = int(n.__index__())
    if value <= 0:
        raise _BadReturn(f"the sampler returned {value} samples at {where}; {hint}")
    return value


def _empty_result(stage: str) -> dict[str, Any]:
    return {
        "status": "ok",
        "stage": stage,
        "error": None,
        "traceback": None,
        "notes": [],
    }


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
) -> dict[str, Any]:
    """Build the sampler with ``kwargs``, make ``warmup`` + ``steps`` calls, report.

    ``stage(name)`` is told where the run is (see ``STAGE_WORDS``); ``holder``
    (in-process runs) receives the Profiler so a watcher can read its progress.
    Returns a JSON-ready dict with ``status`` one of ``"ok"``, ``"error"`` (the
    factory or the sampler raised) or ``"invalid"`` (the factory returned no
    sampler, or a call returned no positive sample count). Figures: ``samples``,
    ``calls`` (steady), ``warmup_calls``, ``sample_time_ns`` (time inside the
    steady calls), ``samples_per_s``, ``call`` (mean/p50/p99/min/max ns),
    ``warmup`` (mean/first ns), ``phases`` (per phase: per_call_ns, share, p50_ns,
    p99_ns, count_per_call), ``peak_rss_bytes``, ``baseline_rss_bytes``,
    ``children_rss_bytes``, ``peak_gpu_bytes``, ``threads``, ``observed`` and the
    gyreprof ``summary`` (``Summary.to_dict()``).
    """
    from gyreprof.profiler import Profiler

    res = _empty_result("build")
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
    res["baseline_rss_bytes"] = peak_rss_bytes()
    stage("build")
    call_kwargs = dict(kwargs)
    given = {k: _safe_repr(v) for k, v in kwargs.items()}
    if info.accepts_prof:
        call_kwargs["prof"] = prof
    try:
        obj = factory(**call_kwargs)
    except (Exception, SystemExit) as exc:
        res.update(
            status="error",
            error=f"the factory raised {_describe_exc(exc)}",
            traceback=_user_traceback(exc),
        )
        return res
    sample = getattr(obj, "sample", None)
    if obj is not None and callable(sample):
        call = sample
    elif obj is not None and callable(obj):
        call = obj
    else:
        what = "None" if obj is None else f"a {type(obj).__name__}"
        res.update(
            status="invalid",
            error=(
                f"the factory returned {what}, which is neither callable nor has a .sample() "
                "method; it must return the sampler (a function, or an object with .sample(), "
                "that makes one sampling call and returns how many samples it produced)"
            ),
        )
        return res
    res["observed"] = observe_settings(obj, [param, *[k for k in kwargs if k != param]])
    begin, end = prof.begin, prof.end
    total = warmup + steps
    samples = 0
    per_call_min = math.inf
    per_call_max = 0
    i = 0
    try:
        stage("warmup" if warmup else "measure")
        for i in range(total):
            if i == warmup and warmup:
                stage("measure")
            begin()
            n = call()
            end()
            if type(n) is not int or n <= 0:
                n = _count(n, i, warmup)
            if i >= warmup:
                samples += n
                if n < per_call_min:
                    per_call_min = n
                if n > per_call_max:
                    per_call_max = n
    except _BadReturn as exc:
        res.update(status="invalid", error=str(exc), stage="warmup" if i < warmup else "measure")
        _close(obj, res)
        return res
    except (Exception, SystemExit) as exc:
        where = f"call {i + 1}" + (" (warm-up)" if i < warmup else "")
        res.update(
            status="error",
            error=f"the sampler raised {_describe_exc(exc)} at {where}",
            traceback=_user_traceback(exc),
            stage="warmup" if i < warmup else "measure",
        )
        _close(obj, res)
        return res
    stage("report")
    summary = prof.summary()
    res["peak_rss_bytes"] = peak_rss_bytes()
    res["children_rss_bytes"] = children_rss_bytes()
    res["peak_gpu_bytes"] = gpu_peak_bytes()
    res["threads"] = observe_threads()
    step = summary.step
    sample_ns = float(step.sum_ns)
    res.update(
        samples=samples,
        calls=int(summary.steps),
        warmup_calls=int(summary.warmup.steps),
        sample_time_ns=sample_ns,
        samples_per_s=samples / (sample_ns / 1e9) if sample_ns > 0 else math.nan,
        samples_per_call_min=int(per_call_min) if samples else 0,
        samples_per_call_max=int(per_call_max),
        call={
            "mean_ns": step.mean,
            "p50_ns": step.p50,
            "p99_ns": step.p99,
            "min_ns": step.min,
            "max_ns": step.max,
        },
        warmup={
            "calls": int(summary.warmup.steps),
            "mean_ns": float(summary.warmup.mean_ns.get("(step)", math.nan)),
            "first_ns": float(summary.warmup.first_ns.get("(step)", math.nan)),
        },
    )
    phases: dict[str, dict[str, float]] = {}
    if info.phases and summary.steps:
        covered = 0.0
        for name in info.phases:
            st = summary.phases[name]
            covered += st.sum_ns
            phases[name] = {
                "per_call_ns": st.sum_ns / summary.steps,
                "share": st.share,
                "p50_ns": st.p50,
                "p99_ns": st.p99,
                "count_per_call": st.count / summary.steps,
            }
        other = max(0.0, sample_ns - covered)
        phases["(other)"] = {
            "per_call_ns": other / summary.steps,
            "share": other / sample_ns if sample_ns > 0 else math.nan,
            "p50_ns": math.nan,
            "p99_ns": math.nan,
            "count_per_call": math.nan,
        }
    res["phases"] = phases
    if summary.steps + summary.warmup.steps != total:
        res["notes"].append(
            f"the profiler counted {summary.steps + summary.warmup.steps} calls, not {total}: "
            "the sampler seems to call prof.begin()/prof.end() itself; record phases with "
            "prof.phase(name), prof.lap(id) or prof.record() only"
        )
    res["summary"] = summary.to_dict()
    for k, v in kwargs.items():
        now = _safe_repr(v)
        if now != given[k]:
            res["notes"].append(
                f"the sampler changed setting {k} in place ({given[k]} -> {now}); the sweep "
                "hands every run its own copy, but the figures reflect the changed value"
            )
    _close(obj, res)
    res["stage"] = "done"
    return res


def _safe_repr(v: Any) -> str:
    try:
        return reprlib.repr(v)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not fail the run
        return object.__repr__(v)


def _close(obj: Any, res: dict[str, Any]) -> None:
    close = getattr(obj, "close", None)
    if close is None:
        owner = getattr(obj, "__self__", None)
        close = getattr(owner, "close", None) if owner is not None else None
    if not callable(close):
        return
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - reported, the measurement stands
        res.setdefault("notes", []).append(f"sampler.close() raised {_describe_exc(exc)}")
