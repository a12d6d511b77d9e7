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

import functools
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["OWN_PREFIX", "name_os_thread", "prepare"]

# The kernel keeps 15 bytes of a thread name; every gyreprof thread's name starts so.
OWN_PREFIX = "gyreprof"

_PR_SET_NAME = 15


@functools.cache
def _prctl() -> Callable[..., Any] | None:
    """libc's ``prctl``, loaded once (a forked child inherits it); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

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
        return None
    return fn


def prepare() -> None:
    """Load ``prctl`` now, in the thread that starts a helper (loading reads files)."""
    _prctl()


def name_os_thread(name: str) -> None:
    """Set the calling thread's kernel name (first 15 bytes of ``name``); Linux only,
    silently nothing elsewhere. Opens no file once :func:`prepare` has run."""
    fn = _prctl()
    if fn is not None:
        fn(_PR_SET_NAME, name.encode("ascii", "replace")[:15], 0, 0, 0)
