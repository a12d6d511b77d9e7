"""What one process of a ``gyreprof run`` leaves in the run directory.

Per process (``pid``):

- ``<pid>.start.json``: written when the process first records something (its
  role and parent); a process with a start file and nothing else did not
  contribute.
- ``<pid>.sampler.snap`` / ``<pid>.trainer.snap``: ``Snapshot.to_bytes()`` of
  the process's sampler and trainer profilers (all threads merged), written at
  exit.
- ``<pid>.sites.json``: the code sites its stack sampler found (``stacks.py``), when
  it ran and saw something.
- ``<pid>.done.json``: written last, so its presence means the snapshots are
  complete.

Per group of processes whose samplers were merged before they were written (a Ray job's
workers of one node and role, ``integrations.ray.job``), numbered ``<n>``:

- ``group-<n>.sampler.snap``: their sampler snapshots merged.
- ``group-<n>.json`` (:class:`GroupRecord`): written last; each process's record and its
  own sampler figures (``analysis.run.ProcessFigures``), for the per-process rows.

Every file is written through a unique temporary name and ``os.replace``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from gyreprof._support.errors import CorruptDataError, InvalidValueError
from gyreprof.integrations._auto.run_files import (  # the run folder's names, re-exported
    ENV_MAIN_PID,
    ENV_PATH,
    ENV_RUN_DIR,
    ENV_RUN_ID,
    SAMPLER_PHASES,
    TRAINER_PHASES,
    done_path,
    exec_key,
    group_numbers,
    group_path,
    group_snap_path,
    parse_exec_key,
    rollouts_path,
    segment_name,
    sites_path,
    snap_path,
    start_path,
)
from gyreprof.model.death import Death

RECORD_VERSION = 1
RECORD_FORMAT = "gyreprof.run-record/1"

_MAX_RECORD_BYTES = 1 << 20


@dataclass(frozen=True)
class ProcessRecord:
    """One process's entry (start or done file): a declared type with a version.

    Its format tag is set as the class variable ``gyreprof.model._serial`` reads (not with
    ``@serial_format``): every process of a run imports this module at start-up, and
    the serialiser (dataclass and type machinery) loads only when a record is written
    or read."""

    __serial_format__: ClassVar[str] = RECORD_FORMAT

    pid: int
    role: str
    ppid: int
    how: str = "started"  # started | exit | sigterm | mp-exit | explicit
    # written empty: a trainer's loop shape is in its snapshot's counters (loop.own /
    # loop.fed), which a live segment keeps too; still read from older records
    loops: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    version: int = RECORD_VERSION
    # a worker of a Ray job whose records came home through Ray (integrations.ray.job):
    # its node's id and IP address ("" for a process of the launcher's own machine)
    node_id: str = field(default="", metadata={"serial_sparse": True})
    node_ip: str = field(default="", metadata={"serial_sparse": True})
    # threads and processes of it that died of an exception (deaths.py): a trainer's
    # feeder among them is named first (gyreprof.analysis.feeders)
    deaths: tuple[Death, ...] = field(default=(), metadata={"serial_sparse": True})

    def __post_init__(self) -> None:
        if self.version != RECORD_VERSION:
            raise InvalidValueError(f"not a version-{RECORD_VERSION} gyreprof run record")

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """The record as strict JSON (format ``gyreprof.run-record/1``, gyreprof.model._serial)."""
        from gyreprof.model._serial import encode
        from gyreprof.render import json as render_json

        return render_json.write(encode(self), path, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> ProcessRecord:
        """Parse a record; ValueError (``SerialError``) for anything that is not one."""
        from gyreprof.model._serial import loads

        return loads(cls, text)


def read_record(path: Path) -> ProcessRecord:
    """The record in ``path``; OSError, or ValueError for anything that is not one (also
    a nested, huge or non-finite JSON that the parser itself chokes on)."""
    import os

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        with open(fd, "rb", closefd=False) as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidValueError(f"{path}: not a regular file, not a run record")
            data = f.read(_MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_RECORD_BYTES:
        raise InvalidValueError(f"{path}: larger than {_MAX_RECORD_BYTES} bytes, not a run record")
    try:
        return ProcessRecord.from_json(data.decode("utf-8", errors="replace"))
    except ValueError:
        raise
    except (RecursionError, OverflowError, TypeError, KeyError, AttributeError) as exc:
        raise CorruptDataError(f"malformed gyreprof run record: {type(exc).__name__}") from None


GROUP_FORMAT = "gyreprof.run-group/1"


@dataclass(frozen=True)
class GroupRecord:
    """The processes of one group (``group-<n>.json``): their records (each a
    :class:`ProcessRecord`'s JSON) and, in the same order, each one's sampler figures
    (``analysis.run.ProcessFigures.to_dict()``)."""

    __serial_format__: ClassVar[str] = GROUP_FORMAT

    records: tuple[str, ...]
    figures: tuple[dict[str, object], ...]

    def to_json(self) -> str:
        from gyreprof.model._serial import encode
        from gyreprof.render import json as render_json

        return render_json.write(encode(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> GroupRecord:
        """Parse a group record; ValueError for anything that is not one."""
        from gyreprof.model._serial import loads

        out = loads(cls, text)
        if len(out.records) != len(out.figures):
            raise InvalidValueError(
                f"{len(out.records)} records but {len(out.figures)} processes' figures"
            )
        return out


__all__ = [
    "ENV_MAIN_PID",
    "ENV_PATH",
    "ENV_RUN_DIR",
    "ENV_RUN_ID",
    "GROUP_FORMAT",
    "GroupRecord",
    "ProcessRecord",
    "RECORD_FORMAT",
    "RECORD_VERSION",
    "SAMPLER_PHASES",
    "TRAINER_PHASES",
    "done_path",
    "exec_key",
    "group_numbers",
    "group_path",
    "group_snap_path",
    "parse_exec_key",
    "read_record",
    "rollouts_path",
    "segment_name",
    "sites_path",
    "snap_path",
    "start_path",
]
