"""A start-up trail read back (``<pid>.trail`` in a run folder): the launch line, the
imports in progress, the exceptions raised and where they were caught, and the stacks
faulthandler dumped. :mod:`gyreprof.integrations._auto.trail` writes the file before the
user's code runs; the launcher's report and ``gyreprof doctor`` read it through here.

This module is imported by that writer too (for :func:`trail_path` and the standard
library's folders), so its top level imports only what a bare interpreter has loaded.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


def trail_path(run_dir: Path, pid: int) -> Path:
    return run_dir / f"{pid}.trail"


def _library_roots() -> tuple[str, ...]:
    """The standard library's folders: where ``os`` lies, and sysconfig's ``stdlib`` and
    ``platstdlib`` (``{base}/{platlibdir}/pythonX.Y``), worked out from ``sys`` (sysconfig
    itself costs 3 modules and a few ms)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    libdir = getattr(sys, "platlibdir", "lib")
    roots = set()
    for p in (
        os.path.dirname(os.__file__),
        os.path.join(sys.base_prefix, libdir, version),
        os.path.join(sys.exec_prefix, libdir, version),
    ):
        if p:
            roots.add(os.path.realpath(p) + os.sep)
            roots.add(p + os.sep)
    return tuple(sorted(roots))


STDLIB = _library_roots()
#: gyreprof's own folder: its frames are never the user's
GYREPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_library(filename: str) -> bool:
    """The standard library, site-packages, frozen modules or gyreprof: not the user's code."""
    if filename.startswith(("<", GYREPROF_DIR)) or "-packages" in filename:
        return True
    return filename.startswith(STDLIB)


class TrailInfo:
    """A trail read back: the launch line, the imports, the exceptions, the stacks dumped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.launch: dict[str, Any] | None = None
        self.first_record: float | None = None
        self.last_t = 0.0
        self.imports_open: list[tuple[str, float]] = []  # (name, began), outermost first
        self.slowest: list[tuple[str, float]] = []
        self.failed_imports: list[tuple[str, str]] = []
        self.exceptions: dict[int, dict[str, Any]] = {}
        self.dumps: list[list[str]] = []  # faulthandler text, one list of lines per dump
        self.fatal: str | None = None  # "Segmentation fault", ...

    @property
    def swallowed(self) -> list[dict[str, Any]]:
        """Exceptions raised before the first record whose last frame is not a
        module's top level (those ended the import or the process instead)."""
        out = []
        for e in self.exceptions.values():
            if self.first_record is not None and e["t"] > self.first_record:
                continue
            out.append(e)
        return out


def _json_loads(text: str) -> Any:
    import json

    return json.loads(text)


def read_trail(path: Path, max_bytes: int = 4 << 20) -> TrailInfo | None:
    """The trail at ``path`` read back, or None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes)
    except OSError:
        return None
    head = path.name.partition(".")[0]
    info = TrailInfo(int(head) if head.isdigit() else 0)
    dump: list[str] | None = None
    for raw in data.decode("utf-8", "replace").splitlines():
        if raw.startswith("{"):
            try:
                line = _json_loads(raw)
            except ValueError:
                line = None
            if isinstance(line, dict):
                dump = None
                _take_line(info, line)
                continue
        text = raw.rstrip()
        if not text:
            continue
        if text.startswith("Fatal Python error:"):
            info.fatal = text.partition(":")[2].strip()
            dump = None
        if dump is None:
            dump = []
            info.dumps.append(dump)
        dump.append(text)
    return info


def _take_line(info: TrailInfo, line: dict[str, Any]) -> None:
    ev = line.get("ev")
    t = float(line.get("t") or 0.0)
    info.last_t = max(info.last_t, t)
    if ev == "launch":
        info.launch = line
    elif ev == "import":
        info.imports_open.append((str(line.get("name")), t))
    elif ev in ("imported", "import-failed") and "s" in line:
        name = str(line.get("name"))
        for i in range(len(info.imports_open) - 1, -1, -1):
            if info.imports_open[i][0] == name:
                del info.imports_open[i:]
                break
        info.slowest.append((name, float(line.get("s") or 0.0)))
        if ev == "import-failed":
            info.failed_imports.append((name, str(line.get("error"))))
    elif ev == "import-failed":
        info.failed_imports.append((str(line.get("name")), str(line.get("error"))))
    elif ev == "exc":
        n = int(line.get("id") or 0)
        info.exceptions[n] = dict(line, caught=line.get("at"), caught_func=line.get("func"))
    elif ev == "exc-up":
        e = info.exceptions.get(int(line.get("id") or 0))
        if e is not None:
            e["caught"] = line.get("at")
            e["caught_func"] = line.get("func")
    elif ev == "first-record":
        info.first_record = t


def find_trail(pid: int, run_dir: Path | None = None) -> Path | None:
    """The trail of ``pid``: in ``run_dir``, or the run folder its environment names."""
    if run_dir is None:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read(1 << 20)
        except OSError:
            return None
        prefix = b"GYREPROF_RUN_DIR="
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                from pathlib import Path

                run_dir = Path(os.fsdecode(item[len(prefix) :]))
                break
        else:
            return None
    path = trail_path(run_dir, pid)
    return path if path.is_file() else None


def _short_path(where: str, cwd: str | None) -> str:
    file, _, line = where.rpartition(":")
    if not file:
        return where
    for base in (cwd, *STDLIB):
        if base and file.startswith(base.rstrip(os.sep) + os.sep):
            file = file[len(base.rstrip(os.sep)) + 1 :]
            break
    return f"{file}:{line}"


_FRAME_PREFIX = '  File "'


def _frames(dump: list[str]) -> list[tuple[str, int, str]]:
    out = []
    for text in dump:
        if not text.startswith(_FRAME_PREFIX):
            continue
        file, _, rest = text[len(_FRAME_PREFIX) :].partition('", line ')
        num, _, func = rest.partition(" in ")
        try:
            out.append((file, int(num), func.strip()))
        except ValueError:
            continue
    return out


def thread_stacks(info: TrailInfo) -> dict[str, list[tuple[str, int, str]]]:
    """The last dump's stacks by thread header (``"Thread 0x..."`` / ``"Current thread
    0x..."``), innermost frame first."""
    if not info.dumps:
        return {}
    out: dict[str, list[tuple[str, int, str]]] = {}
    head: str | None = None
    block: list[str] = []
    for text in info.dumps[-1] + ["Thread end"]:
        if text.startswith(("Thread ", "Current thread ")):
            if head is not None:
                out[head] = _frames(block)
            head, block = text, []
        else:
            block.append(text)
    return out


def _qualname(file: str, line: int, func: str) -> str:
    """``Class.func`` when the source shows ``func`` defined in a class, else ``func``."""
    try:
        with open(file, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()[:line]
    except OSError:
        return func
    indent = None
    for text in reversed(lines):
        stripped = text.lstrip()
        width = len(text) - len(stripped)
        if indent is None:
            if stripped.startswith((f"def {func}(", f"async def {func}(")):
                indent = width
            continue
        if width < indent and stripped.startswith("class "):
            name = stripped[6:].split("(")[0].split(":")[0].strip()
            return f"{name}.{func}"
        if width == 0 and stripped and not stripped.startswith(("#", "@")):
            break
    return func


def main_thread_wait(info: TrailInfo) -> str | None:
    """Where the main thread was in the last dump of stacks: the library call the user's
    code waits in, and the user's line (``Queue.get (toolkit/scheduler.py:20)``)."""
    stacks = thread_stacks(info)
    if not stacks:
        return None
    ident = info.launch.get("main_thread") if info.launch else None
    frames = None
    for head, fr in stacks.items():
        if ident is not None and f"0x{int(ident):016x}" in head:
            frames = fr
    if frames is None:  # no ident to match: the last thread listed is the oldest
        frames = list(stacks.values())[-1]
    if not frames:
        return None
    cwd = info.launch.get("cwd") if info.launch else None
    for i, (file, line, func) in enumerate(frames):
        if not is_library(file):
            where = _short_path(f"{file}:{line}", cwd)
            if i == 0:
                return f"`{func}` ({where})"
            cfile, cline, cfunc = frames[i - 1]
            return f"`{_qualname(cfile, cline, cfunc)}` ({where})"
    file, line, func = frames[0]
    return f"`{_qualname(file, line, func)}` ({_short_path(f'{file}:{line}', cwd)})"


def _thread_gone(pid: int, tid: int | None) -> bool | None:
    if tid is None:
        return None
    if not os.path.isdir(f"/proc/{pid}"):
        return None
    return not os.path.isdir(f"/proc/{pid}/task/{tid}")


def describe(
    info: TrailInfo, *, alive: bool | None = None, now_s: float | None = None
) -> list[str]:
    """The trail in plain words: start-up state, the exceptions swallowed, failed imports,
    the stacks of a fatal signal."""
    out: list[str] = []
    cwd = info.launch.get("cwd") if info.launch else None
    if info.first_record is None:
        age = ""
        if now_s is None and info.launch and info.launch.get("wall"):
            now_s = time.time() - float(info.launch["wall"])
        if now_s is not None:
            age = f" for {now_s:.0f} s"
        if info.fatal:
            head = f"died in start-up ({info.fatal}), before any step or phase"
        elif alive is False:
            head = "ended in start-up, before any step or phase was recorded"
        else:
            head = f"stuck in start-up{age}: no step or phase recorded"
            wait = main_thread_wait(info)
            if wait:
                head += f"; main thread waits in {wait}"
        out.append(head)
        if info.imports_open:
            chain = " > ".join(name for name, _ in info.imports_open[:8])
            out.append(f"import in progress (main thread): {chain}")
    exc = info.swallowed
    if exc:
        described = [_exc_words(e, info.pid, cwd) for e in exc[:3]]
        n = len(exc)
        more = f" (and {n - 3} more)" if n > 3 else ""
        verb = "raised" if alive is False else "swallowed"
        out.append(
            f"{n} exception{' was' if n == 1 else 's were'} {verb} during start-up{more}: "
            + "; ".join(described)
        )
    for name, error in info.failed_imports[:3]:
        out.append(f"failed import {name}: {error}")
    if info.fatal:
        out.append(f"fatal signal: {info.fatal}; the stacks at that moment:")
        out += ["  " + t for t in info.dumps[-1][:40]]
    return out


def _exc_words(e: dict[str, Any], pid: int, cwd: str | None) -> str:
    text = f"{e.get('repr') or e.get('type')} raised at {_short_path(str(e.get('at')), cwd)}"
    if e.get("caught") and e.get("caught") != e.get("at"):
        text += f", caught at {_short_path(str(e.get('caught')), cwd)}"
    if not e.get("main"):
        gone = _thread_gone(pid, e.get("tid"))
        text += f", in thread {e.get('thread')}"
        if gone:
            text += ", which has exited"
    return text


__all__ = [
    "GYREPROF_DIR",
    "STDLIB",
    "is_library",
    "TrailInfo",
    "describe",
    "find_trail",
    "main_thread_wait",
    "read_trail",
    "thread_stacks",
    "trail_path",
]
