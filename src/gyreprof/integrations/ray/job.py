"""A Ray job under ``gyreprof run``: every worker of the job, on every node, and its
records brought home through Ray.

**The driver.** When an instrumented process calls ``ray.init`` (a local cluster, one
at ``address=...``, or one named by ``RAY_ADDRESS``), :func:`merge_runtime_env` adds
to the job's runtime environment Ray's ``worker_process_setup_hook`` and a few
environment variables (the run's id, the name of the job's inbox actor): the user's
own ``runtime_env`` is merged, never replaced (a setup hook of theirs runs first).
Only this job's workers get them: processes of other jobs are never touched. Right
after ``ray.init`` the driver starts the job's *inbox*, a detached named actor
(:class:`Inbox`, no CPU, on the driver's node when it can), and at the end of the job
(``ray.shutdown``, or the driver's exit) asks every worker for its final record,
writes what arrived into its run folder as the launcher's own records and ends the
inbox. The workers that only sampled are written by node and role: one merged sampler
snapshot and one record of the group's processes with each one's own figures
(``group-<n>.sampler.snap``, ``group-<n>.json``); a worker that trained, or is alone in
its node and role, keeps its own files (``<pid>.sampler.snap``, ``<pid>.trainer.snap``,
and ``<pid>.done.json`` with the worker's node).

**The hook.** Ray runs the setup hook in each new worker process of the job before
any task. A hook whose module cannot be imported makes Ray end the worker (so a
node without gyreprof would lose the job): the hook Ray gets is a small function
pickled by value (:func:`_hook`), which imports gyreprof itself, and on a node where
that fails reports the node to the inbox and returns: the worker runs on,
uninstrumented. Where it imports, ``_auto.ray_worker.setup_worker`` instruments the
process as the launcher's bootstrap does (a run folder of the node's own, under the
temp folder) and starts its sender thread (:func:`start_sender`).

**The sender** (one daemon thread per worker): a long poll on the inbox
(``wait_flush``), which returns when the driver asks for the final records or after
``GYREPROF_RAY_PERIOD_S`` seconds (2 by default; longer in a fleet of more than 6
workers: 0.3 s a worker, at most 600 s, so that receiving the fleet's records costs
the inbox's node about 1% of one core, see :class:`Inbox`); each time, when the
process recorded something new, it sends its snapshots (all threads merged) and its
process record to the inbox. Off the hot path: the recording threads are never stopped
(the Profilers' readers are lock-free). An actor the job ends (RLlib stops its env
runners before ``ray.shutdown``) sends its final record from its exit handlers; a
worker killed outright, or whose node dies, keeps what it last sent. A worker whose final
record went home, or that exits, removes its files from its node's run folder.

**Ray's loop shape.** A ``ray.get`` / ``ray.wait`` on refs that the waiting training
thread itself submitted (``.remote()``) since its last update is its own collect (a
synchronous loop: the actors work only while it waits); any other ref (submitted by
another thread, or before the update: a pipeline) feeds it.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import records as rec
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import Patches, warn

__all__ = [
    "ENV_INBOX",
    "ENV_PERIOD",
    "ENV_RAY_RUN",
    "Inbox",
    "finish",
    "install",
    "merge_runtime_env",
    "start_sender",
    "tell_missing_here",
]

ENV_RAY_RUN = "GYREPROF_RAY_RUN"  # the run's id, in each worker of the job
ENV_INBOX = "GYREPROF_RAY_INBOX"  # the inbox actor's name (namespace NAMESPACE)
ENV_PERIOD = "GYREPROF_RAY_PERIOD_S"  # seconds between a worker's periodic sends
ENV_WORKER = "GYREPROF_RAY_WORKER"  # set in a worker instrumented by the hook
NAMESPACE = "gyreprof"
RAY_JOB_FILE = "ray-job.json"  # the driver's node and the job's notes, in the run folder
DEFAULT_PERIOD_S = 2.0
FINAL_WAIT_S = 15.0  # how long the driver waits for the workers' final records

_patches = Patches()
_lock = threading.Lock()
_inbox: Any = None  # the driver's inbox handle while a job is open
_inbox_name = ""
_jobs = 0  # ray.init calls of this driver that opened a job


# ------------------------------------------------------------ the job's runtime env


def _ray_hook_env() -> str:
    try:
        from ray._private import ray_constants

        return str(ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR)
    except Exception:  # noqa: BLE001 - the name Ray has used since 2.8
        return "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"


_HOOK_SOURCE = '''
def gyreprof_worker_setup(_user=None, _inbox="", _namespace=""):
    """gyreprof's worker setup (its ray.integrations.ray.job): the job's own hook first,
    then gyreprof's instrumentation, or a report of a node where gyreprof is missing."""
    if _user is not None:
        if isinstance(_user, str):
            import importlib

            mod, _, name = _user.rpartition(".")
            getattr(importlib.import_module(mod), name)()
        else:
            _user()
    try:
        from gyreprof.integrations._auto.ray_worker import setup_worker
    except Exception as exc:  # gyreprof is not importable on this node: the job runs on
        import threading

        why = f"{type(exc).__name__}: {exc}"
        threading.Thread(
            target=_tell_missing, args=(_inbox, _namespace, why), daemon=True
        ).start()
        return
    setup_worker()


def _tell_missing(inbox, namespace, why):
    import os
    import socket
    import time

    import ray

    try:
        node_id = ray.get_runtime_context().get_node_id()
        node_ip = ray.util.get_node_ip_address()
    except Exception:
        node_id, node_ip = "", ""
    for _ in range(120):
        try:
            actor = ray.get_actor(inbox, namespace=namespace)
            actor.missing.remote(node_id, node_ip, socket.gethostname(), os.getpid(), why)
            return
        except Exception:
            time.sleep(0.5)
'''


def _hook(user: Any, inbox: str) -> Any:
    """The setup hook Ray gets: a function of a module no worker imports (so cloudpickle
    sends it by value, and a node without gyreprof can still run it), with the user's
    own hook and the inbox's name as its defaults."""
    space: dict[str, Any] = {"__name__": "gyreprof_ray_setup"}
    exec(compile(_HOOK_SOURCE, "<gyreprof ray setup hook>", "exec"), space)  # noqa: S102
    fn = space["gyreprof_worker_setup"]
    fn.__defaults__ = (user, inbox, NAMESPACE)
    return fn


def merge_runtime_env(
    user: Mapping[str, Any] | None, env_vars: Mapping[str, str], inbox: str
) -> dict[str, Any]:
    """The user's ``runtime_env`` (None for none) with gyreprof's ``env_vars`` added (the
    user's own values win on a name both set) and the setup hook: a new dict, the user's
    is left as it was. A ``runtime_env`` that already sets Ray's hook variable itself
    gets the variables only (its hook is kept, gyreprof's is not added)."""
    if user is not None and not isinstance(user, Mapping):
        from gyreprof._support.errors import InvalidValueError

        raise InvalidValueError(f"runtime_env must be a dict, got {type(user).__name__}")
    out = dict(user or {})
    given = out.get("env_vars") or {}
    if not isinstance(given, Mapping):
        from gyreprof._support.errors import InvalidValueError

        raise InvalidValueError(
            f"runtime_env['env_vars'] must be a dict, got {type(given).__name__}"
        )
    merged = {**dict(env_vars), **dict(given)}
    out["env_vars"] = merged
    if _ray_hook_env() in given:
        return out
    out["worker_process_setup_hook"] = _hook(out.get("worker_process_setup_hook"), inbox)
    return out


def _period() -> float:
    try:
        period = float(os.environ.get(ENV_PERIOD, DEFAULT_PERIOD_S))
    except ValueError:
        return DEFAULT_PERIOD_S
    return period if 0.05 <= period <= 600 else DEFAULT_PERIOD_S


def _job_env(inbox: str) -> dict[str, str]:
    env = {ENV_RAY_RUN: st.run_id or "run", ENV_INBOX: inbox}
    if ENV_PERIOD in os.environ:
        env[ENV_PERIOD] = os.environ[ENV_PERIOD]
    return env


def _with_runtime_env(kwargs: dict[str, Any], inbox: str) -> dict[str, Any]:
    """``ray.init``'s keyword arguments with the job's runtime env merged (into
    ``job_config``'s when the runtime env is given there)."""
    out = dict(kwargs)
    job_config: Any = out.get("job_config")
    if out.get("runtime_env") is None and getattr(job_config, "runtime_env", None):
        merged = merge_runtime_env(job_config.runtime_env, _job_env(inbox), inbox)
        job_config.set_runtime_env(merged)
        return out
    out["runtime_env"] = merge_runtime_env(out.get("runtime_env"), _job_env(inbox), inbox)
    return out


# ------------------------------------------------------------ the driver


def _is_driver() -> bool:
    return st.run_dir is not None and not os.environ.get(ENV_WORKER)


def _init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ray.init``: the job's runtime env merged, then the inbox started (see the module
    doc); a second ``ray.init`` of a connected driver passes straight through."""
    ray = sys.modules.get("ray")
    if ray is None or not _is_driver() or ray.is_initialized():
        return wrapped(*args, **kwargs)
    global _jobs
    _jobs += 1  # a driver that shuts Ray down and starts again gets a new inbox
    name = f"gyreprof-inbox-{st.run_id or 'run'}-{os.getpid()}-{_jobs}"
    try:
        kwargs = _with_runtime_env(kwargs, name)
    except ValueError:  # not a runtime env: Ray says so in its own words
        return wrapped(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the job runs, its workers uninstrumented
        warn(f"could not add gyreprof to the Ray job's runtime_env ({exc!r})")
        return wrapped(*args, **kwargs)
    out = wrapped(*args, **kwargs)
    try:
        _start_inbox(ray, name)
    except Exception as exc:  # noqa: BLE001 - never into the user's code
        warn(f"could not start the Ray job's record inbox ({exc!r}); workers keep theirs")
    return out


def _start_inbox(ray: ModuleType, name: str) -> None:
    global _inbox, _inbox_name
    opts: dict[str, Any] = dict(
        name=name,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        num_cpus=0,
        max_concurrency=8192,
    )
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=here, soft=True)
    except Exception:  # noqa: BLE001, S110 - anywhere will do
        pass
    handle = _inbox_class(ray).options(**opts).remote()
    with _lock:
        _inbox, _inbox_name = handle, name
    atexit.register(finish)  # after Ray's own exit handler: it runs first


def _shutdown(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not kwargs.get("_exiting_interpreter"):
        finish()
    return wrapped(*args, **kwargs)


REFRESH_WAIT_S = 5.0  # how long a ray.kill waits for the actor's fresh record


def _kill(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ray.kill(actor)`` by the driver (RLlib's stop, the user's own): the actor sends a
    fresh record first (its exit handlers will not run), then it is killed."""
    inbox = _inbox
    actor = args[0] if args else kwargs.get("actor")
    if inbox is not None and actor is not None:
        try:
            _refresh(inbox, actor)
        except Exception:  # noqa: BLE001, S110 - never into the user's code: kill anyway
            pass
    return wrapped(*args, **kwargs)


def _refresh(inbox: Any, actor: Any) -> None:
    ray = sys.modules["ray"]
    aid = getattr(actor, "_actor_id", None)
    if aid is None:
        return
    aid = aid.hex()
    before = ray.get(inbox.refresh.remote(aid), timeout=REFRESH_WAIT_S)
    if before < 0:
        return  # an actor gyreprof does not instrument (its node lacks it, the inbox itself)
    end = time.monotonic() + REFRESH_WAIT_S
    while time.monotonic() < end:
        if ray.get(inbox.sent.remote(aid), timeout=REFRESH_WAIT_S) > before:
            return
        time.sleep(0.02)


def finish(timeout_s: float = FINAL_WAIT_S) -> int:
    """End the job's collection (once): ask every worker for its final record, wait up to
    ``timeout_s`` for them, write what arrived into the run folder and end the inbox;
    the number of worker processes written."""
    global _inbox
    with _lock:
        inbox, _inbox = _inbox, None
    if inbox is None or st.run_dir is None:
        return 0
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return 0
    try:
        got, missing = _gather(ray, inbox, timeout_s)
        return write_records(st.run_dir, got, missing, _driver_node(ray))
    except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
        warn(f"could not bring the Ray workers' records home ({exc!r})")
        return 0
    finally:
        try:
            ray.kill(inbox)
        except Exception:  # noqa: BLE001, S110 - gone with the cluster
            pass


def _gather(ray: Any, inbox: Any, timeout_s: float) -> tuple[list[dict[str, Any]], list[Any]]:
    ray.get(inbox.flush.remote(), timeout=timeout_s)
    end = time.monotonic() + timeout_s
    settle = time.monotonic() + min(1.0, timeout_s)  # every live sender answers the flush
    while time.monotonic() < end:
        known, final = ray.get(inbox.status.remote(), timeout=timeout_s)
        if final >= known and time.monotonic() >= settle:
            break
        time.sleep(0.1)
    got, missing = ray.get(inbox.take.remote(), timeout=timeout_s)
    return list(got), list(missing)


def _driver_node(ray: Any) -> dict[str, Any]:
    try:
        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "node_id": ctx.get_node_id(), "node_ip": _node_ip(ray)}
    except Exception:  # noqa: BLE001 - the driver's node is informative only
        return {"pid": os.getpid(), "node_id": "", "node_ip": ""}


def _node_ip(ray: Any) -> str:
    try:
        return str(ray.util.get_node_ip_address())
    except Exception:  # noqa: BLE001 - informative only
        return ""


def write_records(
    run_dir: Path,
    got: list[dict[str, Any]],
    missing: list[Any],
    driver: dict[str, Any] | None = None,
) -> int:
    """Write the workers' records (the inbox's payloads) into ``run_dir`` as the launcher's
    own, and the job's file (:data:`RAY_JOB_FILE`: the driver's node, the nodes where
    gyreprof was missing, the job's notes); the number of processes written.

    The workers that only sampled are written by node and role (:func:`_write_group`):
    their samplers merged into one snapshot, each process's record and own figures in
    one group record beside it, so a job of 1,024 workers on 16 nodes leaves a few dozen
    files, not thousands. A worker that trained, or that is alone in its node and role,
    keeps its own files (``<pid>.sampler.snap``, ``<pid>.trainer.snap``,
    ``<pid>.done.json``): its trainer and its whole snapshot are its own."""
    import json

    from gyreprof._support.format import safe_text
    from gyreprof._support.io import write_atomic

    notes: list[str] = []
    written = 0
    periodic = 0
    nodes: set[str] = set()
    groups: dict[tuple[str, str], list[tuple[rec.ProcessRecord, bytes]]] = {}
    alone: list[tuple[rec.ProcessRecord, dict[str, Any]]] = []
    seen = _grouped_pids(run_dir)  # an earlier job's groups in the same folder
    for p in sorted(got, key=lambda p: (str(p.get("node_id")), int(p.get("pid", 0)))):
        try:
            record = rec.ProcessRecord.from_json(str(p["record"]))
            pid = record.pid
            if (
                pid in seen
                or rec.done_path(run_dir, pid).exists()
                or rec.start_path(run_dir, pid).exists()
            ):
                notes.append(
                    f"Ray: pid {pid} on node {record.node_ip or '?'} has the pid of a process "
                    "already in the run folder; its record is left out"
                )
                continue
            seen.add(pid)
            if p.get("sites"):  # its stack samples: a small file of its own, grouped or not
                write_atomic(rec.sites_path(run_dir, pid), bytes(p["sites"]))
            if p.get("trainer") is None and p.get("sampler") is not None:
                groups.setdefault((record.node_id, record.role), []).append(
                    (record, bytes(p["sampler"]))
                )
            else:
                alone.append((record, p))
        except (KeyError, TypeError, ValueError, OSError) as exc:
            notes.append(f"Ray: a worker's record could not be written ({exc})")
    n = max(rec.group_numbers(run_dir), default=-1) + 1
    for members in groups.values():
        try:
            done = _write_group(run_dir, n, members) if len(members) > 1 else []
        except OSError as exc:
            notes.append(
                f"Ray: the records of {len(members)} worker processes on node "
                f"{members[0][0].node_ip or '?'} could not be written ({exc})"
            )
            continue
        if not done:  # alone in its node and role, or snapshots that do not merge
            alone += [(record, {"sampler": data}) for record, data in members]
            continue
        n += 1
        written += len(done)
        nodes.update(r.node_id for r in done)
        periodic += sum(r.how == "ray-periodic" for r in done)
    for record, p in alone:
        try:
            for side in ("sampler", "trainer"):
                if p.get(side) is not None:  # a side with no events was not sent
                    write_atomic(rec.snap_path(run_dir, record.pid, side), bytes(p[side]))
            # the done record alone (a start record would say the same): two files a worker
            write_atomic(rec.done_path(run_dir, record.pid), record.to_json().encode())
        except (TypeError, ValueError, OSError) as exc:
            notes.append(f"Ray: a worker's record could not be written ({exc})")
            continue
        written += 1
        nodes.add(record.node_id)
        periodic += record.how == "ray-periodic"
    if written:
        line = (
            f"Ray: {written} worker process(es) of the job sent their records through Ray "
            f"from {len(nodes)} node(s)"
        )
        if periodic:
            line += (
                f"; {periodic} ended before the job (killed, or their node died): their last "
                "periodic record is kept"
            )
        notes.append(line)
    gone: dict[str, tuple[str, str, list[int], str]] = {}
    for m in missing:
        try:
            node_id, node_ip, host, pid, why = m
            pid = int(pid)
        except (TypeError, ValueError):
            continue
        slot = gone.setdefault(str(node_id), (str(host), str(node_ip), [], str(why)))
        slot[2].append(pid)
    for node_id, (host, node_ip, pids, why) in sorted(gone.items()):
        notes.append(
            f"Ray: gyreprof is not importable on node {safe_text(host)} ({safe_text(node_ip)}, "
            f"node id {safe_text(node_id)[:12]}): its {len(pids)} worker process(es) of the "
            f"job ran uninstrumented (pid {', '.join(map(str, sorted(pids)))}: "
            f"{safe_text(why)[:200]}); install gyreprof on every node"
        )
    job = {"format": "gyreprof.ray-job/1", "driver": driver or {}, "notes": notes}
    write_atomic(run_dir / RAY_JOB_FILE, json.dumps(job, allow_nan=False).encode())
    return written


def _grouped_pids(run_dir: Path) -> set[int]:
    """The pids of the groups already in ``run_dir`` (a driver that ran an earlier job)."""
    from gyreprof._support.io import read_bytes

    out: set[int] = set()
    for n in rec.group_numbers(run_dir):
        try:
            group = rec.GroupRecord.from_json(read_bytes(rec.group_path(run_dir, n), "snapshot"))
            out.update(rec.ProcessRecord.from_json(r).pid for r in group.records)
        except (OSError, ValueError):
            continue  # the report says what is wrong with it
    return out


def _write_group(
    run_dir: Path, n: int, members: list[tuple[rec.ProcessRecord, bytes]]
) -> list[rec.ProcessRecord]:
    """Write group ``n`` (``records.group_path``): the ``members``' sampler snapshots merged,
    then their records and each one's own figures (``analysis.run.ProcessFigures``); the
    records written. Nothing is written, and the list is empty, when a snapshot does not
    decode or they do not merge: each member then keeps its own files (and the report
    says what is wrong with them)."""
    from gyreprof._support.io import write_atomic
    from gyreprof.analysis.run import ProcessFigures
    from gyreprof.model.snapshot import EncodedSnapshot, merge

    try:
        # read with their histograms left encoded (a few kB each, not a dense ~2 MB), each
        # one's figures from its records, the buckets decoded straight into the group's sums
        snaps = [EncodedSnapshot.from_bytes(data) for _, data in members]
        figures = [ProcessFigures.of(s).to_dict() for s in snaps]
        merged = merge(snaps)
    except ValueError:
        return []
    group = rec.GroupRecord(records=tuple(r.to_json() for r, _ in members), figures=tuple(figures))
    write_atomic(rec.group_snap_path(run_dir, n), merged.to_bytes())
    write_atomic(rec.group_path(run_dir, n), group.to_json().encode())
    return [r for r, _ in members]


# ------------------------------------------------------------ the inbox actor


_INBOX_CLASS: Any = None


def _inbox_class(ray: Any) -> Any:
    global _INBOX_CLASS
    if _INBOX_CLASS is None:
        _INBOX_CLASS = ray.remote(Inbox)
    return _INBOX_CLASS


_INBOX_SOURCE = '''
import asyncio
import os


class Inbox:
    """The job's inbox (a detached named actor, asyncio): the latest record of each worker
    process, the nodes where gyreprof was missing, and the flush the driver asks for.
    Defined by value (gyreprof's ray.job): it runs on whichever node Ray puts it.

    A worker's periodic send costs the inbox's process about SEND_CPU_S of CPU (the
    record and the long poll: two Ray calls; BENCHMARKS.md, "records streaming in"), so
    a long poll lasts the worker's period, or as long as keeps the fleet's sends within
    SHARE of one core (the open polls times SEND_CPU_S / SHARE), at most MAX_WAIT_S. The
    driver's flush, and its refresh of an actor, answer a poll at once all the same."""

    SEND_CPU_S = 0.003
    SHARE = 0.01
    MAX_WAIT_S = 600.0  # the longest period a worker takes (_period)

    def __init__(self):
        os.environ["GYREPROF_RAY_INBOX_HERE"] = "1"  # this process's own sender stays quiet
        self.records = {}
        self.gone = []
        self.flushed = asyncio.Event()
        self.asked = {}  # actor id -> Event: the driver wants a fresh record before a kill
        self.puts = {}  # actor id -> records received
        self.polling = 0  # long polls open now: one a live sender

    def wait_s(self, timeout_s):
        """How long a long poll asked for timeout_s (the worker's period) lasts."""
        fleet_s = min(self.MAX_WAIT_S, self.polling * self.SEND_CPU_S / self.SHARE)
        return max(timeout_s, fleet_s)

    async def put(self, payload):
        key = (str(payload.get("node_id")), int(payload.get("pid", 0)))
        aid = payload.get("actor_id") or ""
        if aid:
            self.puts[aid] = self.puts.get(aid, 0) + 1
        old = self.records.get(key)
        if old is not None and old.get("final") and not payload.get("final"):
            return  # a late periodic send never replaces the final one
        self.records[key] = payload

    async def missing(self, node_id, node_ip, host, pid, why):
        self.gone.append((node_id, node_ip, host, pid, why))

    async def wait_flush(self, timeout_s, actor_id=""):
        """"final" once the driver asked for the final records, "refresh" when it wants
        this actor's record now (it is about to kill it), "" after wait_s(timeout_s)."""
        waits = [asyncio.ensure_future(self.flushed.wait())]
        if actor_id:
            self.puts.setdefault(actor_id, 0)
            waits.append(asyncio.ensure_future(self.asked.setdefault(actor_id, asyncio.Event()).wait()))
        self.polling += 1
        try:
            wait = self.wait_s(timeout_s)
            await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.polling -= 1
            for w in waits:
                w.cancel()
        if self.flushed.is_set():
            return "final"
        ev = self.asked.get(actor_id) if actor_id else None
        if ev is not None and ev.is_set():
            ev.clear()
            return "refresh"
        return ""

    async def refresh(self, actor_id):
        """Ask the sender of actor_id for a record now; its count of records so far, or -1
        when no sender of that actor ever asked (an actor gyreprof does not instrument)."""
        if actor_id not in self.puts:
            return -1
        self.asked.setdefault(actor_id, asyncio.Event()).set()
        return self.puts[actor_id]

    async def sent(self, actor_id):
        return self.puts.get(actor_id, -1)

    async def flush(self):
        self.flushed.set()

    async def status(self):
        return len(self.records), sum(1 for p in self.records.values() if p.get("final"))

    async def take(self):
        return list(self.records.values()), list(self.gone)
'''


def _define_inbox() -> type:
    space: dict[str, Any] = {"__name__": "gyreprof_ray_inbox"}
    exec(compile(_INBOX_SOURCE, "<gyreprof ray inbox>", "exec"), space)  # noqa: S102
    cls: type = space["Inbox"]
    return cls


#: the job's inbox actor class (see :data:`_INBOX_SOURCE`): a class of a module no worker
#: imports, so cloudpickle sends it by value and a node without gyreprof can host it
Inbox = _define_inbox()
MAX_POLL_S = float(vars(Inbox)["MAX_WAIT_S"])  # the longest long poll the inbox holds
ENV_INBOX_HERE = "GYREPROF_RAY_INBOX_HERE"


# ------------------------------------------------------------ a worker of the job


_final_sent = threading.Event()


def _send_at_exit(inbox_name: str) -> None:
    """An actor ended by the job (``__ray_terminate__``, ``exit_actor``: RLlib stops its
    env runners before ``ray.shutdown``) runs its exit handlers: its final record goes
    to the inbox now, while Ray is still connected. A process killed outright keeps what
    it last sent."""
    ray = sys.modules.get("ray")
    if _final_sent.is_set() or os.environ.get(ENV_INBOX_HERE) or ray is None:
        return
    try:
        if not ray.is_initialized():
            return
        payload, _ = _payload(True, "ray-exit")
        if payload is not None:
            inbox = ray.get_actor(inbox_name, namespace=NAMESPACE)
            ray.get(inbox.put.remote(payload), timeout=10)
            _final_sent.set()
    except Exception:  # noqa: BLE001, S110 - on the way out: the last periodic record stays
        pass
    finally:
        _leave_staging()


def _leave_staging() -> None:
    """This worker's files in its node's run folder go (its records went home through
    Ray, or never will: no one reads that folder), and nothing more is saved there; the
    folder goes with its last file."""
    folder = st.run_dir
    if folder is None or not os.environ.get(ENV_WORKER):
        return
    st.run_dir = None
    for path in folder.glob(f"{os.getpid()}.*"):
        try:
            path.unlink()
        except OSError:
            pass
    try:
        folder.rmdir()
    except OSError:
        pass


def tell_missing_here(inbox: str, why: str) -> None:
    """Tell the job's inbox that this worker runs uninstrumented, and why (a thread of
    its own: the inbox may not be up yet)."""
    hook = _hook(None, inbox)
    tell = hook.__globals__["_tell_missing"]
    threading.Thread(target=tell, args=(inbox, NAMESPACE, why), daemon=True).start()


def start_sender(inbox: str) -> None:
    """Start this instrumented worker's sender thread to the job's ``inbox``, and its
    final send at exit (an actor the job ended)."""
    threading.Thread(
        target=_send_loop, args=(inbox, _period()), name="gyreprof-ray-sender", daemon=True
    ).start()
    atexit.register(_send_at_exit, inbox)  # after Ray's own exit handler: runs before it


def _send_loop(inbox_name: str, period: float) -> None:
    """The sender thread (see the module doc). A record's ``how``: ``ray`` (the final one,
    at the driver's flush), ``ray-exit`` (an actor the job ended), ``ray-kill`` (sent
    before the driver's ``ray.kill``), ``ray-periodic`` (the last periodic one)."""
    import ray

    inbox = None
    sent_events = -1
    while not os.environ.get(ENV_INBOX_HERE) and not _final_sent.is_set():
        if inbox is None:
            try:
                inbox = ray.get_actor(inbox_name, namespace=NAMESPACE)
            except Exception:  # noqa: BLE001 - not started yet
                time.sleep(min(period, 1.0))
                continue
        aid = _actor_id(ray)
        try:
            poll = inbox.wait_flush.remote(period, aid)  # longer in a large fleet
            answer = ray.get(poll, timeout=max(period, MAX_POLL_S) + 60)
        except ray.exceptions.GetTimeoutError:
            answer = ""
        except Exception:  # noqa: BLE001 - the inbox is gone: the job has ended
            return
        if os.environ.get(ENV_INBOX_HERE):
            return
        final = answer == "final"
        try:
            how = {"final": "ray", "refresh": "ray-kill"}.get(answer, "ray-periodic")
            payload, events = _payload(final, how)
            if payload is not None and (answer or events != sent_events):
                ref = inbox.put.remote(payload)
                sent_events = events
                if final:
                    ray.get(ref, timeout=60)
                    _final_sent.set()
                    _leave_staging()
        except Exception as exc:  # noqa: BLE001 - the job goes on without this send
            st.note(f"Ray: a send of pid {os.getpid()}'s records failed ({exc!r})")
        if final:
            return


def _actor_id(ray: Any) -> str:
    try:
        return str(ray.get_runtime_context().get_actor_id() or "")
    except Exception:  # noqa: BLE001 - a task worker
        return ""


def _payload(final: bool, how: str = "") -> tuple[dict[str, Any] | None, int]:
    """This process's records as the inbox keeps them, and the events they hold (a send
    that would repeat the last is skipped); None while it has recorded nothing."""
    ts = st.threads()
    if not ts:
        return None, 0
    from gyreprof.model.snapshot import merge

    if final:
        st.close_open_steps(ts)
    out: dict[str, Any] = {"pid": os.getpid(), "final": final}
    events = 0
    for side in ("sampler", "trainer"):
        snap = merge([getattr(t, side).snapshot() for t in st._side_threads(ts, side)])
        n = int(snap.summary().events)
        events += n
        # a side that recorded nothing is not sent (most workers never train)
        out[side] = snap.to_bytes() if n or side == "sampler" else None
    import ray

    node_id = ray.get_runtime_context().get_node_id() or ""
    node_ip = _node_ip(ray)
    record = rec.ProcessRecord(
        pid=os.getpid(),
        role=_role(ray),
        ppid=os.getppid(),
        how=how or ("ray" if final else "ray-periodic"),
        notes=tuple(st._notes),
        node_id=node_id,
        node_ip=node_ip,
    )
    out.update(node_id=node_id, node_ip=node_ip, host=socket.gethostname(), actor_id=_actor_id(ray))
    out["record"] = record.to_json()
    out["sites"] = _sites(final)
    return out, events


def _sites(final: bool) -> bytes | None:
    """The stack sampler's sites of this process (``<pid>.sites.json``'s text), or None."""
    from gyreprof.integrations._auto import stacks

    found = stacks.record() if final else stacks.so_far()
    return None if found is None else found.to_json().encode()


def _role(ray: Any) -> str:
    """A role a framework registered (RLlib's env runner), else the actor's class name,
    else what the process did (``state.role``)."""
    own = st.role()
    if own not in ("child", "env_worker"):
        return own
    try:
        worker = ray._private.worker.global_worker
        actors = list(getattr(worker, "actors", {}).values())
        if actors:
            return str(type(actors[0]).__name__)
    except Exception:  # noqa: BLE001, S110 - a task worker, or a Ray that keeps it elsewhere
        pass
    return own


# ------------------------------------------------------------ Ray's loop shape

_asked = threading.local()  # .gen: (thread ident, blocks) when .ids were submitted
#: refs noted in one collect block at most (a thread that submits without ever waiting
#: starts over: its later waits read as fed)
MAX_ASKED = 100_000


def _generation() -> tuple[int, int] | None:
    """(thread, collect blocks closed) of a calling thread whose waits count, else None."""
    t = getattr(st.tls, "t", None)
    if t is None:
        if st._default_main and st.default_trainer_here():
            return (threading.get_ident(), 0)
        return None
    w = st.waiting_thread()
    return None if w is None else (w.ident, w.blocks)


def _refs(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _ref_id(ref: Any) -> bytes | None:
    binary = getattr(ref, "binary", None)
    if binary is None:
        return None
    try:
        out = binary()
    except Exception:  # noqa: BLE001 - not an ObjectRef
        return None
    return out if isinstance(out, bytes) else None


def _submitted(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``.remote()`` (an actor method's or a remote function's): the refs a waiting
    thread asked for in its open collect block are noted."""
    out = wrapped(*args, **kwargs)
    try:
        gen = _generation()
        if gen is not None:
            if getattr(_asked, "gen", None) != gen or len(_asked.ids) >= MAX_ASKED:
                _asked.gen, _asked.ids = gen, set()
            for ref in _refs(out):
                rid = _ref_id(ref)
                if rid is not None:
                    _asked.ids.add(rid)
    except Exception:  # noqa: BLE001, S110 - never into the user's code
        pass
    return out


def asked_here(refs: Any) -> bool:
    """Every ref of ``refs`` was submitted by the calling thread since its last update."""
    gen = _generation()
    if gen is None or getattr(_asked, "gen", None) != gen:
        return False
    listed = _refs(refs)
    ids: set[bytes] = _asked.ids
    return bool(listed) and all(_ref_id(r) in ids for r in listed)


def _timed_as_own(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call the wait through the queue patches' timing as the thread's own collect (the
    original under their wrapper), or as it is when they did not wrap it."""
    inner = getattr(wrapped, "__wrapped__", None)
    if inner is None or not getattr(wrapped, "__gyreprof_wrapped__", False):
        return wrapped(*args, **kwargs)
    from gyreprof.integrations.libs.queues import _wait_kind

    return _wait_kind("own", inner, *args, **kwargs)


def _get(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    refs = args[0] if args else kwargs.get("object_refs")
    if refs is not None and asked_here(refs):
        return _timed_as_own(wrapped, args, kwargs)
    return wrapped(*args, **kwargs)


def _wait(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    refs = args[0] if args else kwargs.get("ray_waitables", kwargs.get("object_refs"))
    if kwargs.get("timeout") != 0 and refs is not None and asked_here(refs):
        return _timed_as_own(wrapped, args, kwargs)
    return wrapped(*args, **kwargs)


def _method_executor(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Ray's executor of an actor method, made in a worker process: each call of a
    plain (not async, not generator, not Ray's own ``__...``) method is one batch of
    the worker (``batches.collecting``): what a rollout worker makes on the driver's
    order, its env steps and forwards timed inside, the rest named by the stack
    sampler; a learner's update (it steps an optimizer) is no batch."""
    ex = wrapped(*args, **kwargs)
    try:
        name = args[0] if args else kwargs.get("method_name", "")
        method = args[1] if len(args) > 1 else kwargs.get("method")
        if st.run_dir is None or not _plain(str(name), method):
            return ex
        from gyreprof.integrations._auto.batches import collecting

        def executor(__ray_actor: Any, *a: Any, **kw: Any) -> Any:
            return collecting(ex, __ray_actor, *a, **kw)

        executor.name = ex.name  # type: ignore[attr-defined] # Ray reads both
        executor.method = ex.method  # type: ignore[attr-defined]
        return executor
    except Exception:  # noqa: BLE001 - an executor of a kind we do not know: Ray's own
        return ex


def _plain(name: str, method: Any) -> bool:
    """A method of the user's whose call is the whole of its work."""
    import inspect

    if name.startswith("__") or not callable(method):
        return False
    return not (
        inspect.iscoroutinefunction(method)
        or inspect.isasyncgenfunction(method)
        or inspect.isgeneratorfunction(method)
    )


def install(ray: ModuleType) -> None:
    """Patch ``ray.init`` / ``ray.shutdown`` (a driver of the run), the submissions and
    the waits (every process: the loop shape), and the executor of actor methods (a
    worker's calls are its batches); idempotent."""
    with _lock:
        if len(_patches):
            return
        _patches.wrap(ray, "init", _init)
        _patches.wrap(ray, "shutdown", _shutdown)
        _patches.wrap(ray, "kill", _kill)
        _patches.wrap(ray, "get", _get)
        _patches.wrap(ray, "wait", _wait)
        from ray import actor, remote_function

        _patches.wrap(actor.ActorMethod, "_remote", _submitted)
        _patches.wrap(remote_function.RemoteFunction, "_remote", _submitted)
        try:
            from ray._private.function_manager import FunctionActorManager
        except ImportError:  # a Ray without it: the workers' calls are not batches
            return
        _patches.wrap(FunctionActorManager, "_make_actor_method_executor", _method_executor)


def uninstall() -> None:
    """Undo :func:`install` (the tests)."""
    with _lock:
        _patches.undo()
