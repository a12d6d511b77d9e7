"""Did the parallelism take effect?

A ``num_workers=8`` that silently runs one worker, or eight workers that each
start sixteen BLAS threads on a sixteen-core box, are among the most common
reasons sampling is slow. This module answers the question from the outside:

* ``register_worker(role, **config)`` — called inside each worker at start;
  records the role, the config the worker actually read and the thread
  settings it actually runs with (see ``_parallel_registry``).
* ``census(pid)`` — the process tree under ``pid``: per process name, command
  line, state, CPU %, RSS, thread count and, for registered workers, role and
  config; grouped so that "4 × env_worker" reads at a glance.
* ``check_parallelism(pid, expected={role: n}, config={key: value})`` —
  expected vs observed worker counts, intended vs read config, oversubscription
  (workers × threads per worker beyond the cores the process may use: CPU
  affinity and cgroup quota), optionally workers that never use CPU. Plain-words
  findings with the numbers behind them and an exit code for scripts.
* ``compare_throughput(a, b, workers=(1, 4))`` — whether env-step throughput
  moved when the worker count changed.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psutil

from gyreprof.analysis._parallel_cpu import CpuLimits, cpu_limits
from gyreprof.analysis._parallel_registry import (
    THREAD_ENV_VARS,
    WorkerRecord,
    read_registry,
    register_worker,
    registry_dir,
    unregister_worker,
)

__all__ = [
    "Census",
    "CpuLimits",
    "Finding",
    "ParallelismReport",
    "ProcessGroup",
    "ProcessInfo",
    "THREAD_ENV_VARS",
    "ThroughputComparison",
    "WorkerRecord",
    "census",
    "check_parallelism",
    "compare_throughput",
    "register_worker",
    "unregister_worker",
]

# Less CPU than one scheduler tick (10 ms) over the sampling interval counts as "no CPU".
_IDLE_CPU_S = 0.005


# --------------------------------------------------------------------------- census


@dataclass(frozen=True)
class ProcessInfo:
    """One process of a census. Fields that could not be read (access denied,
    zombie) are ``None`` and ``error`` says why.

    ``cpu_percent`` is per-core percent (100 = one core busy; above 100 for
    multi-threaded work) over the census interval, or over the process's
    lifetime when the census was taken with ``interval_s=0``.
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "name": self.name,
            "cmdline": list(self.cmdline),
            "status": self.status,
            "num_threads": self.num_threads,
            "rss_bytes": self.rss_bytes,
            "cpu_percent": self.cpu_percent,
            "cpu_time_s": self.cpu_time_s,
            "create_time_s": self.create_time_s,
            "role": self.role,
            "label": self.label,
            "worker": self.worker.to_dict() if self.worker is not None else None,
            "error": self.error,
            "live": list(self.live),
        }


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "role": self.role,
            "count": self.count,
            "pids": list(self.pids),
            "threads_min": self.threads_min,
            "threads_max": self.threads_max,
            "threads_total": self.threads_total,
            "cpu_percent": self.cpu_percent,
            "rss_bytes": self.rss_bytes,
            "process_name": self.process_name,
        }


@dataclass(frozen=True)
class Census:
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

    def process(self, pid: int) -> ProcessInfo:
        """The census entry of ``pid``; ``KeyError`` listing the pids present when absent."""
        for proc in self.processes:
            if proc.pid == pid:
                return proc
        raise KeyError(f"pid {pid} is not in this census; pids: {[p.pid for p in self.processes]}")

    def roles(self) -> dict[str, int]:
        """Registered role -> number of processes registered with it."""
        return dict(Counter(p.role for p in self.processes if p.role is not None))

    def workers(self, role: str | None = None) -> list[ProcessInfo]:
        """Registered processes, all or those with ``role``."""
        return [
            p for p in self.processes if p.worker is not None and (role is None or p.role == role)
        ]

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "taken_at_s": self.taken_at_s,
            "interval_s": self.interval_s,
            "registry": self.registry,
            "limits": self.limits.to_dict(),
            "cores_available": self.cores_available,
            "num_processes": len(self.processes),
            "num_threads": sum(p.num_threads or 0 for p in self.processes),
            "roles": self.roles(),
            "groups": [g.to_dict() for g in self.groups()],
            "processes": [p.to_dict() for p in self.processes],
            "vanished": list(self.vanished),
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        threads = sum(p.num_threads or 0 for p in self.processes)
        root = self.root
        head = (
            f"process tree of pid {self.pid}"
            + (f" ({_shorten(root.command, 60)})" if root is not None else " (exited)")
            + f": {len(self.processes)} processes, {threads} threads; {self.limits.describe()}"
        )
        lines = [head, ""]
        rows = [["count", "role / command", "threads", "cpu%", "rss", "pids"]]
        for g in self.groups():
            rows.append(
                [
                    f"{g.count} ×",
                    g.title,
                    _range(g.threads_min, g.threads_max),
                    _fmt_pct(g.cpu_percent),
                    _fmt_bytes(g.rss_bytes),
                    _fmt_pids(g.pids),
                ]
            )
        lines += _table(rows, right={0, 2, 3, 4})
        lines.append("")
        rows = [["pid", "ppid", "role", "state", "threads", "cpu%", "rss", "command"]]
        for p in self.processes:
            rows.append(
                [
                    str(p.pid),
                    "?" if p.ppid is None else str(p.ppid),
                    p.role or "-",
                    p.status or "?",
                    "?" if p.num_threads is None else str(p.num_threads),
                    _fmt_pct(p.cpu_percent),
                    "?" if p.rss_bytes is None else _fmt_bytes(p.rss_bytes),
                    _shorten(p.command, 70),
                ]
            )
        lines += _table(rows, right={0, 1, 4, 5, 6})
        for p in self.processes:
            for seg in p.live:
                lines.append(f"  live gyreprof segment of pid {p.pid}: {seg}")
        extra = list(self.notes)
        if self.vanished:
            extra.insert(0, f"exited during the census: pids {_fmt_pids(self.vanished)}")
        lines += [f"note: {n}" for n in extra]
        return "\n".join(lines)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _range(lo: int | None, hi: int | None) -> str:
    if lo is None or hi is None:
        return "?"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _fmt_pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _fmt_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns


def _fmt_pids(pids: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(p) for p in pids[:limit])
    return shown + (f", … (+{len(pids) - limit})" if len(pids) > limit else "")


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _check_pid(pid: Any) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise ValueError(f"pid must be a positive integer process id, got {pid!r}")
    if pid <= 0:
        raise ValueError(f"pid must be a positive integer process id, got {pid}")
    return pid


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
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


def _read_process(
    proc: psutil.Process,
    cpu_before_s: float | None,
    interval_s: float,
    worker: WorkerRecord | None,
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
    if status == psutil.STATUS_ZOMBIE:
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
    interval_s = _check_seconds("interval_s", interval_s)
    directory = registry_dir(registry)
    notes: list[str] = []
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
    procs: list[psutil.Process] = [root, *children]

    vanished: list[int] = []
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
    if interval_s > 0:
        time.sleep(interval_s)

    workers, problems = read_registry(create_times, directory)
    notes.extend(problems)
    infos: list[ProcessInfo] = []
    for proc in procs:
        if proc.pid in vanished:
            continue
        try:
            info = _read_process(proc, before.get(proc.pid), interval_s, workers.get(proc.pid))
        except _Vanished:
            vanished.append(proc.pid)
            continue
        if info.error and "access denied" in info.error:
            notes.append(f"pid {info.pid}: {info.error}")
        infos.append(info)
    if pid in vanished:
        notes.append(f"pid {pid} itself exited during the census")
    infos = _with_live_segments(infos, notes)
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


# --------------------------------------------------------------------------- check


@dataclass(frozen=True)
class Finding:
    """One problem found by ``check_parallelism``.

    ``kind`` is one of ``"count"`` (expected vs observed workers), ``"config"``
    (intended vs read config), ``"oversubscription"``, ``"idle"`` (workers that
    used no CPU while sampled), ``"registry"`` (nothing registered to compare
    against). ``data`` holds the numbers behind ``message``.
    """

    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "data": self.data}


@dataclass(frozen=True)
class ParallelismReport:
    """Result of ``check_parallelism``: ``ok`` when nothing was found.

    ``observed`` maps each role (expected or registered) to the number of
    processes seen with it; ``findings`` lists plain-words problems (``details``
    has them with their kind and numbers); ``notes`` holds things worth knowing
    that are not problems (processes that exited during the check, fields that
    could not be read). ``threads_total`` is the sum of threads per worker used
    for the oversubscription check, ``threads_per_worker`` maps worker pid to
    ``(threads, source)``.
    """

    pid: int
    ok: bool
    observed: dict[str, int]
    expected: dict[str, int]
    config: dict[str, Any]
    details: tuple[Finding, ...]
    notes: tuple[str, ...]
    cores_available: float
    threads_total: int | None
    threads_per_worker: dict[int, tuple[int, str]]
    census: Census

    @property
    def findings(self) -> list[str]:
        """Plain-words findings (empty when ``ok``)."""
        return [f.message for f in self.details]

    @property
    def exit_code(self) -> int:
        """0 when ok, 1 when there are findings (2 is the CLI's usage error)."""
        return 0 if self.ok else 1

    def kinds(self) -> set[str]:
        """The kinds of findings present (``"count"``, ``"config"``, ...)."""
        return {f.kind for f in self.details}

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "observed": self.observed,
            "expected": self.expected,
            "config": self.config,
            "findings": self.findings,
            "details": [f.to_dict() for f in self.details],
            "notes": list(self.notes),
            "cores_available": self.cores_available,
            "threads_total": self.threads_total,
            "threads_per_worker": {
                str(pid): {"threads": n, "source": src}
                for pid, (n, src) in self.threads_per_worker.items()
            },
            "census": self.census.to_dict(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def __str__(self) -> str:
        head = f"parallelism check of pid {self.pid}: " + (
            "ok" if self.ok else f"{len(self.details)} finding(s)"
        )
        lines = [head]
        roles = sorted(set(self.expected) | set(self.observed))
        for role in roles:
            want = self.expected.get(role)
            got = self.observed.get(role, 0)
            lines.append(
                f"  {role}: {got} process(es)" + (f", {want} expected" if want is not None else "")
            )
        if self.threads_total is not None:
            lines.append(
                f"  threads across workers: {self.threads_total} on {self.census.limits.describe()}"
            )
        else:
            lines.append(f"  {self.census.limits.describe()}")
        lines += [f"- {msg}" for msg in self.findings]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _canon(value: Any) -> Any:
    """Comparable form of a config value: ``"1"``, ``1`` and ``1.0`` compare equal."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except ValueError:
            return ("str", text)
        if isinstance(value, str):
            return ("str", value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", float(value))
    if value is None:
        return ("none", None)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canon(v) for v in value))
    if isinstance(value, Mapping):
        return ("dict", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    return ("other", repr(value))


def _validate_expected(expected: Mapping[str, int] | None) -> dict[str, int]:
    if expected is None:
        return {}
    if not isinstance(expected, Mapping):
        raise ValueError(f"expected must map role -> process count, got {type(expected).__name__}")
    out: dict[str, int] = {}
    for role, count in expected.items():
        if not isinstance(role, str) or not role:
            raise ValueError(f"expected: role names must be non-empty strings, got {role!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(
                f"expected[{role!r}] must be a process count (int >= 0), got {count!r}"
            )
        out[role] = count
    return out


def _validate_intended(config: Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ValueError(f"config must map key -> intended value, got {type(config).__name__}")
    for key in config:
        if not isinstance(key, str) or not key:
            raise ValueError(f"config keys must be non-empty strings, got {key!r}")
    return dict(config)


def _plural(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _count_findings(
    c: Census, expected: dict[str, int], observed: dict[str, int], matched: dict[str, list[int]]
) -> list[Finding]:
    findings: list[Finding] = []
    registered = c.workers()
    unregistered = [p for p in c.processes if p.worker is None and p.pid != c.pid]
    for role, want in expected.items():
        got = observed.get(role, 0)
        if got == want:
            continue
        pids = matched.get(role, [])
        data: dict[str, Any] = {"role": role, "expected": want, "observed": got, "pids": pids}
        were = "was" if want == 1 else "were"
        msg = f"{role}: {_plural(got, 'process', 'processes')} where {want} {were} expected"
        if got == 0 and want > 0:
            if not registered and unregistered:
                groups = Counter(p.label for p in unregistered)
                listed = ", ".join(f"{n} × {label}" for label, n in groups.most_common())
                children = _plural(
                    len(unregistered), "unregistered child process", "unregistered child processes"
                )
                msg += (
                    f". No process in the tree registered as {role!r}; it has {children}"
                    f" ({listed}). Call gp.register_worker({role!r}, replace=True) at worker "
                    "start (replace=True: an env built twice in one process, as SyncVectorEnv "
                    "does, registers again instead of failing) so the census can tell workers "
                    "apart"
                )
            elif not unregistered and not registered:
                msg += (
                    f": the tree of pid {c.pid} is a single process, so no worker processes "
                    "were ever started (a synchronous backend, or num_workers=0)"
                )
            else:
                seen = ", ".join(f"{r} ({n})" for r, n in sorted(c.roles().items())) or "none"
                msg += f"; registered roles in the tree: {seen}"
                if unregistered:
                    msg += (
                        f"; {len(unregistered)} other child process(es) did not register "
                        f"(pids {_fmt_pids([p.pid for p in unregistered])})"
                    )
        elif got < want:
            inline = [
                p for p in c.workers(role) if p.worker is not None and p.worker.registrations > 1
            ]
            if inline:
                p = inline[0]
                assert p.worker is not None
                msg += (
                    f"; pid {p.pid} registered as {role!r} {p.worker.registrations} times: "
                    "those workers run inline in one process (a synchronous backend such as "
                    "SyncVectorEnv, or a worker-count setting that never reached the launcher)"
                )
                data["inline_registrations"] = {
                    str(q.pid): q.worker.registrations for q in inline if q.worker is not None
                }
            else:
                msg += f" (pids {_fmt_pids(pids)})"
            if c.vanished:
                msg += (
                    f"; {_plural(len(c.vanished), 'process', 'processes')} exited during the check"
                )
        else:
            msg += f" (pids {_fmt_pids(pids)}): more workers than configured"
        findings.append(Finding("count", msg, data))
    return findings


def _config_findings(
    c: Census, workers: list[ProcessInfo], intended: dict[str, Any]
) -> list[Finding]:
    if not intended:
        return []
    registered = [p for p in workers if p.worker is not None]
    if not registered:
        return [
            Finding(
                "registry",
                f"cannot compare config ({', '.join(sorted(intended))}): no process in the tree "
                f"of pid {c.pid} registered as a worker; call gp.register_worker(role, key=value, "
                "...) in each worker with the values it actually read",
                {"keys": sorted(intended)},
            )
        ]
    findings: list[Finding] = []
    for key, want in intended.items():
        missing: list[int] = []
        wrong: dict[Any, list[tuple[int, Any]]] = {}
        for p in registered:
            assert p.worker is not None
            found, value = p.worker.lookup(key)
            if not found:
                missing.append(p.pid)
            elif _canon(value) != _canon(want):
                wrong.setdefault(_canon(value), []).append((p.pid, value))
        roles = sorted({p.role for p in registered if p.role is not None})
        total = len(registered)
        who = f"{total} {'/'.join(roles)} {'process' if total == 1 else 'processes'}"
        for entries in wrong.values():
            pids = [pid for pid, _ in entries]
            value = entries[0][1]
            findings.append(
                Finding(
                    "config",
                    f"{key}: intended {want!r}, but {len(pids)} of {who} run with {value!r} "
                    f"(pids {_fmt_pids(pids)}) — the setting did not reach them (overridden "
                    "upstream, a different key read, or set after the workers started)",
                    {"key": key, "intended": want, "actual": value, "pids": pids},
                )
            )
        if missing:
            if key in THREAD_ENV_VARS:
                detail = (
                    f"it is not set in {len(missing)} of {who} (pids {_fmt_pids(missing)}), so "
                    "their libraries use their default (usually one thread per core) — set it "
                    "in the environment the workers start with"
                )
            else:
                detail = (
                    f"{len(missing)} of {who} never read it (pids {_fmt_pids(missing)}; not in "
                    "their registered config or thread settings) — a wrong key name, or the "
                    "setting never reaches the worker"
                )
            findings.append(
                Finding(
                    "config",
                    f"{key}: intended {want!r}, but {detail}",
                    {"key": key, "intended": want, "actual": None, "pids": missing},
                )
            )
    return findings


def _threads_per_worker(workers: list[ProcessInfo]) -> dict[int, tuple[int, str]]:
    out: dict[int, tuple[int, str]] = {}
    for p in workers:
        pool = p.worker.compute_threads() if p.worker is not None else None
        if pool is not None:
            out[p.pid] = (pool, "thread pool size")
        elif p.num_threads is not None:
            out[p.pid] = (p.num_threads, "OS threads")
    return out


def _oversubscription_findings(
    c: Census,
    workers: list[ProcessInfo],
    per_worker: dict[int, tuple[int, str]],
    max_threads_per_core: float,
) -> list[Finding]:
    if not per_worker:
        return []
    total = sum(n for n, _ in per_worker.values())
    cores = c.cores_available
    if total <= cores * max_threads_per_core:
        return []
    n_workers = len(per_worker)
    counts = [n for n, _ in per_worker.values()]
    lo, hi = min(counts), max(counts)
    sources = sorted({src for _, src in per_worker.values()})
    roles = sorted({p.label for p in workers if p.pid in per_worker})
    who = f"{n_workers} {'/'.join(roles)} {'process' if n_workers == 1 else 'processes'}"
    each = f"{hi} thread{'s' if hi != 1 else ''}" if lo == hi else f"{lo}-{hi} threads"
    fit = max(1, int(cores // n_workers)) if n_workers else 1
    if hi > 1:
        advice = (
            f"cap the threads in each worker to {fit} (OMP_NUM_THREADS={fit} in the workers' "
            f"environment, threadpoolctl.threadpool_limits({fit}) or torch.set_num_threads({fit}) "
            f"at worker start)"
            + (f" or run at most {max(1, int(cores))} workers" if n_workers > cores else "")
        )
    else:
        advice = (
            f"more busy workers than cores take turns on the CPUs; run at most "
            f"{max(1, int(cores))} workers or give the job more cores, unless the workers mostly "
            "wait on I/O"
        )
    msg = (
        f"oversubscribed: {who} × {each} ({', '.join(sources)}) = {total} threads on "
        f"{c.limits.describe()}: {advice}"
    )
    return [
        Finding(
            "oversubscription",
            msg,
            {
                "workers": n_workers,
                "threads_total": total,
                "threads_per_worker_max": hi,
                "cores_available": cores,
                "max_threads_per_core": max_threads_per_core,
            },
        )
    ]


def _idle_findings(c: Census, workers: list[ProcessInfo]) -> list[Finding]:
    if c.interval_s <= 0:
        return []
    idle = [
        p
        for p in workers
        if p.cpu_percent is not None and p.cpu_percent / 100.0 * c.interval_s < _IDLE_CPU_S
    ]
    if not idle:
        return []
    roles = "/".join(sorted({p.label for p in idle}))
    return [
        Finding(
            "idle",
            f"{len(idle)} of {len(workers)} {roles} processes used no CPU in {c.interval_s:g} s "
            f"(pids {_fmt_pids([p.pid for p in idle])}): started but given no work, or blocked "
            "(was the sampler running while this was measured?)",
            {"pids": [p.pid for p in idle], "interval_s": c.interval_s},
        )
    ]


def check_parallelism(
    pid: int,
    expected: Mapping[str, int] | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    sample_s: float = 0.0,
    max_threads_per_core: float = 1.0,
    registry: str | os.PathLike[str] | None = None,
    census_result: Census | None = None,
) -> ParallelismReport:
    """Check that the configured parallelism of the process tree under ``pid`` took effect.

    * ``expected`` — role -> process count, e.g. ``{"env_worker": 8}``. Roles
      are matched against ``register_worker`` roles; a role nobody registered
      is matched against unregistered processes' command labels (as shown by
      ``census``).
    * ``config`` — key -> intended value. Each registered worker (of the
      expected roles, or all when ``expected`` is empty) is checked: the key is
      looked up in its registered config, then in its thread settings
      (``OMP_NUM_THREADS`` & co., ``torch_num_threads``,
      ``torch_num_interop_threads``, ``blas_num_threads``). ``"1"``, ``1`` and
      ``1.0`` compare equal.
    * Oversubscription — the sum of threads per worker (thread-pool size from
      the registration where known, else the OS thread count) above
      ``max_threads_per_core`` × cores available (CPU affinity and cgroup
      quota of ``pid``).
    * ``sample_s > 0`` samples CPU use twice, that far apart, and reports
      workers that used none.

    ``census_result`` reuses an existing census instead of taking one.
    Raises ``ProcessLookupError`` for a pid that does not exist and
    ``ValueError`` for malformed arguments.
    """
    expected_ = _validate_expected(expected)
    intended = _validate_intended(config)
    sample_s = _check_seconds("sample_s", sample_s)
    if (
        isinstance(max_threads_per_core, bool)
        or not isinstance(max_threads_per_core, (int, float))
        or not max_threads_per_core > 0
    ):
        raise ValueError(f"max_threads_per_core must be > 0, got {max_threads_per_core!r}")
    c = (
        census_result
        if census_result is not None
        else census(pid, interval_s=sample_s, registry=registry)
    )

    full = c
    # Zombies have exited: they are not workers any more, whatever they registered.
    zombies = [p for p in c.processes if p.status == psutil.STATUS_ZOMBIE]
    if zombies:
        dead = {z.pid for z in zombies}
        c = replace(c, processes=tuple(p for p in c.processes if p.pid not in dead))

    observed: dict[str, int] = dict(c.roles())
    matched: dict[str, list[int]] = {r: [p.pid for p in c.workers(r)] for r in observed}
    for role in expected_:
        if role in observed:
            continue
        by_label = [p for p in c.processes if p.worker is None and p.label == role]
        observed[role] = len(by_label)
        matched[role] = [p.pid for p in by_label]

    # The processes the config, thread and idle checks look at.
    if expected_:
        wanted = {pid_ for role in expected_ for pid_ in matched.get(role, [])}
        workers = [p for p in c.processes if p.pid in wanted]
    elif c.workers():
        workers = c.workers()
    else:
        workers = [p for p in c.processes if p.pid != c.pid]

    per_worker = _threads_per_worker(workers)
    details: list[Finding] = []
    details += _count_findings(c, expected_, observed, matched)
    details += _config_findings(c, workers, intended)
    details += _oversubscription_findings(c, workers, per_worker, float(max_threads_per_core))
    details += _idle_findings(c, workers)

    notes = list(c.notes)
    if c.vanished:
        notes.insert(0, f"exited during the check: pids {_fmt_pids(c.vanished)}")
    for z in zombies:
        notes.append(
            f"pid {z.pid} ({z.label}) has exited and is not yet reaped by its parent "
            f"(pid {z.ppid}); not counted"
        )
    return ParallelismReport(
        pid=c.pid,
        ok=not details,
        observed=observed,
        expected=expected_,
        config=intended,
        details=tuple(details),
        notes=tuple(notes),
        cores_available=c.cores_available,
        threads_total=sum(n for n, _ in per_worker.values()) if per_worker else None,
        threads_per_worker=per_worker,
        census=full,
    )


# --------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class ThroughputComparison:
    """Env-step throughput at two worker counts.

    ``rate_a_per_s`` / ``rate_b_per_s`` are env steps per second: env steps per
    ``phase`` call divided by the phase's mean duration (or the rates given
    directly). ``change`` is ``rate_b / rate_a - 1``; ``ideal_change`` is what
    linear scaling with the worker count would give; ``scaling_efficiency`` is
    the achieved speed-up over the ideal one (``None`` when the worker count
    did not change). ``changed`` is ``|change| > tolerance``; ``ok`` is whether
    throughput moved in the direction of the worker change (or stayed put when
    the worker count did not change).
    """

    phase: str
    workers: tuple[int, int]
    rate_a_per_s: float
    rate_b_per_s: float
    change: float
    ideal_change: float
    scaling_efficiency: float | None
    tolerance: float
    changed: bool
    ok: bool
    loop_steps_per_s: tuple[float | None, float | None]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "workers": list(self.workers),
            "rate_a_per_s": self.rate_a_per_s,
            "rate_b_per_s": self.rate_b_per_s,
            "change": self.change,
            "ideal_change": self.ideal_change,
            "scaling_efficiency": self.scaling_efficiency,
            "tolerance": self.tolerance,
            "changed": self.changed,
            "ok": self.ok,
            "loop_steps_per_s": list(self.loop_steps_per_s),
            "message": self.message,
        }

    def __str__(self) -> str:
        return self.message


def _as_summary(run: Any, which: str) -> Any:
    if isinstance(getattr(run, "phases", None), Mapping):
        return run  # a Summary: phase name -> PhaseStats
    summary = getattr(run, "summary", None)
    if callable(summary):  # a Snapshot or a Profiler
        result = summary()
        if isinstance(getattr(result, "phases", None), Mapping):
            return result
    raise TypeError(
        f"run {which} must be a Summary, Snapshot or Profiler (or an env-steps/s number), "
        f"got {type(run).__name__}"
    )


def _rate(run: Any, which: str, phase: str, per_call: float) -> tuple[float, float | None]:
    """(env steps/s, loop steps/s or None) of one run."""
    if isinstance(run, bool):
        raise TypeError(f"run {which} must be a Summary or a number, got a bool")
    if isinstance(run, (int, float)):
        if not math.isfinite(run) or run <= 0:
            raise ValueError(f"run {which}: env steps/s must be a positive number, got {run!r}")
        return float(run), None
    summary = _as_summary(run, which)
    phases = summary.phases
    if phase not in phases:
        raise ValueError(
            f"run {which} has no phase {phase!r}; its phases are {sorted(phases)} "
            "(pass phase= the name of the env-step phase)"
        )
    stats = phases[phase]
    mean_ns = float(getattr(stats, "mean", 0.0) or 0.0)
    if getattr(stats, "count", 0) <= 0 or mean_ns <= 0:
        raise ValueError(f"run {which} has no {phase!r} samples to compare")
    loop = getattr(summary, "steps_per_s", None)
    loop_rate = float(loop) * per_call if isinstance(loop, (int, float)) and loop > 0 else None
    return per_call * 1e9 / mean_ns, loop_rate


def _pair(name: str, value: Any, kind: type) -> tuple[Any, Any]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise ValueError(f"{name} must be one value or a pair (run a, run b), got {value!r}")
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name} must hold positive numbers, got {value!r}")
        if kind is int and not isinstance(v, int):
            raise ValueError(f"{name} must hold positive integers, got {value!r}")
    return pair[0], pair[1]


def compare_throughput(
    a: Any,
    b: Any,
    *,
    workers: tuple[int, int] | Sequence[int],
    phase: str = "env",
    env_steps_per_call: float | tuple[float, float] = 1,
    tolerance: float = 0.10,
) -> ThroughputComparison:
    """Did env-step throughput change between two runs taken at different worker counts?

    ``a`` and ``b`` are Summaries (or Snapshots / Profilers, summarised here)
    of the same loop at ``workers=(workers_a, workers_b)``, or their env
    steps/s as plain numbers. The rate of a run is ``env_steps_per_call``
    (env steps one ``phase`` call performs: the vector env's ``num_envs``,
    one value or a pair) divided by the phase's mean duration — pass the pair
    when ``num_envs`` changed with the worker count, or the comparison reads a
    4× bigger batch as no change. ``tolerance`` is the relative change still
    called "did not move" (default 10%).

    The classic symptom this catches: "changed the worker count 1→4, env steps/s
    did not move: 1020→1040 (+2%)".
    """
    wa, wb = _pair("workers", workers, int)
    per_a, per_b = _pair("env_steps_per_call", env_steps_per_call, float)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise ValueError(f"tolerance must be a fraction >= 0 (0.1 = 10%), got {tolerance!r}")
    rate_a, loop_a = _rate(a, "a", phase, float(per_a))
    rate_b, loop_b = _rate(b, "b", phase, float(per_b))
    change = rate_b / rate_a - 1.0
    ideal = wb / wa - 1.0
    efficiency = (rate_b / rate_a) / (wb / wa) if wa != wb else None
    changed = abs(change) > tolerance
    if wa == wb:
        ok = not changed
    elif wb > wa:
        ok = change > tolerance
    else:  # fewer workers: a drop is expected; no drop means the removed ones did nothing
        ok = change < -tolerance
    figures = f"{rate_a:,.0f}→{rate_b:,.0f} ({change:+.0%})"
    what = f"{phase} steps/s"
    if wa == wb:
        msg = f"same worker count ({wa}); {what} {figures}"
    elif not changed:
        msg = (
            f"changed the worker count {wa}→{wb}, {what} did not move: {figures}; "
            f"linear scaling would give {rate_a * wb / wa:,.0f} — the extra workers do no useful "
            "work (check `gyreprof check PID`: fewer worker processes than configured, "
            "oversubscribed cores, or a bottleneck outside the workers)"
        )
    elif (change > 0) == (wb > wa):
        assert efficiency is not None
        msg = (
            f"changed the worker count {wa}→{wb}: {what} {figures}, "
            f"{efficiency:.0%} of linear scaling"
        )
    else:
        msg = (
            f"changed the worker count {wa}→{wb}: {what} moved the wrong way, {figures} — "
            "more workers made it slower (oversubscription or inter-process overhead)"
            if wb > wa
            else f"changed the worker count {wa}→{wb}: {what} rose, {figures} — the removed "
            "workers were costing throughput"
        )
    if loop_a is not None and loop_b is not None:
        msg += f"; whole loop {loop_a:,.0f}→{loop_b:,.0f} env steps/s ({loop_b / loop_a - 1:+.0%})"
    return ThroughputComparison(
        phase=phase,
        workers=(wa, wb),
        rate_a_per_s=rate_a,
        rate_b_per_s=rate_b,
        change=change,
        ideal_change=ideal,
        scaling_efficiency=efficiency,
        tolerance=float(tolerance),
        changed=changed,
        ok=ok,
        loop_steps_per_s=(loop_a, loop_b),
        message=msg,
    )
