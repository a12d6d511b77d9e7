"""The one input of analysis and export: whatever the user passed, resolved once.

Every public entry point that reads a run (``wait_report``, ``diagnose``, each
exporter in ``gyreprof.export``, the commands that take a file) turns its input
into a :class:`Source` with :func:`resolve`, at its door, and passes only that
on. It accepts a Profiler, a Snapshot, a Summary, an events file
(``gyreprof.export.load_events``), the path of a saved one, or a Source (given
back as it is). Deeper layers never ask "what was I given?" again, and never
touch a Recorder: a live Profiler's raw events are read by the Source itself
(once, the first time they are asked for, through :mod:`gyreprof.recording._rings`).

Times inside gyreprof are monotonic-clock ns; :attr:`Source.unix_offset_ns`
maps them to wall-clock time when that mapping is known.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof._support import io as _io
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, MissingFileError
from gyreprof.model import files
from gyreprof.model.snapshot import Snapshot, unix_offset_ns
from gyreprof.model.summary import Summary

if TYPE_CHECKING:
    from gyreprof.recording._rings import Rings
    from gyreprof.recording.events import EventsFile
    from gyreprof.recording.profiler import Profiler

__all__ = ["Source", "is_profiler", "load_file", "resolve"]


def is_profiler(obj: object) -> bool:
    """Whether ``obj`` is a gyreprof Profiler (never imports the compiled core: a process
    that did not import ``gyreprof.recording.profiler`` holds no Profiler)."""
    mod = sys.modules.get("gyreprof.recording.profiler")
    return mod is not None and isinstance(obj, mod.Profiler)


def _is_events_file(obj: object) -> bool:
    mod = sys.modules.get("gyreprof.recording.events")
    return mod is not None and isinstance(obj, mod.EventsFile)


@dataclass(frozen=True, eq=False)
class Source:
    """One input, seen at every level analysis or an export may need.

    ``summary`` is what the numbers are read from (a Summary input as given, else the
    snapshot's steady-state summary); ``snapshot`` the snapshot behind it (None for a
    Summary loaded from JSON); ``profiler`` the live Profiler when one was given;
    ``events`` the events file when one was given. ``origin`` names the input in
    messages ("profiler", "snapshot", "summary", "eventsfile" or the file's path), ``given``
    the kind of input.
    """

    summary: Summary
    snapshot: Snapshot | None
    origin: str
    given: str  # the kind of the input: "Profiler", "EventsFile", "Snapshot" or "Summary"
    profiler: Profiler | None = None
    events: EventsFile | None = None

    # -- what was given ----------------------------------------------------------------

    @property
    def phases(self) -> tuple[str, ...]:
        """Phase names in id order."""
        if self.profiler is not None:
            return tuple(self.profiler.phases)
        if self.events is not None:
            return tuple(self.events.phases)
        return tuple(self.summary.phases)

    @property
    def nothing_to_read(self) -> bool:
        """A ``per_thread=True`` Profiler that no thread has written to yet."""
        return self.profiler is not None and not self.profiler.recorders

    # -- raw events --------------------------------------------------------------------

    @cached_property
    def rings(self) -> Rings | None:
        """A live Profiler's rings, read once on first use (None for any other input)."""
        if self.profiler is None:
            return None
        from gyreprof.recording._rings import read_rings

        return read_rings(self.profiler)

    @cached_property
    def raw(self) -> EventsFile | None:
        """The raw events with what is needed to draw them: the events file given, or the
        live Profiler's rings (read once); None for a Snapshot or Summary."""
        if self.events is not None:
            return self.events
        if self.profiler is None:
            return None
        from gyreprof.recording.events import EventsFile

        assert self.snapshot is not None  # a Profiler always gives its snapshot
        return EventsFile.of_rings(self.rings, self.snapshot, label=self.profiler.label)  # type: ignore[arg-type]

    def events_file(self, what: str) -> EventsFile:
        """:attr:`raw`, or a ``InvalidValueError`` (a ValueError) saying that ``what`` needs it."""
        raw = self.raw
        if raw is None:
            raise InvalidValueError(
                f"{what} needs the raw events, which only a live Profiler or an events file "
                "(gyreprof.export.save_events) holds; a snapshot or summary keeps histograms only"
            )
        return raw

    @property
    def in_process(self) -> bool:
        """The data was taken by this very process (same monotonic clock)."""
        return self.profiler is not None

    @property
    def synced_phases(self) -> frozenset[str]:
        """Phases timed through ``gyreprof.integrations.torch`` (CUDA synchronised); empty
        unless a live Profiler was given and that module is in use."""
        mod = sys.modules.get("gyreprof.integrations.torch")
        if mod is None or self.profiler is None:
            return frozenset()
        return frozenset(mod.synchronized_phases(self.profiler))

    # -- times -------------------------------------------------------------------------
    # A Summary is read as given, and carries no clock to relate to wall time: these are
    # None for one even when the snapshot behind it is known.

    @property
    def _clock(self) -> Snapshot | None:
        return None if self.given == "Summary" else self.snapshot

    @property
    def unix_offset_ns(self) -> int | None:
        """Add to a monotonic ns timestamp of this data to get Unix-epoch ns (None: unknown)."""
        if self.profiler is not None:
            return time.time_ns() - time.monotonic_ns()
        if self.events is not None and self.events.unix_offset_ns is not None:
            return self.events.unix_offset_ns
        return unix_offset_ns(self._clock) if self._clock is not None else None

    @property
    def start_ns(self) -> int | None:
        """Monotonic ns of the first write of the run (None: unknown)."""
        if self._clock is None:
            return None
        start = self._clock.times.start_ns
        return start if start > 0 else None

    @property
    def steady_start_ns(self) -> int | None:
        """Monotonic ns steady state began (None: unknown or still warming up)."""
        if self._clock is None:
            return None
        v = self._clock.times.steady_start_ns
        return v if v > 0 else None


def load_file(path: str | os.PathLike[str]) -> Summary | Snapshot | EventsFile:
    """Read a saved snapshot (GYRS bytes), summary (JSON) or events file (.npz).

    ``MissingFileError`` (a FileNotFoundError) when it is missing, ``InvalidValueError`` (a ValueError) for a
    directory, ``CorruptDataError`` (a ValueError) for anything else.
    """
    p = Path(path)
    if not p.exists():
        raise MissingFileError(f"no such file: {p}")
    if p.is_dir():
        raise InvalidValueError(f"{p} is a directory, not a gyreprof summary or snapshot file")
    head = _io.read_head(p, 4, what="input file")
    if head[:2] == b"PK":
        from gyreprof.recording.events import load_events

        return load_events(p)
    return files.read(p)


def resolve(source: Any, *, what: str = "this", paths: bool = True) -> Source:
    """Turn ``source`` into a :class:`Source`; ``what`` names the caller in errors.

    A Profiler is snapshotted once, here; a path is read once, here (``paths=False``:
    a path is refused like any other wrong kind, for callers that document no file
    input). A Source is given back as it is. ``ArgumentTypeError`` (a TypeError) for
    any other kind of input.
    """
    if isinstance(source, Source):
        return source
    origin: str | None = None
    if paths and isinstance(source, (str, os.PathLike)):
        origin = str(source)
        source = load_file(source)
    if is_profiler(source):
        snap = source.snapshot()
        return Source(snap.summary(), snap, origin or "profiler", "Profiler", profiler=source)
    if _is_events_file(source):
        snap = source.snapshot
        return Source(snap.summary(), snap, origin or "eventsfile", "EventsFile", events=source)
    if isinstance(source, Snapshot):
        return Source(source.summary(), source, origin or "snapshot", "Snapshot")
    if isinstance(source, Summary):
        return Source(source, source.snapshot, origin or "summary", "Summary")
    if isinstance(source, np.ndarray):
        raise ArgumentTypeError(
            f"{what} takes a Profiler, Snapshot, Summary or events file, not a bare array; "
            "wrap raw events with EventsFile(...) or save them with "
            "gyreprof.export.save_events(prof, path)"
        )
    raise ArgumentTypeError(
        f"{what} takes a Profiler, Snapshot or Summary (or an events file, or the path of a saved "
        f"one), got {type(source).__name__}"
    )
