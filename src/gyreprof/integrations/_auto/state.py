"""This process's automatic profilers: one sampler and one trainer Profiler per thread.

The patched library methods read the calling thread's :class:`ThreadState`
(``tls.t``, created on first use by :func:`new_thread`) and time through its
phase timers: one C-level context manager per timed call, no allocation per
call. A Profiler has one writer thread, so every thread gets its own pair; they
are merged when the process saves.

``ThreadState.inside`` is the nesting guard: only the outermost of nested env
calls (a wrapper's ``step`` calling the wrapped env's ``step``) is timed.

Under ``gyreprof run`` (``$GYREPROF_RUN_DIR`` set) the process writes its
snapshots into the run directory once, at the first of: normal exit
(``atexit``, also after an uncaught exception), SIGTERM, the end of a
``multiprocessing`` child's ``_bootstrap`` (before its ``os._exit``). Each
profiler also publishes a live segment, which ``gyreprof run`` reads when a
process was killed before it could save.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from gyreprof.integrations._auto import records as rec

# the thread-local that the patched methods read (replaced after fork / per session)
tls = threading.local()

_lock = threading.RLock()  # re-entrant: the SIGTERM handler may run while it is held
_threads: list[ThreadState] = []
_loops: set[str] = set()
_notes: list[str] = []
_saved_pid = 0
_started_pid = 0

run_dir: Path | None = None
run_id: str | None = None
main_pid = 0


def configure_from_env() -> bool:
    """Read the run directory from the environment; True when this process is in a run."""
    global run_dir, run_id, main_pid
    d = os.environ.get(rec.ENV_RUN_DIR)
    if not d:
        return False
    run_dir = Path(d)
    run_id = os.environ.get(rec.ENV_RUN_ID) or "run"
    mp = os.environ.get(rec.ENV_MAIN_PID)
    if not mp:
        # the first Python process of the run is its main process; children inherit this
        os.environ[rec.ENV_MAIN_PID] = mp = str(os.getpid())
    try:
        main_pid = int(mp)
    except ValueError:
        main_pid = 0
    return True


class ThreadState:
    """One thread's profilers and phase timers (what the patched methods touch)."""

    __slots__ = (
        "inside",
        "in_collect",
        "in_train",
        "sampler",
        "trainer",
        "env_step",
        "env_reset",
        "step_async",
        "step_wait",
        "fwd",
        "tbegin",
        "tlap",
        "tend",
    )

    def __init__(self, sampler: Any, trainer: Any) -> None:
        self.inside = False
        self.in_collect = False
        self.in_train = False
        self.sampler = sampler
        self.trainer = trainer
        ph = sampler.phase
        self.env_step = ph("env_step")
        self.env_reset = ph("env_reset")
        self.step_async = ph("step_async")
        self.step_wait = ph("step_wait")
        self.fwd = ph("fwd")
        self.tbegin = trainer.begin
        self.tlap = trainer.lap
        self.tend = trainer.end  # a trainer step is one wait + one compute, closed after compute


WAIT = 0  # trainer phase ids (records.TRAINER_PHASES)
COMPUTE = 1


def new_thread() -> ThreadState:
    """Create (and register) the calling thread's profilers: the slow path of ``tls.t``."""
    from gyreprof.profiler import Profiler

    live_s: bool | str = False
    live_t: bool | str = False
    if run_id is not None:
        live_s = rec.segment_name(run_id, "sampler")
        live_t = rec.segment_name(run_id, "trainer")
    kw: dict[str, Any] = dict(capacity=1 << 12, label="gyreprof-run")
    from gyreprof.integrations._auto.options import warmup_kwargs  # gyreprof run --warmup-*

    skw, tkw = {**kw, **warmup_kwargs("sampler")}, {**kw, **warmup_kwargs("trainer")}
    try:
        sampler = Profiler(rec.SAMPLER_PHASES, live=live_s, **skw)
        trainer = Profiler(rec.TRAINER_PHASES, live=live_t, window_steps=1, **tkw)
    except OSError:  # no shared memory: record without the live segments
        sampler = Profiler(rec.SAMPLER_PHASES, **skw)
        trainer = Profiler(rec.TRAINER_PHASES, window_steps=1, **tkw)
    t = ThreadState(sampler, trainer)
    tls.t = t
    from gyreprof._core import guard  # the C env-call guard: every thread reads tls afresh

    guard.forget()
    with _lock:
        _threads.append(t)
    _on_first_record()
    return t


def preload() -> None:
    """Import what recording needs now (called when a recognised library is imported), so
    the first timed call inside the training loop does not pay for the imports."""
    try:  # only a head start: new_thread() imports what it needs anyway
        import gyreprof.profiler  # noqa: F401

        if run_id is not None:
            import gyreprof.live.publish  # noqa: F401
    except ImportError:
        pass


def note_loop(kind: str) -> None:
    """Remember a loop shape a framework is known to have (e.g. ``"sync"``)."""
    _loops.add(kind)


def note(text: str) -> None:
    """A line for the run's report (e.g. a library left uninstrumented)."""
    with _lock:
        if text not in _notes:
            _notes.append(text)


def warn_once(key: str, text: str) -> None:
    """Print ``text`` once per run (the first process to claim ``key``), note it always."""
    note(text)
    if run_dir is not None:
        try:
            os.close(os.open(run_dir / f"warned-{key}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        except OSError:
            pass
    print(f"gyreprof run: {text}", file=sys.stderr, flush=True)


_registered_role: tuple[int, str] | None = None  # (pid, role) registered by gyreprof run


def registered(role_name: str) -> None:
    """This process registered itself (``workers.register_here``) with ``role_name``."""
    global _registered_role
    _registered_role = (os.getpid(), role_name)


def role() -> str:
    pid = os.getpid()
    if pid == main_pid:
        return "main"
    reg = _registered_role
    if reg is not None and reg[0] == pid:
        return reg[1]
    with _lock:
        threads = list(_threads)
    for t in threads:
        if _env_steps(t) > 0:
            return "env_worker"
    return "child"


def _env_steps(t: ThreadState) -> int:
    return int(t.sampler.snapshot().summary().phases["env_step"].count)


def threads() -> list[ThreadState]:
    with _lock:
        return list(_threads)


def _record(how: str) -> rec.ProcessRecord:
    return rec.ProcessRecord(
        pid=os.getpid(),
        role=role() if how != "started" else _started_role(),
        ppid=os.getppid(),
        how=how,
        loops=tuple(sorted(_loops)),
        notes=tuple(_notes),
    )


def _started_role() -> str:
    pid = os.getpid()
    if pid == main_pid:
        return "main"
    reg = _registered_role
    return reg[1] if reg is not None and reg[0] == pid else "child"


def _on_first_record() -> None:
    global _started_pid
    pid = os.getpid()
    if _started_pid == pid:
        return
    _started_pid = pid
    if run_dir is None:
        return
    from gyreprof.integrations._auto import trail

    trail.first_record()  # the start-up tracing ends here: nothing of it runs in the loop
    from gyreprof._io import write_atomic  # here: the bootstrap of every process stays light

    try:
        write_atomic(rec.start_path(run_dir, pid), _record("started").to_json().encode())
    except OSError as exc:
        print(f"gyreprof run: pid {pid} cannot write to {run_dir}: {exc}", file=sys.stderr)
    _install_exit_hooks()


def save(how: str, key: int | str | None = None) -> bool:
    """Write this process's snapshots into the run directory (once per process image).

    ``key`` names the record (the pid by default; an image about to ``exec`` saves under
    ``rec.exec_key``). A save that fails (a full disk) keeps the live segments, which
    hold the same numbers, for ``gyreprof run`` to read, and says where they are.
    """
    global _saved_pid
    pid = os.getpid()
    if run_dir is None or _saved_pid == pid:
        return False
    ts = threads()
    if not ts:
        return False
    _saved_pid = pid
    name = pid if key is None else key
    written: list[Path] = []
    try:
        from gyreprof import merge
        from gyreprof._io import write_atomic

        for side in ("sampler", "trainer"):
            snaps = [getattr(t, side).snapshot() for t in ts]
            snap = merge(snaps)
            path = rec.snap_path(run_dir, name, side)
            write_atomic(path, snap.to_bytes())
            written.append(path)
        _save_rollouts(name)
        write_atomic(rec.done_path(run_dir, name), _record(how).to_json().encode())
    except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
        for path in written:
            _unlink(path)
        kept = _keep_live_segments(ts)
        where = (
            "; its numbers stay in its live segment(s) " + ", ".join(kept)
            if kept
            else " (and it has no live segment: its numbers are lost)"
        )
        print(
            f"gyreprof run: pid {pid} could not save its profile to {run_dir}: {exc!r}{where}",
            file=sys.stderr,
        )
        return False
    return True


def _save_rollouts(name: int | str) -> None:
    """The HTTP rollout requests (issue 23) in their own record; a failure costs only them.
    Nothing is imported here unless requests were made (their record's module was loaded
    at the first one: a dataclass defined at exit would reset Python's exit by SIGINT)."""
    log = sys.modules.get("gyreprof.integrations._auto.rollout_log")
    if log is None or run_dir is None or not log.logs():
        return
    try:
        from gyreprof.integrations._auto import rollout_record

        rollout_record.save(run_dir, name)
    except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
        print(f"gyreprof run: could not save the rollout requests: {exc!r}", file=sys.stderr)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _keep_live_segments(ts: list[ThreadState]) -> list[str]:
    """Stop publishing without removing the segments (as if the process were killed), so
    the exit does not delete the only copy of the numbers; their paths."""
    kept: list[str] = []
    for t in ts:
        for prof in (t.sampler, t.trainer):
            pub: Any = getattr(prof, "live", None)
            path = getattr(pub, "path", None)
            detach = getattr(pub, "_detach_locked", None)
            if path is None or detach is None or not getattr(pub, "active", False):
                continue
            try:
                with pub._lock:
                    detach()
            except Exception:  # noqa: BLE001, S112 - keep what can be kept
                continue
            kept.append(str(path))
    return kept


def _save_on_exit(why: str) -> None:
    save({"SIGTERM": "sigterm", "multiprocessing child exit": "mp-exit"}.get(why, "exit"))


_real: dict[str, Any] = {}


def _patch_process_exits() -> None:
    """``os._exit`` (a plain forked child leaving) saves first; ``os.execv``/``os.execve``
    (every ``os.exec*``) save the image that is replaced under a record of its own and
    close its live segments, since the new image has the same pid and starts afresh."""
    if _real:
        return
    _real.update(_exit=os._exit, execv=os.execv, execve=os.execve)

    def _exit(code: int) -> None:  # type: ignore[misc]
        try:
            save("os-exit")
        except BaseException:  # noqa: BLE001, S110 - leaving now, whatever happens
            pass
        _real["_exit"](code)

    def execv(path: Any, argv: Any) -> None:
        key = _save_image()
        try:
            _real["execv"](path, argv)
        except BaseException:
            _exec_failed(key)
            raise

    def execve(path: Any, argv: Any, env: Any) -> None:
        key = _save_image()
        try:
            _real["execve"](path, argv, env)
        except BaseException:
            _exec_failed(key)
            raise

    for name, fn in (("_exit", _exit), ("execv", execv), ("execve", execve)):
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = getattr(_real[name], "__doc__", None)
        setattr(os, name, fn)


def _save_image() -> str | None:
    """Before an exec: save this image as ``<pid>-x<token>`` and close its live segments."""
    global _saved_pid
    if run_dir is None or _saved_pid == os.getpid():
        return None
    key = rec.exec_key(os.getpid())
    if not save("exec", key):
        return None
    # the new image writes its own start file if it records (it may not be Python at all)
    _unlink(rec.start_path(run_dir, os.getpid()))
    for t in threads():
        for prof in (t.sampler, t.trainer):
            pub = getattr(prof, "live", None)
            try:
                if pub is not None:
                    pub.close()
            except Exception:  # noqa: BLE001, S110 - the segment goes with the image
                pass
    return key


def _exec_failed(key: str | None) -> None:
    """The exec did not happen: this image goes on, and saves under its pid at exit."""
    global _saved_pid
    if key is None or run_dir is None:
        return
    _unlink(rec.done_path(run_dir, key))
    _unlink(rec.rollouts_path(run_dir, key))  # the exit's save writes them again
    for side in ("sampler", "trainer"):
        _unlink(rec.snap_path(run_dir, key, side))
    _saved_pid = 0
    try:
        from gyreprof._io import write_atomic

        start = rec.start_path(run_dir, os.getpid())
        write_atomic(start, _record("started").to_json().encode())
    except OSError:
        pass


def _install_exit_hooks() -> None:
    """Save at exit, on SIGTERM and at a multiprocessing child's exit through the
    autosave's handlers (one SIGTERM handler per process, whoever came first: a user's
    ``Profiler(autosave=...)`` and the run both save)."""
    from gyreprof import _autosave  # imported with the profiler already

    _autosave.on_exit(_save_on_exit)
    _patch_process_exits()


def fresh_threads() -> int:
    """Start new per-thread profilers from here on (a session); returns the registry mark."""
    global tls
    with _lock:
        mark = len(_threads)
    tls = threading.local()
    return mark


def threads_since(mark: int) -> list[ThreadState]:
    with _lock:
        return list(_threads[mark:])


def _after_fork_in_child() -> None:
    global tls, _lock, _threads
    # the parent's profilers stay the parent's: the child records into its own
    tls = threading.local()
    _lock = threading.RLock()
    _threads = []


os.register_at_fork(after_in_child=_after_fork_in_child)
