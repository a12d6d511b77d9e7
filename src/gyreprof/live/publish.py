"""Writer side of the live view: put a Profiler's stats block in a shared-memory file.

``Profiler(..., live=True)`` (or ``live="name"``) calls :func:`publish_profiler`,
which creates a segment (see ``gyreprof.live._layout`` for the format), moves
the Recorder's stats block into it with ``Recorder.rebind`` and returns a
:class:`LivePublication`, stored as ``prof.live``. The recorder then writes
its histograms, counters, step counter and open-phase marker straight into the
shared pages: the hot path is the same code with a different base pointer, so
it costs what it costs without ``live``.

Lifetime
--------
- ``prof.live.close()`` (or ``with prof.live:``) hands the stats block back to
  private memory, marks the segment closed and removes its file; the profiler
  keeps working. Readers that had it open keep seeing its last state.
- The segment is removed at normal interpreter exit, when the Profiler is
  garbage-collected, and at the exit of a ``multiprocessing`` child process
  (a worker that exits through ``os._exit`` after its target returns).
- A process killed by a signal leaves its file behind; ``gp.live.list()``
  reports it as stale (its pid is gone, or reused by a process started later)
  and ``gp.live.clean()`` removes it.

Trust
-----
The segment is created in this user's private folder (see
``gyreprof.live._layout``: a checked 0700 folder, never a name another user
could have created first) under a random temp name with ``O_CREAT | O_EXCL |
O_NOFOLLOW`` and mode 0600, then renamed to its final name. Its header records
the writer's uid and boot id beside its pid and start time, which is what a
reader checks. Another user can therefore neither open, truncate nor replace
it, nor make ``live=True`` fail by squatting names. The same user (and root)
still can: shrinking the file of a running writer kills it with SIGBUS, as
``kill -9`` would.

Fork
----
A child created by ``fork`` (``multiprocessing`` with the fork start method,
gymnasium ``AsyncVectorEnv`` workers on Linux) must not write into its
parent's segment. Right after a fork the child's copy of every published
profiler is *detached*: its stats block moves to private memory (the counts
recorded before the fork are kept) and ``prof.live.active`` becomes False.
The child publishes nothing until it calls ``prof.live.reopen()`` (a fresh
segment of its own) or creates a new ``Profiler(..., live=True)``.

Threads
-------
A ``per_thread=True`` profiler gets a :class:`LiveThreadGroup` as ``prof.live``:
each thread's Recorder is published in a segment of its own when the thread
first records (all of them carry the same ``meta["group"]``), and the
finished threads that the profiler folds into one snapshot (see
``gyreprof.recording.profiler``) are published in one *retired* segment, rewritten at
each fold before the folded threads' own segments are closed (its
``meta["folded"]`` lists them, so a reader never counts one twice and never
loses one). ``gp.live.attach(pid)`` and ``gp.live.collect`` merge the group
back into one view of the whole profiler.
"""

from __future__ import annotations

import errno
import itertools
import mmap
import os
import secrets
import socket
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from gyreprof._core import monotonic_ns
from gyreprof._support.block import block_words
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof._version import __version__
from gyreprof.live import _layout as lay

_SERIAL = itertools.count(1)
_PUBLISHED: weakref.WeakSet[LivePublication] = weakref.WeakSet()
_LOCK = threading.Lock()
_MAX_NAME = 200
_CREATE_FLAGS = (
    os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _check_name(name: str) -> str:
    if not isinstance(name, str):
        raise ArgumentTypeError(f"a live segment name must be a string, got {type(name).__name__}")
    text = name.strip()
    if not text or len(text) > _MAX_NAME or not text.isprintable():
        raise InvalidValueError(
            f"a live segment name must be 1..{_MAX_NAME} printable characters, got {name!r}"
        )
    return text


def _default_name(label: str | None) -> str:
    if label:
        return str(label)
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return prog if prog and not prog.startswith("-") else "python"


def _create_temp(pid: int, serial: int, *, retired: bool = False) -> tuple[Path, Path, int]:
    """(final path, temp path, fd of the temp file created 0600 with O_EXCL|O_NOFOLLOW)
    in this user's private segment folder."""
    directory = lay.base_dir()
    try:
        directory = lay.segment_dir(create=True)
        final = directory / lay.segment_filename(pid, serial, retired=retired)
        tmp = directory / f".{final.name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, _CREATE_FLAGS, 0o600)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"cannot create a live segment in {directory} ({exc.strerror}); set "
            f"{lay.ENV_DIR} to a writable directory, or pass live=False",
        ) from None
    return final, tmp, fd


def _reserve(fd: int, size: int) -> None:
    """Give the file ``size`` bytes of real storage now.

    On tmpfs a sparse file whose pages cannot be allocated later kills the
    writer with SIGBUS at its first touch; reserving them up front turns a
    full ``/dev/shm`` into an OSError (ENOSPC) here instead.
    """
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
    os.ftruncate(fd, size)


class _SharedMap:
    """A shared, writable mapping of a segment file that keeps no descriptor.

    ``mmap.mmap`` keeps a duplicate of the file's descriptor and closes that
    number in ``close()``, whatever it names by then: a program that closed
    every descriptor (``os.closerange``) and opened files of its own would have
    one of them closed under it at exit. So the file is mapped without keeping
    one (``trackfd=False`` where Python has it, else ``mmap(2)`` through ctypes),
    its descriptor is closed right after, and the pages are unmapped when the
    last view of them is released (a ``stats_view()`` a caller still holds keeps
    them mapped, as an ``mmap`` with exports would).
    """

    def __init__(self, fd: int, size: int) -> None:
        self.size = size
        self._owner: Any
        if sys.version_info >= (3, 13):
            self._owner = mmap.mmap(  # type: ignore[call-arg,unused-ignore]
                fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, trackfd=False
            )
        else:
            self._owner = _ctypes_map(fd, size)
        self.view: memoryview | None = memoryview(self._owner).cast("B")

    def close(self) -> None:
        """Drop this object's hold on the pages (unmapped once no view holds them)."""
        view, self.view = self.view, None
        owner, self._owner = self._owner, None
        if view is not None:
            view.release()
        if isinstance(owner, mmap.mmap):
            try:
                owner.close()
            except BufferError:  # a stats_view() still holds it; unmapped with that view
                pass


def _ctypes_map(fd: int, size: int) -> Any:
    """``size`` bytes of ``fd`` mapped shared and writable, as a ctypes array whose
    collection unmaps them (no descriptor is kept)."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    )
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    arr = (ctypes.c_ubyte * size).from_address(addr)
    # not at exit: a recorder may write into the pages until the process is gone
    weakref.finalize(arr, libc.munmap, addr, size).atexit = False
    return arr


class LivePublication:
    """A profiler's stats block published in a shared-memory segment (``prof.live``).

    Attributes: ``path`` (the segment file, None once closed or detached),
    ``name``, ``pid`` (the process that published it), ``active``.
    """

    def __init__(
        self,
        recorder: Any,
        recordings: Any,
        name: str,
        *,
        extra_meta: dict[str, Any] | None = None,
    ) -> None:
        self._rec = recorder
        self._extra_meta = dict(extra_meta or {})
        # the Profiler's RecorderSet (gyreprof.recording._recorders): its identity and counter names
        self._recordings = recordings
        self.name = name
        self._counter_names: list[str] = list(recordings.counter_names)
        self._lock = threading.Lock()
        self.pid = os.getpid()
        self.path: Path | None = None
        self.active = False
        self._map: _SharedMap | None = None
        self._mm: memoryview | None = None  # the whole segment, bytes
        self._stats_mv: memoryview | None = None
        self._names_offset = 0
        self._max_counters = int(recorder.config()["max_counters"])
        self._mp_finalizer: Any = None
        self._open()

    # -- creating ------------------------------------------------------------------

    def _open(self) -> None:
        rec = self._rec
        cfg = rec.config()
        stats_bytes = 8 * block_words(cfg)
        pid = os.getpid()
        ident = lay.process_identity(pid) or lay.ProcessIdentity(-1, time.time())
        identity = self._recordings.identity
        meta = {
            "name": self.name,
            "label": identity.label,
            "phases": list(identity.phases),
            "clock": str(cfg["clock"]),
            "config": cfg,
            "lap_cost_ns": float(identity.lap_cost_ns),
            "start_unix_s": time.time(),
            "start_mono_ns": int(monotonic_ns()),
            "gyreprof": __version__,
            "host": socket.gethostname(),
            "argv": list(sys.argv[:16]),
            "uid": lay.euid(),
            "boot_id": lay.boot_id(),
        }
        meta.update(self._extra_meta)
        head, header_bytes, names_offset = lay.build_header(
            pid=pid,
            identity=ident,
            stats_bytes=stats_bytes,
            max_counters=self._max_counters,
            meta=meta,
        )
        total = header_bytes + stats_bytes
        final, tmp, fd = _create_temp(pid, next(_SERIAL))
        directory = final.parent
        try:
            _reserve(fd, total)
            shared = _SharedMap(fd, total)
        except OSError as exc:
            os.close(fd)
            os.unlink(tmp)
            raise OSError(
                exc.errno,
                f"cannot create a live segment of {total} bytes in {directory} "
                f"({exc.strerror}); free space there, set {lay.ENV_DIR}, or pass live=False",
            ) from None
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)  # the mapping keeps no descriptor (see _SharedMap)
        mm = shared.view
        assert mm is not None
        try:
            mm[:header_bytes] = head
            for slot, cname in enumerate(self._counter_names[: self._max_counters]):
                self._write_slot(mm, names_offset, slot, cname)
            stats_mv = mm[header_bytes:total]
            rec.rebind(stats_mv)
            os.rename(tmp, final)
        except BaseException:
            try:
                rec.rebind(None)
            finally:
                os.unlink(tmp)
                shared.close()
            raise
        self._map = shared
        self._mm = mm
        self._stats_mv = stats_mv
        self._names_offset = names_offset
        self.path = final
        self.pid = pid
        self.active = True
        self._register_exit_hooks()

    @staticmethod
    def _write_slot(mm: memoryview, names_offset: int, slot: int, name: str) -> None:
        data = lay.encode_name_slot(name)
        off = names_offset + slot * lay.NAME_SLOT_BYTES
        mm[off + 1 : off + len(data)] = data[1:]  # the bytes first, the length byte last
        mm[off] = data[0]

    def _register_exit_hooks(self) -> None:
        with _LOCK:
            _PUBLISHED.add(self)
        if "multiprocessing" in sys.modules:
            import multiprocessing

            if multiprocessing.parent_process() is not None:
                # a multiprocessing child ends with os._exit (no atexit); its
                # finalizer registry still runs on the way out
                import multiprocessing.util as mp_util

                ref = weakref.ref(self)
                self._mp_finalizer = mp_util.Finalize(
                    None, _close_ref, args=(ref,), exitpriority=10
                )

    # -- the Profiler hook -----------------------------------------------------------

    def counter_added(self, name: str, slot: int) -> None:
        """Publish the name of event counter ``slot`` (called by Profiler.count)."""
        with self._lock:
            while len(self._counter_names) <= slot:
                self._counter_names.append(f"counter{len(self._counter_names)}")
            self._counter_names[slot] = name
            mm = self._mm
            if mm is not None and self.active and 0 <= slot < self._max_counters:
                self._write_slot(mm, self._names_offset, slot, name)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop publishing: stats move to private memory, the segment is marked closed and
        removed. The profiler keeps recording. Idempotent."""
        with self._lock:
            if not self.active:
                return
            if self.pid != os.getpid():
                self._detach_locked()
                return
            mm = self._mm
            assert mm is not None
            lay_state = lay.STATE_CLOSED.to_bytes(4, "little")
            mm[lay.CLOSED_NS_OFFSET : lay.CLOSED_NS_OFFSET + 8] = int(monotonic_ns()).to_bytes(
                8, "little", signed=True
            )
            mm[lay.STATE_OFFSET : lay.STATE_OFFSET + 4] = lay_state
            self._rec.rebind(None)
            if self.path is not None:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
            self._release_mapping()
            if self._mp_finalizer is not None:
                self._mp_finalizer.cancel()
                self._mp_finalizer = None

    def _detach_locked(self) -> None:
        """In a forked child: stop writing to the parent's segment (no unlink, no state)."""
        self._rec.rebind(None)
        self._release_mapping()
        self._mp_finalizer = None

    def _release_mapping(self) -> None:
        mv, self._stats_mv = self._stats_mv, None
        shared, self._map = self._map, None
        self._mm = None
        self.active = False
        self.path = None
        if mv is not None:
            try:
                mv.release()
            except BufferError:  # a stats_view() still holds it; freed with that view
                pass
        if shared is not None:
            shared.close()

    def _after_fork_in_child(self) -> None:
        if self.active and self.pid != os.getpid():
            # the parent's lock object may be held by a thread that does not exist here
            self._lock = threading.Lock()
            with self._lock:
                self._detach_locked()

    def reopen(self) -> Path:
        """Publish again in a fresh segment of this process (e.g. in a forked child, or
        after ``close()``); the counts recorded so far are kept. Returns the new path."""
        with self._lock:
            if self.active and self.pid == os.getpid():
                assert self.path is not None
                return self.path
            if self.active:
                self._detach_locked()
            self._open()
            assert self.path is not None
            return self.path

    def __enter__(self) -> LivePublication:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"at {self.path}" if self.active else "closed"
        return f"LivePublication(name={self.name!r}, pid={self.pid}, {state})"


def _close_ref(ref: weakref.ref[LivePublication] | weakref.ref[LiveThreadGroup]) -> None:
    pub = ref()
    if pub is not None:
        try:
            pub.close()
        except Exception as exc:  # noqa: BLE001 - on the way out: report, never raise
            print(f"gyreprof: closing live segment {pub.path} failed: {exc}", file=sys.stderr)


def _after_fork_in_child() -> None:
    for pub in list(_PUBLISHED):
        pub._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class LiveThreadGroup:
    """A ``per_thread`` profiler's live segments (``prof.live``): one per thread, plus the
    retired segment of its folded (finished) threads. See the module doc.

    Attributes: ``name``, ``pid``, ``group`` (the id every segment of it carries),
    ``active``, ``paths`` (the segment files now), ``path`` (the first of them).
    """

    def __init__(self, recordings: Any, name: str) -> None:
        self.name = name
        # the Profiler's RecorderSet (gyreprof.recording._recorders): recorders, identity, counter names
        self._recordings = recordings
        self._lock = threading.RLock()
        self._pubs: dict[int, LivePublication] = {}  # id(recorder) -> its publication
        self._folded: list[int] = []  # serials of thread segments in the retired one
        self._retired_snap: Any = None
        self._retired_path: Path | None = None
        self._retired_serial = 0
        self._warned = False
        self._mp_finalizer: Any = None
        self.pid = 0
        self.group = ""
        self.active = False
        self._start()
        for rec in recordings.all():
            self.thread_started(rec)

    def _start(self) -> None:
        self.pid = os.getpid()
        self.group = f"{self.pid}-{next(_SERIAL)}-{secrets.token_hex(4)}"
        self._retired_serial = next(_SERIAL)
        self._retired_path = None
        self._folded = []
        self._pubs = {}
        self.active = True
        lay.segment_dir(create=True)  # fail now (OSError) when no private folder can be had
        with _LOCK:
            _GROUPS.add(self)
        if "multiprocessing" in sys.modules:
            import multiprocessing

            if multiprocessing.parent_process() is not None:
                import multiprocessing.util as mp_util

                self._mp_finalizer = mp_util.Finalize(
                    None, _close_ref, args=(weakref.ref(self),), exitpriority=10
                )

    @property
    def paths(self) -> list[Path]:
        with self._lock:
            out = [p.path for p in self._pubs.values() if p.active and p.path is not None]
            if self._retired_path is not None:
                out.append(self._retired_path)
            return out

    @property
    def path(self) -> Path | None:
        paths = self.paths
        return paths[0] if paths else None

    # -- the Profiler hooks ----------------------------------------------------------

    def thread_started(self, rec: Any) -> None:
        """Publish a new thread's Recorder. A segment that cannot be created (a full
        /dev/shm) is reported once on stderr; the thread records privately."""
        with self._lock:
            if not self.active or self.pid != os.getpid() or id(rec) in self._pubs:
                return
            try:
                pub = LivePublication(
                    rec,
                    self._recordings,
                    self.name,
                    extra_meta={"group": self.group, "thread": threading.current_thread().name},
                )
            except OSError as exc:
                if not self._warned:
                    self._warned = True
                    print(
                        f"gyreprof: thread {threading.current_thread().name!r} of live profiler "
                        f"{self.name!r} is not published: {exc}",
                        file=sys.stderr,
                    )
                return
            self._pubs[id(rec)] = pub

    def threads_folded(self, dead: list[Any], folded: Any) -> None:
        """Called by the profiler after it folded the recorders ``dead`` into ``folded``:
        the retired segment is rewritten first, then the dead threads' segments close."""
        with self._lock:
            if not self.active or self.pid != os.getpid():
                return
            pairs = [(id(r), self._pubs.pop(id(r))) for r in dead if id(r) in self._pubs]
            pubs = [pub for _, pub in pairs]
            serials = []
            for pub in pubs:
                parsed = lay.parse_filename(pub.path.name) if pub.path is not None else None
                if parsed is not None:
                    serials.append(parsed[1])
            self._folded.extend(serials)
            self._retired_snap = folded
            try:
                self._write_retired(folded, dead[0].config() if dead else None)
            except OSError as exc:
                print(
                    f"gyreprof: cannot publish finished threads of {self.name!r}: {exc}",
                    file=sys.stderr,
                )
                self._folded = self._folded[: len(self._folded) - len(serials)]
                for key, pub in pairs:
                    self._pubs[key] = pub  # keep them published rather than lose them
                return
            for pub in pubs:
                pub.close()

    def _write_retired(self, snap: Any, cfg: dict[str, Any] | None) -> None:
        if cfg is None:
            cfg = snap.config.to_dict()
        data = snap.to_bytes()
        pid = self.pid
        ident = lay.process_identity(pid) or lay.ProcessIdentity(-1, time.time())
        identity = self._recordings.identity
        meta = {
            "name": self.name,
            "label": identity.label,
            "phases": list(identity.phases),
            "clock": str(cfg.get("clock", "monotonic")),
            "config": cfg,
            "lap_cost_ns": identity.lap_cost_ns,
            "start_unix_s": time.time(),
            "gyreprof": __version__,
            "host": socket.gethostname(),
            "argv": list(sys.argv[:16]),
            "uid": lay.euid(),
            "boot_id": lay.boot_id(),
            "kind": lay.KIND_RETIRED,
            "group": self.group,
            "folded": list(self._folded),
        }
        head, _, _ = lay.build_header(
            pid=pid,
            identity=ident,
            stats_bytes=len(data),
            max_counters=int(cfg.get("max_counters", 0)),
            meta=meta,
        )
        final, tmp, fd = _create_temp(pid, self._retired_serial, retired=True)
        try:
            try:
                _write_all(fd, head)
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.rename(tmp, final)  # readers see the old file or the new one, never half
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._retired_path = final

    def counter_added(self, name: str, slot: int) -> None:
        with self._lock:
            pubs = list(self._pubs.values())
        for pub in pubs:
            pub.counter_added(name, slot)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop publishing every thread (their stats move to private memory) and remove
        the retired segment. The profiler keeps recording. Idempotent."""
        with self._lock:
            if not self.active:
                return
            mine = self.pid == os.getpid()
            pubs = list(self._pubs.values())
            self._pubs = {}
            self.active = False
            for pub in pubs:
                pub.close()
            if mine and self._retired_path is not None:
                try:
                    os.unlink(self._retired_path)
                except FileNotFoundError:
                    pass
            self._retired_path = None
            if self._mp_finalizer is not None and mine:
                self._mp_finalizer.cancel()
            self._mp_finalizer = None

    def _after_fork_in_child(self) -> None:
        if self.active and self.pid != os.getpid():
            self._lock = threading.RLock()
            self._pubs = {}  # each detached itself (their own fork hook)
            self._retired_path = None
            self._mp_finalizer = None
            self.active = False

    def reopen(self) -> list[Path]:
        """Publish again (in a forked child, or after ``close()``): every thread's
        Recorder and the folded threads get fresh segments of this process."""
        with self._lock:
            if self.active and self.pid == os.getpid():
                return self.paths
            self._start()
            for rec in self._recordings.all():
                self.thread_started(rec)
            if self._retired_snap is not None:
                self._write_retired(self._retired_snap, None)
            return self.paths

    def __enter__(self) -> LiveThreadGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"{len(self.paths)} segments" if self.active else "closed"
        return f"LiveThreadGroup(name={self.name!r}, pid={self.pid}, {state})"


_GROUPS: weakref.WeakSet[LiveThreadGroup] = weakref.WeakSet()


def _groups_after_fork_in_child() -> None:
    for g in list(_GROUPS):
        g._after_fork_in_child()


os.register_at_fork(after_in_child=_groups_after_fork_in_child)


def publish_profiler(prof: Any, name: str | None = None) -> LivePublication | LiveThreadGroup:
    """Publish ``prof``'s stats block in a new live segment; returns ``prof.live``'s value.

    ``name`` labels the segment in ``gp.live.list()`` and ``gyreprof top``
    (default: the profiler's label, else the script's file name). A
    ``per_thread`` profiler gets a :class:`LiveThreadGroup` (a segment per thread).
    """
    recordings = prof._recs  # the Profiler's RecorderSet (gyreprof.recording._recorders)
    seg_name = _check_name(name) if name is not None else _default_name(recordings.identity.label)
    if getattr(prof, "per_thread", False):
        group = LiveThreadGroup(recordings, seg_name)
        weakref.finalize(prof, _close_ref, weakref.ref(group))
        return group
    pub = LivePublication(prof.recorder, recordings, seg_name)
    weakref.finalize(prof, _close_ref, weakref.ref(pub))
    return pub
