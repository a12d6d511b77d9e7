"""A thread or process that died of an exception, and the frame of the user's code it
died in: one type for what ``gyreprof run`` sees die (``integrations._auto.deaths``,
kept in each process's record) and what ``gyreprof doctor`` reads from a process's
trail or the tracebacks in its output (``diagnostics._feeders``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from gyreprof.model.trail_file import is_library

#: ``Death.kind``: a thread of the process, a ``multiprocessing`` process, a process's
#: main thread, or a top-level traceback read from a program's output
KINDS = ("thread", "process", "main thread", "program")

Frame = tuple[str, int, str]  # (file, line, function)


@dataclass(frozen=True)
class Death:
    """One thread or process ended by an exception.

    ``kind`` (one of :data:`KINDS`) and ``name`` (the thread's or process's name) say
    who; ``exc_type`` and ``message`` what; ``file``, ``line`` and ``function`` the
    innermost frame of the user's code in its traceback (:func:`innermost_user_frame`);
    ``at_ns`` when (CLOCK_MONOTONIC, the recorders' timeline; 0: unknown) and ``pid``
    in which process (0: unknown). ``backlog`` is how many items were left in the last
    queue it put into when it died, the ones a trainer still takes after it (-1: it put
    into no queue ``gyreprof run`` watches, or that queue cannot tell its size)."""

    kind: str
    name: str
    exc_type: str
    message: str
    file: str
    line: int
    function: str = "?"
    at_ns: int = 0
    pid: int = 0
    backlog: int = -1

    @property
    def who(self) -> str:
        """``thread `producer```, ``process `worker-1```, ``main thread``, ``the program``."""
        if self.kind in ("thread", "process"):
            return f"{self.kind} `{self.name}`"
        return "the program" if self.kind == "program" else self.kind

    @property
    def short_type(self) -> str:
        """The exception's class name without its module (``JSONDecodeError``)."""
        return self.exc_type.rpartition(".")[2]

    def where(self) -> str:
        """``file:line``: the file as given when relative (the doctor's, shortened from
        the process's working folder), its base name when absolute."""
        file = os.path.basename(self.file) if os.path.isabs(self.file) else self.file
        return f"{file}:{self.line}"

    def words(self) -> str:
        """``ValueError: bad item at feed.py:12 (make_item)``."""
        msg = f": {self.message}" if self.message else ""
        func = f" ({self.function})" if self.function != "?" else ""
        return f"{self.short_type}{msg} at {self.where()}{func}"


def innermost_user_frame(frames: Iterable[Frame]) -> Frame:
    """Of a traceback's frames (outermost first), the innermost in the user's code (not
    the standard library's, site-packages' or gyreprof's: ``trail_file.is_library``); the
    innermost frame at all when every frame is a library's; ``("?", 0, "?")`` for none."""
    last: Frame = ("?", 0, "?")
    user: Frame | None = None
    for frame in frames:
        last = frame
        if not is_library(frame[0]):
            user = frame
    return user or last
