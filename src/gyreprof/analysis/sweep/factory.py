"""The factory side of a sweep: check it, name it, find it again in a fresh process.

Also where a run can be (``STAGE_WORDS``) and how its errors are put in words,
shared by the runner, the worker and the parent.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gyreprof._support.errors import GyreprofError
from gyreprof.model.histogram import STEP

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


class SweepUsageError(GyreprofError, ValueError):
    """A problem with the factory itself (every value would fail the same way)."""


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
    if "(other)" in names or STEP in names:
        raise SweepUsageError(f"{where}: '(other)' and {STEP!r} are reserved names")
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


def user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without the sweep's own frames."""
    here = os.path.dirname(os.path.realpath(__file__))
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if os.path.dirname(os.path.realpath(f.filename)) != here]
    )
    return "".join(te.format())


def describe_exc(exc: BaseException) -> str:
    """'ValueError: text' (or what a SystemExit means)."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): it called sys.exit()"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
