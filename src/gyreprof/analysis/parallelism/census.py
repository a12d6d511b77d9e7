"""The process tree under a pid: per process its state, CPU, memory, threads and registration.

``census(pid)`` reads the tree once (twice ``interval_s`` apart for CPU use),
joins each process with its ``register_worker`` entry and groups the result
so that "4 × env_worker" reads at a glance. A process that registered a role
that processes below it registered too is the *main* process of those
workers (gymnasium's ``AsyncVectorEnv`` builds one env in the parent to read
the spaces): its envs are counted as "built in the main process", and it is
not a worker. So is a process that built several envs of a role nobody else
holds (``SyncVectorEnv``: the envs run inline, one after another).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import psutil

from gyreprof._support.errors import InvalidValueError, MissingKeyError
from gyreprof._support.format import fmt_bytes, fmt_pct, safe_text, shorten, text_table
from gyreprof._support.threadname import OWN_PREFIX
from gyreprof.analysis.parallelism._text import fmt_pids, plural, span
from gyreprof.analysis.parallelism.cpu import CpuLimits, cpu_limits
from gyreprof.analysis.parallelism.registry import WorkerRecord, read_registry, registry_dir
from gyreprof.model._serial import Record, serial_derived, serial_format

CENSUS_FORMAT = "gyreprof.census/1"
# what a process is that builds a role's envs and steps them itself (no worker process)
INLINE = "main process, envs inline"

__all__ = ["CENSUS_FORMAT", "Census", "ProcessGroup", "ProcessInfo", "ThreadInfo", "census"]


# A thread runnable (on a CPU or waiting for one) at least this share of the
# observation is busy: it competes for a core. Counted whatever else loads the
# machine, since the time it waited for a CPU counts as well as the time it ran.
BUSY_SHARE = 0.5
# Less CPU than this over the observation: the thread did not run (an idle pool).
RAN_CPU_S = 0.002


@serial_derived("busy", "ran", "own")
@dataclass(frozen=True)
class ThreadInfo:
    """One OS thread of a process over the census observation.

    ``cpu_s`` is the CPU time it used during the observation (over its lifetime
    when the census was taken with ``interval_s=0``); ``runnable_s`` adds the time
    it waited for a CPU (``/proc/PID/task/TID/schedstat``; ``None`` where the kernel
    does not keep it) and ``span_s`` is the time observed (the interval, or the
    thread's age).
    """

    tid: int
    name: str
    cpu_s: float
    runnable_s: float | None
    span_s: float

    @property
    def own(self) -> bool:
        """A gyreprof helper thread (named ``gyreprof-...``): never the user's."""
        return self.name.startswith(OWN_PREFIX)

    @property
    def ran(self) -> bool:
        """It used CPU during the observation."""
        return self.cpu_s >= RAN_CPU_S

    @property
    def busy(self) -> bool:
        """Runnable (running, or waiting for a CPU) at least half of the observation."""
        if self.span_s <= 0:
            return False
        used = self.runnable_s if self.runnable_s is not None else self.cpu_s
        return used >= BUSY_SHARE * self.span_s and self.ran


@serial_derived("role", "label")
@dataclass(frozen=True)
class ProcessInfo:
    """One process of a census. Fields that could not be read (access denied,
    zombie) are ``None`` and ``error`` says why.

    ``cpu_percent`` is per-core percent (100 = one core busy; above 100 for
    multi-threaded work) over the census interval, or over the process's
    lifetime when the census was taken with ``interval_s=0``.

    ``worker`` is the registration of a worker process. ``main_envs`` is the
    registration of a process that built envs of a role but is not one of its
    workers: the main process of an ``AsyncVectorEnv`` (one env, to read the
    spaces) or of a ``SyncVectorEnv`` (all envs, run inline). Its
    ``registrations`` is the number of envs built there.
    """

    pid: int
    ppid: int | None
    name: str
    cmdline: tuple[str, ...]
    status: str | None
    num_threads: int | None
    rss_bytes: int | None
    cpu_percent: float | None
    cpu_time_s: float | None
    create_time_s: float
    worker: WorkerRecord | None = None
    error: str | None = None
    # gyreprof live segments this process publishes: "name: phases, N steps"
    live: tuple[str, ...] = ()
    main_envs: WorkerRecord | None = None
    # its OS threads over the observation (None when /proc could not be read)
    threads: tuple[ThreadInfo, ...] | None = None

    def user_threads(self) -> list[ThreadInfo] | None:
        """Its threads but gyreprof's own, or ``None`` when they could not be read."""
        if self.threads is None:
            return None
        return [t for t in self.threads if not t.own]

    @property
    def role(self) -> str | None:
        """The role this process registered with ``register_worker``, else ``None``."""
        return self.worker.role if self.worker is not None else None

    @property
    def command(self) -> str:
        """Command line as one string (the process name when it cannot be read)."""
        return " ".join(self.cmdline) if self.cmdline else f"[{self.name}]"

    @property
    def label(self) -> str:
        """Grouping label: the role when registered, else a short form of the command."""
        if self.role is not None:
            return self.role
        return _command_label(self.name, self.cmdline)


_PY_EXE = re.compile(r"^(python|pypy)[\d.]*m?$")
_MP_SUFFIX = re.compile(r"-\d+$")


def _command_label(name: str, cmdline: Sequence[str]) -> str:
    """Short, groupable description of a command line (``python train.py``, ``sleep``)."""
    if not cmdline:
        return f"[{name}]"
    exe = os.path.basename(cmdline[0]) or name
    args = list(cmdline[1:])
    if not _PY_EXE.match(exe):
        return exe
    # Skip interpreter options such as -u, -X dev, -W ignore.
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-c", "-m"):
        i += 2 if args[i] in ("-X", "-W") else 1
    if i >= len(args):
        return exe
    if args[i] == "-c":
        code = args[i + 1] if i + 1 < len(args) else ""
        if "multiprocessing.spawn" in code:
            return f"{exe} (multiprocessing spawn child)"
        if "resource_tracker" in code:
            return f"{exe} (multiprocessing resource tracker)"
        if "forkserver" in code:
            return f"{exe} (multiprocessing forkserver)"
        return f"{exe} -c ..."
    if args[i] == "-m":
        return f"{exe} -m {args[i + 1]}" if i + 1 < len(args) else exe
    return f"{exe} {os.path.basename(args[i])}"


@serial_derived("count")
@dataclass(frozen=True)
class ProcessGroup:
    """Processes of a census that share a role (or, unregistered, a command)."""

    label: str
    role: str | None
    pids: tuple[int, ...]
    threads_min: int | None
    threads_max: int | None
    threads_total: int
    cpu_percent: float | None
    rss_bytes: int
    process_name: str | None

    @property
    def count(self) -> int:
        return len(self.pids)

    @property
    def title(self) -> str:
        """``env_worker (Worker<AsyncVectorEnv>)`` style label for display."""
        return f"{self.label} ({self.process_name})" if self.process_name else self.label


@serial_format(
    CENSUS_FORMAT,
    derived=("cores_available", "num_processes", "num_threads", "roles", "main_envs", "groups"),
)
@dataclass(frozen=True)
class Census(Record):
    """The process tree under ``pid`` as read at ``taken_at_s`` (Unix time).

    ``processes`` lists the processes that could be read (the root first).
    ``vanished`` holds pids that exited while the census ran; ``notes`` says
    in plain words what could not be read and why.
    """

    pid: int
    processes: tuple[ProcessInfo, ...]
    limits: CpuLimits
    interval_s: float
    taken_at_s: float
    registry: str
    vanished: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def cores_available(self) -> float:
        """Cores the root process may use: the smaller of CPU affinity and cgroup quota."""
        return self.limits.cores_available

    @property
    def root(self) -> ProcessInfo | None:
        """The process ``pid`` itself (``None`` when it exited during the census)."""
        for proc in self.processes:
            if proc.pid == self.pid:
                return proc
        return None

    def __len__(self) -> int:
        return len(self.processes)

    @property
    def num_processes(self) -> int:
        """Processes read (the root and its descendants)."""
        return len(self.processes)

    @property
    def num_threads(self) -> int:
        """Threads of all processes read (those whose count could be read)."""
        return sum(p.num_threads or 0 for p in self.processes)

    def process(self, pid: int) -> ProcessInfo:
        """The census entry of ``pid``; ``KeyError`` listing the pids present when absent."""
        for proc in self.processes:
            if proc.pid == pid:
                return proc
        raise MissingKeyError(
            f"pid {pid} is not in this census; pids: {[p.pid for p in self.processes]}"
        )

    def roles(self) -> dict[str, int]:
        """Registered role -> number of processes registered with it."""
        return dict(Counter(p.role for p in self.processes if p.role is not None))

    def workers(self, role: str | None = None) -> list[ProcessInfo]:
        """Registered processes, all or those with ``role``."""
        return [
            p for p in self.processes if p.worker is not None and (role is None or p.role == role)
        ]

    def main_envs(self) -> dict[str, int]:
        """Role -> envs built in main processes (not workers), for roles that have any."""
        out: dict[str, int] = {}
        for p in self.processes:
            if p.main_envs is not None:
                out[p.main_envs.role] = out.get(p.main_envs.role, 0) + p.main_envs.registrations
        return out

    def describe_role(self, role: str) -> str:
        """``4 env_worker processes (pids ...), and 1 env built in the main process`` style."""
        workers = [p for p in self.workers(role) if p.status != psutil.STATUS_ZOMBIE]
        mains = [p for p in self.processes if p.main_envs is not None and p.main_envs.role == role]
        if workers:
            text = f"{plural(len(workers), role + ' process', role + ' processes')} "
            text += f"(pids {fmt_pids([p.pid for p in workers])})"
            envs = sum(p.worker.registrations for p in workers if p.worker is not None)
            if envs != len(workers):
                text += f" with {plural(envs, 'env')}"
        else:
            text = f"no {role} worker processes"
        if mains:
            envs = sum(p.main_envs.registrations for p in mains if p.main_envs is not None)
            where = "the main process" if len(mains) == 1 else f"{len(mains)} main processes"
            text += ", and " if workers else f"; {INLINE}: "
            text += f"{plural(envs, 'env')} built in {where} "
            text += f"(pid{'s' if len(mains) > 1 else ''} {fmt_pids([p.pid for p in mains])})"
        return text

    def groups(self) -> list[ProcessGroup]:
        """Processes grouped by role, or by command when unregistered; largest group first."""
        buckets: dict[tuple[str, str | None], list[ProcessInfo]] = {}
        for proc in self.processes:
            buckets.setdefault((proc.label, proc.role), []).append(proc)
        groups: list[ProcessGroup] = []
        for (label, role), procs in buckets.items():
            threads = [p.num_threads for p in procs if p.num_threads is not None]
            cpu = [p.cpu_percent for p in procs if p.cpu_percent is not None]
            names = {
                _MP_SUFFIX.sub("", p.worker.process_name)
                for p in procs
                if p.worker is not None and p.worker.process_name
            }
            groups.append(
                ProcessGroup(
                    label=label,
                    role=role,
                    pids=tuple(p.pid for p in procs),
                    threads_min=min(threads) if threads else None,
                    threads_max=max(threads) if threads else None,
                    threads_total=sum(threads),
                    cpu_percent=sum(cpu) if cpu else None,
                    rss_bytes=sum(p.rss_bytes or 0 for p in procs),
                    process_name=names.pop() if len(names) == 1 else None,
                )
            )
        root_label = self.root.label if self.root is not None else None
        groups.sort(key=lambda g: (g.label != root_label, -g.count, g.label))
        return groups

    def __str__(self) -> str:
        threads = self.num_threads
        root = self.root
        head = (
            f"process tree of pid {self.pid}"
            + (f" ({shorten(root.command, 60)})" if root is not None else " (exited)")
            + f": {len(self.processes)} processes, {threads} threads; {self.limits.describe()}"
        )
        lines = [head, ""]
        rows = [["count", "role / command", "threads", "cpu", "rss", "pids"]]
        for g in self.groups():
            rows.append(
                [
                    f"{g.count} ×",
                    g.title,
                    span(g.threads_min, g.threads_max),
                    _fmt_cpu(g.cpu_percent),
                    fmt_bytes(g.rss_bytes),
                    fmt_pids(g.pids),
                ]
            )
        lines += _table(rows, right={0, 2, 3, 4})
        lines.append("")
        rows = [["pid", "ppid", "role", "state", "threads", "busy", "cpu", "rss", "command"]]
        for p in self.processes:
            user = p.user_threads()
            rows.append(
                [
                    str(p.pid),
                    "?" if p.ppid is None else str(p.ppid),
                    _role_cell(p, self),
                    p.status or "?",
                    "?" if p.num_threads is None else str(p.num_threads),
                    "?" if user is None else str(sum(1 for t in user if t.busy)),
                    _fmt_cpu(p.cpu_percent),
                    "?" if p.rss_bytes is None else fmt_bytes(p.rss_bytes),
                    shorten(p.command, 70),
                ]
            )
        lines += _table(rows, right={0, 1, 4, 5, 6, 7})
        observed = (
            f"the {self.interval_s:g} s observed" if self.interval_s > 0 else "their lifetime"
        )
        lines.append(
            f"  busy: threads runnable (running or waiting for a CPU) at least half of {observed}"
            ", gyreprof's own left out"
        )
        for role in sorted(self.main_envs()):
            lines.append(f"  {role}: {self.describe_role(role)}")
        for p in self.processes:
            for seg in p.live:
                lines.append(f"  live gyreprof segment of pid {p.pid}: {seg}")
        extra = list(self.notes)
        if self.vanished:
            extra.insert(0, f"exited during the census: pids {fmt_pids(self.vanished)}")
        lines += [f"note: {n}" for n in extra]
        return safe_text("\n".join(lines))


def _fmt_cpu(percent: float | None) -> str:
    """Per-core CPU percent (100 = one core busy) in the one percentage spelling."""
    return fmt_pct(None if percent is None else percent / 100.0)


def _check_pid(pid: Any) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise InvalidValueError(f"pid must be a positive integer process id, got {pid!r}")
    if pid <= 0:
        raise InvalidValueError(f"pid must be a positive integer process id, got {pid}")
    return pid


_MAX_INTERVAL_S = 86400


def check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    if value > _MAX_INTERVAL_S:  # time.sleep and psutil overflow far above
        raise InvalidValueError(
            f"{name} must be at most {_MAX_INTERVAL_S} seconds (a day), got {value!r}"
        )
    return float(value)


class _Vanished(Exception):
    """The process exited while being read."""


def _read_field(proc: psutil.Process, what: str, errors: list[str]) -> Any:
    """One psutil field; ``None`` (and a note) on access denied or zombie, ``_Vanished`` if gone."""
    try:
        return getattr(proc, what)()
    except psutil.ZombieProcess:
        errors.append(f"{what}: zombie")
        return None
    except psutil.NoSuchProcess:
        raise _Vanished() from None
    except psutil.AccessDenied:
        errors.append(f"{what}: access denied")
        return None


def _cpu_seconds(proc: psutil.Process, errors: list[str]) -> float | None:
    times = _read_field(proc, "cpu_times", errors)
    return None if times is None else float(times.user + times.system)


# (name, cpu ns, run-queue wait ns or None, start in s since boot) per tid
_ThreadSample = dict[int, tuple[str, int, int | None, float]]
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _thread_sample(pid: int) -> _ThreadSample | None:
    """Per-thread CPU and run-queue wait of ``pid`` from /proc; ``None`` where unreadable."""
    # by hand: psutil's threads() has each thread's CPU time only, not its name, start
    # or run-queue wait (schedstat); the CPU time comes with the same stat line
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    out: _ThreadSample = {}
    for name in tids:
        if not name.isdigit():
            continue
        try:
            with open(f"{base}/{name}/stat", "rb") as f:
                stat_line = f.read().decode("utf-8", "replace")
        except OSError:
            continue  # the thread exited
        lp, rp = stat_line.find("("), stat_line.rfind(")")
        fields = stat_line[rp + 2 :].split()
        if lp < 0 or rp < 0 or len(fields) < 20:
            continue
        comm = stat_line[lp + 1 : rp]
        cpu_ns = int((int(fields[11]) + int(fields[12])) * _TICK_S * 1e9)
        start_s = int(fields[19]) * _TICK_S
        wait_ns: int | None = None
        try:
            with open(f"{base}/{name}/schedstat", "rb") as f:
                parts = f.read().split()
            cpu_ns, wait_ns = int(parts[0]), int(parts[1])
        except (OSError, ValueError, IndexError):
            pass
        out[int(name)] = (comm, cpu_ns, wait_ns, start_s)
    return out


def _uptime_s() -> float | None:
    try:  # by hand: psutil.boot_time() is in whole seconds, thread starts are in ticks
        with open("/proc/uptime", "rb") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _thread_infos(
    before: _ThreadSample | None, after: _ThreadSample | None, interval_s: float
) -> tuple[ThreadInfo, ...] | None:
    """Threads over the observation: the difference of two samples, or (``interval_s``
    0) each thread's lifetime totals."""
    if after is None:
        return None
    up = _uptime_s() if interval_s <= 0 else None
    out: list[ThreadInfo] = []
    for tid, (comm, cpu_ns, wait_ns, start_s) in sorted(after.items()):
        if interval_s > 0:
            if before is None:
                return None
            prev = before.get(tid)
            # a thread born during the observation: all it used, it used in it
            cpu0, wait0 = (prev[1], prev[2]) if prev is not None else (0, 0)
            cpu = max(0, cpu_ns - cpu0)
            wait = None if wait_ns is None or wait0 is None else max(0, wait_ns - wait0)
            span = interval_s
        else:
            cpu, wait = cpu_ns, wait_ns
            span = max(0.0, up - start_s) if up is not None else 0.0
        runnable = None if wait is None else (cpu + wait) / 1e9
        out.append(ThreadInfo(tid, comm, cpu / 1e9, runnable, span))
    return tuple(out)


def _read_process(
    proc: psutil.Process,
    cpu_before_s: float | None,
    interval_s: float,
    worker: WorkerRecord | None,
    threads_before: _ThreadSample | None = None,
) -> ProcessInfo:
    """Everything the census shows about one process; raises ``_Vanished`` if it exited."""
    errors: list[str] = []
    with proc.oneshot():
        create_time = _read_field(proc, "create_time", errors)
        name = _read_field(proc, "name", errors) or "?"
        cmdline = _read_field(proc, "cmdline", errors) or []
        status = _read_field(proc, "status", errors)
        ppid = _read_field(proc, "ppid", errors)
        num_threads = _read_field(proc, "num_threads", errors)
        mem = _read_field(proc, "memory_info", errors)
        cpu_s = _cpu_seconds(proc, errors)
    cpu_percent: float | None = None
    if cpu_s is not None:
        if interval_s > 0 and cpu_before_s is not None:
            cpu_percent = max(0.0, cpu_s - cpu_before_s) / interval_s * 100.0
        elif interval_s == 0 and create_time is not None:
            age = max(time.time() - float(create_time), 1e-3)
            cpu_percent = cpu_s / age * 100.0
    threads = _thread_infos(threads_before, _thread_sample(proc.pid), interval_s)
    if status == psutil.STATUS_ZOMBIE:
        threads = None
        errors = [e for e in errors if not e.endswith("zombie")]
        errors.append("zombie: exited, not yet reaped by its parent")
    return ProcessInfo(
        pid=proc.pid,
        ppid=ppid,
        name=str(name),
        cmdline=tuple(str(a) for a in cmdline),
        status=status,
        num_threads=num_threads,
        rss_bytes=int(mem.rss) if mem is not None else None,
        cpu_percent=cpu_percent,
        cpu_time_s=cpu_s,
        create_time_s=float(create_time) if create_time is not None else 0.0,
        worker=worker,
        error="; ".join(errors) or None,
        threads=threads,
    )


def census(
    pid: int,
    *,
    interval_s: float = 0.1,
    registry: str | os.PathLike[str] | None = None,
) -> Census:
    """Read the process tree under ``pid`` (``pid`` and all its descendants).

    ``interval_s`` is how long CPU use is sampled for ``cpu_percent`` (two
    readings, ``interval_s`` apart); ``0`` reports each process's lifetime
    average instead and returns at once. ``registry`` overrides the worker
    registry directory (default: ``$GYREPROF_REGISTRY_DIR`` or a per-user
    temp dir).

    Raises ``ProcessLookupError`` when ``pid`` does not exist, ``ValueError``
    for a pid that is not a positive integer. Processes that exit while the
    census runs are listed in ``vanished``; fields that cannot be read (access
    denied, zombies) are ``None`` with the reason in ``ProcessInfo.error`` —
    the census reports what it could read.
    """
    pid = _check_pid(pid)
    interval_s = check_seconds("interval_s", interval_s)
    directory = registry_dir(registry)
    notes: list[str] = []
    procs, limits = _tree(pid, notes)
    vanished: list[int] = []
    before, create_times = _first_reading(procs, interval_s, vanished)
    thread_before = (
        {p.pid: _thread_sample(p.pid) for p in procs if p.pid not in vanished}
        if interval_s > 0
        else {}
    )
    if interval_s > 0:
        time.sleep(interval_s)
    workers, problems = read_registry(create_times, directory)
    notes.extend(problems)
    infos: list[ProcessInfo] = []
    for proc in procs:
        if proc.pid in vanished:
            continue
        try:
            info = _read_process(
                proc,
                before.get(proc.pid),
                interval_s,
                workers.get(proc.pid),
                thread_before.get(proc.pid),
            )
        except _Vanished:
            vanished.append(proc.pid)
            continue
        if info.error and "access denied" in info.error:
            notes.append(f"pid {info.pid}: {info.error}")
        infos.append(info)
    if pid in vanished:
        notes.append(f"pid {pid} itself exited during the census")
    infos = _split_main_envs(_with_live_segments(infos, notes))
    return Census(
        pid=pid,
        processes=tuple(infos),
        limits=limits,
        interval_s=interval_s,
        taken_at_s=time.time(),
        registry=str(directory),
        vanished=tuple(vanished),
        notes=tuple(notes),
    )


def _tree(pid: int, notes: list[str]) -> tuple[list[psutil.Process], CpuLimits]:
    """``pid`` and its descendants, and the CPU limits of ``pid``."""
    try:
        root = psutil.Process(pid)
        limits = cpu_limits(pid)
    except psutil.NoSuchProcess:
        raise ProcessLookupError(
            f"no process with pid {pid}: it does not exist or has already exited"
        ) from None
    try:
        children = root.children(recursive=True)
    except psutil.NoSuchProcess:
        raise ProcessLookupError(f"process {pid} exited as the census started") from None
    except psutil.AccessDenied:
        children = []
        notes.append(f"access denied listing the children of pid {pid}; only pid {pid} is shown")
    return [root, *children], limits


def _first_reading(
    procs: list[psutil.Process], interval_s: float, vanished: list[int]
) -> tuple[dict[int, float | None], dict[int, float]]:
    """(CPU seconds before the interval, start time) per pid; exited pids go to ``vanished``."""
    before: dict[int, float | None] = {}
    create_times: dict[int, float] = {}
    for proc in procs:
        scratch: list[str] = []
        try:
            with proc.oneshot():
                before[proc.pid] = _cpu_seconds(proc, scratch) if interval_s > 0 else None
                ct = _read_field(proc, "create_time", scratch)
        except _Vanished:
            vanished.append(proc.pid)
            continue
        if ct is not None:
            create_times[proc.pid] = float(ct)
    return before, create_times


def _with_live_segments(infos: list[ProcessInfo], notes: list[str]) -> list[ProcessInfo]:
    """Attach what the live segments of these processes say (phases, steps so far)."""
    try:
        from gyreprof.live import attach
        from gyreprof.live import list as list_segments
    except ImportError:  # the compiled core is not built: no live view either
        return infos
    pids = {p.pid for p in infos}
    try:
        entries = [e for e in list_segments() if e.pid in pids and e.alive]
    except (OSError, ValueError) as exc:
        notes.append(f"live segments could not be listed: {exc}")
        return infos
    found: dict[int, list[str]] = {}
    for e in entries:
        desc = f"{e.name}: phases {', '.join(e.phases or ())}"
        try:
            reader = attach(e.path)
            try:
                desc += f"; {reader.snapshot(windows=False).steps} steps so far"
            finally:
                reader.close()
        except (LookupError, ValueError, OSError) as exc:
            desc += f" (unreadable: {exc})"
        found.setdefault(e.pid, []).append(desc)
    return [replace(p, live=tuple(found[p.pid])) if p.pid in found else p for p in infos]


def _role_cell(p: ProcessInfo, c: Census) -> str:
    if p.role is not None:
        return p.role
    if p.main_envs is not None:
        envs = plural(p.main_envs.registrations, p.main_envs.role + " env")
        if not c.workers(p.main_envs.role):
            return f"{INLINE} ({envs})"
        return f"main ({envs})"
    return "-"


def _ancestors(pid: int, parents: dict[int, int | None]) -> list[int]:
    """Pids above ``pid`` within the census, nearest first."""
    out: list[int] = []
    seen = {pid}
    up = parents.get(pid)
    while up is not None and up in parents and up not in seen:
        out.append(up)
        seen.add(up)
        up = parents.get(up)
    return out


def _split_main_envs(infos: list[ProcessInfo]) -> list[ProcessInfo]:
    """Tell the main process of a role's workers apart from the workers.

    A registered process with a descendant registered under the same role is
    their main process (``AsyncVectorEnv`` builds one env in the parent before
    it starts the workers). A process that built several envs of a role no
    other process holds, and is not a multiprocessing child, runs them inline
    (``SyncVectorEnv``): no worker processes. So does a process, not a
    multiprocessing child, where ``gyreprof run`` registered a vector env's envs
    after its ``__init__``: a one-env ``SyncVectorEnv`` stepped by the main program
    is the main process running its envs inline, not an env worker. Either way its
    registration moves from ``worker`` to ``main_envs``. One registration by the
    user in a process alone is a worker (a learner, or a one-env sampler).
    """
    parents = {p.pid: p.ppid for p in infos}
    holders: dict[str, list[ProcessInfo]] = {}
    for p in infos:
        if p.worker is not None:
            holders.setdefault(p.worker.role, []).append(p)
    mains: set[int] = set()
    for procs in holders.values():
        pids = {p.pid for p in procs}
        for p in procs:
            mains.update(a for a in _ancestors(p.pid, parents) if a in pids)
        if len(procs) == 1:
            only = procs[0].worker
            if only is not None and only.process_name is None:
                if only.registrations > 1 or only.run_registrations > 0:
                    mains.add(procs[0].pid)
    return [replace(p, worker=None, main_envs=p.worker) if p.pid in mains else p for p in infos]


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Header row and body as indented, aligned lines."""
    return text_table(rows[0], rows[1:], right=right, indent="  ").splitlines()
