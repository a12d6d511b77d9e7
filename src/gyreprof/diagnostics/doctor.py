"""Why does nothing move?  Classify a process from evidence: absent, spinning, blocked, progressing.

``doctor(pid, log=None, interval_s=2.0)`` looks at the process several times
over ``interval_s`` seconds (psutil everywhere; ``/proc`` on Linux for each
thread's scheduler state, kernel wait channel and system call) and returns a
:class:`ProcessDiagnosis`:

``absent``       no such process (or it exited and is a zombie).  With ``log=`` the
                 log's last lines are shown: a start-up exception hidden by output
                 buffering is the usual cause.
``spinning``     alive, burning CPU (at least ``SPIN_CPU_SHARE`` of one core), no progress.
``blocked``      alive, little CPU, no progress; each thread's kernel wait channel and
                 system call (and the socket or file it waits on) where readable.
``progressing``  the step counter or the log advances.

Progress evidence, best first (the diagnosis says which one it used):

1. a gyreprof live segment published by the process (``gyreprof.live``): its step
   counter, open phase and event counters;
2. ``step_file=``: a file whose whole content is the step counter as an integer;
3. ``log=``: the log file's size and modification time;
4. otherwise CPU time alone -- weak evidence, since a busy loop also burns CPU:
   a process using CPU counts as progressing, an idle one as blocked.

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
=============  ====

(2 is left to command-line errors, 1 to unexpected failures.)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gyreprof.diagnostics import _procfs

STATES = ("absent", "spinning", "blocked", "progressing")
EXIT_CODES: dict[str, int] = {"progressing": 0, "absent": 3, "blocked": 4, "spinning": 5}

#: No progress and at least this share of one core busy -> "spinning"; below -> "blocked".
SPIN_CPU_SHARE = 0.2
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


@dataclass(frozen=True)
class ProcessDiagnosis:
    """The doctor's answer for one process.

    ``state`` is one of ``absent``, ``spinning``, ``blocked``, ``progressing``;
    ``evidence`` lists, in plain words, what was seen; ``exit_code`` is the
    state's exit code (see the module docstring).  ``cpu_share`` is CPU seconds
    per wall second over the observation (1.0 = one core); ``progress_source``
    is ``"live"``, ``"step_file"``, ``"log"`` or ``"cpu"``.
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

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        out = asdict(self)
        out["steps"] = list(self.steps) if self.steps is not None else None
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        head = f"process {self.pid}"
        if self.command:
            head += f" ({_shorten(self.command, 80)})"
        lines = [f"{head}: {self.state.upper()}  (exit code {self.exit_code})"]
        lines += [f"  - {e}" for e in self.evidence]
        if self.threads and self.state in ("blocked", "spinning"):
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
    events: int | None  # phase events of the live segment (moves within long steps)
    counters: dict[str, int]
    open_phase: str | None
    log_size: int | None
    log_mtime_ns: int | None
    step_file: int | None


class _Gone(Exception):
    """The process disappeared while being observed."""


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


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
        text = path.read_text(encoding="utf-8", errors="replace").strip()
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
    p = Path(path)
    with open(p, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 65536))
        data = fh.read()
    text = data.decode("utf-8", errors="replace")
    return [line.rstrip("\r") for line in text.splitlines()[-lines:]]


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

    def read(self) -> tuple[int | None, dict[str, int], str | None, int | None]:
        """(steps completed, counters, open phase, phase events) — Nones without a segment."""
        if self.reader is None:
            return None, {}, None, None
        try:
            snap = self.reader.snapshot()
        except Exception as exc:  # a segment that vanished or is torn: no evidence, not a crash
            self.reason = f"the live segment could not be read ({exc})"
            self.close()
            return None, {}, None, None
        steps = getattr(snap, "steps", None)
        events = getattr(snap, "totals", {}).get("events")
        counters = getattr(snap, "counters", None) or {}
        phase = getattr(snap, "open_phase", None)
        return (
            int(steps) if steps is not None else None,
            {str(k): int(v) for k, v in dict(counters).items()},
            str(phase) if phase is not None else None,
            int(events) if events is not None else None,
        )

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
    steps, counters, phase, events = live.read()
    size, mtime = _log_stat(log)
    return _Sample(
        t_s=time.monotonic() - t0,
        cpu_s=cpu_s,
        num_threads=num_threads,
        status=status,
        threads=_procfs.thread_samples(pid),
        steps=steps,
        events=events,
        counters=counters,
        open_phase=phase,
        log_size=size,
        log_mtime_ns=mtime,
        step_file=_read_step_file(step_file),
    )


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
            except OSError as exc:
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
    spinning, blocked or progressing, with the evidence.

    ``log``: a file the process writes (its growth is progress; its tail is shown when
    the process is gone).  ``step_file``: a file holding the step counter as an
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
    evidence: list[str] = []

    cpu_share: float | None = None
    if first.cpu_s is not None and last.cpu_s is not None:
        cpu_share = max(0.0, (last.cpu_s - first.cpu_s) / wall_s)

    # ---- progress evidence, best first
    source: str
    progressed: bool
    steps: tuple[int, int] | None = None
    if first.steps is not None and last.steps is not None:
        source = "live"
        steps = (first.steps, last.steps)
        rate = (last.steps - first.steps) / wall_s
        phases_moved = (
            first.events is not None and last.events is not None and last.events > first.events
        )
        progressed = last.steps > first.steps or phases_moved
        where = f" (open phase {last.open_phase!r})" if last.open_phase else ""
        if last.steps > first.steps:
            evidence.append(
                f"live segment: step counter advanced {first.steps} -> {last.steps} "
                f"in {wall_s:.1f} s ({rate:.1f} steps/s){where}"
            )
        elif phases_moved:
            evidence.append(
                f"live segment: no step completed in {wall_s:.1f} s, but phases did "
                f"({first.events} -> {last.events} phase events){where}: steps are longer "
                "than the interval; rerun with a longer --interval to see whole steps"
            )
        else:
            evidence.append(
                f"live segment: step counter stayed at {last.steps} for {wall_s:.1f} s{where}"
            )
    elif first.step_file is not None and last.step_file is not None:
        source = "step_file"
        steps = (first.step_file, last.step_file)
        progressed = last.step_file > first.step_file
        verb = (
            f"advanced {first.step_file} -> {last.step_file}"
            if progressed
            else f"stayed at {last.step_file}"
        )
        evidence.append(f"step file {str(step_file)!r}: counter {verb} in {wall_s:.1f} s")
    elif log is not None and last.log_size is not None:
        source = "log"
        grown = (
            first.log_size is None
            or last.log_size != first.log_size
            or last.log_mtime_ns != first.log_mtime_ns
        )
        progressed = grown
        if grown:
            delta = last.log_size - (first.log_size or 0)
            evidence.append(f"log {str(log)!r} grew by {delta} bytes in {wall_s:.1f} s")
        else:
            age_s = max(0.0, time.time() - (last.log_mtime_ns or 0) / 1e9)
            evidence.append(
                f"log {str(log)!r} did not change in {wall_s:.1f} s (last written {age_s:.1f} s "
                "ago; if the process logs less often, rerun with a longer interval)"
            )
    else:
        source = "cpu"
        progressed = cpu_share is not None and cpu_share >= IDLE_CPU_SHARE
        missing = [live.reason]
        if step_file is not None:
            missing.append(f"step file {str(step_file)!r} missing or not an integer")
        if log is not None:
            missing.append(f"log {str(log)!r} does not exist")
        else:
            missing.append("no log given")
        evidence.append(
            "progress judged from CPU time alone (" + "; ".join(missing) + "): this cannot tell "
            "useful work from a busy loop -- pass --log FILE or publish a live segment"
        )

    if cpu_share is not None:
        evidence.append(f"CPU: {_share_words(cpu_share)} over {wall_s:.1f} s")
    else:
        evidence.append("CPU time could not be read (permission denied)")

    # ---- the state
    status = last.status
    if status in (psutil.STATUS_STOPPED, getattr(psutil, "STATUS_TRACING_STOP", "tracing-stop")):
        state = "blocked"
        evidence.append(
            f"the process is {status}: a signal (SIGSTOP, Ctrl-Z) or a debugger paused it; "
            f"resume with: kill -CONT {pid}"
        )
    elif source == "cpu":
        state = "progressing" if progressed else "blocked"
    elif progressed:
        state = "progressing"
    elif cpu_share is not None and cpu_share >= SPIN_CPU_SHARE:
        state = "spinning"
    else:
        state = "blocked"

    # ---- counters and the retrying finding
    counter_rates: dict[str, float] = {}
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

    # ---- threads
    counts = [s.num_threads for s in taken if s.num_threads is not None]
    trend = _thread_trend(counts)
    if counts:
        if trend == "growing":
            evidence.append(
                f"thread count growing: {counts[0]} -> {counts[-1]} over {wall_s:.1f} s "
                "(a growing count suggests a retry storm or leaked threads/connections)"
            )
        elif trend == "steady":
            evidence.append(f"thread count steady at {counts[-1]}")
        else:
            evidence.append(f"thread count {trend}: {' -> '.join(str(c) for c in counts)}")

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
    wchan = _procfs.read_wchan(pid)
    if state == "blocked" and waits:
        main = next((w for w in waits if w.tid == pid), None)
        if main is not None:
            what = main.waits_on or (f"in {main.syscall}" if main.syscall else "waiting")
            chan = f" (kernel wait channel {main.wchan})" if main.wchan else ""
            evidence.append(f"main thread {what}{chan}")
        others = [w for w in waits if w.tid != pid and w.waits_on]
        kinds: dict[str, int] = {}
        for w in others:
            kinds[w.waits_on or ""] = kinds.get(w.waits_on or "", 0) + 1
        for what, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
            evidence.append(f"{n} other thread{'s' if n > 1 else ''}: {what}")
    elif state == "spinning" and waits:
        busy = sorted((w for w in waits if w.cpu_s > 0.0), key=lambda w: -w.cpu_s)[:3]
        for w in busy:
            who = "main thread" if w.tid == pid else f"thread {w.tid}"
            evidence.append(f"{who} used {w.cpu_s:.2f} s CPU ({w.state})")
    elif not waits and state in ("blocked", "spinning") and not _procfs.proc_available(pid):
        evidence.append("per-thread wait states need Linux /proc; not available here")

    # ---- log tail, stacks
    tail: list[str] = []
    if log is not None and log.exists():
        try:
            tail = read_log_tail(log)
        except OSError as exc:
            evidence.append(f"the log {str(log)!r} could not be read ({exc})")
    stacks: str | None = None
    hint: str | None = None
    if state in ("blocked", "spinning"):
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
        progress_source=source,
        progressed=progressed,
        cpu_share=cpu_share,
        command=command,
        status=status,
        thread_counts=counts,
        thread_trend=trend,
        threads=waits,
        wchan=wchan,
        steps=steps,
        open_phase=last.open_phase,
        counter_rates=counter_rates,
        retrying=retrying,
        log=str(log) if log is not None else None,
        log_tail=tail,
        stacks=stacks,
        stacks_hint=hint,
    )
