"""The child side of ``gyreprof selfcheck``: build the sampler, call it once, report events.

Run by :func:`gyreprof.diagnostics.selfcheck.selfcheck` in a fresh interpreter as::

    python -c "<bootstrap>" EVENTS_FILE STACKS_FILE RUN_DIR TARGET METHOD KWARGS_JSON

The bootstrap puts the package's path first on ``sys.path`` (a ``gyreprof/`` folder
in the current one cannot shadow it), binds the process to its parent
(:func:`gyreprof._subproc.bind_to_parent`: RUN_DIR is removed and the process group
killed if the parent dies) and calls :func:`main` with the other arguments.

Each stage appends one JSON line to EVENTS_FILE (``build``, ``built``, ``call``,
``done`` or ``error``), so the parent knows how far a hung check got.  SIGUSR1
makes faulthandler write every thread's stack to STACKS_FILE, which the parent
asks for before abandoning a call that timed out.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import signal
import sys
import time
import traceback
from typing import IO, Any

from gyreprof._sample_count import NotACount, count_samples

_ENDPOINT_ATTRS = ("endpoint", "url", "base_url", "address", "server_url")


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without this module's and importlib's frames."""
    te = traceback.TracebackException.from_exception(exc)
    for chained in _chain(te):
        kept = [
            f
            for f in chained.stack
            if f.filename not in (__file__, importlib.__file__)
            and not f.filename.startswith("<frozen importlib")
        ]
        chained.stack = traceback.StackSummary.from_list(kept)
    return "".join(te.format())


def _chain(te: traceback.TracebackException) -> list[traceback.TracebackException]:
    out: list[traceback.TracebackException] = []
    todo: list[traceback.TracebackException | None] = [te]
    while todo:
        item = todo.pop()
        if item is None or any(item is o for o in out):
            continue
        out.append(item)
        todo += [item.__cause__, item.__context__]
    return out


def _emit(fh: IO[str], **event: Any) -> None:
    fh.write(json.dumps(event, default=repr) + "\n")
    fh.flush()


def endpoint_of(obj: Any) -> str | None:
    """The sampler's endpoint if it exposes one (``endpoint``, ``url``, ``host``/``port``...)."""
    for attr in _ENDPOINT_ATTRS:
        try:
            value = getattr(obj, attr, None)
        except Exception:
            continue
        if value is not None and not callable(value):
            return str(value)
    try:
        host, port = getattr(obj, "host", None), getattr(obj, "port", None)
    except Exception:
        return None
    if host is not None and port is not None:
        return f"{host}:{port}"
    return None


def count_of(result: Any) -> tuple[int | None, str, str]:
    """How many samples ``result`` stands for, the rule's name and its words.

    The one reading ``gyreprof sweep`` uses too (:func:`gyreprof._sample_count.count_samples`);
    a value that is no count gives ``(None, "refused", why)``.
    """
    try:
        count = count_samples(result)
    except NotACount as exc:
        return None, "refused", str(exc)
    return count.n, count.rule, count.detail


class _Failed(Exception):
    """A self-check step failed: where, what to say, and the user's exception if any."""

    def __init__(
        self, where: str, error: str, exc: BaseException | None = None, **extra: Any
    ) -> None:
        super().__init__(error)
        self.where, self.error, self.exc, self.extra = where, error, exc, extra


def _import_factory(target: str) -> Any:
    module_name, _, factory_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:
        missing = getattr(exc, "name", None)
        if (
            isinstance(exc, ModuleNotFoundError)
            and missing is not None
            and (missing == module_name or module_name.startswith(missing + "."))
        ):
            raise _Failed(
                "import",
                f"cannot import module {module_name!r}: {exc} (is it on sys.path? "
                "run from the folder that holds it, or set PYTHONPATH)",
            ) from None
        raise _Failed(
            "import", f"importing {module_name!r} failed: {type(exc).__name__}: {exc}", exc
        ) from None
    obj: Any = module
    for part in factory_name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            public = sorted(n for n in dir(module) if not n.startswith("_"))
            raise _Failed(
                "import",
                f"module {module_name!r} has no attribute {factory_name!r} "
                f"(it has: {', '.join(public[:30]) or 'nothing public'})",
            ) from None
    if not callable(obj):
        raise _Failed(
            "import", f"{target} is an object of type {type(obj).__name__}, not a callable factory"
        )
    return obj


def _check(events: IO[str], target: str, method: str, kwargs_json: str) -> None:
    _emit(events, stage="build", t=time.monotonic())
    t0 = time.perf_counter()
    factory = _import_factory(target)
    kwargs = json.loads(kwargs_json)
    try:
        sampler = factory(**kwargs)
    except BaseException as exc:
        raise _Failed(
            "build", f"{target}(**{kwargs!r}) raised {type(exc).__name__}: {exc}", exc
        ) from None
    _emit(
        events,
        stage="built",
        build_s=time.perf_counter() - t0,
        sampler_type=_type_name(sampler),
        endpoint=endpoint_of(sampler),
    )
    call = getattr(sampler, method, None) if method else sampler
    if call is None or not callable(call):
        public = sorted(
            n for n in dir(sampler) if not n.startswith("_") and callable(getattr(sampler, n))
        )
        raise _Failed(
            "call",
            f"the sampler ({type(sampler).__name__}) has no method {method!r} "
            f"(its methods: {', '.join(public[:30]) or 'none'}); pass --method NAME",
        )
    _emit(events, stage="call", method=method)
    t1 = time.perf_counter()
    try:
        result = call()
    except BaseException as exc:
        raise _Failed(
            "call",
            f"{method}() raised {type(exc).__name__}: {exc}",
            exc,
            call_s=time.perf_counter() - t1,
        ) from None
    call_s = time.perf_counter() - t1
    count, rule, how = count_of(result)
    _emit(
        events,
        stage="done",
        call_s=call_s,
        result_type=_type_name(result),
        count=count,
        count_rule=rule,
        counted_as=how,
    )


def main(argv: list[str]) -> int:
    events_path, stacks_path, target, method, kwargs_json = argv
    if "" not in sys.path:  # modules in the current folder, after the package's own path
        sys.path.insert(1, "")
    stacks = open(stacks_path, "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    with open(events_path, "a", encoding="utf-8") as events:
        try:
            _check(events, target, method, kwargs_json)
        except _Failed as f:
            _emit(
                events,
                stage="error",
                where=f.where,
                **f.extra,
                error=f.error,
                traceback=_user_traceback(f.exc) if f.exc is not None else None,
            )
            return 1
    return 0
