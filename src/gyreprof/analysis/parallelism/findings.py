"""Did the configured parallelism take effect? Expected against observed, in plain words.

``check_parallelism(pid, expected={role: n}, config={key: value})`` compares
the census of the tree under ``pid`` with what was intended: worker counts
(envs built in the main process are told apart from worker processes), the
config the workers actually read and, when sampled, workers that used no CPU.
Each problem is a :class:`Finding` with the numbers behind it; ``ok`` says
there is none: the parallelism took effect.

Threads are judged by what ran. The census reads each thread's CPU time and
run-queue wait twice over the observation; a thread runnable at least half of
it is busy. Oversubscription (busy threads across the workers beyond the cores
the process may use) and workers running more busy threads than the
``num_threads`` they declared are *warnings*, beside ``ok``: the workers run, only
slower. A pool that never ran is a note, and gyreprof's own threads (named
``gyreprof-...``) are never counted.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import psutil

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.format import safe_text
from gyreprof.analysis.parallelism._text import fmt_pids, plural
from gyreprof.analysis.parallelism.census import Census, ProcessInfo, census, check_seconds
from gyreprof.analysis.parallelism.registry import THREAD_ENV_VARS, WorkerRecord
from gyreprof.model._serial import Record, serial_format

__all__ = [
    "PARALLELISM_FORMAT",
    "Finding",
    "ParallelismReport",
    "WorkerThreads",
    "check_parallelism",
]

PARALLELISM_FORMAT = "gyreprof.parallelism/1"

# Less CPU than one scheduler tick (10 ms) over the sampling interval counts as "no CPU".
_IDLE_CPU_S = 0.005
# With the threads' own nanosecond counts (schedstat): a worker stepping CartPole ten
# times a second uses more than this; one blocked in a read uses microseconds.
_IDLE_THREAD_CPU_S = 0.0005


@dataclass(frozen=True)
class Finding:
    """One problem found by ``check_parallelism``.

    ``kind`` is one of ``"count"`` (expected vs observed workers), ``"config"``
    (intended vs read config), ``"inline"`` (envs of a role built in the main
    process, no worker process: ``SyncVectorEnv``), ``"oversubscription"``,
    ``"idle"`` (workers that used no CPU while sampled), ``"registry"``
    (nothing registered to compare against). ``data`` holds the numbers behind ``message``.
    """

    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerThreads:
    """Threads one worker competes for the CPUs with, and where the number came from.

    ``source`` is ``"busy threads"`` (threads runnable at least half of the
    observation, gyreprof's own left out: the measured answer), else, where the
    threads could not be read, ``"declared num_threads"`` (``register_worker(...,
    num_threads=N)``), ``"thread pool size"`` or ``"OS threads"``. ``ran`` counts the
    user's threads that used any CPU, ``declared`` and ``pool`` are the declared
    count and the largest BLAS/OpenMP/torch pool the worker registered, ``own`` the
    gyreprof threads left out (``None`` where not known).
    """

    threads: int
    source: str
    ran: int | None = None
    declared: int | None = None
    pool: int | None = None
    own: int | None = None

    def __iter__(self) -> Iterator[int | str]:
        """``threads, source = w``: the ``(threads, source)`` pair this used to be."""
        return iter((self.threads, self.source))


@serial_format(PARALLELISM_FORMAT, derived=("exit_code", "findings", "roles"))
@dataclass(frozen=True)
class ParallelismReport(Record):
    """Result of ``check_parallelism``: ``ok`` when nothing was found.

    ``observed`` maps each role (expected or registered) to the number of
    worker processes seen with it (envs built in the main process are not
    worker processes: ``main_envs`` maps role to their count, and
    :meth:`describe` says both); ``findings`` lists plain-words problems (``details``
    has them with their kind and numbers); ``notes`` holds things worth knowing
    that are not problems (processes that exited during the check, fields that
    could not be read). ``threads_total`` is the sum of threads per worker used
    for the oversubscription check, ``threads_per_worker`` maps worker pid to
    its :class:`WorkerThreads`.
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
    threads_per_worker: dict[int, WorkerThreads]
    census: Census
    main_envs: dict[str, int] = field(default_factory=dict)
    # things that slow the workers down without undoing the parallelism
    # (oversubscription, more busy threads than declared): printed, not failures
    warnings: tuple[Finding, ...] = ()

    @property
    def findings(self) -> list[str]:
        """Plain-words findings (empty when ``ok``)."""
        return [f.message for f in self.details]

    @property
    def exit_code(self) -> int:
        """0 when ok (warnings or not), 1 when there are findings (2 is the CLI's usage
        error)."""
        return 0 if self.ok else 1

    def describe(self, role: str) -> str:
        """What was seen of ``role`` in plain words.

        For example ``4 env_worker processes (pids ...), and 1 env built in the
        main process (pid ...)``, or ``no env_worker worker processes; 4 envs
        built in the main process (pid ...)`` for a ``SyncVectorEnv``.
        """
        if role in self.census.roles() or role in self.main_envs:
            return self.census.describe_role(role)
        return plural(self.observed.get(role, 0), "process", "processes")

    def kinds(self) -> set[str]:
        """The kinds of findings present (``"count"``, ``"config"``, ...)."""
        return {f.kind for f in self.details}

    def warning_kinds(self) -> set[str]:
        """The kinds of warnings present (``"oversubscription"``, ``"declared"``)."""
        return {f.kind for f in self.warnings}

    @property
    def roles(self) -> dict[str, str]:
        """What was seen of each observed role, in plain words (:meth:`describe`)."""
        return {role: self.describe(role) for role in self.observed}

    def __str__(self) -> str:
        head = f"parallelism check of pid {self.pid}: " + (
            "ok" if self.ok else f"{len(self.details)} finding(s)"
        )
        if self.warnings:
            head += f", {plural(len(self.warnings), 'warning')}"
        lines = [head]
        roles = sorted(set(self.expected) | set(self.observed))
        for role in roles:
            want = self.expected.get(role)
            lines.append(
                f"  {role}: {self.describe(role)}"
                + (f"; {want} expected" if want is not None else "")
            )
        if self.threads_total is not None:
            sources = ", ".join(sorted({w.source for w in self.threads_per_worker.values()}))
            lines.append(
                f"  threads across workers: {self.threads_total} ({sources}) on "
                f"{self.census.limits.describe()}"
            )
        else:
            lines.append(f"  {self.census.limits.describe()}")
        lines += [f"- {msg}" for msg in self.findings]
        lines += [f"warning: {w.message}" for w in self.warnings]
        lines += [f"note: {n}" for n in self.notes]
        return safe_text("\n".join(lines))


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
        raise InvalidValueError(
            f"expected must map role -> process count, got {type(expected).__name__}"
        )
    out: dict[str, int] = {}
    for role, count in expected.items():
        if not isinstance(role, str) or not role:
            raise InvalidValueError(f"expected: role names must be non-empty strings, got {role!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidValueError(
                f"expected[{role!r}] must be a process count (int >= 0), got {count!r}"
            )
        out[role] = count
    return out


def _validate_intended(config: Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidValueError(
            f"config must map key -> intended value, got {type(config).__name__}"
        )
    for key in config:
        if not isinstance(key, str) or not key:
            raise InvalidValueError(f"config keys must be non-empty strings, got {key!r}")
    return dict(config)


def _count_findings(
    c: Census, expected: dict[str, int], observed: dict[str, int], matched: dict[str, list[int]]
) -> list[Finding]:
    """Expected against observed worker processes, per role; inline envs without workers."""
    findings: list[Finding] = []
    main_envs = c.main_envs()
    for role, want in expected.items():
        got = observed.get(role, 0)
        if got == want:
            continue
        pids = matched.get(role, [])
        data: dict[str, Any] = {"role": role, "expected": want, "observed": got, "pids": pids}
        were = "was" if want == 1 else "were"
        if got == 0 and role in main_envs:
            data["main_envs"] = main_envs[role]
            msg = f"{role}: no worker processes where {want} {were} expected; " + _inline(c, role)
        else:
            msg = f"{role}: {plural(got, 'process', 'processes')} where {want} {were} expected"
            if got == 0 and want > 0:
                msg += _none_found(c, role)
            elif got < want:
                msg += _too_few(c, role, pids, data)
            else:
                msg += f" (pids {fmt_pids(pids)}): more workers than configured"
        findings.append(Finding("count", msg, data))
    for role, envs in sorted(main_envs.items()):
        if role not in expected and not c.workers(role) and envs > 1:
            msg = f"{role}: no worker processes; " + _inline(c, role)
            findings.append(Finding("inline", msg, {"role": role, "main_envs": envs}))
    return findings


def _inline(c: Census, role: str) -> str:
    """Why envs built in the main process, with no worker process, are not parallel."""
    mains = [p.pid for p in c.processes if p.main_envs is not None and p.main_envs.role == role]
    envs = c.main_envs().get(role, 0)
    return (
        f"{plural(envs, 'env')} built in the main process (pid {fmt_pids(mains)}) run there "
        "one after another (a synchronous vector env such as SyncVectorEnv or DummyVecEnv, or "
        "a worker-count setting that never reached the launcher); AsyncVectorEnv or "
        "SubprocVecEnv runs them in worker processes"
    )


def _none_found(c: Census, role: str) -> str:
    """No process holds ``role``: what the tree holds instead."""
    registered = c.workers()
    unregistered = [
        p for p in c.processes if p.worker is None and p.main_envs is None and p.pid != c.pid
    ]
    if not registered and unregistered:
        groups = Counter(p.label for p in unregistered)
        listed = ", ".join(f"{n} × {label}" for label, n in groups.most_common())
        children = plural(
            len(unregistered), "unregistered child process", "unregistered child processes"
        )
        return (
            f". No process in the tree registered as {role!r}; it has {children}"
            f" ({listed}). Call gp.register_worker({role!r}) at worker start (in the env "
            "factory is fine: an env built in the main process is told apart from the "
            "workers) so the census can tell workers apart"
        )
    if not unregistered and not registered:
        return (
            f": the tree of pid {c.pid} is a single process, so no worker processes "
            "were ever started (a synchronous backend, or num_workers=0)"
        )
    seen = ", ".join(f"{r} ({n})" for r, n in sorted(c.roles().items())) or "none"
    msg = f"; registered roles in the tree: {seen}"
    if unregistered:
        msg += (
            f"; {len(unregistered)} other child process(es) did not register "
            f"(pids {fmt_pids([p.pid for p in unregistered])})"
        )
    return msg


def _too_few(c: Census, role: str, pids: list[int], data: dict[str, Any]) -> str:
    """Some workers of ``role`` but fewer than expected: several envs per process, or exits."""
    inline = [p for p in c.workers(role) if p.worker is not None and p.worker.registrations > 1]
    if inline:
        p = inline[0]
        assert p.worker is not None
        msg = (
            f"; pid {p.pid} built {p.worker.registrations} {role!r} envs: those run inline "
            "in one process (a synchronous backend, or a worker-count setting that never "
            "reached the launcher)"
        )
        data["inline_registrations"] = {
            str(q.pid): q.worker.registrations for q in inline if q.worker is not None
        }
    else:
        msg = f" (pids {fmt_pids(pids)})"
    if c.vanished:
        msg += f"; {plural(len(c.vanished), 'process', 'processes')} exited during the check"
    return msg


def _config_findings(
    c: Census, workers: list[ProcessInfo], intended: dict[str, Any]
) -> list[Finding]:
    """Intended config against what each registered worker read.

    With no worker process registered, the registrations of envs built in
    the main process (``SyncVectorEnv``) are compared instead: that is where
    those envs read their settings.
    """
    if not intended:
        return []
    records = [p.worker for p in workers if p.worker is not None]
    if not records:
        records = [p.main_envs for p in c.processes if p.main_envs is not None]
    if not records:
        return [
            Finding(
                "registry",
                f"cannot compare config ({', '.join(sorted(intended))}): no process in the tree "
                f"of pid {c.pid} registered as a worker; call gp.register_worker(role, key=value, "
                "...) in each worker with the values it actually read",
                {"keys": sorted(intended)},
            )
        ]
    roles = sorted({r.role for r in records})
    total = len(records)
    who = f"{total} {'/'.join(roles)} {'process' if total == 1 else 'processes'}"
    findings: list[Finding] = []
    for key, want in intended.items():
        findings += _config_key_findings(key, want, records, who)
    return findings


def _config_key_findings(
    key: str, want: Any, records: list[WorkerRecord], who: str
) -> list[Finding]:
    """One config key: the workers running with another value, and those that never read it."""
    missing: list[int] = []
    wrong: dict[Any, list[tuple[int, Any]]] = {}
    for record in records:
        found, value = record.lookup(key)
        if not found:
            missing.append(record.pid)
        elif _canon(value) != _canon(want):
            wrong.setdefault(_canon(value), []).append((record.pid, value))
    findings: list[Finding] = []
    for entries in wrong.values():
        pids = [pid for pid, _ in entries]
        value = entries[0][1]
        findings.append(
            Finding(
                "config",
                f"{key}: intended {want!r}, but {len(pids)} of {who} run with {value!r} "
                f"(pids {fmt_pids(pids)}) — the setting did not reach them (overridden "
                "upstream, a different key read, or set after the workers started)",
                {"key": key, "intended": want, "actual": value, "pids": pids},
            )
        )
    if not missing:
        return findings
    if key in THREAD_ENV_VARS:
        detail = (
            f"it is not set in {len(missing)} of {who} (pids {fmt_pids(missing)}), so "
            "their libraries use their default (usually one thread per core) — set it "
            "in the environment the workers start with"
        )
    else:
        detail = (
            f"{len(missing)} of {who} never read it (pids {fmt_pids(missing)}; not in "
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


def _threads_per_worker(workers: list[ProcessInfo]) -> dict[int, WorkerThreads]:
    """Per worker, the threads it competes for the CPUs with.

    Measured where /proc can be read: the user's threads busy during the
    observation. An idle pool (BLAS/OpenMP threads that never ran) adds nothing,
    and gyreprof's own threads are left out. Where the threads cannot be read:
    the declared ``num_threads``, else the pool size, else the OS thread count.
    """
    out: dict[int, WorkerThreads] = {}
    for p in workers:
        rec = p.worker
        declared = rec.declared_threads() if rec is not None else None
        pool = rec.compute_threads() if rec is not None else None
        user = p.user_threads()
        if user is not None and p.threads is not None:
            busy = sum(1 for t in user if t.busy)
            ran = sum(1 for t in user if t.ran)
            own = len(p.threads) - len(user)
            out[p.pid] = WorkerThreads(busy, "busy threads", ran, declared, pool, own)
        elif declared is not None:
            out[p.pid] = WorkerThreads(declared, "declared num_threads", None, declared, pool)
        elif pool is not None:
            out[p.pid] = WorkerThreads(pool, "thread pool size", None, declared, pool)
        elif p.num_threads is not None:
            out[p.pid] = WorkerThreads(p.num_threads, "OS threads", None, declared, pool)
    return out


def _declared_warnings(
    workers: list[ProcessInfo], per_worker: dict[int, WorkerThreads]
) -> list[Finding]:
    """Workers that ran more busy threads than the ``num_threads`` they declared."""
    over = {
        pid: w
        for pid, w in per_worker.items()
        if w.source == "busy threads" and w.declared is not None and w.threads > w.declared
    }
    if not over:
        return []
    labels = {p.pid: p.label for p in workers}
    pids = sorted(over)
    declared = sorted({w.declared for w in over.values() if w.declared is not None})
    busy = max(w.threads for w in over.values())
    who = "/".join(sorted({labels.get(pid, "?") for pid in pids}))
    return [
        Finding(
            "declared",
            f"{plural(len(pids), who + ' process', who + ' processes')} (pids {fmt_pids(pids)}) "
            f"declared num_threads={'/'.join(map(str, declared))} but ran up to {busy} busy "
            "threads: the cap did not reach every library (OMP_NUM_THREADS and "
            "threadpoolctl.threadpool_limits cover BLAS/OpenMP, torch.set_num_threads torch)",
            {"pids": pids, "declared": declared, "busy_max": busy},
        )
    ]


def _thread_notes(
    c: Census, workers: list[ProcessInfo], per_worker: dict[int, WorkerThreads]
) -> list[str]:
    """Idle pools (mentioned, not counted) and gyreprof's own threads (left out)."""
    notes: list[str] = []
    span_s = f"the {c.interval_s:g} s observed" if c.interval_s > 0 else "their lifetime"
    idle: dict[tuple[int, int], list[int]] = {}
    for pid, w in per_worker.items():
        if w.source == "busy threads" and w.pool is not None and w.ran is not None:
            if w.pool > max(w.ran, 1):
                idle.setdefault((w.pool, w.ran), []).append(pid)
    labels = {p.pid: p.label for p in workers}
    for (pool, ran), pids in sorted(idle.items()):
        who = "/".join(sorted({labels.get(pid, "?") for pid in pids}))
        notes.append(
            f"idle thread pool, not counted: {plural(len(pids), who + ' process', who + ' processes')}"
            f" (pids {fmt_pids(sorted(pids))}) hold a thread pool of {pool} threads "
            f"(BLAS/OpenMP/torch) of which {ran} ran during {span_s}"
        )
    own = {pid: w.own for pid, w in per_worker.items() if w.own}
    if own:
        names = sorted(
            {
                t.name
                for p in workers
                if p.pid in own and p.threads is not None
                for t in p.threads
                if t.own
            }
        )
        notes.append(
            f"gyreprof's own threads ({', '.join(names)}) not counted: "
            f"{sum(own.values())} in {plural(len(own), 'worker')}"
        )
    return notes


def _oversubscription_findings(
    c: Census,
    workers: list[ProcessInfo],
    per_worker: dict[int, WorkerThreads],
    max_threads_per_core: float,
) -> list[Finding]:
    if not per_worker:
        return []
    total = sum(w.threads for w in per_worker.values())
    cores = c.cores_available
    if total <= cores * max_threads_per_core:
        return []
    n_workers = len(per_worker)
    counts = [w.threads for w in per_worker.values()]
    lo, hi = min(counts), max(counts)
    sources = sorted({w.source for w in per_worker.values()})
    roles = sorted({p.label for p in workers if p.pid in per_worker})
    who = f"{n_workers} {'/'.join(roles)} {'process' if n_workers == 1 else 'processes'}"
    each = f"{hi} thread{'s' if hi != 1 else ''}" if lo == hi else f"{lo}-{hi} threads"
    if total == 0:
        return []
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


def _used_no_cpu(p: ProcessInfo, interval_s: float) -> bool:
    """Per thread (nanosecond counts) where /proc has them, else the process's tick counts."""
    if p.threads is not None:
        return sum(t.cpu_s for t in p.threads) < _IDLE_THREAD_CPU_S
    return p.cpu_percent is not None and p.cpu_percent / 100.0 * interval_s < _IDLE_CPU_S


def _idle_findings(c: Census, workers: list[ProcessInfo]) -> list[Finding]:
    if c.interval_s <= 0:
        return []
    idle = [p for p in workers if _used_no_cpu(p, c.interval_s)]
    if not idle:
        return []
    roles = "/".join(sorted({p.label for p in idle}))
    return [
        Finding(
            "idle",
            f"{len(idle)} of {len(workers)} {roles} processes used no CPU in {c.interval_s:g} s "
            f"(pids {fmt_pids([p.pid for p in idle])}): started but given no work, or blocked "
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
    * Oversubscription, a warning — the sum of busy threads per worker (the
      user's threads runnable at least half of the observation; where /proc
      cannot be read, the declared ``num_threads``, else the pool size, else
      the OS thread count) above ``max_threads_per_core`` × cores available
      (CPU affinity and cgroup quota of ``pid``). A worker that declared
      ``num_threads=N`` and ran more busy threads is a warning too.
    * ``sample_s > 0`` observes for that long (two readings) and reports
      workers that used no CPU; ``0`` judges the threads over their lifetimes.

    ``census_result`` reuses an existing census instead of taking one.
    Raises ``ProcessLookupError`` for a pid that does not exist and
    ``ValueError`` for malformed arguments.
    """
    expected_ = _validate_expected(expected)
    intended = _validate_intended(config)
    sample_s = check_seconds("sample_s", sample_s)
    if (
        isinstance(max_threads_per_core, bool)
        or not isinstance(max_threads_per_core, (int, float))
        or not max_threads_per_core > 0
    ):
        raise InvalidValueError(f"max_threads_per_core must be > 0, got {max_threads_per_core!r}")
    c = (
        census_result
        if census_result is not None
        else census(pid, interval_s=sample_s, registry=registry)
    )

    full = c
    c, zombies = _without_zombies(c)
    observed, matched = _observe(c, expected_)
    workers = _checked_workers(c, expected_, matched)
    per_worker = _threads_per_worker(workers)
    details: list[Finding] = []
    details += _count_findings(c, expected_, observed, matched)
    details += _config_findings(c, workers, intended)
    details += _idle_findings(c, workers)
    warnings = _oversubscription_findings(c, workers, per_worker, float(max_threads_per_core))
    warnings += _declared_warnings(workers, per_worker)

    notes = _notes(c, zombies) + _thread_notes(c, workers, per_worker)
    return ParallelismReport(
        pid=c.pid,
        ok=not details,
        warnings=tuple(warnings),
        observed=observed,
        expected=expected_,
        config=intended,
        details=tuple(details),
        notes=tuple(notes),
        cores_available=c.cores_available,
        threads_total=sum(w.threads for w in per_worker.values()) if per_worker else None,
        threads_per_worker=per_worker,
        census=full,
        main_envs=c.main_envs(),
    )


def _without_zombies(c: Census) -> tuple[Census, list[ProcessInfo]]:
    """Zombies have exited: they are not workers any more, whatever they registered."""
    zombies = [p for p in c.processes if p.status == psutil.STATUS_ZOMBIE]
    if not zombies:
        return c, []
    dead = {z.pid for z in zombies}
    return replace(c, processes=tuple(p for p in c.processes if p.pid not in dead)), zombies


def _observe(c: Census, expected: dict[str, int]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Role -> worker process count, and role -> their pids.

    Registered roles count worker processes (a role whose envs were all built
    in the main process counts 0); an expected role nobody registered is
    matched against the command labels of unregistered processes.
    """
    observed: dict[str, int] = dict(c.roles())
    for role in c.main_envs():
        observed.setdefault(role, 0)
    matched: dict[str, list[int]] = {r: [p.pid for p in c.workers(r)] for r in observed}
    for role in expected:
        if role in observed:
            continue
        by_label = [
            p for p in c.processes if p.worker is None and p.main_envs is None and p.label == role
        ]
        observed[role] = len(by_label)
        matched[role] = [p.pid for p in by_label]
    return observed, matched


def _checked_workers(
    c: Census, expected: dict[str, int], matched: dict[str, list[int]]
) -> list[ProcessInfo]:
    """The processes the config, thread and idle checks look at."""
    if expected:
        wanted = {pid for role in expected for pid in matched.get(role, [])}
        return [p for p in c.processes if p.pid in wanted]
    if c.workers():
        return c.workers()
    return [p for p in c.processes if p.pid != c.pid]


def _notes(c: Census, zombies: list[ProcessInfo]) -> list[str]:
    notes = list(c.notes)
    if c.vanished:
        notes.insert(0, f"exited during the check: pids {fmt_pids(c.vanished)}")
    for z in zombies:
        notes.append(
            f"pid {z.pid} ({z.label}) has exited and is not yet reaped by its parent "
            f"(pid {z.ppid}); not counted"
        )
    return notes
