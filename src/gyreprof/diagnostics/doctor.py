"""Why does nothing move?  Classify a process from evidence: absent, spinning, blocked,
busy, progressing.

``doctor(pid, log=None, interval_s=2.0)`` looks at the process several times
over ``interval_s`` seconds (psutil everywhere; ``/proc`` on Linux for each
thread's scheduler state, kernel wait channel, system call and open files) and
returns a :class:`ProcessDiagnosis`:

``absent``       no such process (or it exited and is a zombie).  With ``log=`` the
                 log's last lines are shown: a start-up exception hidden by output
                 buffering is the usual cause.
``spinning``     alive, burning CPU (at least ``SPIN_CPU_SHARE`` of one core, or runnable
                 at ``BUSY_RUNNING_SHARE`` of the looks), and the
                 live segment, ``step_file=`` or ``log=`` shows no progress.
``blocked``      alive, little CPU, no progress; each thread's kernel wait channel and
                 system call (and the socket or file it waits on) where readable.
``busy``         alive, burning CPU, and no progress signal at all: nothing tells useful
                 work from a loop that spins (pass ``--log`` or publish a live segment).
``progressing``  the step counter, the log or a file the process writes advances.

Progress evidence, best first (the diagnosis says which one it used):

1. a gyreprof live segment published by the process (``gyreprof.live``): its step
   counter, open phase and event counters;
2. ``step_file=``: a file whose whole content is the step counter as an integer;
3. ``log=``: the log file's size and modification time;
4. found without being named (Linux ``/proc``): the process's stdout and stderr when
   redirected to a regular file, and the other regular files it holds open for
   writing (logs, TensorBoard event files, checkpoints). One that grows is progress.
   One that does not grow is *not* taken as proof of a stall -- a training loop may
   print once a minute -- so a busy process whose found files stay quiet is ``busy``
   (the files are listed), not ``spinning``; name the file with ``log=`` to make its
   silence count, or observe longer;
5. otherwise nothing: a busy process is ``busy``, an idle one ``blocked``.  CPU time
   alone never counts as progress, since a busy loop burns CPU too.

Also reported: the thread-count trend across the samples (a growing count suggests
a retry storm or a thread leak), a ``retrying`` finding when a retry-like counter of
the live segment moves while the step counter does not, and Python stacks from
``py-spy dump`` when ``py-spy`` is on ``PATH`` (otherwise how to get them).

Exit codes (``ProcessDiagnosis.exit_code`` and ``gyreprof doctor``):

=============  ====
progressing    0
absent         3
blocked        4
spinning       5
busy           6
=============  ====

(2 is left to command-line errors, 1 to unexpected failures.)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from gyreprof import _io
from gyreprof._format import shorten
from gyreprof._serial import decode, dumps, encode, serial_format
from gyreprof.diagnostics import _procfs

if TYPE_CHECKING:  # the doctor runs without the compiled core: no runtime import of it
    from gyreprof._block import Progress

DIAGNOSIS_FORMAT = "gyreprof.doctor/1"
STATES = ("absent", "spinning", "blocked", "busy", "progressing")
EXIT_CODES: dict[str, int] = {
    "progressing": 0,
    "absent": 3,
    "blocked": 4,
    "spinning": 5,
    "busy": 6,
}

#: No progress (or no progress signal) and at least this share of one core busy ->
#: "spinning" (or "busy"); below -> "blocked".
SPIN_CPU_SHARE = 0.2
#: ... or runnable (a thread in state R) at least this share of the looks (a busy loop
#: on a crowded machine may get less than SPIN_CPU_SHARE of a core).
BUSY_RUNNING_SHARE = 0.6
#: Bytes through its descriptors over the watch that make an idle process "busy", not
#: "blocked": a process stalled on a lock or an empty socket moves none.
IDLE_IO_BYTES = 4096
#: ... or wakeups of its main thread a second (a thread stuck in one wait wakes never).
MAIN_WAKEUPS_PER_S = 5.0
#: Below this share of one core a process is called idle in the evidence.
IDLE_CPU_SHARE = 0.05
#: At or above this share of one core a process is called busy in the evidence.
BUSY_CPU_SHARE = 0.5

_RETRY_WORDS = ("retr", "reconnect", "timeout")
_LOG_TAIL_LINES = 20
_PY_SPY_TIMEOUT_S = 20.0


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


@serial_format(DIAGNOSIS_FORMAT)
@dataclass(frozen=True)
class ProcessDiagnosis:
    """The doctor's answer for one process.

    ``state`` is one of ``absent``, ``spinning``, ``blocked``, ``busy``,
    ``progressing``; ``evidence`` lists, in plain words, what was seen;
    ``exit_code`` is the state's exit code (see the module docstring).
    ``cpu_share`` is CPU seconds per wall second over the observation (1.0 = one
    core); ``progress_source`` is the evidence used: ``"live"``, ``"step_file"``,
    ``"log"``, ``"files"`` (files found open for writing) or ``"none"`` (no
    progress signal); ``watched`` lists the files found and watched, each as
    ``"PATH (role)"``.
    """

    pid: int
    state: str
    evidence: list[str]
    exit_code: int
    interval_s: float
    progress_source: str | None = None
    progressed: bool | None = None
    cpu_share: float | None = None
    command: str | None = None
    status: str | None = None
    thread_counts: list[int] = field(default_factory=list)
    thread_trend: str | None = None
    threads: list[ThreadWait] = field(default_factory=list)
    wchan: str | None = None
    steps: tuple[int, int] | None = None
    open_phase: str | None = None
    counter_rates: dict[str, float] = field(default_factory=dict)
    retrying: bool = False
    log: str | None = None
    log_tail: list[str] = field(default_factory=list)
    stacks: str | None = None
    stacks_hint: str | None = None
    watched: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field, format ``gyreprof.doctor/1``."""
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessDiagnosis:
        """The diagnosis again from :meth:`to_dict`; ``CorruptDataError`` naming what is wrong."""
        return decode(cls, data)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON text of :meth:`to_dict`."""
        return dumps(self, indent=indent)

    def __str__(self) -> str:
        head = f"process {self.pid}"
        if self.command:
            head += f" ({shorten(self.command, 80)})"
        lines = [f"{head}: {self.state.upper()}  (exit code {self.exit_code})"]
        lines += [f"  - {e}" for e in self.evidence]
        if self.threads and self.state in ("blocked", "spinning", "busy"):
            lines.append(f"threads ({len(self.threads)}):")
            lines += [f"  {line}" for line in _thread_lines(self.threads)]
        if self.log_tail:
            shown = self.log_tail if self.state == "absent" else self.log_tail[-5:]
            lines.append(f"last {len(shown)} lines of {self.log}:")
            lines += [f"  | {line}" for line in shown]
        if self.stacks:
            lines.append("python stacks (py-spy dump):")
            lines += [f"  {line}" for line in self.stacks.rstrip().splitlines()]
        elif self.stacks_hint:
            lines.append(f"python stacks: {self.stacks_hint}")
        return "\n".join(lines)


def _thread_lines(threads: Sequence[ThreadWait], detailed: int = 8) -> list[str]:
    """One line per thread; beyond ``detailed`` threads, idle ones alike are counted together."""
    if len(threads) <= detailed:
        return [t.describe() for t in threads]
    lines: list[str] = []
    groups: dict[tuple[str, str | None, str | None], list[ThreadWait]] = {}
    for t in threads:
        if t.cpu_s > 0.0 or t is threads[0]:
            lines.append(t.describe())
        else:
            groups.setdefault((t.state, t.waits_on or t.syscall, t.wchan), []).append(t)
    for (state, what, wchan), members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        if len(members) == 1:
            lines.append(members[0].describe())
            continue
        parts = [f"{len(members)} threads", _procfs.STATE_WORDS.get(state, state)]
        if what:
            parts.append(what)
        if wchan:
            parts.append(f"[kernel: {wchan}]")
        lines.append(", ".join(parts))
    return lines


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


class _Gone(Exception):
    """The process disappeared while being observed."""


def _check_pid(pid: object) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int):
        try:
            pid = int(str(pid))
        except ValueError:
            raise ValueError(f"pid must be a positive integer, got {pid!r}") from None
    if pid <= 0:
        raise ValueError(f"pid must be a positive integer, got {pid}")
    return pid


def _check_file_arg(path: str | os.PathLike[str] | None, what: str) -> Path | None:
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {str(p)!r} is a directory; pass the file the process writes")
    if p.exists() and not os.access(p, os.R_OK):
        raise ValueError(f"{what} {str(p)!r} is not readable (permission denied)")
    return p


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
    )


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


def _py_spy(pid: int) -> tuple[str | None, str]:
    exe = shutil.which("py-spy")
    if exe is None:
        return None, (
            "py-spy is not installed (pip install py-spy, then: py-spy dump --pid "
            f"{pid}); or run the loop with prof.watchdog(stall_after_s) or "
            "gp.banner(faulthandler=True), which dump every thread's stack via faulthandler"
        )
    try:
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


def _share_words(share: float) -> str:
    pct = f"{100.0 * share:.0f}% of one core"
    if share < IDLE_CPU_SHARE:
        return f"idle ({pct})"
    if share >= BUSY_CPU_SHARE:
        return f"busy ({pct})"
    return f"partly busy ({pct})"


def _absent(pid: int, interval_s: float, log: Path | None, why: str) -> ProcessDiagnosis:
    evidence = [why]
    tail: list[str] = []
    if log is not None:
        if log.exists():
            try:
                tail = read_log_tail(log)
            except (OSError, ValueError) as exc:  # ValueError: a FIFO or device
                evidence.append(f"the log {str(log)!r} could not be read ({exc})")
            else:
                if tail:
                    evidence.append(
                        f"the log {str(log)!r} ends with the lines below; a start-up exception "
                        "is usually the last thing written"
                    )
                else:
                    evidence.append(f"the log {str(log)!r} is empty")
        else:
            evidence.append(f"the log {str(log)!r} does not exist: nothing was written there")
    if log is None:
        evidence.append("pass --log FILE (where its output went) to see how it ended")
    else:
        evidence.append(
            "if the log stops short of the failure, output was buffered: run Python unbuffered "
            "(python -u or PYTHONUNBUFFERED=1) and call gp.banner(log=...) at start-up"
        )
    return ProcessDiagnosis(
        pid=pid,
        state="absent",
        evidence=evidence,
        exit_code=EXIT_CODES["absent"],
        interval_s=interval_s,
        log=str(log) if log is not None else None,
        log_tail=tail,
    )


def _zombie_why(proc: psutil.Process, pid: int) -> str:
    try:
        parent = proc.ppid()
    except psutil.Error:
        return f"process {pid} has exited (a zombie waiting for its parent to reap it)"
    return f"process {pid} has exited (a zombie waiting for its parent, pid {parent}, to reap it)"


def doctor(
    pid: int,
    log: str | os.PathLike[str] | None = None,
    interval_s: float = 2.0,
    *,
    step_file: str | os.PathLike[str] | None = None,
    samples: int = 5,
    stacks: bool = True,
) -> ProcessDiagnosis:
    """Observe process ``pid`` for ``interval_s`` seconds and say whether it is absent,
    spinning, blocked, busy or progressing, with the evidence.

    ``log``: a file the process writes (its growth is progress, its silence a stall;
    its tail is shown when the process is gone).  Without it, the files the process
    writes are found in ``/proc`` (stdout / stderr redirected to a file, files open
    for writing): their growth is progress, their silence is not taken as a stall.  ``step_file``: a file holding the step counter as an
    integer.  ``samples``: how many looks spread over the interval (at least 2; the
    thread-count trend uses all of them).  ``stacks``: run ``py-spy dump`` on a
    spinning or blocked process when py-spy is installed.

    Raises ``ValueError`` for a pid that is not a positive integer, a non-positive
    interval, or a log / step file path that is a directory or unreadable.  A
    missing process is not an error: it is the ``absent`` state.
    """
    pid = _check_pid(pid)
    if not (isinstance(interval_s, (int, float)) and interval_s > 0.0):
        raise ValueError(f"interval_s must be a positive number of seconds, got {interval_s!r}")
    if samples < 2:
        raise ValueError(f"samples must be at least 2 (one look at each end), got {samples}")
    log_path = _check_file_arg(log, "log")
    step_path = _check_file_arg(step_file, "step_file")
    interval_s = float(interval_s)

    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return _absent(pid, interval_s, log_path, f"no process with pid {pid} exists")
    try:
        command = " ".join(proc.cmdline()) or proc.name()
    except psutil.ZombieProcess:
        return _absent(pid, interval_s, log_path, _zombie_why(proc, pid))
    except psutil.NoSuchProcess:
        return _absent(pid, interval_s, log_path, f"process {pid} exited just now")
    except psutil.AccessDenied:
        command = None

    live = _LiveProbe(pid)
    t0 = time.monotonic()
    taken: list[_Sample] = []
    try:
        for i in range(samples):
            if i:
                target = t0 + interval_s * i / (samples - 1)
                time.sleep(max(0.0, target - time.monotonic()))
            taken.append(_sample(proc, pid, live, log_path, step_path, t0))
    except _Gone:
        live.close()
        if taken:
            why = f"process {pid} exited during the observation"
        elif psutil.pid_exists(pid):
            why = _zombie_why(proc, pid)
        else:
            why = f"process {pid} exited just now"
        return _absent(pid, interval_s, log_path, why)
    live.close()
    sockets = _socket_map(proc)
    return _classify(
        pid, command, interval_s, taken, live, log_path, step_path, sockets, proc, stacks
    )


@dataclass
class _Progress:
    """The progress evidence used and what it showed."""

    source: str  # "live", "step_file", "log", "files" or "none"
    progressed: bool | None  # None: no progress signal at all
    evidence: list[str]
    steps: tuple[int, int] | None = None
    watched: list[str] = field(default_factory=list)


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
    for found in (
        _live_progress(first, last, wall_s),
        _step_file_progress(first, last, wall_s, step_file),
        _log_progress(first, last, wall_s, log),
        _files_progress(taken, wall_s),
    ):
        if found is not None:
            return found
    return _no_signal(live, log, step_file)


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


def _state(
    status: str | None,
    progress: _Progress,
    cpu_share: float | None,
    running_share: float,
    pid: int,
    activity: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """The state from the process status, the progress evidence and how busy it was."""
    if status in (psutil.STATUS_STOPPED, getattr(psutil, "STATUS_TRACING_STOP", "tracing-stop")):
        return "blocked", [
            f"the process is {status}: a signal (SIGSTOP, Ctrl-Z) or a debugger paused it; "
            f"resume with: kill -CONT {pid}"
        ]
    if progress.progressed:
        return "progressing", []
    busy = (cpu_share is not None and cpu_share >= SPIN_CPU_SHARE) or (
        running_share >= BUSY_RUNNING_SHARE
    )
    if progress.progressed is None:
        if busy:
            return "busy", [
                "CPU busy, no progress signal to tell work from spinning; pass --log or "
                "publish a live segment"
            ]
        if activity:
            # idle on its own CPU, yet moving data or driving busy children: waiting on
            # them is its work, not a hang; without a progress signal, busy says so
            return "busy", [
                f"its own CPU is idle, but it {' and '.join(activity)}: it works through "
                "them; no progress signal to tell work from a stall; pass --log or publish "
                "a live segment"
            ]
        return "blocked", []
    return ("spinning" if busy else "blocked"), []


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


def _classify(
    pid: int,
    command: str | None,
    interval_s: float,
    taken: list[_Sample],
    live: _LiveProbe,
    log: Path | None,
    step_file: Path | None,
    sockets: Mapping[int, str],
    proc: psutil.Process,
    want_stacks: bool,
) -> ProcessDiagnosis:
    first, last = taken[0], taken[-1]
    wall_s = max(last.t_s - first.t_s, 1e-9)

    cpu_share: float | None = None
    if first.cpu_s is not None and last.cpu_s is not None:
        cpu_share = max(0.0, (last.cpu_s - first.cpu_s) / wall_s)
    progress = _progress(taken, wall_s, live, log, step_file)
    evidence = list(progress.evidence) + live.skipped
    if cpu_share is not None:
        evidence.append(f"CPU: {_share_words(cpu_share)} over {wall_s:.1f} s")
    else:
        evidence.append("CPU time could not be read (permission denied)")

    activity = _activity_words(first, last, wall_s)
    state, why = _state(last.status, progress, cpu_share, _running_share(taken), pid, activity)
    evidence += why
    counter_rates, retrying, words = _counter_findings(first, last, wall_s, progress.steps)
    evidence += words
    counts = [s.num_threads for s in taken if s.num_threads is not None]
    trend = _thread_trend(counts)
    evidence += _thread_count_words(counts, trend, wall_s)
    waits = _thread_waits(first, last, pid, sockets)
    evidence += _thread_findings(state, waits, pid)

    tail: list[str] = []
    if log is not None and log.exists():
        try:
            tail = read_log_tail(log)
        except (OSError, ValueError) as exc:  # ValueError: a FIFO or device
            evidence.append(f"the log {str(log)!r} could not be read ({exc})")
    stacks: str | None = None
    hint: str | None = None
    if state in ("blocked", "spinning", "busy"):
        if want_stacks:
            stacks, hint = _py_spy(pid)
        else:
            hint = f"not collected (run: py-spy dump --pid {pid})"

    return ProcessDiagnosis(
        pid=pid,
        state=state,
        evidence=evidence,
        exit_code=EXIT_CODES[state],
        interval_s=interval_s,
        progress_source=progress.source,
        progressed=progress.progressed,
        cpu_share=cpu_share,
        command=command,
        status=last.status,
        thread_counts=counts,
        thread_trend=trend,
        threads=waits,
        wchan=_procfs.read_wchan(pid),
        steps=progress.steps,
        open_phase=last.open_phase,
        counter_rates=counter_rates,
        retrying=retrying,
        log=str(log) if log is not None else None,
        log_tail=tail,
        stacks=stacks,
        stacks_hint=hint,
        watched=progress.watched,
    )
