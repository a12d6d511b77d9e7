"""Deadlocks named (private helper of :mod:`gyreprof.diagnostics.doctor`).

With Python stacks (``py-spy dump``): each thread that waits to take a lock -- its
innermost frame of the user's code stands on a ``with LOCK:`` line or a
``LOCK.acquire(`` call -- and the locks it holds there: the ``with`` blocks that
enclose that line and the lines of its callers, read from the source. Two threads or
more that each wait for a lock another one holds are a *lock-order deadlock*, named
with both lines. Locks are told apart by the expression that names them
(``self.lock_a``), which is what the source shows.

Without stacks (or owners) only the kernel's view is left: every thread of the
process asleep on a futex (a lock or a condition) and none using CPU is a *possible
deadlock*.
"""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field

_THREAD = re.compile(r'^Thread (?P<tid>\S+) \((?P<state>[^)]*)\): "(?P<name>[^"]*)"')
_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<file>[^()]+):(?P<line>\d+)\)\s*$")
_WITH = re.compile(r"^\s*(?:async\s+)?with\s+(?P<expr>[^:]+?)\s*(?:as\s+\w+\s*)?:")
_ACQUIRE = re.compile(r"(?P<expr>[\w.\[\]'\"]+)\.acquire\(")
_LIBRARY = tuple(
    p.rstrip(os.sep) + os.sep
    for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")}
    if p
)
_STDLIB_NAMES = frozenset({"threading.py", "queue.py"})  # py-spy may show short names


@dataclass
class _Thread:
    name: str
    frames: list[tuple[str, str, int]]  # (func, file, line), innermost first
    waits: tuple[str, str] | None = None  # (lock expression, file:line)
    holds: dict[str, str] = field(default_factory=dict)  # lock expression -> file:line


def parse_py_spy(text: str) -> list[_Thread]:
    """The threads of a ``py-spy dump`` text, innermost frame first."""
    threads: list[_Thread] = []
    for raw in text.splitlines():
        m = _THREAD.match(raw)
        if m:
            threads.append(_Thread(m.group("name"), []))
            continue
        f = _FRAME.match(raw)
        if f and threads:
            threads[-1].frames.append((f.group("func"), f.group("file"), int(f.group("line"))))
    return threads


def _is_library(file: str) -> bool:
    return (
        file.startswith(_LIBRARY)
        or "-packages" in file
        or file.startswith("<")
        or os.path.basename(file) == file
        and file in _STDLIB_NAMES
    )


def _source(file: str, cwd: str | None, cache: dict[str, list[str]]) -> list[str]:
    if file in cache:
        return cache[file]
    lines: list[str] = []
    for path in (file, os.path.join(cwd, file) if cwd else None):
        if not path:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read(1 << 20).splitlines()
            break
        except OSError:
            continue
    cache[file] = lines
    return lines


def _enclosing_withs(lines: list[str], line: int) -> list[tuple[str, int]]:
    """(lock expression, line) of each ``with`` block that encloses ``line`` (1-based)
    inside its function."""
    if not 0 < line <= len(lines):
        return []
    text = lines[line - 1]
    indent = len(text) - len(text.lstrip())
    out: list[tuple[str, int]] = []
    for n in range(line - 1, 0, -1):
        above = lines[n - 1]
        stripped = above.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        width = len(above) - len(stripped)
        if width >= indent:
            continue
        indent = width
        if stripped.startswith(("def ", "async def ", "class ")):
            break
        m = _WITH.match(above)
        if m:
            out.append((m.group("expr").strip(), n))
    return out


def _short(file: str, cwd: str | None) -> str:
    if cwd and file.startswith(cwd.rstrip(os.sep) + os.sep):
        return file[len(cwd.rstrip(os.sep)) + 1 :]
    return file


def lock_order_deadlock(stacks: str, cwd: str | None = None) -> str | None:
    """Words naming a lock-order deadlock the stacks show, or None."""
    cache: dict[str, list[str]] = {}
    threads = parse_py_spy(stacks)
    for t in threads:
        user = [(i, fr) for i, fr in enumerate(t.frames) if not _is_library(fr[1])]
        if not user:
            continue
        first, (_, file, line) = user[0]
        lines = _source(file, cwd, cache)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        m = _WITH.match(text) or _ACQUIRE.search(text)
        if m is None:
            continue
        t.waits = (m.group("expr").strip(), f"{_short(file, cwd)}:{line}")
        for _, (_, cfile, cline) in user:
            for expr, n in _enclosing_withs(_source(cfile, cwd, cache), cline):
                t.holds.setdefault(expr, f"{_short(cfile, cwd)}:{n}")
    waiting = [t for t in threads if t.waits is not None and t.holds]
    for a in waiting:
        for b in waiting:
            if a is b or a.waits is None or b.waits is None:
                continue
            if a.waits[0] in b.holds and b.waits[0] in a.holds:
                return (
                    f"lock-order deadlock: thread `{a.name}` holds `{b.waits[0]}` "
                    f"({a.holds[b.waits[0]]}) and waits for `{a.waits[0]}` ({a.waits[1]}); "
                    f"thread `{b.name}` holds `{a.waits[0]}` ({b.holds[a.waits[0]]}) and "
                    f"waits for `{b.waits[0]}` ({b.waits[1]}): each waits for a lock the "
                    "other holds; take the locks in one order everywhere"
                )
    return None


def possible_deadlock(waits: Sequence[object], pid: int) -> str | None:
    """Words when two threads or more all sleep on futexes (locks or conditions) and none
    used CPU over the watch; None otherwise."""
    own = [w for w in waits if not str(getattr(w, "name", "")).startswith("gyreprof")]
    if len(own) < 2:
        return None
    for w in own:
        if getattr(w, "syscall", None) not in ("futex", "futex_waitv"):
            return None
        if getattr(w, "state", None) != "S" or float(getattr(w, "cpu_s", 0.0)) > 0.0:
            return None
    return (
        f"possible deadlock: {len(own)} threads wait on locks, none runs (their owners "
        f"cannot be known from outside; Python stacks name the lines: py-spy dump --pid {pid})"
    )
