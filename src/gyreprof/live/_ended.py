"""The note a ``gyreprof run`` leaves per pid when it ends, so that ``gyreprof top PID``
can say the run ended and where its records went. The launcher writes it after its
report: this module stays light (no numpy, no reader)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gyreprof._support.format import safe_name
from gyreprof.live import _folder

#: the note ``gyreprof run`` leaves in the segment folder when it ends, one per pid
ENDED_PREFIX = "gyreprof-ended-"
ENDED_FORMAT = "gyreprof.run-ended/1"
#: notes older than this are removed when a run writes its own, at most once a
#: :data:`ENDED_SWEEP_S` (the last time in the folder's :data:`ENDED_SWEPT` file's mtime):
#: a week of runs leaves thousands of notes, and each run would stat them all
ENDED_KEEP_S = 7 * 24 * 3600.0
ENDED_SWEEP_S = 3600.0
ENDED_SWEPT = "gyreprof-ended.swept"


def remember_run(
    pids: list[int], command: list[str], exit_code: int | None, records: dict[str, Any]
) -> None:
    """Leave a note per pid of a ``gyreprof run`` that ended (its launcher's and its
    processes'): the command, its exit code and where its records went (``records``:
    option -> path, None when not given), so that ``gyreprof top PID`` can say the run
    ended and where to read it. Best effort: a folder that cannot be written is skipped."""
    import json
    import os

    from gyreprof._support import io as _io

    try:
        folder = _folder.segment_dir(create=True)
        now = time.time()
        _sweep(folder, now)
        kept = {k: os.path.abspath(v) for k, v in records.items() if v}
        note = {
            "format": ENDED_FORMAT,
            "command": list(command),
            "exit_code": exit_code,
            "ended_unix_s": now,
            "records": kept,
        }
        data = json.dumps(note).encode("utf-8")
        for pid in dict.fromkeys(pids):
            _io.write_atomic(folder / f"{ENDED_PREFIX}{int(pid)}.json", data)
    except (OSError, ValueError):
        return


def _sweep(folder: Path, now: float) -> None:
    """Remove the notes older than :data:`ENDED_KEEP_S`, unless the folder was swept less
    than :data:`ENDED_SWEEP_S` ago."""
    import os

    swept = folder / ENDED_SWEPT
    try:
        if now - os.stat(swept).st_mtime < ENDED_SWEEP_S:
            return
    except FileNotFoundError:
        pass
    with os.scandir(folder) as entries:
        for old in entries:
            name = old.name
            if name.startswith(ENDED_PREFIX) and name.endswith(".json"):
                if now - old.stat().st_mtime > ENDED_KEEP_S:
                    (folder / name).unlink(missing_ok=True)
    fd = os.open(swept, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.utime(fd, (now, now))
    finally:
        os.close(fd)


def ended_run(pid: int) -> str | None:
    """What ``gyreprof top PID`` says of a pid whose ``gyreprof run`` ended: the command,
    when and how it ended, and where its records are (None without a note, or when the
    pid now belongs to a process that started after the run ended)."""
    import json

    import psutil

    path = _folder.segment_dir() / f"{ENDED_PREFIX}{pid}.json"
    try:
        with open(path, "rb") as f:
            note = json.loads(f.read(65536))
        if not isinstance(note, dict) or note.get("format") != ENDED_FORMAT:
            return None  # another program's file, or a later format: not read as ours
        ended = float(note["ended_unix_s"])
        command = [str(c) for c in note["command"]]
        records = {str(k): str(v) for k, v in dict(note["records"]).items()}
        code = note.get("exit_code")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:  # the pid taken again by a later process: the note is not about it
        if psutil.Process(pid).create_time() > ended:
            return None
    except psutil.Error:
        pass
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ended))
    how = f"exit code {code}" if isinstance(code, int) else "no exit code"
    head = (
        f"pid {pid} was part of gyreprof run {safe_name(' '.join(command))!r}, which ended "
        f"at {when} ({how}); its live segments ended with it"
    )
    if not records:
        return (
            head + "; its report was printed when it ended, and it kept no records (gyreprof "
            "run --json FILE or --save DIR keeps them for gyreprof report)"
        )
    where = ", ".join(
        f"{safe_name(k)} {safe_name(v)}"
        + (" (read it again: gyreprof report " + safe_name(v) + ")" if k != "--html" else "")
        for k, v in records.items()
    )
    return f"{head}; its records: {where}"
