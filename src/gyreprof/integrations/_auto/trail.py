"""The start-up trail: what each process of a ``gyreprof run`` did before its first record.

Every process writes ``<run dir>/<pid>.trail``, one JSON object a line, each line
one ``write`` on an ``O_APPEND`` descriptor (no buffer to lose: the trail outlives
a hang, a SIGKILL or a crash):

- ``launch``: pid, parent, argv, cwd, Python version and executable, virtualenv,
  the ``CUDA_*`` and thread-count variables (written before the user's code);
- ``import`` / ``imported`` / ``import-failed``: the modules imported, with their
  nesting depth and time (top-level packages, and the user's own submodules;
  at most :data:`MAX_IMPORT_LINES` lines);
- ``exc`` / ``exc-up``: each exception raised during start-up (type, message, the
  file:line where it first reached a traced frame, the thread), then each frame it
  propagated into; the last frame it reached is where it was caught. At most
  :data:`MAX_EXCEPTIONS` exceptions, messages cut at :data:`MAX_MESSAGE`;
- ``first-record``: the first phase or step recorded; tracing ends there;
- raw ``faulthandler`` text: the stacks of every thread on a fatal signal, and once
  at ``$GYREPROF_STARTUP_TIMEOUT`` seconds if no record came by then.

How exceptions are seen: one tracer per Python version, no fallback. On 3.12+,
``sys.monitoring`` (RAISE, EXCEPTION_HANDLED). On 3.10-3.11, the bounded way: a trace
function in C (``gyreprof._core.trace``, installed with ``PyEval_SetTrace``; new threads
get it through ``threading.settrace``, set when ``threading`` is imported (this module
does not import it), and a shim that puts it in place at the thread's first call). It
turns line events off in every frame it sees called, ignores frames of the standard
library and of gyreprof (decided once per code object), and calls back into Python only
for the exceptions it records: at most :data:`MAX_EXCEPTIONS`, and :data:`MAX_UP_LINES`
frames followed for each (an exception raised in the standard library is named at the
first frame of the user's or a library's code it reaches); where the extension is not
built, importing this module is an ImportError that says how to build it. Tracing
pauses, in the importing thread, while any module of a library (site-packages) or of the
standard library runs its body, submodules included: any trace function makes 3.11 run
every bytecode of its thread through its tracing dispatch, and those imports are most of
a start-up; an exception a library raises and swallows inside its own import is
therefore not seen (one that reaches the user's code is, named there). What stays
traced: the user's own modules and functions and the library code they call. Exceptions
the import machinery handles, ``StopIteration`` and ``GeneratorExit`` are not recorded.
The trace function is switched off for good at the first record (each thread drops it at
its next call), so nothing of it runs in the loop. See the README ("gyreprof run:
start-up") for its cost.
"""

from __future__ import annotations

import _thread
import faulthandler
import os
import sys
import time
from _json import encode_basestring_ascii as _json_str

from gyreprof.model.trail_file import STDLIB as _STDLIB
from gyreprof.model.trail_file import trail_path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType, ModuleType
    from typing import Any

# What runs before the user's code (the writing half of this module) imports only
# modules a bare interpreter has loaded, and ``_json`` and ``faulthandler``: no json,
# pathlib, sysconfig, typing, threading or importlib (tests/test_trail.py counts them).
# The reading half imports json and pathlib where it needs them.

ENV_STARTUP_TIMEOUT = "GYREPROF_STARTUP_TIMEOUT"
MAX_EXCEPTIONS = 64
MAX_MESSAGE = 200
MAX_IMPORT_LINES = 400
MAX_UP_LINES = 12  # frames an exception is followed through, each
_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TORCH_NUM_THREADS",
    "RAYON_NUM_THREADS",
)
_SKIP_TYPES = (StopIteration, StopAsyncIteration, GeneratorExit)


_GYREPROF = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


_OWN: list[str] = [_GYREPROF]  # gyreprof, and the run folder (its sitecustomize)


def _is_stdlib(filename: str) -> bool:
    """The standard library (not site-packages), frozen modules and gyreprof itself."""
    if filename.startswith("<"):
        return True
    if filename.startswith(tuple(_OWN)):
        return True
    return filename.startswith(_STDLIB) and "-packages" not in filename


def _dumps(value: Any) -> str:
    """``json.dumps(value, default=repr, ensure_ascii=True)`` for what a trail line holds,
    without importing json before the user's code (tests/test_trail.py compares them)."""
    if isinstance(value, str):
        return _json_str(value)  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            if isinstance(k, str):
                key = k
            elif k is None or isinstance(k, (bool, int, float)):
                key = _dumps(k)
            else:
                raise TypeError(f"keys must be str, int, float, bool or None, not {type(k)}")
            items.append(_json_str(key) + ": " + _dumps(v))
        return "{" + ", ".join(items) + "}"
    return _dumps(repr(value))


def _thread_name() -> str:
    """This thread's name, from ``threading`` where it is loaded (a thread started without
    it is the main thread, or one ``_thread`` started: named by its id)."""
    threading = sys.modules.get("threading")
    if threading is not None:
        return str(threading.current_thread().name)
    return "MainThread" if _thread.get_ident() == _main_ident else f"Thread-{_thread.get_ident()}"


_main_ident = _thread.get_ident()  # the main thread: the bootstrap runs there; set again in a fork


def _fd_ident(fd: int) -> tuple[int, int] | None:
    """(st_dev, st_ino) of what ``fd`` names now: the rule of ``gyreprof._support.io.OwnedFd``,
    written here because this half of the module imports nothing of gyreprof's."""
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


class _Trail:
    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.fd = -1
        self.ident: tuple[int, int] | None = None  # the trail file the fd named when opened
        self.pid = 0
        self.t0 = time.monotonic()
        self.on = False
        self.exceptions = 0
        self.import_lines = 0
        self.depth = 0
        self.lock = _thread.allocate_lock()
        self.last: tuple[int, int] = (0, 0)  # (id of the exception, its number)
        self.ups = 0
        self.tls = _thread._local()
        self.armed = 0  # the pid that armed faulthandler's start-up dump
        self.stop_at = self.t0 + _trace_limit_s()

    # ---------------------------------------------------------------- writing
    def open(self) -> None:
        self.pid = os.getpid()
        self.fd = os.open(
            os.path.join(self.run_dir, f"{self.pid}.trail"),
            os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC,
            0o600,
        )
        self.ident = _fd_ident(self.fd)

    def ours(self) -> bool:
        """The fd still names this trail: a program that closed every fd (a daemon's
        ``os.closerange``) may have opened a file of its own under the number."""
        return self.fd >= 0 and self.ident is not None and _fd_ident(self.fd) == self.ident

    def write(self, ev: str, **fields: Any) -> None:
        if self.fd < 0:
            return
        if not self.ours():
            self.fd, self.ident = -1, None  # the number is the program's now
            return
        fields = {"ev": ev, "t": round(time.monotonic() - self.t0, 4), **fields}
        try:
            line = _dumps(fields) + "\n"
            os.write(self.fd, line.encode())
        except (OSError, ValueError, TypeError, RecursionError):
            pass

    def launch(self) -> None:
        env = os.environ
        self.write(
            "launch",
            pid=os.getpid(),
            ppid=os.getppid(),
            argv=list(sys.argv) if hasattr(sys, "argv") else None,
            orig_argv=list(getattr(sys, "orig_argv", [])),
            cwd=_cwd(),
            python=sys.version.split()[0],
            executable=sys.executable,
            prefix=sys.prefix,
            virtualenv=env.get("VIRTUAL_ENV")
            or (sys.prefix if sys.prefix != sys.base_prefix else None),
            conda=env.get("CONDA_PREFIX"),
            main_thread=_main_ident,
            env={k: v for k, v in env.items() if k.startswith("CUDA_") or k in _THREAD_VARS},
            wall=time.time(),
        )

    # ------------------------------------------------------------ exceptions
    def exception(self, frame: FrameType, exc: BaseException) -> None:
        """``sys.monitoring``'s RAISE (3.12+): a new exception, or the last one reaching
        its next frame."""
        key = id(exc)
        with self.lock:
            if self.last[0] == key and getattr(exc, "__gyreprof_trail__", None) == self.last[1]:
                if self.ups < MAX_UP_LINES:
                    self.ups += 1
                    self.write("exc-up", id=self.last[1], at=_where(frame), func=_func(frame))
                return
            if self.exceptions >= MAX_EXCEPTIONS:
                if self.exceptions == MAX_EXCEPTIONS:
                    self.exceptions += 1
                    self.write("exc-cap", cap=MAX_EXCEPTIONS)
                return
            self.exceptions += 1
            n = self.exceptions
            self.last = (key, n)
            self.ups = 0
        try:
            exc.__gyreprof_trail__ = n  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass
        self.write_exception(frame, exc, n)

    def native_exception(self, frame: FrameType, exc: BaseException, n: int, up: int) -> None:
        """The C tracer's call (``_core/trace.pyx``), which has already decided new or
        up and kept the bounds: exception ``n``, or its next frame; ``n`` past the cap
        once."""
        if up:
            self.write("exc-up", id=n, at=_where(frame), func=_func(frame))
        elif n > MAX_EXCEPTIONS:
            self.write("exc-cap", cap=MAX_EXCEPTIONS)
        else:
            self.exceptions = n
            self.write_exception(frame, exc, n)

    def write_exception(self, frame: FrameType, exc: BaseException, n: int) -> None:
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001 - a broken __str__ is still an exception
            text = "<unprintable>"
        fields: dict[str, Any] = dict(
            id=n,
            type=type(exc).__qualname__,
            module=type(exc).__module__,
            msg=text[:MAX_MESSAGE],
            repr=_short_repr(exc),
            at=_where(frame),
            func=_func(frame),
            thread=_thread_name(),
            tid=_thread.get_native_id(),
            main=_thread.get_ident() == _main_ident,
        )
        if isinstance(exc, OSError):  # a connection error: the address it was trying
            peer = _peer_of(frame)
            if peer is not None:
                fields["peer"] = peer
        if isinstance(exc, ImportError):
            fields["name"] = exc.name
            self.write("import-failed", name=exc.name, error=_short_repr(exc), at=fields["at"])
        self.write("exc", **fields)

    # --------------------------------------------------------------- imports
    def import_begin(self, name: str) -> float:
        depth = getattr(self.tls, "depth", 0)
        self.tls.depth = depth + 1
        if self.import_lines < MAX_IMPORT_LINES and _thread.get_ident() == _main_ident:
            self.import_lines += 1
            self.write("import", name=name, depth=depth)
        return time.monotonic()

    def import_end(self, name: str, began: float, error: BaseException | None) -> None:
        self.tls.depth = max(0, getattr(self.tls, "depth", 1) - 1)
        if _thread.get_ident() != _main_ident:
            return
        took = round(time.monotonic() - began, 4)
        if error is not None:
            self.write("import-failed", name=name, error=_short_repr(error), s=took)
        elif self.import_lines < MAX_IMPORT_LINES:
            self.import_lines += 1
            self.write("imported", name=name, s=took)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _func(frame: FrameType) -> str:
    return getattr(frame.f_code, "co_qualname", frame.f_code.co_name)


def _peer_of(frame: FrameType | None, frames: int = 3, values: int = 32) -> str | None:
    """``host:port`` of the address a failed connection was trying, from the locals of
    the frame it reached and of its callers (an ``(host, port)`` tuple, a URL, or
    ``host`` and ``port`` locals); None where none is seen. Bounded: ``frames`` frames,
    ``values`` locals each."""
    for _ in range(frames):
        if frame is None:
            return None
        try:
            local = dict(list(frame.f_locals.items())[:values])
        except Exception:  # noqa: BLE001 - a frame whose locals cannot be read
            local = {}
        host, port = local.get("host"), local.get("port")
        if isinstance(host, str) and isinstance(port, int) and 0 < port < 65536:
            return f"{host}:{port}"
        for value in local.values():
            if (
                isinstance(value, tuple)
                and len(value) == 2
                and isinstance(value[0], str)
                and isinstance(value[1], int)
                and 0 < value[1] < 65536
            ):
                return f"{value[0]}:{value[1]}"
            if isinstance(value, str) and "://" in value and len(value) < 400:
                netloc = value.partition("://")[2].partition("/")[0].rpartition("@")[2]
                if netloc.rpartition(":")[2].isdigit():
                    return netloc
        frame = frame.f_back
    return None


def _short_repr(exc: BaseException) -> str:
    try:
        text = repr(exc)
    except Exception:  # noqa: BLE001
        text = type(exc).__name__
    return text[:MAX_MESSAGE]


def _wrappable(spec: Any) -> Any:
    """The loader of ``spec`` whose ``exec_module`` can be replaced, or None (no spec, or a
    built-in or frozen module: a class for a loader)."""
    loader = spec.loader if spec is not None else None
    if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
        return None
    return loader


def _set_exec(loader: Any, exec_module: Callable[[ModuleType], None]) -> None:
    """Give ``loader`` (this import's instance) ``exec_module``; one that refuses runs as it is."""
    try:
        setattr(loader, "exec_module", exec_module)  # noqa: B010 - an instance attribute
    except (AttributeError, TypeError):
        pass


def spec_from_others(me: object, fullname: str, path: Any, target: Any = None) -> Any:
    """The spec the first finder on ``sys.meta_path`` other than ``me`` gives for
    ``fullname``; None when none finds it. Here, where the bootstrap's finder finds it too:
    what runs before the user's code loads no more (the instrumentors load threading and typing)."""
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _give_threads_the_tracer(threading: Any) -> None:
    """``threading`` was just imported (or was before the trail started): threads it
    starts from now on get the C trace function at their first call, while tracing is on."""
    native = _native
    t = _trail
    if native is not None and t is not None and t.on:
        threading.settrace(native.tracer)


class _ImportFinder:
    """First on ``sys.meta_path``: finds nothing itself, times the module's execution."""

    def __init__(self, trail: _Trail) -> None:
        self.trail = trail
        self.busy = _thread._local()
        self.library_tops: set[str] = set()  # top-level packages of libraries / the stdlib

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        trail = self.trail
        if not trail.on:
            return None
        if fullname == "threading" and _native is not None:
            return self.threading_spec(fullname, path, target)
        top, dot, _ = fullname.partition(".")
        if dot and top in self.library_tops and not _tracing_here():
            return None  # a library's submodule (never timed), nothing to pause: most imports
        timing = trail.import_lines < MAX_IMPORT_LINES
        if not timing and not _tracing_here():
            return None
        spec = self.others_spec(fullname, path, target)
        if spec is None:
            return None
        loader = _wrappable(spec)
        if loader is None:
            return spec  # built-in and frozen modules (a class for a loader) run untouched
        origin = spec.origin
        stdlib = origin is None or origin in ("built-in", "frozen") or _is_stdlib(origin)
        library = stdlib or _is_library(origin)
        if library and not dot and origin is not None:  # (a namespace package may be the user's)
            self.library_tops.add(fullname)
        # timed: the user's own modules and a library's top-level package (not the
        # standard library's, not a library's submodules)
        timed = timing and not stdlib and not ("." in fullname and library)
        # 3.10-3.11: no tracing while a module of a library or of the standard library
        # runs its body, submodules included (a library's own import is most of a
        # start-up, and tracing slows every bytecode there)
        pause = library and _PAUSE_IMPORTS and _tracing_here()
        if not timed and not pause:
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            began = trail.import_begin(fullname) if timed else 0.0
            paused = pause and _pause(trail)
            try:
                original(module)
            except BaseException as exc:
                if timed:
                    trail.import_end(fullname, began, exc)
                raise
            finally:
                if paused:
                    _resume(trail)
            if timed:
                trail.import_end(fullname, began, None)

        _set_exec(loader, exec_module)
        return spec

    def others_spec(self, fullname: str, path: Any, target: Any) -> Any:
        """The spec the other finders give for ``fullname``, or None; None too when this
        thread is already asking them for it (a finder that imports what it finds)."""
        busy: set[str] | None = getattr(self.busy, "names", None)
        if busy is None:
            busy = self.busy.names = set()
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            return spec_from_others(self, fullname, path, target)
        finally:
            busy.discard(fullname)

    def threading_spec(self, fullname: str, path: Any, target: Any) -> Any:
        """3.10-3.11: ``threading``'s spec, its loader set to give the threads it starts the
        tracer once it has run (the trail does not import threading itself: it costs
        ``python -c pass`` 3 modules)."""
        spec = self.others_spec(fullname, path, target)
        loader = _wrappable(spec)
        if loader is None:
            return spec  # a frozen or built-in threading: given the tracer at the first record
        original = loader.exec_module
        trail = self.trail

        def exec_module(module: ModuleType) -> None:
            paused = _PAUSE_IMPORTS and _tracing_here() and _pause(trail)
            try:
                original(module)
            finally:
                if paused:
                    _resume(trail)
            _give_threads_the_tracer(module)

        _set_exec(loader, exec_module)
        return spec


_PAUSE_IMPORTS = sys.version_info < (3, 12)  # sys.monitoring costs nothing where nothing raises


def _tracing_here() -> bool:
    """3.10-3.11: the start-up tracer runs in this thread (False on 3.12+)."""
    native = _native
    return native is not None and bool(native.active())


def _pause(t: _Trail) -> bool:
    """3.10-3.11: no tracing in this thread while a library or standard-library module is
    imported: the trace function slows every bytecode of the thread, and those imports
    are most of a start-up (see the README for what is missed)."""
    native = _native
    return native is not None and bool(native.pause())


def _resume(t: _Trail) -> None:
    native = _native
    if t.on and native is not None:
        native.resume()


def _is_library(origin: str) -> bool:
    return _is_stdlib(origin) or "-packages" in origin


def _is_traced(filename: str) -> bool:
    """The C tracer asks this once per code object: its frames are traced."""
    return not _is_stdlib(filename)


_BUILD_HINT = (
    "Build it with `pip install .` (or `pip install -e .` in a checkout; needs a C "
    "compiler, Cython and numpy)."
)


def _load_native() -> Any:
    """The C trace function (``gyreprof._core.trace``) on 3.10-3.11; None on 3.12+ (where
    ``sys.monitoring`` is the tracer). Not built: ImportError saying how to build it.
    Loaded from its file: importing it by name runs ``gyreprof._core``'s ``__init__``,
    which imports numpy, and nothing of that may run before the user's code."""
    if not _PAUSE_IMPORTS:
        return None
    name = "gyreprof._core.trace"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    # the import system's own frozen modules, loaded in every interpreter (importlib.util
    # and importlib.machinery would add 6 modules)
    import _frozen_importlib as bootstrap
    import _frozen_importlib_external as external
    import _imp

    for suffix in _imp.extension_suffixes():
        path = os.path.join(_GYREPROF, "_core", "trace" + suffix)
        if os.path.isfile(path):
            break
    else:
        raise ImportError(
            f"gyreprof's start-up tracer ({name}) is not built for this Python. {_BUILD_HINT}",
            name=name,
        )
    try:
        loader = external.ExtensionFileLoader(name, path)
        spec = bootstrap.spec_from_loader(name, loader, origin=path)
        if spec is None:
            raise ImportError(f"no module spec for {path}", name=name)
        mod = bootstrap.module_from_spec(spec)
        loader.exec_module(mod)
    except (ImportError, OSError) as exc:
        raise ImportError(
            f"gyreprof's start-up tracer ({name}) does not load ({exc}). {_BUILD_HINT}",
            name=name,
        ) from exc
    if not mod.available():
        raise ImportError(
            f"gyreprof's start-up tracer ({name}) was built for Python 3.12+ and this is "
            f"{sys.version.split()[0]}. {_BUILD_HINT}",
            name=name,
        )
    sys.modules[name] = mod
    return mod


_native: Any = _load_native()
_trail: _Trail | None = None
_finder: _ImportFinder | None = None


def start(run_dir: str | os.PathLike[str]) -> None:
    """Open this process's trail, write the launch line, start the start-up tracing."""
    global _trail, _finder, _main_ident
    folder = os.fspath(run_dir)
    _OWN.append(folder + os.sep)
    _main_ident = _thread.get_ident()
    t = _Trail(folder)
    try:
        t.open()
    except OSError:
        return
    _trail = t
    t.launch()
    try:
        faulthandler.enable(file=t.fd, all_threads=True)
    except (OSError, ValueError, RuntimeError):
        pass
    _arm_timeout(t)
    t.on = True
    _finder = _ImportFinder(t)
    sys.meta_path.insert(0, _finder)
    _trace_on(t)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _arm_timeout(t: _Trail) -> None:
    try:
        seconds = float(os.environ.get(ENV_STARTUP_TIMEOUT, "0") or 0)
    except ValueError:
        return
    if seconds > 0:
        try:
            faulthandler.dump_traceback_later(seconds, repeat=False, file=t.fd)
        except (OSError, ValueError, RuntimeError):
            return
        t.armed = os.getpid()


def _disarm(t: _Trail) -> None:
    # only where this process armed it: a forked child inherits the armed state but not
    # the watchdog thread, and cancelling waits for that thread forever
    if t.armed != os.getpid():
        return
    t.armed = 0
    try:
        faulthandler.cancel_dump_traceback_later()
    except RuntimeError:
        pass


def _trace_on(t: _Trail) -> None:
    native = _native
    if native is None:  # 3.12+
        _monitoring_on(t)
        return
    native.start(
        t.native_exception,
        _is_traced,
        lambda: stop(t, "the start-up timeout passed with no record"),
        max(0.001, t.stop_at - time.monotonic()),
        MAX_EXCEPTIONS,
        MAX_UP_LINES,
    )
    # a new thread's first call installs the C one: through threading.settrace, now if
    # threading is loaded, else when it is (_ImportFinder.threading_spec)
    threading = sys.modules.get("threading")
    if threading is not None:
        _give_threads_the_tracer(threading)


_TOOL = 4  # a sys.monitoring tool id free of debuggers (0-2) and coverage (1, 3)


def _monitoring_on(t: _Trail) -> None:  # pragma: no cover - 3.12+
    mon: Any = getattr(sys, "monitoring", None)
    if mon is None:
        return
    try:
        mon.use_tool_id(_TOOL, "gyreprof-trail")
    except ValueError:
        return
    ev = mon.events

    def on_raise(code: Any, offset: int, exc: BaseException) -> Any:
        if not t.on:
            return mon.DISABLE
        if isinstance(exc, _SKIP_TYPES) or _is_stdlib(code.co_filename):
            return None
        if time.monotonic() > t.stop_at:  # checked where something raises: nothing else costs
            stop(t, "the start-up timeout passed with no record")
            return None
        frame = sys._getframe(1)
        t.exception(frame, exc)
        return None

    def on_handled(code: Any, offset: int, exc: BaseException) -> Any:
        if not t.on:
            return mon.DISABLE
        n = getattr(exc, "__gyreprof_trail__", None)
        if n is None or _is_stdlib(code.co_filename):
            return None
        t.write("exc-up", id=n, at=_where(sys._getframe(1)), func=code.co_qualname)
        return None

    mon.register_callback(_TOOL, ev.RAISE, on_raise)
    mon.register_callback(_TOOL, ev.RERAISE, on_raise)
    mon.register_callback(_TOOL, ev.EXCEPTION_HANDLED, on_handled)
    mon.set_events(_TOOL, ev.RAISE | ev.RERAISE | ev.EXCEPTION_HANDLED)


def _trace_limit_s() -> float:
    """How long tracing lasts without a record: the start-up timeout, at least 60 s (a
    program that never records, e.g. one that marks its own phases, is traced no longer)."""
    try:
        seconds = float(os.environ.get(ENV_STARTUP_TIMEOUT, "0") or 0)
    except ValueError:
        seconds = 0.0
    return max(60.0, seconds)


def first_record() -> None:
    """The first phase or step of this process was recorded: end the start-up tracing."""
    t = _trail
    if t is None or not t.on or t.pid != os.getpid():
        return
    _disarm(t)
    stop(t, None)


def stop(t: _Trail, why: str | None) -> None:
    """End the tracing (each thread drops its trace function at its next event)."""
    t.on = False
    if sys.version_info >= (3, 12):  # pragma: no cover - 3.12+
        mon: Any = getattr(sys, "monitoring", None)
        if mon is not None:
            try:
                mon.set_events(_TOOL, 0)
                mon.free_tool_id(_TOOL)
            except ValueError:
                pass
    else:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading.settrace(None)
        native = _native
        if native is not None:
            native.stop()  # every other thread drops it at its next call
    f = _finder
    if f is not None and f in sys.meta_path:
        try:
            sys.meta_path.remove(f)
        except ValueError:
            pass
    if why is None:
        t.write("first-record", thread=_thread_name())
    else:
        t.write("trace-off", why=why)


def _after_fork_in_child() -> None:
    """A forked child writes a trail of its own (same tracing state as its parent)."""
    global _main_ident
    t = _trail
    if t is None:
        return
    _main_ident = _thread.get_ident()  # the forking thread is the child's main thread
    if t.ours():
        try:
            os.close(t.fd)
        except OSError:
            pass
    t.fd, t.ident = -1, None
    t.exceptions = 0
    t.import_lines = 0
    t.lock = _thread.allocate_lock()
    if _native is not None:
        _native.forked()
    try:
        t.open()
    except OSError:
        t.on = False
        if _native is not None:
            _native.stop()
        return
    t.launch()
    try:
        faulthandler.enable(file=t.fd, all_threads=True)
    except (OSError, ValueError, RuntimeError):
        pass
    if t.on and not t.armed:  # an armed timer cannot be touched in a forked child
        _arm_timeout(t)


__all__ = [
    "ENV_STARTUP_TIMEOUT",
    "first_record",
    "start",
    "trail_path",
]
