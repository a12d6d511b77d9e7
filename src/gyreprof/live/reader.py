"""Reader side of the live view: find, attach to and aggregate live segments.

A reader copies a segment's stats block with ``pread`` whenever asked for a
snapshot; it never maps the file, so a segment truncated under it is a
``SegmentReadError`` (a ValueError), never SIGBUS, and it never locks,
signals or otherwise slows the writer. It believes a segment only after the
checks of ``gyreprof.live._layout.check_trust`` (owner, folder, identity).

Consistency: every histogram bucket and counter of a stats block only grows
while the writer runs, so a copy taken mid-write is a valid histogram of the
values recorded up to some instant between the copy's start and end.
``Snapshot.from_stats`` takes the counts from the buckets; before that, the
reader widens a phase's min/max to cover its non-empty buckets (min/max are
words stored apart from the buckets, so a copy can catch one of them a value
behind). Each snapshot therefore has counts that add up and percentiles in
order (min <= p50 <= p90 <= p99 <= p99.9 <= max). Up to ``_QUIET_TRIES``
copies are taken to find one during which no step closed; that makes the
rolling windows and the step count agree exactly, but the last copy is used
when the writer never pauses.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from gyreprof._core import monotonic_ns
from gyreprof._support import checks as _checks
from gyreprof._support import limits as _limits
from gyreprof._support.block import Progress, StatsBlock, block_words
from gyreprof._support.errors import ArgumentTypeError, CorruptDataError, InvalidValueError
from gyreprof._support.io import OwnedFd
from gyreprof._support.limits import decode_errors
from gyreprof.live import _layout as lay
from gyreprof.model.snapshot import (
    ProfilerIdentity,
    Snapshot,
    build_snapshot,
    interval,
    layout_edges,
    merge,
)
from gyreprof.model.summary import Summary

try:
    import pwd
except ImportError:  # not on Unix
    pwd = None  # type: ignore[assignment]

_QUIET_TRIES = 3

__all__ = [
    "LiveCollection",
    "LiveEntry",
    "LiveGroupReader",
    "LiveReader",
    "attach",
    "clean",
    "collect",
    "interval",
    "list_segments",
]


def _permission_message(path: Path) -> str:
    try:
        owner = path.stat().st_uid
        who = f"uid {owner}"
        if pwd is not None:
            try:
                who = f"user {pwd.getpwuid(owner).pw_name!r} (uid {owner})"
            except KeyError:
                pass
    except OSError:
        who = "another user"
    return (
        f"permission denied reading live segment {path}: it belongs to {who}. Run the reader "
        "as the same user as the profiled process (or as root)."
    )


# ---------------------------------------------------------------------------- listing


@dataclass(frozen=True)
class LiveEntry:
    """One live segment on this machine, as ``gp.live.list()`` reports it.

    ``alive``: the process that published it is running (same pid, same start
    time). ``stale``: that process is gone (or its pid now belongs to a
    different process); the file is a leftover that ``gp.live.clean()`` removes.
    ``error`` says why the header could not be read (then ``name`` is None).
    """

    pid: int
    name: str | None
    path: Path
    alive: bool
    stale: bool
    serial: int = 0
    phases: tuple[str, ...] = ()
    closed: bool = False
    error: str | None = None
    group: str | None = None  # the per_thread profiler it belongs to
    retired: bool = False  # the retired-threads segment of that profiler
    folded: tuple[int, ...] = ()  # (retired) serials of the thread segments it holds

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "name": self.name,
            "path": str(self.path),
            "alive": self.alive,
            "stale": self.stale,
            "serial": self.serial,
            "phases": list(self.phases),
            "closed": self.closed,
            "error": self.error,
            "group": self.group,
            "retired": self.retired,
        }


_HEADER_CAP = lay.HEADER_CAP  # bytes of header a reader reads at most (metadata + name table)
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _pread_exact(fd: int, n: int, offset: int, where: str) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.pread(fd, n - len(out), offset + len(out))
        if not chunk:
            raise lay.SegmentReadError(
                f"{where} is truncated: it ended at {offset + len(out)} bytes while "
                f"{offset + n} were expected (shrunk while read?)"
            )
        out += chunk
    return bytes(out)


def _open_segment(path: Path) -> tuple[int, os.stat_result, lay.Header]:
    """Open a segment without following links, check its owner and folder on the open
    fd (``lay.check_owner``) before reading a byte, then parse its header from at most
    ``_HEADER_CAP`` bytes (the size field is checked first). Returns (fd, fstat, header);
    the fd is closed on error. FileNotFoundError (absent), PermissionError, ValueError."""
    where = str(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except PermissionError:
        raise PermissionError(_permission_message(path)) from None
    except IsADirectoryError:
        raise InvalidValueError(f"{where} is a directory, not a gyreprof live segment") from None
    except OSError as exc:
        if os.path.islink(path):
            raise lay.UntrustedSegmentError(f"{where} is a symbolic link; not followed") from None
        raise InvalidValueError(f"cannot open {where}: {exc}") from None
    try:
        fst = os.fstat(fd)
        if not stat_mod.S_ISREG(fst.st_mode):
            raise InvalidValueError(f"{where} is not a regular file, not a gyreprof live segment")
        name = lay.parse_filename(path.name)
        lay.check_owner(path, fst, name[0] if name else None)
        size = fst.st_size
        head = _pread_exact(fd, min(size, lay.FIXED_BYTES), 0, where)
        if size >= lay.FIXED_BYTES and head[:8] == lay.LIVE_MAGIC:
            hb = int(lay.FIXED.unpack_from(head, 0)[2])
            if lay.FIXED_BYTES < hb <= min(size, _HEADER_CAP):
                head = _pread_exact(fd, hb, 0, where)
            elif hb > _HEADER_CAP:
                raise InvalidValueError(
                    f"{where} is corrupted: a header of {hb} bytes (at most {_HEADER_CAP})"
                )
        with decode_errors(f"{where} is corrupted"):
            header = lay.parse_header(head, size, where)
    except BaseException:
        os.close(fd)
        raise
    return fd, fst, header


def _entry(path: Path, pid: int, serial: int) -> LiveEntry:
    try:
        fd, fst, header = _open_segment(path)
    except PermissionError:
        alive = lay.process_identity(pid) is not None
        return LiveEntry(pid, None, path, alive, not alive, serial, error=_permission_message(path))
    except FileNotFoundError:
        raise
    except lay.UntrustedSegmentError as exc:
        return LiveEntry(pid, None, path, False, False, serial, error=str(exc))
    except (ValueError, OSError) as exc:
        alive = lay.process_identity(pid) is not None
        return LiveEntry(pid, None, path, alive, not alive, serial, error=str(exc))
    os.close(fd)
    try:
        alive = lay.check_trust(path, fst, header, pid)
    except lay.UntrustedSegmentError as exc:
        # never believed; a leftover of this user's own (e.g. from an older gyreprof in an
        # open folder) whose process is gone is still stale, for clean() to remove
        mine_and_gone = fst.st_uid == lay.euid() and lay.process_identity(pid) is None
        return LiveEntry(pid, None, path, False, mine_and_gone, serial, error=str(exc))
    return LiveEntry(
        pid=pid,
        name=str(header.meta.get("name")),
        path=path,
        alive=alive,
        stale=not alive,
        serial=serial,
        phases=tuple(header.meta["phases"]),
        closed=header.state == lay.STATE_CLOSED,
        group=header.group,
        retired=header.retired,
        folded=_folded_of(header),
    )


def _folded_of(header: lay.Header) -> tuple[int, ...]:
    raw = header.meta.get("folded") if header.retired else None
    if not isinstance(raw, list):
        return ()
    return tuple(x for x in raw if isinstance(x, int) and not isinstance(x, bool))


def drop_folded(entries: Sequence[LiveEntry]) -> list[LiveEntry]:
    """``entries`` less the thread segments that a retired segment of the same
    profiler already holds (a fold in progress: never count a thread twice)."""
    folded = {(e.pid, e.group, k) for e in entries if e.retired for k in e.folded}
    return [
        e
        for e in entries
        if e.retired or e.group is None or (e.pid, e.group, e.serial) not in folded
    ]


def _dirs_to_scan(pid: int | None) -> list[Path]:
    """The folders where segments of ``pid`` (or of anyone this user may read) can be."""
    me = lay.euid()
    uids = {me}
    if pid is not None:
        owner = lay.process_uid(pid)
        if owner is not None:
            uids.add(owner)
    base = lay.base_dir()
    if me == 0 and pid is None:
        try:
            for n in os.listdir(base):
                if n.startswith("gyreprof-") and n[9:].isdigit():
                    uids.add(int(n[9:]))
        except OSError:
            pass
    out: list[Path] = []
    for uid in sorted(uids):
        for d in lay.candidate_dirs(uid):
            if d not in out and os.path.isdir(d):
                out.append(d)
    return out


def list_segments(
    pid: int | None = None, *, directory: str | os.PathLike[str] | None = None
) -> list[LiveEntry]:
    """Live segments on this machine (of ``pid`` only, when given), oldest first per pid.

    Looks in this user's segment folders and, for ``pid``, in those of the
    process's owner (root: everyone's). A segment that may not be believed
    (see ``gyreprof.live._layout``) is listed with ``error`` set, never alive.
    """
    dirs = [Path(directory)] if directory is not None else _dirs_to_scan(pid)
    found = []
    denied: list[Path] = []
    for d in dirs:
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            continue
        except (PermissionError, NotADirectoryError):
            denied.append(d)
            continue
        for n in names:
            parsed = lay.parse_filename(n)
            if parsed is None or (pid is not None and parsed[0] != pid):
                continue
            found.append((parsed[0], parsed[1], d / n))
    if denied and directory is not None:
        raise PermissionError(
            f"permission denied listing {denied[0]}; set GYREPROF_LIVE_DIR to a directory you "
            "can read"
        )
    found.sort()
    out = []
    for p, serial, path in found:
        try:
            out.append(_entry(path, p, serial))
        except FileNotFoundError:  # removed while we looked
            continue
    return out


def clean(*, directory: str | os.PathLike[str] | None = None) -> list[LiveEntry]:
    """Remove the segments of processes that are gone; returns the entries removed.

    Segments this user may not remove (another user's, in a sticky directory)
    are left alone.
    """
    removed = []
    for e in list_segments(directory=directory):
        if not e.stale:
            continue
        if e.error is not None and not e.path.is_file():
            continue  # a directory or other object that only looks like a segment by name
        try:
            os.unlink(e.path)
        except OSError:  # gone already, not ours to remove, not a file
            continue
        removed.append(e)
    return removed


# ----------------------------------------------------------------------------- reader


class _SegmentFile:
    """Bytes of an open segment read with ``pread``: ``buf[i]`` and ``buf[a:b]``.

    Nothing is mapped, so a file shrunk by its owner gives SegmentReadError
    (a ValueError), never SIGBUS.
    """

    def __init__(self, fd: int | OwnedFd, where: str) -> None:
        self.owned = fd if isinstance(fd, OwnedFd) else OwnedFd(fd)
        self.where = where

    @property
    def fd(self) -> int:
        """The segment's descriptor, proved to still name the segment: a program that
        closed every descriptor may have a file of its own under that number now."""
        if not self.owned.ours():
            raise lay.SegmentReadError(
                f"{self.where} can no longer be read: its descriptor was closed by the "
                "program (the number may name another file now); attach again"
            )
        return self.owned.fd

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            start, stop = int(key.start or 0), int(key.stop)
            return _pread_exact(self.fd, max(0, stop - start), start, self.where)
        return _pread_exact(self.fd, 1, int(key), self.where)[0]


class _Words:
    """The stats block as int64 words, read on access: ``w[i]``, ``np.array(w)``."""

    def __init__(self, buf: _SegmentFile, offset: int, count: int) -> None:
        self._buf = buf
        self._offset = offset
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self._count:
            raise IndexError(f"word {i} outside the stats block of {self._count} words")
        raw = self._buf[self._offset + 8 * i : self._offset + 8 * i + 8]
        return int.from_bytes(raw, "little", signed=True)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = np.empty(self._count, dtype="<i8")
        dest: Any = arr.view(np.uint8)
        done = 0
        while done < len(dest):  # straight into the array: one copy, no mapping
            n = os.preadv(self._buf.fd, [dest[done:]], self._offset + done)
            if n <= 0:
                raise lay.SegmentReadError(
                    f"{self._buf.where} is truncated: it ended at {self._offset + done} bytes "
                    f"while {self._offset + len(dest)} were expected (shrunk while read?)"
                )
            done += n
        out = arr.astype(np.int64, copy=False)
        return out if dtype is None else out.astype(dtype, copy=False)


class LiveReader:
    """Read-only view of one live segment: ``snapshot()``, ``summary()``, ``progress()``.

    Get one with ``gp.live.attach(pid)``. Attributes: ``pid``, ``name``,
    ``path``, ``phases``, ``meta`` (the segment's metadata). ``alive`` and
    ``closed`` are re-checked on each access.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        where = str(self.path)
        try:
            fd, fst, header = _open_segment(self.path)
        except FileNotFoundError:
            raise LookupError(f"no live segment at {where} (its process may have exited)") from None
        try:
            name = lay.parse_filename(self.path.name)
            lay.check_trust(self.path, fst, header, name[0] if name else None)
        except BaseException:
            os.close(fd)
            raise
        size = fst.st_size
        self._fd = OwnedFd(fd)
        self._mm: _SegmentFile | None = _SegmentFile(self._fd, where)
        self._header = header
        h = self._header
        self._size = size
        meta = h.meta
        self.meta: dict[str, Any] = meta
        self.pid = h.pid
        self.name = str(meta["name"])
        self.phases: tuple[str, ...] = tuple(meta["phases"])
        self.config: dict[str, Any] = dict(meta["config"])
        try:
            with decode_errors(f"{where} is corrupted"):
                self.lap_cost_ns = float(meta["lap_cost_ns"])
        except BaseException:
            self.close()
            raise
        self._words = block_words(self.config)
        self._view: Any = _Words(self._mm, h.header_bytes, self._words)
        self.group = h.group
        self.retired = h.retired
        self.folded: tuple[int, ...] = _folded_of(h)
        self._retired_snap: Snapshot | None = None
        try:
            with decode_errors(f"{where} is corrupted"):
                if self.retired:
                    self._retired_snap = self._read_retired(self._mm, h)
                else:
                    StatsBlock.from_config(self._view, self.config)  # checks layout and size
                self._layout = (
                    int(self.config["lowest_ns"]),
                    int(self.config["highest_ns"]),
                    int(self.config["significant_figures"]),
                )
        except BaseException:
            self.close()
            raise

    # -- retired threads (a per_thread profiler's folded snapshot) --------------------

    def _read_retired(self, buf: _SegmentFile, h: lay.Header) -> Snapshot:
        raw = buf[h.header_bytes : h.header_bytes + h.stats_bytes]
        try:
            return Snapshot.from_bytes(raw)
        except ValueError as exc:
            raise InvalidValueError(
                f"{self.path} is corrupted: unreadable retired snapshot ({exc})"
            ) from None

    def _reload_retired(self) -> Snapshot:
        """The retired segment is rewritten (renamed over) at each fold: read the newest,
        or keep the last one read when it is gone (its profiler closed)."""
        try:
            fd, fst, header = _open_segment(self.path)
        except (FileNotFoundError, ValueError, OSError):
            assert self._retired_snap is not None
            return self._retired_snap
        try:
            if (fst.st_ino, fst.st_dev) == getattr(self, "_retired_ino", None):
                assert self._retired_snap is not None
                return self._retired_snap
            name = lay.parse_filename(self.path.name)
            lay.check_trust(self.path, fst, header, name[0] if name else None)
            if not header.retired or header.group != self.group:
                raise lay.UntrustedSegmentError(
                    f"{self.path} was replaced by a segment of another profiler"
                )
            snap = self._read_retired(_SegmentFile(fd, str(self.path)), header)
        finally:
            os.close(fd)
        self._retired_snap = snap
        self._retired_ino = (fst.st_ino, fst.st_dev)
        self.folded = _folded_of(header)
        return snap

    # -- state ---------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """Whether the writer process is still running."""
        return lay.same_process(self._header.identity, lay.process_identity(self.pid))

    @property
    def closed(self) -> bool:
        """Whether the writer closed the segment (its content is then final)."""
        mm = self._require()
        return int.from_bytes(mm[lay.STATE_OFFSET : lay.STATE_OFFSET + 4], "little") == (
            lay.STATE_CLOSED
        )

    @property
    def stale(self) -> bool:
        """The writer is gone without closing: the content is the last it wrote."""
        return not self.alive and not self.closed

    def _require(self) -> _SegmentFile:
        if self._mm is None:
            raise InvalidValueError(f"this reader of {self.path} is closed")
        return self._mm

    def _block(self, stats: np.ndarray) -> StatsBlock:
        return StatsBlock(stats, self.config["offsets"], len(self.phases))

    def counter_names(self) -> list[str]:
        return lay.read_name_slots(self._require(), self._header)

    # -- reading ---------------------------------------------------------------------

    def _copy(self) -> tuple[np.ndarray, int]:
        self._require()
        if os.fstat(self._require().fd).st_size < self._header.total_bytes:
            raise InvalidValueError(
                f"{self.path} was truncated while mapped; it is no longer readable"
            )
        view = self._view
        stats = view
        taken = 0
        live = self._block(view)
        for _ in range(_QUIET_TRIES):
            before = live.steps_completed
            taken = int(monotonic_ns())
            stats = np.array(view, copy=True)
            if live.steps_completed == before == self._block(stats).steps_completed:
                break
        else:  # no quiet copy: the writer ran through every one (a torn read, not damage)
            self._block(stats).settle_torn_steps()
        return stats, taken

    def _check_copy(self, stats: np.ndarray) -> None:
        """Refuse (CorruptDataError) a copy with numbers no writer produces: negative
        bucket counts, sums, warm-up totals, step or event counters. A genuine copy
        taken while the writer runs never has them (they only grow)."""
        block = self._block(stats)
        where = f"{self.path} is corrupted"
        off = self.config["offsets"]
        c0, c1 = int(off["counts"]), int(off["wring"])
        if (stats[c0:c1] < 0).any():
            raise CorruptDataError(f"{where}: a negative histogram bucket count")
        # every total built from them (events, merges) must stay within int64 (check_counts
        # adds them up in int64 where that cannot wrap, exactly in Python ints where it can)
        _checks.check_counts(
            np.concatenate((stats[c0 : int(off["wcounts"])], block.warm[:, 0])), what=where
        )
        if block.any_negative_sum():
            raise CorruptDataError(f"{where}: a negative sum of durations")
        warm = block.warm
        if (warm[:, :2] < 0).any() or (warm[:, 2] < -1).any():
            raise CorruptDataError(f"{where}: a negative warm-up count, sum or maximum")
        heads = {
            "steps begun": block.steps_begun,
            "steps completed": block.steps_completed,
            "warm-up steps": block.warmup_steps_done,
            "events written": block.ring_head,
            "negative durations": block.negative,
            "values above the range": block.out_of_range,
            "non-finite durations": block.nonfinite,
            "windows closed": block.windows_closed,
            "saturated sums": block.saturated,
        }
        for what, v in heads.items():
            if v < 0:
                raise CorruptDataError(f"{where}: {what} is {v}")
        if block.steps_completed > block.steps_begun:
            raise CorruptDataError(
                f"{where}: {block.steps_completed} steps completed of {block.steps_begun} begun"
            )

    def _fix_sums(self, stats: np.ndarray) -> None:
        """Hold each sum within ``[count * min, count * max]`` (after ``_fix_extremes``): a
        copy taken while the writer runs can catch a bucket a value before its sum (or
        after); a forged one can say anything. Then every mean lies in [min, max]."""
        block = self._block(stats)
        counts = block.counts_total()
        st = block.stat
        for h, total in enumerate(block.exact_sums()):
            n, vmin, vmax = int(counts[h]), int(st[h, 2]), int(st[h, 3])
            want = total
            if n == 0:
                want = 0
            elif vmin >= 0 and vmax >= 0:
                want = min(max(total, n * vmin), n * vmax)
            if want != total:
                block.set_sum(h, want)
        warm = block.warm
        for h, total in enumerate(block.exact_warm_sums()):
            n, vmax = int(warm[h, 0]), int(warm[h, 2])
            want = 0 if n == 0 else (min(total, n * vmax) if vmax >= 0 else total)
            if want != total:
                block.set_warm_sum(h, want)

    def _fix_extremes(self, stats: np.ndarray) -> None:
        """Widen each histogram's min/max to its non-empty buckets (see module doc)."""
        block = self._block(stats)
        nh = block.nh
        counts = block.counts
        st = block.stat  # a view: the fixes go into ``stats``
        lo, width = layout_edges(*self._layout)
        highest = self._layout[1]
        for h in range(nh):
            nz = np.flatnonzero(counts[h])
            if nz.size == 0:
                continue
            i0, i1 = int(nz[0]), int(nz[-1])
            bottom_lo, bottom_hi = int(lo[i0]), int(lo[i0] + width[i0] - 1)
            top_lo, top_hi = int(lo[i1]), min(int(lo[i1] + width[i1] - 1), highest)
            if st[h, 2] < 0 or st[h, 2] > bottom_hi:
                st[h, 2] = bottom_lo
            if st[h, 3] < top_lo:
                st[h, 3] = max(top_hi, st[h, 2])

    def snapshot(self, *, windows: bool = True) -> Snapshot:
        """A consistent copy of everything the writer counted so far (see module doc).

        ``windows=False`` leaves out the closed rolling windows (cheaper when
        only the histograms are wanted, as in ``gyreprof top``).
        """
        if self.retired:
            self._require()
            return self._reload_retired()
        with decode_errors(f"{self.path} is corrupted"):  # never a KeyError: "no segment"
            names = self.counter_names()
            stats, taken = self._copy()
            self._check_copy(stats)
            self._fix_extremes(stats)
            self._fix_sums(stats)
            block = self._block(stats)
            windows_closed = block.windows_closed
            if not windows:
                block.hide_windows()
        label, host = self.meta.get("label"), self.meta.get("host")
        identity = ProfilerIdentity(
            self.phases, label if isinstance(label, str) else None, self.lap_cost_ns
        )
        with decode_errors(f"{self.path} is corrupted"):
            snap = build_snapshot(
                stats,
                self.config,
                identity,
                names,
                taken_ns=taken,
                pid=self.pid,
                host=host if isinstance(host, str) else None,
                live_path=str(self.path),
                windows_closed=windows_closed if windows else 0,
            )
            try:  # what a saved snapshot's decoder would refuse, refused here too
                return _limits.check_snapshot(snap)
            except CorruptDataError:
                raise
            except ValueError as exc:
                raise CorruptDataError(f"{self.path} is corrupted: {exc}") from None

    def event_counts(self) -> tuple[dict[str, int], int]:
        """The events recorded so far per phase (steady and warm-up: a snapshot row's
        ``count + warm_count``) and the steps completed, from one copy of the block, with
        no snapshot built: what a watch for movement asks each second of every segment of
        a run (``gyreprof run``'s stall watch), at a fraction of :meth:`snapshot`'s cost.
        CorruptDataError where a snapshot of the same copy would be refused as one no
        writer produces (a negative count, counts past the int64 range, ...)."""
        if self.retired:
            snap = self.snapshot(windows=False)
            counts = {r.name: r.count + r.warm_count for r in snap.rows[:-1]}
            return counts, snap.totals.steps_completed
        with decode_errors(f"{self.path} is corrupted"):
            stats, _ = self._copy()
            self._check_copy(stats)  # what a snapshot refuses: counts within int64 among it
            block = self._block(stats)
            n = len(self.phases)
            totals = block.counts[:n].sum(axis=1) + block.warm[:n, 0]
            steps = block.steps_completed
        return {name: int(totals[i]) for i, name in enumerate(self.phases)}, int(steps)

    def summary(self) -> Summary:
        """Steady-state summary of the writer's run so far."""
        return self.snapshot().summary()

    def progress(self) -> Progress:
        """Step counters, the open phase and the counters, read without copying the whole
        block (see :class:`gyreprof._support.block.Progress`; times are CLOCK_MONOTONIC ns)."""
        self._require()
        if self.retired:
            snap = self._reload_retired()
            now = int(monotonic_ns())
            return Progress(
                snap.totals.steps_begun,
                snap.totals.steps_completed,
                None,
                -1,
                now,
                -1,
                {k: int(v) for k, v in snap.counters.items()},
            )
        slots = {name: i for i, name in enumerate(self.counter_names())}
        return self._block(self._view).progress(self.phases, slots, int(monotonic_ns()))

    def close(self) -> None:
        """Close the segment file. Idempotent."""
        mm, self._mm = self._mm, None
        if mm is not None:
            self._view = np.zeros(0, dtype=np.int64)
        owned = getattr(self, "_fd", None)
        if owned is not None:
            owned.close()  # only while it still names the segment

    def __enter__(self) -> LiveReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"LiveReader(pid={self.pid}, name={self.name!r}, path={str(self.path)!r})"


class LiveGroupReader(LiveReader):
    """Every thread of one ``per_thread`` profiler of process ``pid``, read as one.

    What ``gp.live.attach(pid)`` returns for such a profiler. Each ``snapshot()``
    looks for the group's segments again (threads start; finished threads are
    folded into the retired segment), reads the retired segment first and
    skips the thread segments it already holds, then merges the rest (counts
    add up, as for ``Profiler.snapshot()`` of the writer). ``members`` are the
    segment paths read last time.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        if self.group is None:
            self.close()
            raise InvalidValueError(f"{self.path} is not a segment of a per_thread profiler")
        self._members: dict[Path, LiveReader] = {}
        self._last: Snapshot | None = None
        self.members: list[Path] = []

    def _refresh(self) -> list[LiveReader]:
        # the group id is unique (pid, serial, random), so a writer killed mid-run is read
        # whole from its stale segments, never mixed with a later process of its pid
        entries = [e for e in list_segments(self.pid) if e.group == self.group and e.error is None]
        keep: dict[Path, LiveReader] = {}
        for e in entries:
            r = self._members.pop(e.path, None)
            if r is None:
                try:
                    r = LiveReader(e.path)
                except (LookupError, ValueError, OSError):  # removed while we looked
                    continue
            keep[e.path] = r
        for r in self._members.values():
            r.close()
        self._members = keep
        # the retired segment first: what it holds decides which threads to skip
        return sorted(keep.values(), key=lambda r: not r.retired)

    def _parts(self, windows: bool) -> list[Snapshot]:
        folded: set[int] = set()
        snaps: list[Snapshot] = []
        read: list[Path] = []
        for r in self._refresh():
            if not r.retired:
                parsed = lay.parse_filename(r.path.name)
                if parsed is not None and parsed[1] in folded:
                    continue
            snaps.append(r.snapshot(windows=windows))
            read.append(r.path)
            if r.retired:
                folded.update(r.folded)
        self.members = read
        return snaps

    def snapshot(self, *, windows: bool = True) -> Snapshot:
        """All threads of the profiler merged (see the class doc)."""
        self._require()
        snaps = self._parts(windows)
        if not snaps:  # the profiler closed its segments: its last state
            if self._last is None:
                self._last = super().snapshot(windows=windows)
            return self._last
        snap = merge(snaps)
        self._last = snap
        return snap

    def progress(self) -> Progress:
        self._require()
        parts = []
        for r in self._refresh():
            try:
                parts.append(r.progress())
            except (ValueError, OSError):
                continue
        return Progress.combine(parts) if parts else super().progress()

    @property
    def closed(self) -> bool:
        """Whether the profiler closed every segment of the group."""
        self._require()
        return not any(
            e.group == self.group and not e.closed
            for e in list_segments(self.pid)
            if e.error is None
        )

    def close(self) -> None:
        for r in getattr(self, "_members", {}).values():
            r.close()
        self._members = {}
        super().close()

    def __repr__(self) -> str:
        return f"LiveGroupReader(pid={self.pid}, name={self.name!r}, group={self.group!r})"


def _process_missing(pid: int) -> str:
    try:
        proc = psutil.Process(pid)
        what = f"process {pid} ({proc.name()})"
    except psutil.NoSuchProcess:
        return f"no process with pid {pid} and no live segment of it"
    except psutil.AccessDenied:
        what = f"process {pid}"
    return (
        f"{what} has no gyreprof live segment; create its Profiler with live=True "
        f"(segments are looked for in {lay.segment_dir()})"
    )


def attach(target: int | str | os.PathLike[str], name: str | None = None) -> LiveReader:
    """A reader for the live segment of process ``target`` (a pid), or of a segment file.

    A process with several live profilers: ``name`` picks one; without it the
    first one the process published is used. Raises LookupError (no such
    process, or no segment), ValueError (not a gyreprof segment, truncated, or
    an unknown layout version), PermissionError (another user's segment).

    A segment that is there but corrupt (say, metadata without a region of the
    stats block, planted by another user) is never read as "no segment": when
    the process has no readable segment beside it, ValueError says what is
    wrong with it (never a KeyError, which is a LookupError); when it has one,
    that one is attached.
    """
    if isinstance(target, bool):
        raise ArgumentTypeError(f"attach needs a pid or a segment path, got {target!r}")
    if isinstance(target, (str, os.PathLike)) and not str(target).strip().isdigit():
        return LiveReader(target)
    try:
        pid = int(target)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"attach needs a pid or a segment path, got {target!r}") from None
    if pid <= 0:
        raise InvalidValueError(f"a pid must be a positive integer, got {pid}")
    entries = list_segments(pid)
    if not entries:
        raise LookupError(_process_missing(pid))
    if name is not None:
        chosen = [e for e in entries if e.name == name]
        if not chosen:
            raise LookupError(
                f"process {pid} has no live segment named {name!r}; it has "
                f"{[e.name for e in entries]}"
            )
        entries = chosen
    readable = [e for e in entries if e.error is None]
    if not readable:
        e = entries[0]
        if e.error and "permission denied" in e.error:
            raise PermissionError(e.error)
        raise InvalidValueError(e.error or f"the live segment {e.path} is unreadable")
    # a running process's own segment first; a stale one (a dead process that had this pid)
    # only when nothing else is there
    readable.sort(key=lambda e: not e.alive)
    first = readable[0]
    if first.group is not None:  # a per_thread profiler: all its threads as one
        return LiveGroupReader(first.path)
    return LiveReader(first.path)


# --------------------------------------------------------------------------- collect


@dataclass
class LiveCollection:
    """Snapshots of several processes and their merge (``gp.live.collect``).

    ``per_process``: pid -> Snapshot (several segments of one process merged).
    ``merged``: the Summary of all of them together. ``snapshot``: the merged
    Snapshot. ``missing``: pid (or segment path) -> why it was not read.
    ``entries``: the segments that were read.
    """

    per_process: dict[int, Snapshot]
    merged: Summary
    snapshot: Snapshot
    missing: dict[Any, str] = field(default_factory=dict)
    entries: list[LiveEntry] = field(default_factory=list)

    def summary(self) -> Summary:
        return self.merged

    def to_dict(self) -> dict[str, Any]:
        return {
            "merged": self.merged.to_dict(histograms=False),
            "per_process": {
                str(pid): s.summary().to_dict(histograms=False)
                for pid, s in self.per_process.items()
            },
            "missing": {str(k): v for k, v in self.missing.items()},
            "segments": [e.to_dict() for e in self.entries],
        }


def _tree(root: int) -> set[int]:
    try:
        proc = psutil.Process(root)
    except psutil.NoSuchProcess:
        raise LookupError(f"no process with pid {root}") from None
    pids = {root}
    try:
        pids.update(c.pid for c in proc.children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    return pids


def _read_entries(
    entries: Iterable[LiveEntry], missing: dict[Any, str]
) -> Iterator[tuple[LiveEntry, Snapshot]]:
    # retired segments first: a thread segment that the retired one read already holds
    # (a fold between listing and reading) is skipped, never counted twice
    folded: set[tuple[int, str | None, int]] = set()
    for e in sorted(entries, key=lambda e: not e.retired):
        if e.error is not None:
            missing[str(e.path)] = e.error
            continue
        if e.group is not None and not e.retired and (e.pid, e.group, e.serial) in folded:
            continue
        try:
            with LiveReader(e.path) as r:
                snap = r.snapshot()
                folded.update((e.pid, e.group, k) for k in r.folded)
        except (LookupError, ValueError, OSError) as exc:
            missing[str(e.path)] = str(exc)
            continue
        yield e, snap


def collect(target: int | Sequence[int], *, include_stale: bool = False) -> LiveCollection:
    """Snapshots of a process tree (a root pid) or of given pids, merged into one Summary.

    ``collect(root_pid)`` reads every live segment of ``root_pid`` and of its
    descendants (an ``AsyncVectorEnv`` parent and its workers).
    ``collect([pid, ...])`` reads those processes; a pid without a readable
    segment is reported in ``missing``. Stale segments (dead writers) are
    read only with ``include_stale=True``. LookupError when nothing is found.
    """
    missing: dict[Any, str] = {}
    if isinstance(target, bool):
        raise ArgumentTypeError(f"collect needs a pid or a list of pids, got {target!r}")
    if isinstance(target, (int, np.integer)):
        pids = _tree(int(target))
        entries = [e for e in list_segments() if e.pid in pids]
        if not entries:
            raise LookupError(
                f"no gyreprof live segment in the process tree of pid {int(target)} "
                f"({len(pids)} processes); create the Profilers with live=True"
            )
        explicit: list[int] = []
    else:
        try:
            explicit = [int(p) for p in target]
        except (TypeError, ValueError):
            raise ArgumentTypeError(
                f"collect needs a pid or a list of pids, got {target!r}"
            ) from None
        wanted = set(explicit)
        entries = [e for e in list_segments() if e.pid in wanted]
        for p in explicit:
            if not any(e.pid == p for e in entries):
                missing[p] = _process_missing(p)
    if not include_stale:
        for e in entries:
            if e.stale:
                missing[str(e.path)] = f"stale segment of pid {e.pid} (process gone)"
        entries = [e for e in entries if not e.stale]
    by_pid: dict[int, list[Snapshot]] = {}
    read: list[LiveEntry] = []
    for e, snap in _read_entries(entries, missing):
        by_pid.setdefault(e.pid, []).append(snap)
        read.append(e)
    if not by_pid:
        detail = "; ".join(f"{k}: {v}" for k, v in missing.items())
        raise LookupError(f"no readable gyreprof live segment found ({detail or 'none'})")
    for p in explicit:
        if p not in by_pid and p not in missing:
            missing[p] = f"no readable live segment of pid {p}"
    per_process = {pid: (s[0] if len(s) == 1 else merge(s)) for pid, s in sorted(by_pid.items())}
    all_snaps = [s for snaps in by_pid.values() for s in snaps]
    merged_snap = merge(all_snaps)
    return LiveCollection(
        per_process=per_process,
        merged=merged_snap.summary(),
        snapshot=merged_snap,
        missing=missing,
        entries=read,
    )
