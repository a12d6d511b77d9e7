"""Give gyreprof's helper threads an OS-visible name (``/proc/PID/task/TID/comm``).

Python 3.11 and 3.12 keep ``threading.Thread(name=...)`` inside the interpreter, so
``ps -L``, ``top -H`` and gyreprof's own census see every thread as ``python``. A
helper thread calls :func:`name_os_thread` first thing, so that the parallelism
check can tell gyreprof's threads from the user's and never count them against
the user (``gyreprof-`` prefix, see ``analysis.parallelism.census``).
"""

from __future__ import annotations

__all__ = ["OWN_PREFIX", "name_os_thread"]

# The kernel keeps 15 bytes of a thread name; every gyreprof thread's name starts so.
OWN_PREFIX = "gyreprof"


def name_os_thread(name: str) -> None:
    """Set the calling thread's kernel name (first 15 bytes of ``name``); Linux only,
    silently nothing elsewhere or when /proc is not writable."""
    try:
        with open("/proc/thread-self/comm", "w", encoding="ascii", errors="replace") as f:
            f.write(name[:15])
    except OSError:
        pass
