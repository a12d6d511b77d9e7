"""This process's automatic profilers: one sampler and one trainer Profiler per thread.

The patched library methods read the calling thread's :class:`ThreadState`
(``tls.t``, created on first use by :func:`new_thread`) and time through its
phase timers: one C-level context manager per timed call, no allocation per
call. A Profiler has one writer thread, so every thread gets its own pair; they
are merged when the process saves.

``ThreadState.inside`` is the nesting guard: only the outermost of nested env
calls (a wrapper's ``step`` calling the wrapped env's ``step``) is timed.

**The training thread's timeline.** Which thread trains, and the shape of its
loop, are read per thread from universal signals, never from a process-wide
flag. An *update signal* (an optimizer step or a backward pass, see
``libs.torch``; once per minibatch, never on the env-step path) on thread t
ends t's *collect block*: the span from the first sampler write since the last
update (``Recorder.since_mark_ns``), or the first data wait, to the last
sampler write or data wait end. The thread's trainer step is then closed
afterwards with the Recorder's ``*_at`` forms: ``compute`` from the previous
block's end to this block's start, ``wait`` this block. Repeated update
signals with no sampling between them (many minibatches) change nothing. Each
block is counted in the trainer Profiler's counters (``loop.own``: the thread
did the sampling itself; ``loop.fed``: it only waited on data made elsewhere),
which travel in its snapshot and its live segment. A thread that never sees an
update signal records no trainer step: a collector worker's inner loop, an env
worker, a Ray env runner are samplers. The main thread of the run's main
process is the default trainer while no thread has trained: there the end of a
data wait is the update signal (a torch-free ``item = q.get(); work(item)``).

Other patches hook in through :func:`data_wait` (a blocking wait for data:
a queue get, a future, a rollout request) and :func:`own_sampling` (a phase in
which the thread produced its data itself: a synchronous collector's batch,
a ``generate`` call), with :func:`waiting_thread` as the cheap gate.

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
from typing import TYPE_CHECKING, Any

from gyreprof.integrations._auto import deaths as _deaths
from gyreprof.integrations._auto import records as rec

if TYPE_CHECKING:  # its module imports the compiled core (and numpy): at the first record
    from gyreprof.integrations._auto.thread_state import ThreadState as ThreadState


def __getattr__(name: str) -> Any:
    """``state.ThreadState``, imported on first use: the bootstrap of every process of a run
    imports this module, and numpy and the core load only when a thread first records."""
    if name == "ThreadState":
        from gyreprof.integrations._auto.thread_state import ThreadState

        return ThreadState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the thread-local that the patched methods read (replaced after fork / per session)
tls = threading.local()

_lock = threading.RLock()  # re-entrant: the SIGTERM handler may run while it is held
_threads: list[ThreadState] = []
_notes: list[str] = []
# the thread ident of the default trainer (the main thread of the run's main process, or
# of a session's process) while no thread of this process has trained; 0: none
_default_main = 0
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
    _set_default_trainer()
    return True


def _set_default_trainer() -> None:
    """The main thread is the default trainer in the run's main process (or outside a run,
    a session's process); in every other process no thread is one until it trains."""
    global _default_main
    if run_dir is None or os.getpid() == main_pid:
        _default_main = threading.main_thread().ident or 0
    else:
        _default_main = 0


WAIT = 0  # trainer phase ids (records.TRAINER_PHASES)
COMPUTE = 1
FWD = rec.SAMPLER_PHASES.index("fwd")  # sampler phase id of the policy forward
OWN, FED = "loop.own", "loop.fed"  # trainer counters: collect blocks by who sampled
OPTIM_STEPS = "optim_steps"


def thread_state() -> ThreadState:
    """The calling thread's ThreadState, created on first use."""
    try:
        t: ThreadState = tls.t
    except AttributeError:
        return new_thread()
    return t


def waiting_thread() -> ThreadState | None:
    """The calling thread's state when its blocking data waits count (it trains, or it is
    the default trainer), else None: the cheap gate of every data-wait wrapper. It creates
    nothing (a thread pool's idle workers get no ThreadState): a default trainer with no
    state yet is told by :func:`default_trainer_here`, and gets its state when its first
    wait ends (a wait that never ends, a start-up hang, leaves nothing recorded)."""
    t: ThreadState | None = getattr(tls, "t", None)
    if t is None or not t.waits_count(_default_main):
        return None
    return t


def default_trainer_here() -> bool:
    """The calling thread is the default trainer (and has no ThreadState yet, when the
    caller asks after :func:`waiting_thread` said None)."""
    return (
        bool(_default_main)
        and threading.get_ident() == _default_main
        and (getattr(tls, "t", None) is None)
    )


def data_wait(
    t: ThreadState, start_ns: int, end_ns: int, kind: str = "fed", closes: bool = True
) -> None:
    """Thread ``t`` waited for data from ``start_ns`` to ``end_ns`` (``t.now()`` clock).

    ``kind``: ``"fed"`` (the data was made elsewhere: a queue, a future, a remote call,
    an asynchronous collector) or ``"own"`` (the thread made it itself: a synchronous
    collector's batch). Call it from the waiting thread, gated by :func:`waiting_thread`
    (or, for own sampling, :func:`own_sampling`). On the default trainer (no thread
    trained yet) the wait's end is the update signal (``Timeline.data_wait``), unless
    ``closes`` is False: a piece of a wait whose end is reported later."""
    t.data_wait(start_ns, end_ns, kind == "own", _default_main, closes)


def own_sampling(t: ThreadState, start_ns: int, end_ns: int) -> None:
    """Thread ``t`` produced its own data from ``start_ns`` to ``end_ns`` (``t.now()``
    clock): a synchronous collector's batch, a generation. Recorded on every thread (a
    thread that never trains keeps it to itself); it makes the collect block ``own``."""
    data_wait(t, start_ns, end_ns, "own")


def update_signal(t: ThreadState, now_ns: int) -> None:
    """An update begins on ``t``'s thread at ``now_ns`` (an optimizer step, a backward):
    the collect block since the last update, if any, ends; called from that thread."""
    global _default_main
    _default_main = 0  # a thread trains: the default trainer is no longer needed
    if not t.trains and t.provisional:
        _restart(t)
    t.trains = True
    if t.ng_depth > 0:
        t.ng_dirty = True  # an update inside a no-grad block: that block is no forward
    if t.framework:
        return
    t.close_block()


def update_end(t: ThreadState, now_ns: int) -> None:
    """An update ended on ``t``'s thread at ``now_ns`` (where the last step's compute is
    closed at save)."""
    if now_ns > t.upd_end:
        t.upd_end = now_ns


def _restart(t: ThreadState) -> None:
    """The default trainer's first real update signal: its steps so far were provisional
    (waits of start-up, a pool's future). They are dropped, but for the last block when
    nothing was sampled or waited on since it (the batch this update trains on)."""
    t.provisional = False
    keep = t.step_open and t.srec.since_mark_ns() < 0 and t.blk_end < 0
    t.trec.reset()
    t.step_open = False
    t.blocks = 1 if keep else 0
    if keep:
        t.trec.begin_at(t.last_start)
        t.trec.lap_at(WAIT, t.prev_end)
        t.trainer.count(OWN if t.last_own else FED)
        t.step_open = True


def no_grad_enter(t: ThreadState, now_ns: int) -> None:
    """The thread entered a ``torch.no_grad`` / ``inference_mode`` block (outermost kept)."""
    if t.ng_depth == 0:
        if t.pend_end >= 0:
            t.classify()  # the pending block was a policy forward, or update work
        t.ng_start = now_ns
        t.ng_lw = t.srec.last_write_ns()
        t.ng_dirty = False
    t.ng_depth += 1


def no_grad_exit(t: ThreadState, now_ns: int) -> None:
    """The thread left a no-grad block; the outermost one, with no sampler write or
    update inside, waits to be classified (``Timeline.classify``)."""
    if t.ng_depth <= 0:
        return
    t.ng_depth -= 1
    if t.ng_depth == 0 and not t.ng_dirty and t.srec.last_write_ns() == t.ng_lw:
        t.pend_start = t.ng_start
        t.pend_end = now_ns


def grad_forward(t: ThreadState, start_ns: int, end_ns: int, last_write: int) -> None:
    """The first module call after an update ran from ``start_ns`` to ``end_ns`` with grad
    on (``libs.torch``): with no sampler write inside it, it waits to be classified as
    a policy forward or update work (``Timeline.classify``), as a no-grad block does."""
    if t.ng_depth > 0 or t.srec.last_write_ns() != last_write:
        return
    if t.pend_end >= 0:
        t.classify()
    t.pend_start = start_ns
    t.pend_end = end_ns


def close_open_steps(ts: list[ThreadState]) -> None:
    """Close each thread's open trainer step (at save): its compute ends where sampling
    began again after the last update, else at the last update's end, else now (the
    default trainer's last item was worked on until here). A thread still running is left
    alone (its recorder has one writer); its last compute is not counted."""
    me = threading.get_ident()
    for t in ts:
        if not t.step_open:
            continue
        if t.ident != me and t.thread.is_alive():
            continue
        try:
            if t.ident != me:
                t.trec.release_writer()  # the thread has ended: this one writes last
            since = t.srec.since_mark_ns()
            nxt = since if since >= 0 else t.blk_start
            if t.blk_start >= 0 and t.blk_start < nxt:
                nxt = t.blk_start
            if nxt >= 0:
                end = nxt
            elif t.upd_end > t.prev_end:
                end = t.upd_end
            else:
                end = t.now() if t.ident == me else t.prev_end
            t.trec.lap_at(COMPUTE, end)
            t.trec.end_at(end)
            t.step_open = False
        except Exception:  # noqa: BLE001, S112 - on the way out: keep the rest
            continue


def new_thread() -> ThreadState:
    """Create (and register) the calling thread's profilers: the slow path of ``tls.t``."""
    from gyreprof.recording.profiler import Profiler

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
    from gyreprof.integrations._auto.thread_state import ThreadState

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
        import gyreprof.recording.profiler  # noqa: F401

        if run_id is not None:
            import gyreprof.live.publish  # noqa: F401
    except ImportError:
        pass


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
        loops=(),  # the loop shape is in each trainer's counters (loop.own / loop.fed)
        notes=tuple(_notes),
        deaths=_deaths.deaths(),
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
    from gyreprof._support.io import (
        write_atomic,  # here: the bootstrap of every process stays light
    )

    try:
        write_atomic(rec.start_path(run_dir, pid), _record("started").to_json().encode())
    except OSError as exc:
        print(f"gyreprof run: pid {pid} cannot write to {run_dir}: {exc}", file=sys.stderr)
    _install_exit_hooks()
    _start_stacks()


def _start_stacks() -> None:
    """The stack sampler (``stacks.py``; not with ``--no-stacks``); a failure costs only it."""
    try:
        from gyreprof.integrations._auto import stacks

        stacks.start(threads, note)
    except Exception as exc:  # noqa: BLE001 - the run goes on without code sites
        note(f"pid {os.getpid()} ran no stack sampler: {exc!r}")


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
        _save_deaths_only(pid)
        return False
    _saved_pid = pid
    name = pid if key is None else key
    written: list[Path] = []
    try:
        from gyreprof._support.io import write_atomic
        from gyreprof.model.snapshot import merge

        close_open_steps(ts)
        for side in ("sampler", "trainer"):
            snaps = [getattr(t, side).snapshot() for t in _side_threads(ts, side)]
            snap = merge(snaps)
            path = rec.snap_path(run_dir, name, side)
            write_atomic(path, snap.to_bytes())
            written.append(path)
        _save_rollouts(name)
        _save_sites(name)
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


def _save_deaths_only(pid: int) -> None:
    """A process that recorded nothing but had a thread die (a feeder that died before its
    first item): its start record carries the deaths, so the run can name them."""
    global _saved_pid
    if run_dir is None or not _deaths.deaths():
        return
    _saved_pid = pid
    try:
        from gyreprof._support.io import write_atomic

        write_atomic(rec.start_path(run_dir, pid), _record(how="exit").to_json().encode())
    except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
        print(f"gyreprof run: pid {pid} could not save what died in it: {exc!r}", file=sys.stderr)


def _save_rollouts(name: int | str) -> None:
    """The HTTP rollout requests (issue 23) in their own record; a failure costs only them.
    Nothing is imported here unless requests were made (their record's module was loaded
    at the first one: a dataclass defined at exit would reset Python's exit by SIGINT)."""
    log = sys.modules.get("gyreprof.integrations._auto.rollout_log")
    record = sys.modules.get("gyreprof.integrations._auto.rollout_record")
    if log is None or record is None or run_dir is None or not log.logs():
        return
    try:
        record.save(run_dir, name)
    except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
        print(f"gyreprof run: could not save the rollout requests: {exc!r}", file=sys.stderr)


def _save_sites(name: int | str) -> None:
    """The stack sampler's code sites in their own record; a failure costs only them."""
    stacks = sys.modules.get("gyreprof.integrations._auto.stacks")
    if stacks is None or run_dir is None:
        return
    try:
        stacks.save(run_dir, name)
    except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
        print(f"gyreprof run: could not save the stack samples: {exc!r}", file=sys.stderr)


def _side_threads(ts: list[ThreadState], side: str) -> list[ThreadState]:
    """The threads whose ``side`` profilers a save merges: every thread's sampler; for the
    trainer, the threads that trained when one did (the default trainer's steps from
    before another thread took over are left out), else all."""
    if side == "trainer":
        trained = [t for t in ts if t.trains]
        if trained:
            return trained
    return ts


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
    pid = os.getpid()
    key = rec.exec_key(pid, len(list(run_dir.glob(f"{pid}-x*.done.json"))))
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
    _unlink(rec.sites_path(run_dir, key))
    for side in ("sampler", "trainer"):
        _unlink(rec.snap_path(run_dir, key, side))
    _saved_pid = 0
    try:
        from gyreprof._support.io import write_atomic

        start = rec.start_path(run_dir, os.getpid())
        write_atomic(start, _record("started").to_json().encode())
    except OSError:
        pass


def _install_exit_hooks() -> None:
    """Save at exit, on SIGTERM and at a multiprocessing child's exit through the
    autosave's handlers (one SIGTERM handler per process, whoever came first: a user's
    ``Profiler(autosave=...)`` and the run both save)."""
    from gyreprof.recording import _autosave  # imported with the profiler already

    _autosave.on_exit(_save_on_exit)
    _autosave.hide_own_handlers()  # signal.getsignal(SIGTERM) as without gyreprof
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
    global tls, _lock, _threads, _default_main
    # the parent's profilers stay the parent's: the child records into its own
    tls = threading.local()
    _lock = threading.RLock()
    _threads = []
    _default_main = 0  # a forked child (a worker) is never the default trainer
    _deaths.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
_set_default_trainer()
