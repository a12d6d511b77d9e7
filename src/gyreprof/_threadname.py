"""Give gyreprof's helper threads an OS-visible name (``/proc/PID/task/TID/comm``).

Python 3.11 and 3.12 keep ``threading.Thread(name=...)`` inside the interpreter, so
``ps -L``, ``top -H`` and gyreprof's own census see every thread as ``python``. A
helper thread calls :func:`name_os_thread` first thing, so that the parallelism
check can tell gyreprof's threads from the user's and never count them against
the user (``gyreprof-`` prefix, see ``analysis.parallelism.census``).

The name is set with ``prctl(PR_SET_NAME)``, which opens no file. Writing
``/proc/thread-self/comm`` instead opens one, and a helper thread that starts while
the program closes every descriptor (a daemon's ``closerange``) and opens files of
its own can then close one of the program's files: its ``open`` got a number, the
program closed that number and reopened it for its own file, and the helper's
``close`` closed the program's file. The thread that starts a helper calls
:func:`prepare` first (it loads what the call needs: ``ctypes`` reads files as it
is imported).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["OWN_PREFIX", "name_os_thread", "prepare"]

# The kernel keeps 15 bytes of a thread name; every gyreprof thread's name starts so.
OWN_PREFIX = "gyreprof"

_PR_SET_NAME = 15
_PRCTL: list[Callable[..., Any] | None] = []  # [prctl] once prepared, [None] where none


def prepare() -> None:
    """Load ``prctl`` (Linux); call it in the thread that starts the helper, before."""
    if _PRCTL:
        return
    fn = None
    try:
        import ctypes
        import sys

        if sys.platform.startswith("linux"):
            fn = ctypes.CDLL(None, use_errno=True).prctl
            fn.argtypes = (
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_ulong,
                ctypes.c_ulong,
                ctypes.c_ulong,
            )
            fn.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError):
        fn = None
    _PRCTL.append(fn)


def name_os_thread(name: str) -> None:
    """Set the calling thread's kernel name (first 15 bytes of ``name``); Linux only,
    silently nothing elsewhere. Without :func:`prepare` called first, or without
    ``prctl``, it writes ``/proc/thread-self/comm`` (which opens a file)."""
    short = name.encode("ascii", "replace")[:15]
    fn = _PRCTL[0] if _PRCTL else None
    if fn is not None:
        fn(_PR_SET_NAME, short, 0, 0, 0)
        return
    try:
        with open("/proc/thread-self/comm", "wb") as f:
            f.write(short)
    except OSError:
        pass
