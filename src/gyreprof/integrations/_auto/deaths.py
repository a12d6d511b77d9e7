"""Threads and worker processes of a ``gyreprof run`` that died of an exception (issue 38).

A trainer fed through a queue, a pipe or a future starves when what fed it dies, and
its wait then looks like a slow sampler. Each death is kept here, with the exception
and the innermost frame of the user's code it was raised in, for the process's record
(``records.ProcessRecord.deaths``); ``gyreprof.analysis.feeders`` later tells whether
the trainer starved after it.

Seen:

- a thread's uncaught exception: ``threading.excepthook``, chained (the hook that was
  set before runs after, so the traceback is printed as before);
- a ``multiprocessing`` process's: its ``run`` raised (``libs.multiprocessing`` calls
  :func:`guard_run` in the child's ``_bootstrap``, which prints the traceback itself);
- a process's main thread: ``sys.excepthook``, chained the same way.

With each death, the number of items left in the last queue the thread put into
(``Death.backlog``): a trainer still takes those after its feeder died, so its
starvation starts later by that much (``analysis.feeders``). The queues' instrumentor
(``libs.queues``) tells :func:`put_into` of each blocking put: one weak reference kept
per thread, its size read only when the thread dies.

At most :data:`MAX_DEATHS` are kept per process, messages cut at :data:`MAX_MESSAGE`.
Nothing else here runs until something dies.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from gyreprof.model.death import Death, Frame, innermost_user_frame

MAX_DEATHS = 16
MAX_MESSAGE = 200

_deaths: list[Death] = []
_lock = threading.Lock()
_installed = False
_thread_hook: Callable[[Any], Any] | None = None
_sys_hook: Callable[..., Any] | None = None
_fed = threading.local()  # .q: a weak reference to the last queue the thread put into


def put_into(q: Any) -> None:
    """The thread put into ``q`` (a ``queue.Queue`` or ``multiprocessing`` queue)."""
    try:
        _fed.q = weakref.ref(q)
    except TypeError:  # a queue class with no weak references: its size stays unknown
        _fed.q = None


def backlog() -> int:
    """Items left in the last queue this thread put into; -1 when unknown (none, gone,
    or a queue that cannot tell, as ``multiprocessing``'s on macOS)."""
    ref = getattr(_fed, "q", None)
    q = ref() if ref is not None else None
    if q is None:
        return -1
    try:
        return max(0, int(q.qsize()))
    except Exception:  # noqa: BLE001 - NotImplementedError, a closed queue: unknown
        return -1


def deaths() -> tuple[Death, ...]:
    """The deaths kept in this process, oldest first."""
    with _lock:
        return tuple(_deaths)


def _frames(tb: TracebackType | None) -> Iterator[Frame]:
    while tb is not None:
        code = tb.tb_frame.f_code
        yield code.co_filename, tb.tb_lineno, code.co_name
        tb = tb.tb_next


def record(kind: str, name: str, exc: BaseException | None, tb: TracebackType | None) -> None:
    """Keep one death of a ``kind`` (``Death.kind``) named ``name`` (never raises: it
    runs on the way out of a thread)."""
    if exc is None or isinstance(exc, (SystemExit, KeyboardInterrupt)):
        return
    try:
        file, line, func = innermost_user_frame(_frames(tb))
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - a broken __str__ still names the type
            message = ""
        death = Death(
            kind=kind,
            name=name,
            exc_type=type(exc).__name__,
            message=message[:MAX_MESSAGE],
            file=file,
            line=line,
            function=func,
            at_ns=time.monotonic_ns(),
            pid=os.getpid(),
            backlog=backlog(),
        )
        with _lock:
            if len(_deaths) < MAX_DEATHS:
                _deaths.append(death)
    except Exception:  # noqa: BLE001, S110 - the user's hook and traceback come first
        pass


def _on_thread_death(args: Any) -> None:
    name = args.thread.name if args.thread is not None else "?"
    record("thread", name, args.exc_value, args.exc_traceback)
    hook = _thread_hook or threading.__excepthook__
    hook(args)


def _on_main_death(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    record("main thread", "MainThread", exc, tb)
    hook = _sys_hook or sys.__excepthook__
    hook(exc_type, exc, tb)


def installed() -> bool:
    """The hooks are chained (:func:`install` ran and was not undone)."""
    return _installed


def install() -> None:
    """Chain the thread and process exception hooks (once per process; the ``threads``
    instrumentor, ``libs.threads``, calls it and undoes it)."""
    global _installed, _thread_hook, _sys_hook
    if _installed:
        return
    _installed = True
    _thread_hook = threading.excepthook
    threading.excepthook = _on_thread_death
    _sys_hook = sys.excepthook
    sys.excepthook = _on_main_death


def uninstall() -> None:
    """Give the hooks back where they are still ours."""
    global _installed
    if not _installed:
        return
    _installed = False
    if threading.excepthook is _on_thread_death:
        threading.excepthook = _thread_hook or threading.__excepthook__
    if sys.excepthook is _on_main_death:
        sys.excepthook = _sys_hook or sys.__excepthook__


def guard_run(process: Any) -> None:
    """Make a ``multiprocessing`` process's ``run`` (in the child, before ``_bootstrap``
    calls it) keep the exception it dies of; the instance's own attribute, so a subclass's
    ``run`` is guarded too."""
    run = process.run

    def run_guarded() -> Any:
        try:
            return run()
        except BaseException as exc:
            record("process", process.name, exc, exc.__traceback__)
            raise

    process.run = run_guarded


def after_fork_in_child() -> None:
    """A forked child starts with no deaths of its own."""
    global _lock, _fed
    _lock = threading.Lock()
    _deaths.clear()
    _fed = threading.local()
