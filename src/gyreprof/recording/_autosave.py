"""Autosave: write a Profiler's snapshot when its process ends, however it ends.

``Profiler(..., autosave="runs/{host}-{pid}.snap")`` registers an
:class:`AutosaveState` here. The state holds what a save needs, the
Profiler's :class:`~gyreprof.recording._recorders.RecorderSet` (its recorders, identity,
counter names and folded finished threads), but not the Profiler, so a save can
run after the Profiler is gone.

When a save happens
-------------------
- **Normal exit** (also after an uncaught exception): one ``atexit`` hook
  saves every registered state.
- **A Profiler garbage-collected before exit** (a function-local profiler):
  a ``weakref.finalize`` saves it then.
- **A multiprocessing child** (fork or forkserver) leaves through
  ``os._exit`` and skips ``atexit``; ``multiprocessing.util`` runs its
  finalizers first (``BaseProcess._bootstrap`` calls ``util._exit_function``),
  so a ``util.Finalize`` registered in the child (also re-registered after a
  fork through ``util.register_after_fork``) saves there.
- **SIGTERM**: a Python handler saves and then re-raises SIGTERM with the
  default action (exit status -15), or calls the handler installed before
  it. A Python handler only runs when the main thread executes bytecode, so a
  helper thread, woken through ``signal.set_wakeup_fd``, saves instead when
  the main thread is stuck in native code that released the GIL, then
  restores SIG_DFL and re-raises: the process ends within about a second.
  Native code that *holds* the GIL stops every Python thread; then nothing is
  saved and the process needs SIGKILL.

What is written
---------------
A path ending in ``.json`` gets the Summary as JSON; any other name gets the
snapshot bytes (``Snapshot.to_bytes``). The snapshot is built from the
recorder's stats block in place (no copy of the histograms): its counts rows
are encoded straight from the shared block and checked afterwards (every
bucket only grows, so unchanged row sums mean an unchanged row; a racing
writer means another try). Rolling windows are kept up to
``WINDOW_WORDS_CAP`` words, newest first (``meta["autosave_windows_dropped"]``
counts the rest; ``JSON_WINDOW_WORDS_CAP`` for a JSON summary). 255 phases with
4096 windows save in about 50 ms as a snapshot (``benchmarks/autosave_cost.py``).

The write is atomic: a temp file with an unpredictable name is created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` in the target's folder and renamed over the
target with ``os.replace`` (which replaces a link, never writes through it).
A failed save (full disk, no permission) leaves the previous file as it was
and prints one line to stderr.

Paths
-----
``{pid}`` and ``{host}`` in the path are filled in per process. A child
forked from the process that created the Profiler writes only when the path
holds ``{pid}`` (never its parent's file), and only if it recorded something
after the fork; its file then also holds the counts inherited from the parent.

Several processes, one path (``spawn`` workers that each create a Profiler
with the same untemplated name): the first to save writes the path; one that
finds it written by another process since its own *process* started saves to
``<stem>.<pid><suffix>`` and prints a line saying so (see ``_claim``). A file
last written before the process started is a previous run's and is replaced.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import socket
import stat
import string
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof._support import threadname as _threadname
from gyreprof._support.block import StatsBlock
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof._support.io import fd_identity, write_atomic
from gyreprof._support.threadname import name_os_thread

if TYPE_CHECKING:
    from gyreprof.recording._recorders import RecorderSet

WINDOW_WORDS_CAP = 1 << 16  # rolling-window words kept in an autosaved snapshot
JSON_WINDOW_WORDS_CAP = 1 << 14  # the same in a JSON summary (each window becomes text)
_SIGTERM_GRACE_S = 0.25  # how long the helper thread lets the main thread's handler start
_TRIES = 3  # encodes raced by a writer before falling back to a private copy
_FIELDS = ("pid", "host")

_STATES: dict[int, AutosaveState] = {}
_LOCK = threading.RLock()  # re-entrant: the SIGTERM handler may interrupt a holder
_ATEXIT_INSTALLED = False
_MP_FINALIZER_PID = -1
_TERM_CLAIM = threading.Lock()
_PREV_SIGTERM: Any = None
_HELPER: dict[str, Any] = {"pid": -1, "read_fd": -1, "write_fd": -1, "old_fd": -1}


def _warn(msg: str) -> None:
    try:
        sys.stderr.write(f"gyreprof: {msg}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr closed on the way out
        pass


# ------------------------------------------------------------------------- paths


def check_template(value: str | os.PathLike[str]) -> tuple[str, bool]:
    """(template text, whether it holds ``{pid}``); ValueError for unknown fields."""
    try:
        text: object = os.fspath(value)
    except TypeError:
        text = None
    if not isinstance(text, str):
        raise ArgumentTypeError(f"autosave must be a path string, got {type(value).__name__}")
    if not text.strip():
        raise InvalidValueError("autosave must be a file path, got an empty string")
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(text) if f is not None]
        specs = [(spec, conv) for _, f, spec, conv in string.Formatter().parse(text) if f]
    except ValueError as exc:
        raise InvalidValueError(
            f"autosave={text!r} is not a valid path template ({exc}); write '{{{{' and "
            "'}}' for literal braces"
        ) from None
    bad = [f for f in fields if f not in _FIELDS]
    if bad or any(s or c for s, c in specs):
        raise InvalidValueError(
            f"autosave={text!r}: only {{pid}} and {{host}} may appear in braces "
            f"(got {['{' + f + '}' for f in bad] or 'a format spec'}); write '{{{{' and '}}}}' "
            "for literal braces"
        )
    return text, "pid" in fields


def fill_template(template: str, pid: int) -> Path:
    return Path(template.format(pid=pid, host=socket.gethostname()))


def _identity(path: Path) -> tuple[int, ...] | None:
    """What tells one write of ``path`` from another (every write is a new inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


_WROTE: dict[tuple[int, str], tuple[int, ...] | None] = {}  # (pid, path) -> what it saved
_START_UNIX: list[float] = []  # this process's start, wall clock (per pid: see below)


def _process_start_unix() -> float:
    """When this process started (wall clock): from its start tick in /proc (boot-time
    clock, 10 ms steps) where there is one, else psutil, else gyreprof's import."""
    pid = os.getpid()
    if _START_UNIX and _START_UNIX[0] == pid:
        return _START_UNIX[1]
    start = _IMPORTED_UNIX
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rpartition(b")")[2].split()[19])
        boot_now = time.clock_gettime(time.CLOCK_BOOTTIME)
        start = time.time() - (boot_now - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        try:
            import psutil

            start = psutil.Process(pid).create_time()
        except Exception:  # noqa: BLE001, S110 - gyreprof's import is the latest bound
            pass
    _START_UNIX[:] = [pid, start]
    return start


_IMPORTED_UNIX = time.time()


def _written_since_start(path: Path) -> bool:
    """``path`` is a file last written after this process started (by a process that
    ran beside this one: an autosave is written as its process ends). A link or other
    non-file there is no one's autosave (it is replaced, never followed). The start is
    read in 10 ms ticks, rounded down: a file written just before may count as after
    (then it is kept, and the note says so)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_mtime >= _process_start_unix()


class _folder_lock:  # noqa: N801 - used as a function
    """An exclusive ``flock`` on a folder (its own descriptor) while saves there compare
    and replace; a no-op where folders cannot be locked."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fd = -1

    def __enter__(self) -> None:
        try:
            import fcntl

            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except (ImportError, OSError):
            return
        deadline = time.monotonic() + 5.0  # a stuck holder never keeps a process from ending
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return
                time.sleep(0.002)
            except OSError:
                os.close(fd)
                return
        self.fd = fd

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock
            self.fd = -1


# ------------------------------------------------------------------------- writing


# ---------------------------------------------------------------- snapshot, in place


def _row_sums(rec: Any) -> np.ndarray:
    return np.asarray(StatsBlock.of(rec).counts.sum(axis=1))


# --------------------------------------------------------------------------- state


class AutosaveState:
    """What one Profiler's autosave needs, without the Profiler itself."""

    def __init__(
        self,
        template: str,
        *,
        templated: bool,
        recordings: RecorderSet,
    ) -> None:
        self.template = template
        self.templated = templated
        # the Profiler's RecorderSet: its recorders, identity, counter names and finished
        # threads (the set does not hold the Profiler)
        self.recordings = recordings
        self.owner_pid = os.getpid()
        self.fork_marks: dict[int, int] | None = None  # id(rec) -> events+steps at fork
        self.lock = threading.RLock()
        # the target as this process last knew it (at start, or as it wrote it): a file
        # there that is neither was written by another process meanwhile
        self.seen: dict[str, tuple[int, ...] | None] = {}
        try:
            first = fill_template(template, self.owner_pid)
            self.seen[str(first)] = _identity(first)
        except (OSError, ValueError):
            pass

    def path(self) -> Path | None:
        """Where this process writes, or None (a forked child with an untemplated path)."""
        pid = os.getpid()
        if pid != self.owner_pid and not self.templated:
            return None
        return fill_template(self.template, pid)

    def _activity(self, rec: Any) -> int:
        return StatsBlock.of(rec).activity()

    def after_fork_in_child(self) -> None:
        self.lock = threading.RLock()
        self.fork_marks = {id(r): self._activity(r) for r in self.recordings.all()}

    def _recorded_since_fork(self) -> bool:
        marks = self.fork_marks
        if marks is None:
            return True
        return any(self._activity(r) != marks.get(id(r), -1) for r in self.recordings.all())

    def encode(self, path: Path) -> bytes:
        """The file content: snapshot bytes, or Summary JSON for ``*.json``."""
        sources = self.recordings.sources()
        recs = sources[0]
        as_json = path.suffix.lower() == ".json"
        for attempt in range(_TRIES + 1):
            copy = attempt == _TRIES
            before = [_row_sums(r) for r in recs]
            snap = self.recordings.snapshot(
                "compact" if copy else "in_place",
                window_words=JSON_WINDOW_WORDS_CAP if as_json else WINDOW_WORDS_CAP,
                sources=sources,
            )
            data = snap.summary().to_json(indent=None).encode() if as_json else snap.to_bytes()
            if copy or all(
                np.array_equal(b, _row_sums(r)) for b, r in zip(before, recs, strict=True)
            ):
                return data
        raise AssertionError("unreachable")  # pragma: no cover

    def save(self) -> Path | None:
        path = self.path()
        if path is None or not self._recorded_since_fork():
            return None
        with self.lock:
            data = self.encode(path)
            with _folder_lock(path.parent):
                target = self._claim(path)
                write_atomic(target, data)
                self.seen[str(target)] = _WROTE[(os.getpid(), str(target))] = _identity(target)
        return target

    def _claim(self, path: Path) -> Path:
        """``path``, or a name of this process's own when another process wrote ``path``
        while this one ran (8 processes autosaving to one path: none is lost).

        "While this one ran" is since the *process* started, not the Profiler: a
        spawned worker whose Profiler is created after a sibling already saved (a
        short job, a slow import) must not take that sibling's file as a previous
        run's. A file last written before this process started is a previous run's
        and is replaced, as a rerun's would be."""
        now = _identity(path)
        if now is None or _WROTE.get((os.getpid(), str(path))) == now:
            return path  # nothing there, or this process's own last save (any Profiler's)
        changed = str(path) in self.seen and self.seen[str(path)] != now
        if not changed and not _written_since_start(path):
            return path  # a previous run's file
        mine = path.with_name(f"{path.stem}.{os.getpid()}{path.suffix}")
        _warn(
            f"autosave: {path} was written by another process while this one ran; "
            f"saved to {mine} instead of overwriting it (merge them with gyreprof.merge)"
        )
        return mine

    def save_reporting(self, why: str) -> None:
        try:
            self.save()
        except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
            try:
                where = str(self.path())
            except Exception:  # noqa: BLE001
                where = self.template
            _warn(f"autosave to {where} ({why}) failed: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------- registering


def register(owner: object, state: AutosaveState) -> None:
    """Save ``state`` at exit, and when ``owner`` (the Profiler) is collected before."""
    key = id(state)
    with _LOCK:
        _STATES[key] = state
    fin = weakref.finalize(owner, _finalize, key)
    fin.atexit = False  # the atexit hook saves the states still registered
    _install_hooks()


def _finalize(key: int) -> None:
    with _LOCK:
        state = _STATES.pop(key, None)
    if state is not None:
        state.save_reporting("profiler collected")


_EXIT_CALLBACKS: list[Callable[[str], object]] = []


def on_exit(callback: Callable[[str], object]) -> None:
    """Also call ``callback(why)`` wherever pending autosaves are written: at exit, on
    SIGTERM (``why == "SIGTERM"``), at a multiprocessing child's exit. ``gyreprof run``
    saves its profiles this way, through the same handlers as the autosaves."""
    with _LOCK:
        if callback not in _EXIT_CALLBACKS:
            _EXIT_CALLBACKS.append(callback)
    _install_hooks()


def save_all(why: str = "exit") -> None:
    with _LOCK:
        states = list(_STATES.values())
        callbacks = list(_EXIT_CALLBACKS)
    for st in states:
        st.save_reporting(why)
    for cb in callbacks:
        try:
            cb(why)
        except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
            print(f"gyreprof: an exit save failed: {exc!r}", file=sys.stderr)


def _install_hooks() -> None:
    global _ATEXIT_INSTALLED
    with _LOCK:
        first = not _ATEXIT_INSTALLED
        _ATEXIT_INSTALLED = True
    if first:
        atexit.register(save_all)
        import multiprocessing.util as mp_util

        mp_util.register_after_fork(_AFTER_FORK_TOKEN, _mp_child_bootstrapped)
    _install_mp_finalizer()
    _install_sigterm()


class _Token:
    pass


_AFTER_FORK_TOKEN = _Token()


def _mp_child_bootstrapped(_token: object) -> None:
    _install_mp_finalizer()


def _install_mp_finalizer() -> None:
    """In a multiprocessing child: save in its exit function (it leaves via os._exit)."""
    global _MP_FINALIZER_PID
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing
    import multiprocessing.util as mp_util

    if multiprocessing.parent_process() is None or _MP_FINALIZER_PID == os.getpid():
        return
    _MP_FINALIZER_PID = os.getpid()
    mp_util.Finalize(None, save_all, args=("multiprocessing child exit",), exitpriority=100)


def _after_fork_in_child() -> None:
    global _TERM_CLAIM
    _TERM_CLAIM = threading.Lock()
    with _LOCK:
        states = list(_STATES.values())
    for st in states:
        st.after_fork_in_child()
    if _HELPER["pid"] != -1:
        _restart_helper_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


# -------------------------------------------------------------------------- SIGTERM


def _die_by_sigterm() -> None:
    """Restore SIGTERM's default action and re-raise it (from any thread)."""
    if threading.current_thread() is threading.main_thread():
        _real_signal(signal.SIGTERM, signal.SIG_DFL)
    else:
        try:
            import ctypes

            setsig = ctypes.pythonapi.PyOS_setsig
            setsig.argtypes = (ctypes.c_int, ctypes.c_void_p)
            setsig.restype = ctypes.c_void_p
            setsig(signal.SIGTERM, None)  # NULL == SIG_DFL
        except Exception:  # noqa: BLE001 - no ctypes: end with the conventional status
            os._exit(128 + signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the signal is on its way
    os._exit(128 + signal.SIGTERM)


def _on_sigterm(signum: int, frame: Any) -> None:
    if not _TERM_CLAIM.acquire(blocking=False):
        return  # the helper thread is saving; it ends the process
    save_all("SIGTERM")
    prev = _PREV_SIGTERM
    if callable(prev):
        _TERM_CLAIM.release()
        prev(signum, frame)
        return
    _die_by_sigterm()


def _install_sigterm() -> None:
    """Our SIGTERM handler (main thread only) and the helper thread behind it."""
    global _PREV_SIGTERM
    if threading.current_thread() is not threading.main_thread():
        return
    prev = _real_getsignal(signal.SIGTERM)
    if prev is _on_sigterm:
        if _HELPER["pid"] != os.getpid():
            _start_helper()
        return
    if prev == signal.SIG_IGN:
        return  # the program chose to ignore SIGTERM
    _PREV_SIGTERM = prev if callable(prev) else None
    _PROGRAMS[signal.SIGTERM] = prev
    _real_signal(signal.SIGTERM, _on_sigterm)
    _start_helper()


# ------------------------------------------------- what the program sees of the handler

_real_signal = signal.signal
_real_getsignal = signal.getsignal
#: signal -> the handler the program would have without gyreprof's (SIG_DFL, its own
#: callable, or None: set outside Python), while gyreprof's handler is installed
_PROGRAMS: dict[int, Any] = {}
_RESTORE: dict[int, Any] = {}  # signal -> the view the program was given when it replaced ours


def _view(signalnum: int, handler: Any) -> Any:
    if handler is _on_sigterm and signalnum == signal.SIGTERM:
        return _PROGRAMS.get(signalnum, signal.SIG_DFL)
    return handler


def _getsignal(signalnum: Any) -> Any:
    """``signal.getsignal`` as the program would see it without gyreprof."""
    return _view(signalnum, _real_getsignal(signalnum))


def _signal(signalnum: Any, handler: Any) -> Any:
    """``signal.signal`` as the program would see it without gyreprof: it returns the
    program's previous handler, never gyreprof's. Setting the handler the program was
    shown (SIG_DFL, say) keeps gyreprof's in place, chaining to it; any other replaces
    gyreprof's, as it would without the hiding; setting again what the program was
    given when it replaced gyreprof's (restoring the "previous" handler) puts gyreprof's
    back, chaining to that."""
    global _PREV_SIGTERM
    if signalnum == signal.SIGTERM and threading.current_thread() is threading.main_thread():
        current = _real_getsignal(signalnum)
        if current is _on_sigterm:
            shown = _view(signalnum, current)
            if handler is shown or (handler == shown and not callable(handler)):
                return shown  # the program sets what it sees: nothing changes for it
            _real_signal(signalnum, handler)
            _RESTORE[signalnum] = shown
            return shown
        if signalnum in _RESTORE and handler is not _on_sigterm:
            back = _RESTORE[signalnum]
            if handler is back or (handler == back and not callable(handler)):
                del _RESTORE[signalnum]
                old = _real_signal(signalnum, _on_sigterm)
                _PREV_SIGTERM = handler if callable(handler) else None
                _PROGRAMS[signalnum] = handler
                return old
    return _real_signal(signalnum, handler)


_getsignal.__name__ = _getsignal.__qualname__ = "getsignal"
_signal.__name__ = _signal.__qualname__ = "signal"
_getsignal.__doc__ = _real_getsignal.__doc__
_signal.__doc__ = _real_signal.__doc__


def hide_own_handlers() -> None:
    """Make ``signal.getsignal`` and ``signal.signal`` report the handlers the program
    would have without gyreprof (``gyreprof run`` calls this in each process it
    instruments): code that installs a handler only while SIG_DFL is in place behaves
    as it would without gyreprof. gyreprof's SIGTERM handler stays installed and calls
    the program's (see :func:`_signal`). Only SIGTERM is hidden: the only signal
    gyreprof installs a Python handler for in the program."""
    signal.getsignal = _getsignal
    signal.signal = _signal


_HIGH_FD = 512  # the helper's pipe lives above the fds a daemonising closerange(3, 256) hits


def _high_pipe() -> tuple[int, int]:
    """A close-on-exec pipe moved above :data:`_HIGH_FD` where the fd limit allows."""
    r, w = os.pipe()
    try:
        import fcntl
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY or soft > 2 * _HIGH_FD:
            out = []
            for fd in (r, w):
                out.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD))
                os.close(fd)
            r, w = out
    except (ImportError, OSError, ValueError):
        pass
    return r, w


def _ours(fd: int, key: str) -> bool:
    """``fd`` is still the pipe end gyreprof made (a program may have closed it and
    opened a file of its own under the same number)."""
    return fd >= 0 and _HELPER.get(key) is not None and fd_identity(fd) == _HELPER.get(key)


_PENDING: list[Any] = []  # the C callback Py_AddPendingCall holds (kept alive here)


def _drop_in_main_thread(_arg: Any) -> int:
    try:
        signal.set_wakeup_fd(-1)
        _HELPER["dropped"] = True
    except (ValueError, OSError):
        pass
    return 0


def _drop_wakeup_fd() -> None:
    """Stop the interpreter writing to the wakeup fd: now in the main thread, else at its
    next bytecode (``Py_AddPendingCall``; only the main thread may change it)."""
    if threading.current_thread() is threading.main_thread():
        _drop_in_main_thread(None)
        return
    try:
        import ctypes

        if not _PENDING:
            _PENDING.append(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(_drop_in_main_thread))
        add = ctypes.pythonapi.Py_AddPendingCall
        add.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
        add.restype = ctypes.c_int
        add(ctypes.cast(_PENDING[0], ctypes.c_void_p), None)
    except Exception:  # noqa: BLE001, S110 - nothing more to do
        pass


def _start_helper() -> None:
    _threadname.prepare()  # here: the helper then names itself without opening a file
    r, w = _high_pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return
    _HELPER.update(
        pid=os.getpid(),
        read_fd=r,
        write_fd=w,
        old_fd=old,
        old_id=fd_identity(old) if old >= 0 else None,
        read_id=fd_identity(r),
        write_id=fd_identity(w),
    )
    threading.Thread(
        target=_helper_loop, args=(r, old), name="gyreprof-sigterm", daemon=True
    ).start()


def _restart_helper_in_child() -> None:
    """After fork: the wakeup fd number still names the parent's pipe; point it at ours.

    Only if those numbers still hold gyreprof's pipe: a program that closed them may
    have its own files there, which are never closed or replaced."""
    w_old = _HELPER["write_fd"]
    if not _ours(w_old, "write_id"):
        _drop_wakeup_fd()
        _HELPER["pid"] = -1
        return
    try:
        r, w = _high_pipe()
        os.set_blocking(w, False)
        os.dup2(w, w_old, inheritable=False)
        os.close(w)
        if _ours(_HELPER["read_fd"], "read_id"):
            os.close(_HELPER["read_fd"])
    except OSError:
        _HELPER["pid"] = -1
        return
    _HELPER.update(pid=os.getpid(), read_fd=r, read_id=fd_identity(r), write_id=fd_identity(w_old))
    try:
        threading.Thread(
            target=_helper_loop, args=(r, _HELPER["old_fd"]), name="gyreprof-sigterm", daemon=True
        ).start()
    except RuntimeError:  # interpreter shutting down
        pass


def _helper_loop(r: int, old_fd: int) -> None:
    # select and _threadname are imported with this module, by the thread that starts
    # this one: an import here reads its file while the main thread may be closing every
    # fd (a daemon's closerange), and died of EBADF before it could notice its pipe gone
    name_os_thread("gyreprof-signal")  # the census must not count this thread as the user's
    me = os.getpid()
    while True:
        try:
            ready, _, _ = select.select([r], [], [], 0.5)
        except InterruptedError:
            continue
        except (OSError, ValueError):
            ready = []
        if os.getpid() != me:
            return
        if not (_ours(r, "read_id") and _ours(_HELPER["write_fd"], "write_id")):
            # the program closed our pipe (closerange): its number may be a file of the
            # program's now, which the interpreter must not write signal bytes into
            _drop_wakeup_fd()
            _HELPER["pid"] = -1
            return
        if not ready:
            continue
        try:
            data = os.read(r, 512)
        except (InterruptedError, BlockingIOError):
            continue
        except OSError:
            return
        if not data:
            return
        if old_fd >= 0 and _ours(old_fd, "old_id"):  # the program's own wakeup fd, still
            try:
                os.write(old_fd, data)
            except OSError:
                pass
        if signal.SIGTERM not in data:
            continue
        if _real_getsignal(signal.SIGTERM) is not _on_sigterm:
            continue  # someone else's handler now; theirs to act on
        deadline = time.monotonic() + _SIGTERM_GRACE_S
        while time.monotonic() < deadline and not _TERM_CLAIM.locked():
            time.sleep(0.01)
        if not _TERM_CLAIM.acquire(blocking=False):
            continue  # the main thread's handler took it
        save_all("SIGTERM, main thread in native code")
        if callable(_PREV_SIGTERM):
            _TERM_CLAIM.release()
            continue  # the program's own handler decides when it runs
        _die_by_sigterm()
