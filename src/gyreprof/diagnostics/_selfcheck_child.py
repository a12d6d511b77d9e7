"""The child side of ``gyreprof selfcheck``: build the sampler, call it once, report events.

Run by :func:`gyreprof.diagnostics.selfcheck.selfcheck` in a fresh interpreter as::

    python -c "<bootstrap>" EVENTS_FILE STACKS_FILE RUN_DIR TARGET METHOD KWARGS_JSON

The bootstrap puts the package's path first on ``sys.path`` (a ``gyreprof/`` folder
in the current one cannot shadow it), binds the process to its parent
(:func:`gyreprof._support.subproc.bind_to_parent`: RUN_DIR is removed and the process group
killed if the parent dies) and calls :func:`main` with the other arguments.

Each stage appends one JSON line to EVENTS_FILE (``build``, ``built``, ``call``,
``done`` or ``error``), so the parent knows how far a hung check got.

During the call, the exceptions raised and caught inside it (swallowed by a broad
``except``) are collected: on 3.12+ with ``sys.monitoring`` ``RAISE`` and
``EXCEPTION_HANDLED`` events (free until something raises); on 3.10-3.11, or where
every monitoring tool id is taken, with ``sys.settrace`` / ``threading.settrace``
exception events (line events switched off, yet every Python call pays for a trace
call: a call-heavy sampler runs several times slower under the check, and its
``call_s`` says so). For each, its type, message, the file:line that raised it and the
file:line of the last frame it reached, where it was caught. Bounded: at most
:data:`MAX_EXCEPTION_EVENTS` events are looked at and :data:`MAX_SWALLOWED` distinct
exceptions kept, with a count each; those caught inside the standard library
(``hasattr``, importlib, ``getattr`` defaults) and ``StopIteration`` are not counted.
Caught in ``<frozen ...>`` modules counts as the standard library too. For an empty
result the ``done`` event carries the returned object's top-level keys or fields with
their sizes (``"the server answered under another key"``); an object that is no count
but has empty sequences among its fields is an empty result (rule ``empty fields``).
For an HTTP sampler, the last response's status and the top-level keys of the last
JSON document decoded during the call (``http``).  SIGUSR1
makes faulthandler write every thread's stack to STACKS_FILE, which the parent
asks for before abandoning a call that timed out.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import importlib
import json
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback
from types import FrameType
from typing import IO, Any

from gyreprof._support.sample_count import NotACount, count_samples

_ENDPOINT_ATTRS = ("endpoint", "url", "base_url", "address", "server_url")

#: exception events looked at during the call (then no more are recorded)
MAX_EXCEPTION_EVENTS = 10_000
#: distinct swallowed exceptions kept (type, message, where raised, where caught)
MAX_SWALLOWED = 20
#: top-level keys or fields shown for an empty result
MAX_FIELDS = 20
_NOT_SWALLOWED = (StopIteration, StopAsyncIteration, GeneratorExit, KeyboardInterrupt)


def _skip_prefixes() -> tuple[str, ...]:
    """Folders whose catches are not the user's: the standard library and gyreprof."""
    out = {os.path.dirname(os.path.abspath(__file__)).rsplit(os.sep, 1)[0]}
    for key in ("stdlib", "platstdlib"):
        try:
            out.add(os.path.abspath(sysconfig.get_paths()[key]))
        except (KeyError, OSError):
            continue
    return tuple(p + os.sep for p in out)


def _library_prefixes() -> tuple[str, ...]:
    """site-packages folders: an installed library's catches count (it may be the user's)."""
    out = set()
    for key in ("purelib", "platlib"):
        try:
            out.add(os.path.abspath(sysconfig.get_paths()[key]) + os.sep)
        except (KeyError, OSError):
            continue
    return tuple(out)


class _SwallowWatch:
    """Collects the exceptions raised inside a call that did not leave it (see the module
    docstring); ``install`` / ``remove`` around the call."""

    def __init__(self) -> None:
        self.events = 0
        self.active = False  # threads the call started keep the hook: it stops answering
        self._live: dict[int, tuple[BaseException, str, str]] = {}  # id -> (exc, raised, last)
        self._skip = _skip_prefixes()
        self._libraries = _library_prefixes()

    @staticmethod
    def _where(frame: FrameType) -> str:
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.active or self.events >= MAX_EXCEPTION_EVENTS:
            return None
        frame.f_trace_lines = False
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.active:
            return None
        if event == "exception" and self.events < MAX_EXCEPTION_EVENTS:
            self.events += 1
            exc = arg[1]
            if isinstance(exc, BaseException) and not isinstance(exc, _NOT_SWALLOWED):
                key = id(exc)
                here = self._where(frame)
                known = self._live.get(key)
                if known is None or known[0] is not exc:
                    if len(self._live) < MAX_EXCEPTION_EVENTS:
                        self._live[key] = (exc, here, here)
                else:
                    self._live[key] = (exc, known[1], here)
        return self._local

    def install(self) -> None:
        self.active = True
        try:
            if self._monitor_install():
                return
        except Exception:  # an interpreter whose sys.monitoring differs: trace instead
            self._tool = None
        threading.settrace(self._global)
        sys.settrace(self._global)

    def remove(self) -> None:
        self.active = False
        if self._tool is not None:
            self._monitor_remove()
            return
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]

    # -- 3.12+: sys.monitoring RAISE / EXCEPTION_HANDLED (no cost until something raises)
    _tool: int | None = None

    @property
    def how(self) -> str:
        """The hook in use: ``sys.monitoring`` or ``sys.settrace`` (which slows the call)."""
        return "sys.monitoring" if self._tool is not None else "sys.settrace"

    def _monitor_install(self) -> bool:
        mon: Any = getattr(sys, "monitoring", None)
        if mon is None:
            return False
        for tool in (mon.DEBUGGER_ID, mon.PROFILER_ID, 3, 4):
            try:
                mon.use_tool_id(tool, "gyreprof-selfcheck")
            except ValueError:
                continue  # taken by a debugger, coverage or a profiler
            try:
                ev = mon.events
                mon.register_callback(tool, ev.RAISE, self._on_raise)
                mon.register_callback(tool, ev.EXCEPTION_HANDLED, self._on_handled)
                mon.set_events(tool, ev.RAISE | ev.EXCEPTION_HANDLED)
            except Exception:
                mon.free_tool_id(tool)
                return False
            self._tool = tool
            return True
        return False

    def _monitor_remove(self) -> None:
        mon: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool, self._tool = self._tool, None
        try:
            mon.set_events(tool, 0)
            mon.register_callback(tool, mon.events.RAISE, None)
            mon.register_callback(tool, mon.events.EXCEPTION_HANDLED, None)
            mon.free_tool_id(tool)
        except Exception:
            pass

    @staticmethod
    def _code_where(code: Any, offset: int) -> str:
        line = None
        for start, end, lineno in code.co_lines():
            if start <= offset < end:
                line = lineno
                break
        return f"{code.co_filename}:{line if line is not None else '?'}"

    def _on_raise(self, code: Any, offset: int, exc: BaseException) -> None:
        try:  # a callback that raised would raise into the sampler's code
            if not self.active or self.events >= MAX_EXCEPTION_EVENTS:
                return
            self.events += 1
            if isinstance(exc, _NOT_SWALLOWED):
                return
            known = self._live.get(id(exc))
            if (known is None or known[0] is not exc) and len(self._live) < MAX_EXCEPTION_EVENTS:
                here = self._code_where(code, offset)
                self._live[id(exc)] = (exc, here, here)
        except Exception:
            pass

    def _on_handled(self, code: Any, offset: int, exc: BaseException) -> None:
        try:
            if not self.active:
                return
            known = self._live.get(id(exc))
            if known is not None and known[0] is exc:
                self._live[id(exc)] = (exc, known[1], self._code_where(code, offset))
        except Exception:
            pass

    def swallowed(self, escaped: BaseException | None) -> list[dict[str, Any]]:
        """The exceptions caught inside the call, alike ones counted together."""
        kept: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for exc, raised, caught in self._live.values():
            if exc is escaped or _in_chain(exc, escaped):
                continue
            if caught.startswith("<") or (
                caught.startswith(self._skip) and not caught.startswith(self._libraries)
            ):
                # caught by the standard library (hasattr, importlib, <frozen os>): not
                # swallowed by the user's code
                continue
            key = (_type_name(exc), str(exc)[:300], raised, caught)
            if key in kept:
                kept[key]["count"] += 1
            elif len(kept) < MAX_SWALLOWED:
                kept[key] = {
                    "type": key[0],
                    "message": key[1],
                    "raised_at": raised,
                    "caught_at": caught,
                    "count": 1,
                }
        return sorted(kept.values(), key=lambda d: -int(d["count"]))


class _HttpWatch:
    """The last HTTP response seen during the call: its status (``http.client``, under
    urllib, requests and urllib3; ``httpx`` when loaded) and the top-level keys of the
    last JSON document decoded (``json.loads`` / ``json.load``: what ``.json()`` calls).
    ``install`` / ``remove`` around the call."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.keys: list[str] | None = None
        self._undo: list[tuple[Any, str, Any]] = []

    def _patch(self, owner: Any, name: str, make: Any) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        self._undo.append((owner, name, original))
        setattr(owner, name, make(original))

    def _saw_json(self, value: Any) -> None:
        if isinstance(value, dict):
            self.keys = [str(k)[:60] for k in list(value)[:MAX_FIELDS]]
        elif isinstance(value, list):
            self.keys = [f"(a list of {len(value)} items, no keys)"]

    def install(self) -> None:
        import http.client
        import json as json_module

        watch = self

        def begin(original: Any) -> Any:
            def wrapped(resp: Any, *args: Any, **kwargs: Any) -> Any:
                out = original(resp, *args, **kwargs)
                watch.status = getattr(resp, "status", None)
                return out

            return wrapped

        def decoding(original: Any) -> Any:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                out = original(*args, **kwargs)
                if watch.status is not None:
                    watch._saw_json(out)
                return out

            return wrapped

        self._patch(http.client.HTTPResponse, "begin", begin)
        self._patch(json_module, "loads", decoding)
        self._patch(json_module, "load", decoding)
        httpx = sys.modules.get("httpx")
        if httpx is not None:

            def send(original: Any) -> Any:
                def wrapped(*args: Any, **kwargs: Any) -> Any:
                    resp = original(*args, **kwargs)
                    watch.status = getattr(resp, "status_code", None)
                    return resp

                return wrapped

            self._patch(getattr(httpx, "Client", None), "send", send)

    def remove(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()

    def event(self) -> dict[str, Any] | None:
        if self.status is None:
            return None
        return {"status": self.status, "keys": self.keys}


def empty_sequences(obj: Any) -> bool:
    """Whether an object that is no count has empty sequences among its fields (a result
    whose ``items`` came back empty): then it is an empty result, not a failure."""
    if isinstance(obj, (str, bytes, dict)) or obj is None:
        return False
    items: list[Any] = []
    try:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            items = [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
            items = list(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            items = [v for k, v in vars(obj).items() if not k.startswith("_")]
    except Exception:
        return False
    for value in items:
        if isinstance(value, (str, bytes)):
            continue
        try:
            if hasattr(value, "__getitem__") and len(value) == 0:
                return True
        except Exception:
            continue
    return False


def _in_chain(exc: BaseException, escaped: BaseException | None) -> bool:
    """Whether ``exc`` is the cause or context of the exception that left the call."""
    seen = 0
    while escaped is not None and seen < 100:
        escaped = escaped.__cause__ or escaped.__context__
        if escaped is exc:
            return True
        seen += 1
    return False


def _size_words(value: Any) -> str:
    if isinstance(value, (str, bytes)):
        return f"{_type_name(value)} {value[:40]!r}"
    try:
        n = len(value)
    except Exception:
        return _type_name(value)
    return f"{_type_name(value)}, {n} item{'s' if n != 1 else ''}"


def fields_of(obj: Any) -> list[str]:
    """Top-level keys or fields of ``obj`` with their types and sizes: ``"data (list, 8
    items)"``; empty for an object without any."""
    items: list[tuple[str, Any]] = []
    try:
        if isinstance(obj, dict):
            items = [(repr(k), v) for k, v in list(obj.items())[: MAX_FIELDS + 1]]
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            items = [(f.name, getattr(obj, f.name, None)) for f in dataclasses.fields(obj)]
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
            items = list(zip(obj._fields, obj, strict=False))
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            items = [(k, v) for k, v in vars(obj).items() if not k.startswith("_")]
    except Exception:
        return []
    out = [f"{name} ({_size_words(value)})" for name, value in items[:MAX_FIELDS]]
    if len(items) > MAX_FIELDS:
        out.append("...")
    return out


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

    The one reading ``gyreprof sweep`` uses too (:func:`gyreprof._support.sample_count.count_samples`);
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
    watch = _SwallowWatch()
    http = _HttpWatch()
    t1 = time.perf_counter()
    try:
        http.install()
    except Exception:  # an http.client or json of another shape: no HTTP view
        http.remove()
    watch.install()
    try:
        result = call()
    except BaseException as exc:
        watch.remove()
        http.remove()
        raise _Failed(
            "call",
            f"{method}() raised {type(exc).__name__}: {exc}",
            exc,
            call_s=time.perf_counter() - t1,
            swallowed=watch.swallowed(exc),
            http=http.event(),
        ) from None
    hook = watch.how
    watch.remove()
    http.remove()
    call_s = time.perf_counter() - t1
    count, rule, how = count_of(result)
    if rule == "refused" and empty_sequences(result):
        count, rule = 0, "empty fields"
        how = "an object with empty sequences among its fields (see them below)"
    _emit(
        events,
        stage="done",
        call_s=call_s,
        result_type=_type_name(result),
        count=count,
        count_rule=rule,
        counted_as=how,
        swallowed=watch.swallowed(None),
        exception_watch=hook,
        result_fields=fields_of(result) if not count else [],
        http=http.event(),
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
