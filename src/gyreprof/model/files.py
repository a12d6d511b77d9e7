"""Saved files of a run, read by what they hold: a snapshot (GYRS bytes) or a summary (JSON).

``gyreprof.model.snapshot`` writes and reads the binary format and ``gyreprof.model.summary``
the JSON one; this module tells them apart, so it sits above both. Events files
(``.npz``) are read by ``gyreprof.export.load_events``.
"""

from __future__ import annotations

import os
from pathlib import Path

from gyreprof._support import io as _io
from gyreprof._support.errors import CorruptDataError
from gyreprof.model.snapshot import SNAPSHOT_MAGIC, Snapshot
from gyreprof.model.summary import Summary

__all__ = ["load", "read"]


def read(path: str | os.PathLike[str]) -> Snapshot | Summary:
    """The richest object a saved file holds: a Snapshot (bytes) or a Summary (JSON).

    ValueError (CorruptDataError) for a file of neither kind; only regular files of
    bounded size are read (``gyreprof._support.io``).
    """
    p = Path(path)
    data = _io.read_bytes(p, "snapshot", what="summary or snapshot file")
    if data[: len(SNAPSHOT_MAGIC)] == SNAPSHOT_MAGIC:
        return Snapshot.from_bytes(data)
    if data.lstrip()[:1] == b"{":
        return Summary.from_json(p)
    raise CorruptDataError(f"{p} is neither a gyreprof summary (JSON) nor a snapshot (GYRS bytes)")


def load(path: str | os.PathLike[str]) -> Summary:
    """Read a saved summary (JSON) or snapshot (bytes) file into a Summary."""
    saved = read(path)
    return saved.summary() if isinstance(saved, Snapshot) else saved
