"""The stack sampler of one ``gyreprof run`` process (issue 38): which code the
sampler's untimed time and the trainer's compute went to.

A daemon thread wakes about ``--stacks-hz`` times a second (``options.stacks_hz``,
25 by default; each wait drawn between half and one and a half periods, so a loop
with a period of its own is not sampled in step with it) and reads
``sys._current_frames()`` for the threads that record (``state.threads()``). Nothing
is added to the hot path: what a thread is doing is read from the state its
timeline already keeps (``timeline.Timeline`` / ``thread_state.ThreadState``):

- *in the sampler's wall time*: a data wait is open (``in_wait``), or something was
  sampled since the last update (``srec.since_mark_ns() >= 0``, ``blk_start >= 0``).
  Such a sample waits (``_Track.pending``) until the thread's timeline tells whether
  the block went on past it: a later sampler write or wait end before the block was
  closed (``last_write_ns``, ``blk_end``), or a block closed at or after it
  (``blocks``, ``prev_end``). Then it counts in the sampler's wall; outside every
  timed phase (no env call, ``inside``; no no-grad block, ``ng_depth``; no data
  wait) it is charged to its site. Inside a collector's own rollout (``in_rollout``:
  a TorchRL worker's batch, itself a wait and a no-grad block) only the env calls
  and the timed policy forward (``in_fwd``) are timed, and a worker that collects
  such batches and never trains is not sampled between them. A sample the block did not
  reach is the update's (compute) on a thread whose trainer step is open, else
  dropped (a worker's loop after its last write);
- *in the trainer's compute*: no block open and a trainer step open (``step_open``):
  charged to its site.

A site is the innermost frame of the user's code (:func:`_site`). At save
(``state.save``) the counts go to ``<pid>.sites.json`` (``analysis.sites.ProcessSites``),
beside the process's snapshots; the launcher merges them (``collect``).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from gyreprof.integrations._auto import options
from gyreprof.integrations._auto import records as rec

_PENDING_MAX = 1 << 16  # samples waiting for their block to be told (per thread)
_MAX_ERRORS = 3  # a sampler that fails this many times in a row stops


class _Track:
    """One recording thread as the sampler follows it: its samples not told yet."""

    __slots__ = ("t", "pending", "blocks")

    def __init__(self, t: Any) -> None:
        self.t = t
        self.pending: list[tuple[int, CodeType | None, bool]] = []  # (ns, site, timed)
        self.blocks = int(t.blocks)


class _Counts:
    """What the sampler found so far in this process."""

    def __init__(self) -> None:
        self.sampler: dict[CodeType, int] = {}  # untimed samples in the sampler's wall
        self.compute: dict[CodeType, int] = {}
        self.sampler_samples = 0
        self.compute_samples = 0
        self.tracks: dict[int, _Track] = {}  # id(ThreadState) -> track
        self.ticks = 0  # looks taken
        self.cpu_s = 0.0  # the sampler thread's CPU time in them

    def in_sampler(self, site: CodeType | None, timed: bool) -> None:
        self.sampler_samples += 1
        if not timed and site is not None:
            self.sampler[site] = self.sampler.get(site, 0) + 1

    def in_compute(self, site: CodeType | None) -> None:
        self.compute_samples += 1
        if site is not None:
            self.compute[site] = self.compute.get(site, 0) + 1


_lock = threading.Lock()
_counts = _Counts()
_stop = threading.Event()
_thread: threading.Thread | None = None
_pid = 0
_hz = 0.0

# ------------------------------------------------------------------- where a frame is

_USER, _PACKAGE, _STDLIB, _OURS = 0, 1, 2, 3
_kinds: dict[CodeType, int] = {}
_roots: tuple[str, tuple[str, ...]] | None = None


def _where_roots() -> tuple[str, tuple[str, ...]]:
    global _roots
    if _roots is None:
        import sysconfig

        ours = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
        paths = sysconfig.get_paths()
        std = {
            os.path.realpath(p) + os.sep
            for p in (paths.get("stdlib"), paths.get("platstdlib"))
            if p
        }
        _roots = (ours + os.sep, tuple(sorted(std)))
    return _roots


def _kind(filename: str) -> int:
    """Whose code a file holds: the user's, an installed package's, the standard
    library's or gyreprof's."""
    if filename.startswith("<"):
        return _STDLIB if filename.startswith("<frozen") else _USER  # python -c: the user's
    ours, std = _where_roots()
    path = os.path.realpath(filename)
    if path.startswith(ours):
        return _OURS
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return _PACKAGE
    if path.startswith(std):
        return _STDLIB
    return _USER


def _kind_of(code: CodeType) -> int:
    """:func:`_kind` of a code object's file; the ``-c`` line by which multiprocessing
    starts a spawned or forkserver child (``from multiprocessing.spawn import
    spawn_main; ...``) is the standard library's, not the user's."""
    if code.co_filename == "<string>" and any(
        n.startswith("multiprocessing") for n in code.co_names
    ):
        return _STDLIB
    return _kind(code.co_filename)


def _site(f: FrameType | None) -> CodeType | None:
    """The innermost frame of the user's code in the stack from ``f`` outwards; with
    none, the innermost installed package's, else the innermost standard library's
    (gyreprof's own frames never)."""
    package = std = None
    kinds = _kinds
    while f is not None:
        code = f.f_code
        k = kinds.get(code)
        if k is None:
            k = kinds[code] = _kind_of(code)
        if k == _USER:
            return code
        if k == _PACKAGE:
            if package is None:
                package = code
        elif k == _STDLIB and std is None:
            std = code
        f = f.f_back
    return package if package is not None else std


# ---------------------------------------------------------------------- the sampling


def _settle(c: _Counts, tr: _Track, final: bool = False) -> None:
    """Tell the thread's waiting samples that its timeline has decided."""
    t, pending = tr.t, tr.pending
    blocks = int(t.blocks)
    if blocks != tr.blocks:  # a block closed since: the samples up to its end were in it
        cut = int(t.prev_end)
        for x, site, timed in pending:
            if x <= cut:
                c.in_sampler(site, timed)
            elif t.step_open:
                c.in_compute(site)
        pending.clear()
        tr.blocks = blocks
        return
    if not pending:
        return
    last = max(int(t.srec.last_write_ns()), int(t.blk_end))
    k = 0
    for x, site, timed in pending:
        if x >= last:
            break
        c.in_sampler(site, timed)
        k += 1
    del pending[:k]
    if final:
        pending.clear()  # after the last write: the loop had ended


def _sample(c: _Counts, ts: list[Any], frames: dict[int, FrameType]) -> None:
    """One look at every recording thread."""
    for t in ts:
        tr = c.tracks.get(id(t))
        if tr is None:
            tr = c.tracks[id(t)] = _Track(t)
        _settle(c, tr)
        f = frames.get(t.ident)
        if f is None:
            continue
        now = int(t.now())
        waiting = bool(t.in_wait)
        if t.in_rollout:  # a collector's own batch: only env calls and the forward are timed
            if len(tr.pending) < _PENDING_MAX:
                tr.pending.append((now, _site(f), bool(t.inside or t.in_fwd)))
        elif t.rolled and not t.trains:
            pass  # a collector's worker between its batches: waiting for its next order
        elif waiting or t.srec.since_mark_ns() >= 0 or t.blk_start >= 0:
            if len(tr.pending) < _PENDING_MAX:
                tr.pending.append((now, _site(f), bool(waiting or t.inside or t.ng_depth > 0)))
        elif t.step_open:
            c.in_compute(_site(f))


def _ready() -> None:
    """Import now what the save at exit needs: a dataclass defined at exit (its methods
    are made by ``exec`` of a string, which resets the interpreter's note of an
    uncaught KeyboardInterrupt, so the process would exit 1 instead of by SIGINT;
    ``state._save_rollouts`` says the same), and an import at exit may find the
    interpreter half gone."""
    from gyreprof._support.io import write_atomic  # noqa: F401
    from gyreprof.analysis.sites import ProcessSites, SiteCount

    ProcessSites(pid=0, hz=1.0, sampler=[SiteCount("f", "f.py", 1, 0)]).to_json()
    _where_roots()


def _run(period_s: float, threads: Callable[[], list[Any]], note: Callable[[str], None]) -> None:
    from gyreprof._support.threadname import name_os_thread

    name_os_thread("gyreprof-stacks")  # the census must not count it as the user's

    draw = random.Random().uniform
    sleep = time.sleep
    cpu = time.thread_time
    me = threading.get_ident()
    errors = 0
    while True:
        sleep(period_s * draw(0.5, 1.5))
        if _stop.is_set():
            return
        c0 = cpu()
        try:
            ts = [t for t in threads() if t.ident != me]
            frames = sys._current_frames()
            try:
                with _lock:
                    _sample(_counts, ts, frames)
            finally:
                del frames
            errors = 0
            _counts.ticks += 1
            _counts.cpu_s += cpu() - c0
        except Exception as exc:  # noqa: BLE001 - the sampler never costs the run
            errors += 1
            if errors >= _MAX_ERRORS:
                note(f"the stack sampler of pid {os.getpid()} stopped: {exc!r}")
                return


def start(threads: Callable[[], list[Any]], note: Callable[[str], None]) -> bool:
    """Start this process's sampler (once per process; not with ``--no-stacks``) over
    ``threads()``, the threads that record (``state.threads``); ``note`` says why it
    stopped, if it does."""
    global _thread, _pid, _hz
    pid = os.getpid()
    if _pid == pid:
        return _thread is not None
    _pid = pid
    hz = options.stacks_hz()
    if hz <= 0:
        return False
    _ready()  # here, on the thread that first records: never in a thread racing an exit
    from gyreprof._support import threadname

    threadname.prepare()  # what naming the thread needs, loaded by the starting thread
    _hz = hz
    _stop.clear()
    th = threading.Thread(
        target=_run, args=(1.0 / hz, threads, note), name="gyreprof-stacks", daemon=True
    )
    th.start()
    _thread = th
    return True


def record() -> Any:
    """Stop sampling and give what was found (``analysis.sites.ProcessSites``), or None
    when the sampler did not run or saw nothing."""
    if _thread is None or _pid != os.getpid():
        return None
    _stop.set()
    return _found(final=True)


def so_far() -> Any:
    """What was found so far, sampling on (a Ray worker's periodic send), or None."""
    if _thread is None or _pid != os.getpid():
        return None
    return _found(final=False)


def _found(final: bool) -> Any:
    """The sites counted (``final``: every waiting sample settled, as at the end)."""
    if "gyreprof.analysis.sites" not in sys.modules:
        return None  # not ready yet (see _ready): no sites rather than imports at exit
    if not _lock.acquire(timeout=1.0):
        return None
    try:
        c = _counts
        for tr in c.tracks.values():
            _settle(c, tr, final=final)
        from gyreprof.analysis.sites import ProcessSites, SiteCount

        def listed(counts: dict[CodeType, int]) -> list[SiteCount]:
            # one row a site: code objects alike by name, file and line (each exec of a
            # string compiles its own "<module> (<string>:1)") are one
            by: dict[tuple[str, str, int], int] = {}
            for code, n in counts.items():
                key = (
                    getattr(code, "co_qualname", code.co_name),
                    code.co_filename,
                    max(0, int(code.co_firstlineno)),
                )
                by[key] = by.get(key, 0) + n
            out = [SiteCount(f, file, line, n) for (f, file, line), n in by.items()]
            out.sort(key=lambda s: -s.samples)
            return out

        if c.sampler_samples == 0 and c.compute_samples == 0:
            return None
        return ProcessSites(
            pid=os.getpid(),
            hz=_hz,
            sampler_samples=c.sampler_samples,
            compute_samples=c.compute_samples,
            sampler=listed(c.sampler),
            compute=listed(c.compute),
        )
    finally:
        _lock.release()


def save(run_dir: Path, name: int | str) -> None:
    """Write the process's sites beside its snapshots (nothing when there are none)."""
    found = record()
    if found is None:
        return
    from gyreprof._support.io import write_atomic

    write_atomic(rec.sites_path(run_dir, name), found.to_json().encode())


def _after_fork_in_child() -> None:
    global _lock, _counts, _stop, _thread, _pid
    # the parent's sampler thread is not in the child; it starts its own at its first record
    _lock = threading.Lock()
    _counts = _Counts()
    _stop = threading.Event()
    _thread = None
    _pid = 0


os.register_at_fork(after_in_child=_after_fork_in_child)
