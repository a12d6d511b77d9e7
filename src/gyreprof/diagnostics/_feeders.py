"""Dead feeders and dead children: what should feed a waiting main thread and died
(private helper of :mod:`gyreprof.diagnostics.doctor`).

A main thread waiting on a queue, pipe, future or condition waits for good when what
feeds it has died. Looked for, in this order:

- a thread of the process that ended with an exception: the start-up trail of a
  ``gyreprof run`` process (an exception raised in a thread that has exited since), or
  the ``Exception in thread NAME:`` traceback ``threading`` printed in the process's
  stderr (or stdout) file, or in the log given;
- a child process that is a zombie (exited, not reaped): its exit status, and the last
  top-level traceback in those files (a child inherits its parent's stderr).

Bounded: the last :data:`MAX_READ_BYTES` of each file are read.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

import psutil

from gyreprof.model.death import Death, Frame, innermost_user_frame

#: at most this many bytes (the last ones) of each file are read
MAX_READ_BYTES = 1024 * 1024

_THREAD_HEAD = re.compile(r"^Exception in thread (?P<name>.+?)(?: \(\w+\))?:\s*$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_EXC_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b|"
    r"[A-Za-z_][\w.]*Error)(?::\s*(?P<msg>.*))?$"
)


def said(d: Death) -> str:
    """The doctor's words for a death: ``ValueError at train.py:9 (bad item)``."""
    return f"{d.short_type} at {d.where()}" + (f" ({d.message[:120]})" if d.message else "")


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - MAX_READ_BYTES))
            data = fh.read(MAX_READ_BYTES)
    except (OSError, ValueError):
        return ""
    if b"\0" in data:
        return ""
    return data.decode("utf-8", errors="replace")


def output_files(pid: int, log: Path | None) -> list[str]:
    """The process's stderr and stdout when they are regular files, and the log given."""
    out: list[str] = []
    for fd in (2, 1):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if stat.S_ISREG(os.stat(f"/proc/{pid}/fd/{fd}").st_mode) and target not in out:
                out.append(target)
        except OSError:
            continue
    if log is not None and str(log) not in out and log.is_file():
        out.append(str(log))
    return out


def _short(file: str, cwd: str | None) -> str:
    if cwd and file.startswith(cwd.rstrip(os.sep) + os.sep):
        return file[len(cwd.rstrip(os.sep)) + 1 :]
    return file


def tracebacks(text: str, cwd: str | None = None) -> list[Death]:
    """The tracebacks printed in ``text``, oldest first: those ``threading`` printed for
    a thread (kind ``thread``) and top-level ones (kind ``program``); each at the
    innermost frame of the user's code (``model.death.innermost_user_frame``), its file
    shortened from ``cwd``."""
    out: list[Death] = []
    thread: str | None = None
    frames: list[Frame] = []
    inside = False
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _THREAD_HEAD.match(line)
        if m:
            thread, frames, inside = m.group("name"), [], False
            continue
        if line.startswith("Traceback (most recent call last):"):
            inside, frames = True, []
            continue
        if not inside:
            continue
        f = _FRAME.match(line)
        if f:
            frames.append((f.group("file"), int(f.group("line")), f.group("func")))
            continue
        if line.startswith((" ", "\t")) or not line:
            continue
        e = _EXC_LINE.match(line)
        if e and frames:
            file, at, func = innermost_user_frame(frames)
            out.append(
                Death(
                    kind="thread" if thread is not None else "program",
                    name=thread or "",
                    exc_type=e.group("type"),
                    message=(e.group("msg") or "").strip(),
                    file=_short(file, cwd),
                    line=at,
                    function=func,
                )
            )
        inside, thread, frames = False, None, []
    return out


def _exit_status(pid: int) -> str | None:
    """A zombie's exit status, from the last field of ``/proc/PID/stat``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            code = int(fh.read(4096).rpartition(b")")[2].split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    if code & 0x7F:
        return f"killed by signal {code & 0x7F}"
    return f"exit code {(code >> 8) & 0xFF}"


def _zombies(proc: psutil.Process) -> list[tuple[int, str, str | None]]:
    out: list[tuple[int, str, str | None]] = []
    try:
        children = proc.children()
    except psutil.Error:
        return out
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                continue
            name = child.name()
        except psutil.Error:
            continue
        out.append((child.pid, name, _exit_status(child.pid)))
    return out


def _main_wait(main_waits_on: str | None, trail_wait: str | None) -> str:
    """What the main thread waits on, as a phrase that starts with "waits"."""
    if trail_wait:
        return f"waits on {trail_wait}"
    if not main_waits_on:
        return "its main thread waits"
    if main_waits_on.startswith("waits on a lock or condition"):
        return "waits on a lock, queue, future or condition (futex)"
    return main_waits_on


def dead_feeders(
    pid: int,
    proc: psutil.Process,
    main_waits_on: str | None,
    log: Path | None,
    trailed: tuple[list[Death], str | None] = ([], None),
) -> list[str]:
    """Words for each thread that died with an exception and each zombie child, saying
    what the main thread waits on; empty when none is found. ``trailed``: the threads
    a ``gyreprof run`` process's start-up trail saw die, and where its main thread waits
    by the trail (read by the evidence module, which may read the trail)."""
    try:
        cwd: str | None = proc.cwd()
    except (psutil.Error, OSError):
        cwd = None
    deaths, trail_wait = list(trailed[0]), trailed[1]
    texts = [_tail(p) for p in output_files(pid, log)]
    printed = [d for t in texts for d in tracebacks(t, cwd)]
    seen = {d.name for d in deaths}
    deaths += [d for d in printed if d.kind == "thread" and d.name not in seen]
    head = _main_wait(main_waits_on, trail_wait)
    out: list[str] = []
    for d in deaths[-3:]:
        out.append(f"{head} fed by {d.who}, which died: {said(d)}")
    top = [d for d in printed if d.kind == "program"]
    for cpid, name, status in _zombies(proc)[:3]:
        words = f"{head}; its child process {cpid} ({name}) is dead (a zombie"
        words += f", {status})" if status else ")"
        if top:
            words += f": {said(top[-1])} (the last traceback in its output)"
        out.append(words)
    return out


def main_waits_on(waits: Sequence[object], pid: int) -> str | None:
    """The main thread's wait words among the doctor's thread waits."""
    for w in waits:
        if getattr(w, "tid", None) == pid:
            return getattr(w, "waits_on", None)
    return None
