"""What an export reads: a Profiler, a Snapshot, a Summary, or a saved file of one.

Every exporter goes through :func:`resolve`, so they all accept the same
inputs and fail the same way on an empty profiler or a file of the wrong kind.
Times inside gyreprof are monotonic-clock ns; :func:`unix_offset_ns` maps them
to wall-clock time when that mapping is known (the data was taken by this very
process, so the monotonic clock is the same one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyreprof import _io, files
from gyreprof.export.events import (
    EventsFile,
    current_unix_offset_ns,
    is_profiler,
    load_events,
    unix_offset_ns,
)
from gyreprof.histogram import STEP
from gyreprof.snapshot import Snapshot, as_snapshot
from gyreprof.summary import PhaseStats, Summary

if TYPE_CHECKING:
    from gyreprof.profiler import Profiler

__all__ = [
    "Resolved",
    "current_unix_offset_ns",
    "is_empty",
    "load_file",
    "require_histograms",
    "resolve",
    "rows",
    "unix_offset_ns",
    "write_text",
]


@dataclass(frozen=True)
class Resolved:
    """One export input, seen at the levels an exporter may need."""

    summary: Summary
    snapshot: Snapshot | None  # None when the input was a Summary
    profiler: Profiler | None  # None unless the input was a live Profiler
    origin: str  # "profiler", "snapshot", "summary" or the file name
    events: EventsFile | None = None  # the raw events, when the input held them

    @property
    def unix_offset_ns(self) -> int | None:
        """Add to a monotonic ns timestamp of this data to get Unix-epoch ns (None: unknown)."""
        if self.profiler is not None:
            return current_unix_offset_ns()
        if self.events is not None and self.events.unix_offset_ns is not None:
            return self.events.unix_offset_ns
        return unix_offset_ns(self.snapshot) if self.snapshot is not None else None

    def events_file(self, what: str) -> EventsFile:
        """The raw events (live Profiler or events file); ValueError naming ``what`` otherwise."""
        if self.events is not None:
            return self.events
        if self.profiler is not None:
            return EventsFile.from_profiler(self.profiler)
        raise ValueError(
            f"{what} needs the raw events, which only a live Profiler or an events file "
            "(gyreprof.export.save_events) holds; a snapshot or summary keeps histograms only"
        )

    @property
    def start_ns(self) -> int | None:
        """Monotonic ns of the first write of the run (None: unknown)."""
        if self.snapshot is None:
            return None
        start = int(self.snapshot.times.get("start_ns", 0))
        return start if start > 0 else None

    @property
    def steady_start_ns(self) -> int | None:
        """Monotonic ns steady state began (None: unknown or still warming up)."""
        if self.snapshot is None:
            return None
        v = int(self.snapshot.times.get("steady_start_ns", -1))
        return v if v > 0 else None


def load_file(path: str | os.PathLike[str]) -> Summary | Snapshot | EventsFile:
    """Read a saved snapshot (GYRS bytes), summary (JSON) or events file (.npz).

    ValueError for anything else.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    if p.is_dir():
        raise ValueError(f"{p} is a directory, not a gyreprof summary or snapshot file")
    head = _io.read_head(p, 4, what="input file")
    if head[:2] == b"PK":
        return load_events(p)
    return files.read(p)


def resolve(source: Any, *, what: str, allow_empty: bool = False) -> Resolved:
    """Turn ``source`` into a :class:`Resolved`; ``what`` names the export in error messages.

    Accepts a Profiler, Snapshot, Summary, an events file loaded with
    ``load_events``, or a path to a saved snapshot / summary / events file.
    Raises ValueError when nothing was recorded (unless ``allow_empty``).
    """
    profiler = None
    events = None
    origin: str
    if isinstance(source, (str, os.PathLike)):
        origin = str(source)
        source = load_file(source)
    elif is_profiler(source):
        origin = "profiler"
        profiler = source
    else:
        origin = type(source).__name__.lower()
    if isinstance(source, EventsFile):
        events = source
        source = source.snapshot
    if profiler is None and not isinstance(source, (Snapshot, Summary)):
        raise TypeError(
            f"{what} takes a Profiler, Snapshot, Summary or the path of a saved one, "
            f"got {type(source).__name__}"
        )
    if profiler is not None and not profiler.recorders:
        # per_thread=True and no thread has written yet: there is nothing to snapshot
        raise ValueError(_nothing(what))
    snapshot: Snapshot | None
    if profiler is None and isinstance(source, Summary):
        snapshot, summary = None, source  # exporters read a Summary as given
    else:
        snapshot = as_snapshot(profiler or source, what=what)
        summary = snapshot.summary()
    if not allow_empty and is_empty(summary):
        raise ValueError(_nothing(what))
    return Resolved(
        summary=summary, snapshot=snapshot, profiler=profiler, origin=origin, events=events
    )


def _nothing(what: str) -> str:
    return (
        f"nothing to export to {what}: no phase or step was recorded yet "
        "(time something first: prof.begin() / prof.lap(i), `with prof.phase(name):` "
        "or prof.record(name, duration_ns))"
    )


def is_empty(summary: Summary) -> bool:
    """True when nothing at all was recorded (not even during warm-up)."""
    if summary.events or summary.steps or summary.warmup.steps:
        return False
    return all(st.count == 0 for _, st in rows(summary))


def rows(summary: Summary, *, include_step: bool = True) -> list[tuple[str, PhaseStats]]:
    """(name, stats) for every phase, then the whole step (named STEP) when asked."""
    out = list(summary.phases.items())
    if include_step:
        out.append((STEP, summary.step))
    return out


def require_histograms(summary: Summary, what: str) -> None:
    """ValueError when a summary was saved without its histograms."""
    for name, st in rows(summary):
        if st.count and st.histogram is None:
            raise ValueError(
                f"{what} needs the histograms, but this summary has none for {name!r} "
                "(it was saved with to_dict(histograms=False)); export from the Profiler, "
                "a snapshot file, or a summary saved with Summary.to_json()"
            )


def write_text(text: str, path: Any) -> str | Path | None:
    """Return ``text`` when ``path`` is None, write it to a stream (returning None) or to a
    file (returning its Path)."""
    if path is None:
        return text
    if hasattr(path, "write"):
        path.write(text)
        return None
    from gyreprof._io import write_atomic

    p = Path(path)
    write_atomic(p, text.encode("utf-8"))
    return p
