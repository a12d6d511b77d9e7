"""The raw events of a run, saved and loaded: ``EventsFile``, ``save_events``, ``load_events``.

An events file (``.npz``) holds the Profiler's raw-event ring, a snapshot and
the wall-clock offset of its monotonic times, so any export can be made from it
later (a Chrome trace from the events, the others from the snapshot).
Wall-clock offsets (monotonic ns to Unix-epoch ns) are computed in
``gyreprof.model.snapshot`` and re-exported here.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof._support import io as _io
from gyreprof._support.errors import (
    ArgumentTypeError,
    CorruptDataError,
    InvalidValueError,
    MissingFileError,
)
from gyreprof._version import __version__
from gyreprof.model.snapshot import Snapshot, current_unix_offset_ns, unix_offset_ns

if TYPE_CHECKING:
    from gyreprof.recording._rings import Rings
    from gyreprof.recording.profiler import Profiler

__all__ = [
    "EVENTS_FORMAT",
    "EventsFile",
    "current_unix_offset_ns",
    "is_profiler",
    "load_events",
    "save_events",
    "unix_offset_ns",
]


def is_profiler(obj: Any) -> bool:
    """Whether ``obj`` is a gyreprof Profiler (imported lazily: exports stay light)."""
    from gyreprof.recording.profiler import Profiler

    return isinstance(obj, Profiler)


EVENTS_FORMAT = "gyreprof.events/1"
_REQUIRED_FIELDS = ("phase", "step", "start_ns", "duration_ns")
NO_EVENTS = (
    "nothing to export to a Chrome trace: the event ring is empty (time something "
    "first: prof.begin() / prof.lap(i) or `with prof.phase(name):`)"
)


@dataclass(frozen=True)
class EventsFile:
    """The raw events of a run with what is needed to draw them (see :func:`save_events`).

    ``events`` is a structured array (phase, step, start_ns, duration_ns; phase
    -1 marks a whole step), ``tids`` gives the recorder (thread) of each event,
    1-based. ``steady_start_ns`` maps a tid to the monotonic ns its warm-up ended.
    """

    phases: tuple[str, ...]
    events: np.ndarray
    tids: np.ndarray
    snapshot: Snapshot
    pid: int
    label: str | None = None
    thread_names: dict[int, str] = field(default_factory=dict)
    steady_start_ns: dict[int, int] = field(default_factory=dict)
    warmup: bool = False  # True when a warm-up rule was configured
    overwritten: int = 0
    unix_offset_ns: int | None = None  # Unix-epoch ns minus monotonic ns of these times

    @classmethod
    def from_profiler(cls, prof: Profiler) -> EventsFile:
        """Copy the ring(s) of a running or finished Profiler (read by ``gyreprof.recording._rings``)."""
        from gyreprof.recording._rings import read_rings

        return cls.of_rings(read_rings(prof), prof.snapshot(), label=prof.label)

    @classmethod
    def of_rings(cls, rings: Rings, snap: Snapshot, *, label: str | None = None) -> EventsFile:
        """The events file of rings read from a Profiler (``gyreprof.recording._rings``) and the
        snapshot taken with them; ``InvalidValueError`` when no thread wrote yet."""
        if not rings.parts:
            raise InvalidValueError(NO_EVENTS)  # per_thread=True and no thread has written yet
        parts = rings.parts
        events = parts[0] if len(parts) == 1 else np.concatenate(parts)
        name = "gyreprof thread {}" if rings.per_thread else "gyreprof loop"
        cfg = snap.config
        return cls(
            phases=rings.phases,
            events=events,
            tids=rings.tids,
            snapshot=snap,
            pid=os.getpid(),
            label=label,
            thread_names={i: name.format(i) for i in range(1, len(parts) + 1)},
            steady_start_ns=dict(rings.steady_start_ns),
            warmup=bool(cfg.warmup_steps or cfg.warmup_ns),
            overwritten=rings.overwritten,
            unix_offset_ns=current_unix_offset_ns(),
        )


def save_events(prof: Profiler, path: str | os.PathLike[str]) -> Path:
    """Save the Profiler's raw-event ring (and a snapshot) to a ``.npz`` file.

    The file feeds every export later: ``chrome_trace`` from its events, the
    others from its snapshot. Returns the path written.
    """
    if not is_profiler(prof):
        raise ArgumentTypeError(f"save_events takes a Profiler, got {type(prof).__name__}")
    ef = EventsFile.from_profiler(prof)
    meta = {
        "format": EVENTS_FORMAT,
        "gyreprof": __version__,
        "pid": ef.pid,
        "label": ef.label,
        "thread_names": {str(k): v for k, v in ef.thread_names.items()},
        "steady_start_ns": {str(k): v for k, v in ef.steady_start_ns.items()},
        "warmup": ef.warmup,
        "overwritten": ef.overwritten,
        "unix_offset_ns": ef.unix_offset_ns,
    }
    from gyreprof._support.io import atomic_open

    p = Path(path)
    with atomic_open(p, "wb") as fh:
        np.savez_compressed(
            fh,
            events=ef.events,
            tids=ef.tids,
            phases=np.array(ef.phases, dtype=np.str_),
            snapshot=np.frombuffer(ef.snapshot.to_bytes(), dtype=np.uint8),
            meta=np.array(json.dumps(meta)),
        )
    return p


def load_events(path: str | os.PathLike[str]) -> EventsFile:
    """Read a file written by :func:`save_events`; ``CorruptDataError`` (a ValueError) says
    what is wrong with its contents, a ValueError that it is no regular file or too large."""
    p = Path(path)
    if not p.exists():
        raise MissingFileError(f"no such file: {p}")
    stream = _io.open_events(p)
    try:
        with np.load(stream, allow_pickle=False) as z:
            missing = [k for k in ("events", "tids", "phases", "snapshot", "meta") if k not in z]
            if missing:
                raise InvalidValueError(f"missing arrays {missing}")
            events = z["events"]
            tids = z["tids"]
            phases = tuple(str(x) for x in z["phases"].tolist())
            snap_bytes = z["snapshot"].tobytes()
            meta = json.loads(str(z["meta"]))
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CorruptDataError(
            f"{p} is not a gyreprof events file (not a readable .npz: {exc})"
        ) from None
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise CorruptDataError(f"{p} is not a gyreprof events file: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != EVENTS_FORMAT:
        raise CorruptDataError(
            f"{p} is not a gyreprof events file (format marker {EVENTS_FORMAT!r} missing)"
        )
    names = events.dtype.names or ()
    if any(f not in names for f in _REQUIRED_FIELDS) or events.ndim != 1:
        raise CorruptDataError(f"{p}: the events array lacks the fields {list(_REQUIRED_FIELDS)}")
    if tids.shape != events.shape:
        raise CorruptDataError(f"{p}: {len(tids)} thread ids for {len(events)} events")
    snapshot = Snapshot.from_bytes(snap_bytes)
    try:
        return EventsFile(
            phases=phases,
            events=events,
            tids=tids.astype(np.int32, copy=False),
            snapshot=snapshot,
            pid=int(meta.get("pid", 0)),
            label=meta.get("label"),
            thread_names={int(k): str(v) for k, v in dict(meta.get("thread_names", {})).items()},
            steady_start_ns={
                int(k): int(v) for k, v in dict(meta.get("steady_start_ns", {})).items()
            },
            warmup=bool(meta.get("warmup", False)),
            overwritten=int(meta.get("overwritten", 0)),
            unix_offset_ns=(
                int(meta["unix_offset_ns"]) if meta.get("unix_offset_ns") is not None else None
            ),
        )
    except (TypeError, ValueError) as exc:
        raise CorruptDataError(f"{p} is not a gyreprof events file: bad metadata ({exc})") from None
