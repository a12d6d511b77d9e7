"""Gather the doctor's evidence about a process (private helper of
:mod:`gyreprof.diagnostics.doctor`).

Looks at the process (psutil; ``/proc`` through :mod:`._procfs` for what psutil does
not read), its gyreprof live segments, the log, the step file and the files it
writes; turns the looks into progress evidence (best first), thread waits,
activity, failure / progress lines, stuck endpoints and Python stacks, each with
the words that describe it. The rules that make a state of it are in
:mod:`._doctor_rules`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from gyreprof._support import io as _io
from gyreprof.diagnostics import _procfs
from gyreprof.diagnostics._doctor_rules import (
    BUSY_CPU_SHARE,
    IDLE_CPU_SHARE,
    IDLE_IO_BYTES,
    MAIN_WAKEUPS_PER_S,
    POLL_WAKEUPS_PER_S,
    RETRY_NEW_THREADS,
    SPIN_CPU_SHARE,
)
from gyreprof.model.death import Death

if TYPE_CHECKING:  # the doctor runs without the compiled core: no runtime import of it
    from gyreprof._support.block import Progress

_SLEEP_CALLS = frozenset(
    {
        "nanosleep",
        "clock_nanosleep",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "futex",
    }
)

#: live counters whose name holds one of these count failed attempts (retry, timeouts,
#: refused, backoff, failures, empty batches, errors)
_RETRY_WORDS = ("retr", "reconnect", "timeout", "refus", "backoff", "fail", "empty", "error")
_LOG_TAIL_LINES = 20
_PY_SPY_TIMEOUT_S = 3.0  # a dump takes well under a second; the doctor answers in 5 s


@dataclass(frozen=True)
class ThreadWait:
    """One thread at the last sample: what it was doing and what it waits on, where readable."""

    tid: int
    name: str
    state: str
    cpu_s: float  # CPU seconds the thread used during the observation
    wchan: str | None
    syscall: str | None
    waits_on: str | None  # plain words: the call's meaning and its socket / file, if known

    def describe(self) -> str:
        parts = [f"tid {self.tid} ({self.name})", _procfs.STATE_WORDS.get(self.state, self.state)]
        if self.cpu_s > 0.0:
            parts.append(f"{self.cpu_s:.2f} s CPU")
        if self.waits_on:
            parts.append(self.waits_on)
        elif self.syscall and self.syscall != "running":
            parts.append(f"in {self.syscall}")
        if self.wchan:
            parts.append(f"[kernel: {self.wchan}]")
        return ", ".join(parts)


@dataclass
class _Sample:
    t_s: float
    cpu_s: float | None
    num_threads: int | None
    status: str | None
    threads: list[_procfs.ThreadSample]
    steps: int | None
    activity_ns: int | None  # the live segment's last phase boundary or write (monotonic ns)
    counters: dict[str, int]
    open_phase: str | None
    log_size: int | None
    log_mtime_ns: int | None
    step_file: int | None
    files: dict[str, _procfs.OpenFile] = field(default_factory=dict)
    io_chars: int | None = None  # bytes read + written through read/write calls (files, pipes)
    children_cpu_s: float | None = None  # CPU time of its live child processes
    wakeups: int | None = None  # times the main thread was woken from a wait
    launcher: dict[str, int] | None = None  # gyreprof run's recorded events by phase


class _Gone(Exception):
    """The process disappeared while being observed."""


def _read_step_file(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        text = _io.read_text(path, "step_file", errors="replace").strip()
        return int(text)
    except (OSError, ValueError):
        return None


def _log_stat(path: Path | None) -> tuple[int | None, int | None]:
    if path is None:
        return None, None
    try:
        st = path.stat()
    except OSError:
        return None, None
    return st.st_size, st.st_mtime_ns


def read_log_tail(path: str | os.PathLike[str], lines: int = _LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of a text file, reading at most the final 64 KiB."""
    return _io.tail_lines(path, lines, 65536)


class _LiveProbe:
    """Reads a gyreprof live segment of ``pid`` if the process publishes one."""

    def __init__(self, pid: int) -> None:
        self.reader: Any = None
        self.reason = "no gyreprof live segment for this process"
        try:
            import gyreprof.live as live

            self.reader = live.attach(pid)  # type: ignore[attr-defined,unused-ignore]
            if getattr(self.reader, "stale", False):
                # left by an earlier process that had this pid: not evidence about this one
                self.reader.close()
                self.reader = None
                self.reason = "no gyreprof live segment (only a stale one of an earlier process)"
        except (ImportError, AttributeError):
            pass  # this build has no live layer
        except Exception as exc:  # LookupError / ValueError / OSError: no usable segment
            detail = str(exc).strip()
            if detail:
                self.reason = f"no gyreprof live segment ({detail})"
        # segments of this pid that could not be read (planted, corrupt): skipped, said so
        self.skipped: list[str] = []
        try:
            import gyreprof.live as live

            bad = [
                e
                for e in live.list(pid)  # type: ignore[attr-defined,unused-ignore]
                if e.error is not None
            ]
            self.skipped = [
                f"skipped the unreadable live segment {e.path}: {e.error}" for e in bad[:3]
            ]
            if len(bad) > 3:
                self.skipped.append(f"skipped {len(bad) - 3} more unreadable live segments")
        except Exception:  # noqa: BLE001 - listing is best effort here
            pass

    def read(self) -> Progress | None:
        """The live segment's progress reading; None without a (readable) segment."""
        if self.reader is None:
            return None
        try:
            prog: Progress = self.reader.progress()
        except Exception as exc:  # a segment that vanished or is torn: no evidence, not a crash
            self.reason = f"the live segment could not be read ({exc})"
            self.close()
            return None
        return prog

    def close(self) -> None:
        reader, self.reader = self.reader, None
        close = getattr(reader, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass


def _socket_map(proc: psutil.Process) -> dict[int, str]:
    """fd -> 'TCP 127.0.0.1:40000 -> 127.0.0.1:5555 (ESTABLISHED)' for the process's sockets."""
    getter = getattr(proc, "net_connections", None) or getattr(proc, "connections", None)
    if getter is None:
        return {}
    try:
        conns = getter(kind="all")
    except (psutil.Error, OSError):
        return {}
    out: dict[int, str] = {}
    for c in conns:
        if c.fd is None or c.fd < 0:
            continue
        if c.family == getattr(socket, "AF_UNIX", None):
            kind = "UNIX"
        else:
            kind = "UDP" if c.type == socket.SOCK_DGRAM else "TCP"

        def addr(a: Any) -> str:
            if not a:
                return "-"
            if isinstance(a, str):
                return a
            return f"{a.ip}:{a.port}"

        text = f"{kind} socket {addr(c.laddr)} -> {addr(c.raddr)}"
        if c.status and c.status != "NONE":
            text += f" ({c.status})"
        out[c.fd] = text
    return out


def _sample(
    proc: psutil.Process,
    pid: int,
    live: _LiveProbe,
    log: Path | None,
    step_file: Path | None,
    t0: float,
    launcher: bool = False,
) -> _Sample:
    try:
        with proc.oneshot():
            times = proc.cpu_times()
            cpu_s = float(times.user + times.system)
            num_threads = proc.num_threads()
            status = proc.status()
    except psutil.NoSuchProcess:
        raise _Gone from None
    except psutil.AccessDenied:
        cpu_s, num_threads, status = None, None, None
    if status == psutil.STATUS_ZOMBIE:
        raise _Gone
    prog = live.read()
    size, mtime = _log_stat(log)
    io_chars, children_cpu_s = _io_and_children(proc)
    return _Sample(
        t_s=time.monotonic() - t0,
        cpu_s=cpu_s,
        num_threads=num_threads,
        status=status,
        threads=_procfs.thread_samples(pid),
        steps=prog.steps_completed if prog is not None else None,
        activity_ns=prog.last_activity_ns if prog is not None else None,
        counters=dict(prog.counters) if prog is not None else {},
        open_phase=prog.phase if prog is not None else None,
        log_size=size,
        log_mtime_ns=mtime,
        step_file=_read_step_file(step_file),
        files={f.path: f for f in _procfs.written_files(pid)},
        io_chars=io_chars,
        children_cpu_s=children_cpu_s,
        wakeups=_procfs.main_thread_wakeups(pid),
        launcher=_launcher_events(pid) if launcher else None,
    )


#: the live segments ``gyreprof run`` publishes are named ``gyreprof-run-<id>:<side>``
_LAUNCHER_PREFIX = "gyreprof-run-"


def _launcher_events(pid: int) -> dict[str, int] | None:
    """Events recorded so far in the live segments ``gyreprof run`` publishes for ``pid``,
    by phase (``env_step``, ``wait``, ...) and ``"(trainer steps)"``; None without any.

    The launcher times env steps and trainer phases but marks no sampler steps, so
    these counts, not the step counter, say whether such a process moves.
    """
    try:
        import gyreprof.live as live
        from gyreprof.live.reader import list_segments
    except ImportError:
        return None
    try:
        entries = [
            e
            for e in list_segments(pid)
            if e.alive and e.error is None and (e.name or "").startswith(_LAUNCHER_PREFIX)
        ]
    except (OSError, ValueError):
        return None
    if not entries:
        return None
    out: dict[str, int] = {}
    for e in entries[:64]:
        try:
            reader = live.attach(e.path)  # type: ignore[attr-defined,unused-ignore]
            try:
                counts, steps = reader.event_counts()
            finally:
                reader.close()
        except Exception:  # a segment torn or gone between list and read: skip it
            continue
        for name, n in counts.items():
            out[name] = out.get(name, 0) + n
        if (e.name or "").endswith(":trainer"):
            key = "(trainer steps)"
            out[key] = out.get(key, 0) + steps
    return out


def _io_and_children(proc: psutil.Process) -> tuple[int | None, float | None]:
    """(bytes it read and wrote through any descriptor, CPU seconds of its children):
    the activity a process can show while its own CPU sits idle (a pipe to vector-env
    workers that do the stepping). None where unreadable."""
    io: int | None = None
    try:
        c = proc.io_counters()
        io = int(getattr(c, "read_chars", c.read_bytes)) + int(
            getattr(c, "write_chars", c.write_bytes)
        )
    except (psutil.AccessDenied, psutil.NoSuchProcess, AttributeError, NotImplementedError):
        pass
    kids: float | None = None
    try:
        kids = 0.0
        for child in proc.children(recursive=True):
            try:
                t = child.cpu_times()
                kids += float(t.user + t.system)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        kids = None
    return io, kids


def _thread_trend(counts: Sequence[int]) -> str:
    if len(counts) < 2:
        return "unknown"
    first, last = counts[0], counts[-1]
    rises = sum(1 for a, b in zip(counts, counts[1:], strict=False) if b > a)
    falls = sum(1 for a, b in zip(counts, counts[1:], strict=False) if b < a)
    if last >= first + 2 or (last > first and rises >= 2 and falls == 0):
        return "growing"
    if last <= first - 2 or (last < first and falls >= 2 and rises == 0):
        return "shrinking"
    if rises or falls:
        return "varying"
    return "steady"


def _find_py_spy(pid: int) -> str | None:
    """py-spy on ``PATH``, beside ``sys.executable``, or in the target's own virtualenv
    (its interpreter's bin folder, unresolved, or ``$VIRTUAL_ENV/bin`` of its
    environment): installed but not activated is still found."""
    exe = shutil.which("py-spy")
    if exe is not None:
        return exe
    name = "py-spy.exe" if os.name == "nt" else "py-spy"
    folders: list[Path] = [Path(sys.executable).parent]
    try:
        proc = psutil.Process(pid)
        argv0 = (proc.cmdline() or [""])[0]
        if os.path.isabs(argv0):
            folders.append(Path(argv0).parent)  # a venv's bin/python is a link: keep the link
        folders.append(Path(proc.exe()).parent)
        venv = proc.environ().get("VIRTUAL_ENV")
        if venv:
            folders.append(Path(venv) / "bin")
    except (psutil.Error, OSError):
        pass
    for folder in folders:
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _py_spy(pid: int) -> tuple[str | None, str]:
    exe = _find_py_spy(pid)
    if exe is None:
        return None, (
            "py-spy is not installed (pip install py-spy, then: py-spy dump --pid "
            f"{pid}); or run the loop with prof.watchdog(stall_after_s) or "
            "gp.banner(faulthandler=True), which dump every thread's stack via faulthandler"
        )
    try:
        # full file names: the deadlock finder reads the source the lines point at
        res = subprocess.run(
            [exe, "dump", "--pid", str(pid), "--full-filenames"],
            capture_output=True,
            text=True,
            timeout=_PY_SPY_TIMEOUT_S,
            check=False,
        )
        if res.returncode != 0 and "full-filenames" in (res.stderr or ""):  # an old py-spy
            res = subprocess.run(
                [exe, "dump", "--pid", str(pid)],
                capture_output=True,
                text=True,
                timeout=_PY_SPY_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"py-spy dump failed ({exc})"
    if res.returncode != 0:
        err = (res.stderr or res.stdout).strip().splitlines()
        why = err[-1] if err else f"exit code {res.returncode}"
        return None, (
            f"py-spy dump failed: {why} (it needs permission to read the process: "
            "run as the same user with ptrace allowed, or with sudo)"
        )
    return res.stdout, "from py-spy dump"


_LOCAL_LINE = re.compile(r"^\s{8,}(?P<name>\w+): (?P<value>.*)$")
_HELD_ERROR = re.compile(
    r"^<(?P<type>\w*(?:Connection\w*Error|ConnectionError|TimeoutError|Timeout|timeout|"
    r"ConnectError|URLError|MaxRetryError|gaierror|RemoteDisconnected)) at 0x"
)
_URL_VALUE = re.compile(r"\w+://(?:[^/@\s\"']*@)?(?P<netloc>[\w.\-]+:\d{1,5})")
_SLEEPING = frozenset({"nanosleep", "clock_nanosleep", "select", "pselect6", "poll", "ppoll"})


def _held_retry(pid: int, exe: str | None = None) -> tuple[str, str | None] | None:
    """(words, endpoint) when the main thread sleeps in a frame that holds a caught
    connection error in a local (``except OSError as exc: ... time.sleep(delay)``): a
    retry with backoff that may log nothing. Read from ``py-spy dump --locals``; the
    endpoint from that frame's or its callers' ``host`` / ``port`` locals, an
    ``(host, port)`` tuple or a URL. None where py-spy is missing or shows none."""
    exe = exe or _find_py_spy(pid)
    if exe is None:
        return None
    try:
        res = subprocess.run(
            [exe, "dump", "--pid", str(pid), "--locals", "--full-filenames"],
            capture_output=True,
            text=True,
            timeout=_PY_SPY_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return None
    frames: list[tuple[str, dict[str, str]]] = []  # the main thread's: (where, locals)
    inside = False
    for raw in res.stdout.splitlines():
        if raw.startswith("Thread "):
            inside = raw.rstrip().endswith('"MainThread"')
            continue
        if not inside:
            continue
        m = re.match(r"^    (?P<func>\S.*?) \((?P<where>[^()]+:\d+)\)\s*$", raw)
        if m:
            frames.append((m.group("where"), {}))
            continue
        v = _LOCAL_LINE.match(raw)
        if v and frames:
            frames[-1][1].setdefault(v.group("name"), v.group("value").strip())
    for i, (where, local) in enumerate(frames):
        held = next((h for h in map(_HELD_ERROR.match, local.values()) if h), None)
        if held is None:
            continue
        endpoint = None
        for _, names in frames[i:]:
            endpoint = _endpoint_of_locals(names)
            if endpoint:
                break
        short = os.path.basename(where.rpartition(":")[0]) + ":" + where.rpartition(":")[2]
        words = (
            f"the main thread waits at {short} holding a caught {held.group('type')} in a "
            "local: a connection retry with backoff, which may log nothing"
            + (f", against {endpoint}" if endpoint else "")
        )
        return words, endpoint
    return None


def _endpoint_of_locals(names: Mapping[str, str]) -> str | None:
    host, port = names.get("host", "").strip("\"'"), names.get("port", "")
    if host and port.isdigit():
        return f"{host}:{port}"
    for value in names.values():
        t = re.match(r"^\(\s*\"([^\"]+)\",\s*(\d{1,5})\s*\)$", value)
        if t:
            return f"{t.group(1)}:{t.group(2)}"
        u = _URL_VALUE.search(value)
        if u:
            return u.group("netloc")
    return None


def _main_sleeps(waits: Sequence[ThreadWait], pid: int) -> bool:
    return any(w.tid == pid and w.syscall in _SLEEPING for w in waits)


def _share_words(share: float) -> str:
    pct = f"{100.0 * share:.0f}% of one core"
    if share < IDLE_CPU_SHARE:
        return f"idle ({pct})"
    if share >= BUSY_CPU_SHARE:
        return f"busy ({pct})"
    return f"partly busy ({pct})"


@dataclass
class _Progress:
    """The progress evidence used and what it showed."""

    source: str  # "live", "step_file", "log", "files" or "none"
    progressed: bool | None  # None: no progress signal at all
    evidence: list[str]
    steps: tuple[int, int] | None = None
    watched: list[str] = field(default_factory=list)


def _launcher_progress(first: _Sample, last: _Sample, wall_s: float) -> _Progress | None:
    """Progress from what ``gyreprof run`` records (env steps, trainer phases): it marks no
    sampler steps, so moving event counts are the evidence. None where it recorded nothing."""
    if last.launcher is None or not any(last.launcher.values()):
        return None
    before = first.launcher or {}
    moved = {
        k: v - before.get(k, 0)
        for k, v in last.launcher.items()
        if v > before.get(k, 0) and k != "(trainer steps)"
    }
    tsteps = last.launcher.get("(trainer steps)", 0) - before.get("(trainer steps)", 0)
    if moved:
        shown = ", ".join(
            f"{k} {n} ({n / wall_s:.1f}/s)" for k, n in sorted(moved.items(), key=lambda kv: -kv[1])
        )
        words = f"gyreprof run's records: {shown} in {wall_s:.1f} s"
        if tsteps > 0:
            words += f"; {tsteps} trainer steps"
        return _Progress("live", True, [words])
    total = sum(v for k, v in last.launcher.items() if k != "(trainer steps)")
    words = (
        f"gyreprof run's records: no env step or trainer phase recorded in {wall_s:.1f} s "
        f"({total} recorded before)"
    )
    return _Progress("live", False, [words])


def _live_progress(first: _Sample, last: _Sample, wall_s: float) -> _Progress | None:
    if first.steps is None or last.steps is None:
        return None
    rate = (last.steps - first.steps) / wall_s
    phases_moved = (
        first.activity_ns is not None
        and last.activity_ns is not None
        and last.activity_ns > first.activity_ns
    )
    where = f" (open phase {last.open_phase!r})" if last.open_phase else ""
    if last.steps > first.steps:
        words = (
            f"live segment: step counter advanced {first.steps} -> {last.steps} "
            f"in {wall_s:.1f} s ({rate:.1f} steps/s){where}"
        )
    elif phases_moved:
        words = (
            f"live segment: no step completed in {wall_s:.1f} s, but phases did "
            f"(phase boundaries kept being crossed){where}: steps are longer "
            "than the interval; rerun with a longer --interval to see whole steps"
        )
    else:
        words = f"live segment: step counter stayed at {last.steps} for {wall_s:.1f} s{where}"
    progressed = last.steps > first.steps or phases_moved
    return _Progress("live", progressed, [words], steps=(first.steps, last.steps))


def _step_file_progress(
    first: _Sample, last: _Sample, wall_s: float, step_file: Path | None
) -> _Progress | None:
    if first.step_file is None or last.step_file is None:
        return None
    progressed = last.step_file > first.step_file
    verb = (
        f"advanced {first.step_file} -> {last.step_file}"
        if progressed
        else f"stayed at {last.step_file}"
    )
    words = f"step file {str(step_file)!r}: counter {verb} in {wall_s:.1f} s"
    return _Progress("step_file", progressed, [words], steps=(first.step_file, last.step_file))


def _log_progress(
    first: _Sample, last: _Sample, wall_s: float, log: Path | None
) -> _Progress | None:
    if log is None or last.log_size is None:
        return None
    grown = (
        first.log_size is None
        or last.log_size != first.log_size
        or last.log_mtime_ns != first.log_mtime_ns
    )
    if grown:
        delta = last.log_size - (first.log_size or 0)
        words = f"log {str(log)!r} grew by {delta} bytes in {wall_s:.1f} s"
    elif last.log_size == 0:
        words = f"log {str(log)!r} never written: still empty after {wall_s:.1f} s"
    else:
        age_s = max(0.0, time.time() - (last.log_mtime_ns or 0) / 1e9)
        words = (
            f"log {str(log)!r} did not change in {wall_s:.1f} s (last written {age_s:.1f} s "
            "ago; if the process logs less often, rerun with a longer interval)"
        )
    return _Progress("log", grown, [words])


def _files_progress(taken: Sequence[_Sample], wall_s: float) -> _Progress | None:
    """Files found open for writing: the first and last look at each path seen twice."""
    first_seen: dict[str, _procfs.OpenFile] = {}
    last_seen: dict[str, _procfs.OpenFile] = {}
    for sample in taken:
        for path, f in sample.files.items():
            first_seen.setdefault(path, f)
            last_seen[path] = f
    if not first_seen:
        return None
    watched = [f"{p} ({f.role})" for p, f in first_seen.items()]
    grew = [
        (p, last_seen[p].size - f.size)
        for p, f in first_seen.items()
        if last_seen[p].size != f.size or last_seen[p].mtime_ns != f.mtime_ns
    ]
    if grew:
        words = [
            f"{first_seen[p].role} file {p!r} grew by {d} bytes in {wall_s:.1f} s (found "
            "open for writing)"
            for p, d in grew[:5]
        ]
        return _Progress("files", True, words, watched=watched)
    shown = ", ".join(watched[:5]) + (f" and {len(watched) - 5} more" if len(watched) > 5 else "")
    quiet = (
        f"files the process writes did not grow in {wall_s:.1f} s: {shown}; a loop that "
        "writes less often looks the same, so this is not taken as a stall (name the file "
        "with --log to make its silence count, or observe longer with --interval)"
    )
    return _Progress("files", None, [quiet], watched=watched)


def _no_signal(live: _LiveProbe, log: Path | None, step_file: Path | None) -> _Progress:
    missing = [live.reason]
    if step_file is not None:
        missing.append(f"step file {str(step_file)!r} missing or not an integer")
    if log is not None:
        missing.append(f"log {str(log)!r} does not exist")
    else:
        missing.append("no log given")
    missing.append("no stdout, stderr or other file found open for writing")
    words = (
        "no progress signal (" + "; ".join(missing) + "): CPU time alone cannot tell useful "
        "work from a busy loop -- pass --log FILE or publish a live segment"
    )
    return _Progress("none", None, [words])


def _progress(
    taken: Sequence[_Sample],
    wall_s: float,
    live: _LiveProbe,
    log: Path | None,
    step_file: Path | None,
) -> _Progress:
    """The best progress evidence available, best first (see the module docstring)."""
    first, last = taken[0], taken[-1]
    launcher = _launcher_progress(first, last, wall_s)
    if launcher is not None and launcher.progressed:
        return launcher
    for found in (
        _live_progress(first, last, wall_s) if launcher is None else None,
        _step_file_progress(first, last, wall_s, step_file),
        _log_progress(first, last, wall_s, log),
        _files_progress(taken, wall_s),
    ):
        if found is not None and (launcher is None or found.progressed):
            return found
    return launcher if launcher is not None else _no_signal(live, log, step_file)


def _running_share(taken: Sequence[_Sample]) -> float:
    """Share of the looks at which some thread was running or runnable (state R).

    On a crowded machine a busy loop may get less than ``SPIN_CPU_SHARE`` of a core,
    yet it is runnable whenever it is looked at; an idle process almost never is.
    """
    looks = [s for s in taken if s.threads]
    if not looks:
        return 0.0
    return sum(1 for s in looks if any(t.state == "R" for t in s.threads)) / len(looks)


def _activity_words(first: _Sample, last: _Sample, wall_s: float) -> list[str]:
    """What the process did besides its own CPU: I/O through read/write calls, its main
    thread woken again and again (replies, a socket stream: recv is not counted as I/O
    by the kernel), its children's CPU. A child that started or ended in between is
    not counted."""
    out: list[str] = []
    if first.io_chars is not None and last.io_chars is not None:
        moved = last.io_chars - first.io_chars
        if moved >= IDLE_IO_BYTES:
            out.append(f"moved {moved} bytes through its descriptors in {wall_s:.1f} s")
    if first.wakeups is not None and last.wakeups is not None:
        woken = (last.wakeups - first.wakeups) / wall_s
        if woken >= MAIN_WAKEUPS_PER_S:
            out.append(f"had its main thread woken {woken:.0f} times a second")
    if first.children_cpu_s is not None and last.children_cpu_s is not None:
        kids = (last.children_cpu_s - first.children_cpu_s) / wall_s
        if kids >= SPIN_CPU_SHARE:
            out.append(f"kept its child processes busy ({_share_words(kids)})")
    return out


def _counter_findings(
    first: _Sample, last: _Sample, wall_s: float, steps: tuple[int, int] | None
) -> tuple[dict[str, float], bool, list[str]]:
    """Counter rates and the ``retrying`` finding (retry-like counters moving, steps not)."""
    counter_rates: dict[str, float] = {}
    evidence: list[str] = []
    retrying = False
    for name, value in sorted(last.counters.items()):
        delta = value - first.counters.get(name, 0)
        counter_rates[name] = delta / wall_s
        if delta > 0:
            evidence.append(f"counter {name!r} rose by {delta} ({delta / wall_s:.1f}/s)")
            if any(w in name.lower() for w in _RETRY_WORDS) and steps and steps[1] == steps[0]:
                retrying = True
    if retrying:
        movers = [
            n
            for n, r in counter_rates.items()
            if r > 0 and any(w in n.lower() for w in _RETRY_WORDS)
        ]
        evidence.append(
            f"retrying: {', '.join(repr(m) for m in movers)} kept rising while the step counter "
            f"stayed at {steps[1] if steps else '?'} -- the loop is retrying, not stepping "
            "(check the server it calls, its timeouts and the retry limit)"
        )
    return counter_rates, retrying, evidence


def _thread_count_words(counts: Sequence[int], trend: str, wall_s: float) -> list[str]:
    if not counts:
        return []
    if trend == "growing":
        return [
            f"thread count growing: {counts[0]} -> {counts[-1]} over {wall_s:.1f} s "
            "(a growing count suggests a retry storm or leaked threads/connections)"
        ]
    if trend == "steady":
        return [f"thread count steady at {counts[-1]}"]
    return [f"thread count {trend}: {' -> '.join(str(c) for c in counts)}"]


def _thread_waits(
    first: _Sample, last: _Sample, pid: int, sockets: Mapping[int, str]
) -> list[ThreadWait]:
    first_cpu = {t.tid: t.cpu_s for t in first.threads}
    waits: list[ThreadWait] = []
    for t in last.threads:
        used = max(0.0, t.cpu_s - first_cpu.get(t.tid, t.cpu_s))
        words = _procfs.meaning(t.syscall)
        if words and t.fd is not None:
            target = _procfs.fd_target(pid, t.fd, sockets)
            words = f"{words} on fd {t.fd}" + (f" = {target}" if target else "")
        waits.append(
            ThreadWait(
                tid=t.tid,
                name=t.name,
                state=t.state,
                cpu_s=used,
                wchan=t.wchan,
                syscall=t.syscall,
                waits_on=words if t.state != "R" else None,
            )
        )
    return waits


def _thread_findings(state: str, waits: Sequence[ThreadWait], pid: int) -> list[str]:
    """What the threads wait on (blocked) or which ones burn the CPU (spinning, busy)."""
    evidence: list[str] = []
    if state == "blocked" and waits:
        main = next((w for w in waits if w.tid == pid), None)
        if main is not None:
            what = main.waits_on or (f"in {main.syscall}" if main.syscall else "waiting")
            chan = f" (kernel wait channel {main.wchan})" if main.wchan else ""
            evidence.append(f"main thread {what}{chan}")
        kinds: dict[str, int] = {}
        for w in waits:
            if w.tid != pid and w.waits_on:
                kinds[w.waits_on] = kinds.get(w.waits_on, 0) + 1
        for what, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
            evidence.append(f"{n} other thread{'s' if n > 1 else ''}: {what}")
    elif state in ("spinning", "busy") and waits:
        for w in sorted((w for w in waits if w.cpu_s > 0.0), key=lambda w: -w.cpu_s)[:3]:
            who = "main thread" if w.tid == pid else f"thread {w.tid}"
            evidence.append(f"{who} used {w.cpu_s:.2f} s CPU ({w.state})")
    elif not waits and state in ("blocked", "spinning", "busy") and not _procfs.proc_available(pid):
        evidence.append("per-thread wait states need Linux /proc; not available here")
    return evidence


def _line_regions(taken: Sequence[_Sample], log: Path | None) -> list[tuple[str, int, int]]:
    """(path, start, end) of what the log and every file found open for writing (stdout,
    stderr, the logs it writes) gained; files that are not text are left out when read."""
    first, last = taken[0], taken[-1]
    regions: list[tuple[str, int, int]] = []
    seen: set[str] = set()
    if log is not None and last.log_size is not None:
        start = first.log_size or 0
        if last.log_size > start:
            regions.append((str(log), start, last.log_size))
        try:
            seen.add(os.path.realpath(log))
        except OSError:
            pass
    starts: dict[str, int] = {}
    for sample in taken:
        for path, f in sample.files.items():
            starts.setdefault(path, f.size)
    for path, f in last.files.items():
        if os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        if f.size > starts.get(path, f.size):
            regions.append((path, starts[path], f.size))
    return regions


_LOCAL_END = re.compile(r"on fd \d+ = (\w+) socket \S+ -> ")


def _new_thread_wait(
    first: _Sample, waits: Sequence[ThreadWait], trend: str
) -> tuple[int, str] | None:
    """(count, what) when the threads started during the watch all wait on one thing."""
    if trend != "growing":
        return None
    old = {t.tid for t in first.threads}
    new = [w for w in waits if w.tid not in old]
    if len(new) < RETRY_NEW_THREADS:
        return None
    groups: dict[str, int] = {}
    for w in new:
        what = w.waits_on or (f"in {w.syscall}" if w.syscall else None)
        if what:
            # each new connection has its own local port: the peer is what they share
            what = _LOCAL_END.sub(r"on a \1 socket to ", what)
            groups[what] = groups.get(what, 0) + 1
    if not groups:
        return None
    what, n = max(groups.items(), key=lambda kv: kv[1])
    if n < RETRY_NEW_THREADS or n < 0.8 * len(new):
        return None
    return n, what


def _poll_spin(
    taken: Sequence[_Sample], pid: int, wall_s: float, cpu_share: float | None
) -> str | None:
    """Words for a low-CPU spin: the main thread wakes often in short sleeps or polls,
    while little CPU is used and no data moves. None otherwise."""
    first, last = taken[0], taken[-1]
    if first.wakeups is None or last.wakeups is None:
        return None
    rate = (last.wakeups - first.wakeups) / wall_s
    if rate < POLL_WAKEUPS_PER_S:
        return None
    if first.io_chars is not None and last.io_chars is not None:
        if last.io_chars - first.io_chars >= IDLE_IO_BYTES:
            return None
    if first.children_cpu_s is not None and last.children_cpu_s is not None:
        if (last.children_cpu_s - first.children_cpu_s) / wall_s >= SPIN_CPU_SHARE:
            return None
    calls = [t.syscall for s in taken for t in s.threads if t.tid == pid and t.syscall]
    if not calls or sum(1 for c in calls if c in _SLEEP_CALLS) < 0.6 * len(calls):
        return None
    shown = sorted({c for c in calls if c != "running"}) or ["running"]
    cpu = _share_words(cpu_share) if cpu_share is not None else "CPU unknown"
    return (
        f"spinning (low CPU): the main thread woke {rate:.0f} times a second in short "
        f"sleeps or polls ({', '.join(shown)}), {cpu}, moving no data and making no "
        "progress: a loop that keeps finding no work (an empty queue or batch)"
    )


def _quiet_output(last: _Sample, quiet_after_s: float) -> str | None:
    """Words when every output file found has stayed unchanged for ``quiet_after_s``."""
    if not last.files:
        return None
    found = [f for f in last.files.values() if "std" in f.role] or list(last.files.values())
    newest = max(f.mtime_ns for f in found) / 1e9
    age_s = time.time() - newest
    if age_s < quiet_after_s:
        return None
    return (
        f"busy, yet its output has not changed for {_age_words(age_s)} (quiet after "
        f"{_age_words(quiet_after_s)}: --quiet-after): spinning"
    )


def _age_words(seconds: float) -> str:
    if seconds >= 120.0:
        return f"{seconds / 60.0:.1f} min"
    return f"{seconds:.1f} s"


def _python_unbuffered(argv: Sequence[str], env: Mapping[str, str]) -> bool | None:
    """Whether a Python command line runs unbuffered (``-u``, ``PYTHONUNBUFFERED``); None
    when it is not a Python interpreter."""
    if not argv or not re.fullmatch(r"python[\d.]*[a-z]?(\.exe)?", os.path.basename(argv[0])):
        return None
    if env.get("PYTHONUNBUFFERED"):
        return True
    takes_value = {"-X", "-W", "--check-hash-based-pycs"}
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg in takes_value:
            skip = True
            continue
        if not arg.startswith("-") or arg in ("-", "--") or arg.startswith("--"):
            break
        letters = arg[1:]
        for i, ch in enumerate(letters):
            if ch == "u":
                return True
            if ch in "cm":
                return False  # what follows is the code or the module
            if ch in "XW":
                skip = i == len(letters) - 1
                break
    return False


def _python_version(proc: psutil.Process) -> tuple[int, int] | None:
    """(major, minor) of a Python interpreter process, from its executable's name (the
    link resolved: ``python3.11``); None where it does not say."""
    try:
        exe = proc.exe()
    except (psutil.Error, OSError):
        return None
    for name in (os.path.basename(exe), os.path.basename(os.path.realpath(exe))):
        m = re.fullmatch(r"python(\d)\.(\d+)[a-z]?", name)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def _block_buffered(pid: int, proc: psutil.Process) -> list[str]:
    """Words for each stdout / stderr of a live Python process that is a file or a pipe,
    has received nothing, while the process runs block-buffered. Since Python 3.9 stderr
    is line-buffered even when redirected: only stdout is said to be, there."""
    try:
        argv = proc.cmdline()
        env = proc.environ()
    except (psutil.Error, OSError):
        return []
    if _python_unbuffered(argv, env) is not False:
        return []
    version = _python_version(proc)
    streams: tuple[tuple[int, str], ...] = ((1, "stdout"), (2, "stderr"))
    if version is None or version >= (3, 9):
        streams = ((1, "stdout"),)
    out: list[str] = []
    wrote: int | None = None
    for fd, name in streams:
        try:
            # by hand: psutil lists regular files only, and a pipe is asked about here
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            if st.st_size != 0:
                continue
            what = target
        elif stat.S_ISFIFO(st.st_mode):
            if wrote is None:
                try:
                    wrote = int(getattr(proc.io_counters(), "write_chars", -1))
                except (psutil.Error, AttributeError, NotImplementedError):
                    wrote = -1
            if wrote != 0:
                continue  # something was written somewhere: cannot tell it was not the pipe
            what = f"a pipe ({target})"
        else:
            continue
        out.append(
            f"{name} ({what}) never written: output is block-buffered, use `python -u` "
            "(or PYTHONUNBUFFERED=1) to see what it prints as it prints it"
        )
    return out


def _stuck_endpoints(
    proc: psutil.Process, io_moved: int | None
) -> tuple[list[tuple[str, int, str]], set[str]]:
    """((host, port, why) of sockets connecting, or connected with no bytes moving), and
    every remote host the process holds a socket to."""
    getter = getattr(proc, "net_connections", None) or getattr(proc, "connections", None)
    if getter is None:
        return [], set()
    try:
        conns = getter(kind="inet")
    except (psutil.Error, OSError):
        return [], set()
    out: list[tuple[str, int, str]] = []
    peers: set[str] = set()
    for c in conns:
        if not c.raddr:
            continue
        peers.add(c.raddr.ip)
        if c.status == "SYN_SENT":
            out.append((c.raddr.ip, c.raddr.port, "connecting (SYN_SENT)"))
        elif c.status == "ESTABLISHED" and (io_moved is None or io_moved < IDLE_IO_BYTES):
            out.append((c.raddr.ip, c.raddr.port, "connected, no bytes moving"))
    return out, peers


class _SocketWatch:
    """The process's TCP connections, looked at often between the doctor's samples: each
    connection attempt (``SYN_SENT``) and each socket that came and went, by peer."""

    #: a look costs this share of the time between looks at most (a big socket table)
    COST_SHARE = 0.25

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc
        self.looks = 0
        self.seen: dict[tuple[str, int], set[int]] = {}  # peer -> local ports seen
        self.syn: dict[tuple[str, int], set[int]] = {}  # peer -> local ports seen connecting
        self.last: set[tuple[str, int, int]] = set()  # (peer host, peer port, local port)
        self.cost_s = 0.0
        self.ok = True

    def look(self) -> None:
        if not self.ok:
            return
        getter = getattr(self.proc, "net_connections", None) or getattr(
            self.proc, "connections", None
        )
        t0 = time.monotonic()
        try:
            conns = getter(kind="tcp") if getter is not None else []
        except (psutil.Error, OSError):
            self.ok = False
            return
        self.cost_s = time.monotonic() - t0
        self.looks += 1
        now: set[tuple[str, int, int]] = set()
        for c in conns:
            if not c.raddr or not c.laddr:
                continue
            peer = (str(c.raddr.ip), int(c.raddr.port))
            now.add((peer[0], peer[1], int(c.laddr.port)))
            self.seen.setdefault(peer, set()).add(int(c.laddr.port))
            if c.status == "SYN_SENT":
                self.syn.setdefault(peer, set()).add(int(c.laddr.port))
        self.last = now

    def sleep_until(self, target: float) -> None:
        """Sleep until ``target`` (monotonic), looking at the sockets on the way."""
        while True:
            left = target - time.monotonic()
            if left <= 0:
                return
            gap = max(0.05, self.cost_s / self.COST_SHARE)
            if left < gap or not self.ok:
                time.sleep(left)
                return
            time.sleep(gap)
            self.look()

    def attempts(self, stood_still: bool) -> tuple[str, int, str] | None:
        """(peer, attempts, words) for the peer most tried: connection attempts seen in
        ``SYN_SENT`` on two sockets or more, or (``stood_still``: no progress) three
        sockets or more to one peer that came and went. None otherwise."""
        best: tuple[str, int, str] | None = None
        for peer, ports in self.seen.items():
            host = f"[{peer[0]}]" if ":" in peer[0] else peer[0]
            where = f"{host}:{peer[1]}"
            syn = self.syn.get(peer, set())
            gone = {p for p in ports if (peer[0], peer[1], p) not in self.last}
            if len(syn) >= 2:
                n, words = (
                    len(syn),
                    (
                        f"{len(syn)} connection attempts to {where} seen connecting (SYN_SENT "
                        f"sockets appearing and vanishing) in {self.looks} looks at its sockets"
                    ),
                )
            elif stood_still and len(gone) >= 3:
                n, words = (
                    len(ports),
                    (
                        f"{len(ports)} sockets to {where} opened and closed again in "
                        f"{self.looks} looks at its sockets, with no progress"
                    ),
                )
            else:
                continue
            if best is None or n > best[1]:
                best = (where, n, words)
        return best


#: swallowed exceptions that are a connection failing (by the type's name)
_CONNECT_ERRORS = (
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "ConnectionError",
    "TimeoutError",
    "timeout",
    "ConnectTimeout",
    "ConnectTimeoutError",
    "ConnectError",
    "NewConnectionError",
    "MaxRetryError",
    "URLError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "RemoteDisconnected",
    "gaierror",
)


def _trail_attempts(pid: int) -> tuple[str | None, int, str] | None:
    """(endpoint or None, count, words) when the start-up trail of a ``gyreprof run``
    process holds two or more swallowed connection errors of one kind; None otherwise."""
    try:
        from gyreprof.model import trail_file as trail
    except ImportError:
        return None
    path = trail.find_trail(pid)
    info = trail.read_trail(path) if path is not None else None
    if info is None:
        return None
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in info.swallowed:
        if str(e.get("type")) in _CONNECT_ERRORS:
            groups.setdefault(str(e.get("type")), []).append(e)
    if not groups:
        return None
    kind, excs = max(groups.items(), key=lambda kv: len(kv[1]))
    if len(excs) < 2:
        return None
    peers = [str(e["peer"]) for e in excs if e.get("peer")]
    peer = max(set(peers), key=peers.count) if peers else None
    last = excs[-1]
    cwd = info.launch.get("cwd") if info.launch else None
    at = str(last.get("caught") or last.get("at") or "?")
    if cwd and at.startswith(cwd.rstrip(os.sep) + os.sep):
        at = at[len(cwd.rstrip(os.sep)) + 1 :]
    words = (
        f"the run's trail holds {len(excs)} swallowed {kind}"
        + (f" against {peer}" if peer else "")
        + f" (last caught at {at}): it keeps trying to connect, logging nothing"
    )
    return peer, len(excs), words


def _trail_deaths(pid: int) -> tuple[list[Death], str | None]:
    """Threads of a ``gyreprof run`` process that raised and have exited since (its
    start-up trail), and where its main thread waits by the trail's last stack dump."""
    try:
        from gyreprof.model import trail_file as trail
    except ImportError:
        return [], None
    path = trail.find_trail(pid)
    info = trail.read_trail(path) if path is not None else None
    if info is None:
        return [], None
    cwd = str(info.launch.get("cwd") or "") if info.launch else ""
    out: list[Death] = []
    for e in info.exceptions.values():
        if e.get("main") or not trail._thread_gone(pid, e.get("tid")):
            continue
        at = str(e.get("at"))
        if cwd and at.startswith(cwd.rstrip(os.sep) + os.sep):
            at = at[len(cwd.rstrip(os.sep)) + 1 :]
        file, _, line = at.rpartition(":")
        out.append(
            Death(
                kind="thread",
                name=str(e.get("thread")),
                exc_type=str(e.get("type")),
                message=str(e.get("msg") or ""),
                file=file or at,
                line=int(line) if line.isdigit() else 0,
            )
        )
    return out, trail.main_thread_wait(info)


def _startup_trail(pid: int) -> list[str]:
    """What the process's start-up trail says (a process of a ``gyreprof run``: its run
    folder is named in its environment): stuck in start-up, the exceptions swallowed,
    the import in progress, failed imports."""
    from gyreprof.model import trail_file as trail

    path = trail.find_trail(pid)
    if path is None:
        return []
    info = trail.read_trail(path)
    if info is None:
        return []
    return [f"start-up trail: {line}" for line in trail.describe(info, alive=True)]
