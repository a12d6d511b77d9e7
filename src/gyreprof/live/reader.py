"""Reader side of the live view: find, attach to and aggregate live segments.

A reader maps a segment read-only and copies its stats block whenever asked
for a snapshot; it never locks, signals or otherwise slows the writer.

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

import mmap
import os
import stat as stat_mod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from gyreprof._block import Progress, StatsBlock, block_words
from gyreprof._core import monotonic_ns
from gyreprof.live import _layout as lay
from gyreprof.snapshot import Snapshot, interval, layout_edges, merge
from gyreprof.summary import Summary

try:
    import pwd
except ImportError:  # not on Unix
    pwd = None  # type: ignore[assignment]

_QUIET_TRIES = 3

__all__ = [
    "LiveCollection",
    "LiveEntry",
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
        }


def _read_header_file(path: Path) -> lay.Header:
    """Parse the header of the segment at ``path`` (ValueError/PermissionError/OSError)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(min(size, 1 << 22))
        if len(head) >= lay.FIXED_BYTES:
            try:
                hb = lay.FIXED.unpack_from(head, 0)[2]
            except Exception:  # noqa: BLE001 - parse_header reports it
                hb = 0
            if isinstance(hb, int) and len(head) < hb <= size:
                fh.seek(0)
                head = fh.read(hb)
    return lay.parse_header(head, size, str(path))


def _entry(path: Path, pid: int, serial: int) -> LiveEntry:
    try:
        header = _read_header_file(path)
    except PermissionError:
        alive = lay.process_identity(pid) is not None
        return LiveEntry(pid, None, path, alive, not alive, serial, error=_permission_message(path))
    except FileNotFoundError:
        raise
    except (ValueError, OSError) as exc:
        alive = lay.process_identity(pid) is not None
        return LiveEntry(pid, None, path, alive, not alive, serial, error=str(exc))
    if header.pid != pid:
        return LiveEntry(
            pid,
            None,
            path,
            False,
            True,
            serial,
            error=f"{path} names pid {pid} but its header says {header.pid}",
        )
    alive = lay.same_process(header.identity, lay.process_identity(pid))
    return LiveEntry(
        pid=pid,
        name=str(header.meta.get("name")),
        path=path,
        alive=alive,
        stale=not alive,
        serial=serial,
        phases=tuple(header.meta["phases"]),
        closed=header.state == lay.STATE_CLOSED,
    )


def list_segments(
    pid: int | None = None, *, directory: str | os.PathLike[str] | None = None
) -> list[LiveEntry]:
    """Live segments on this machine (of ``pid`` only, when given), oldest first per pid."""
    d = Path(directory) if directory is not None else lay.segment_dir()
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    except PermissionError:
        raise PermissionError(
            f"permission denied listing {d}; set GYREPROF_LIVE_DIR to a directory you can read"
        ) from None
    found = []
    for n in names:
        parsed = lay.parse_filename(n)
        if parsed is None or (pid is not None and parsed[0] != pid):
            continue
        found.append((parsed[0], parsed[1], d / n))
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
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise LookupError(f"no live segment at {where} (its process may have exited)") from None
        except PermissionError:
            raise PermissionError(_permission_message(self.path)) from None
        except IsADirectoryError:
            raise ValueError(f"{where} is a directory, not a gyreprof live segment") from None
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise ValueError(f"{where} is not a regular file, not a gyreprof live segment")
            size = st.st_size
            if size < lay.FIXED_BYTES:
                lay.parse_header(b"", size, where)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._mm: mmap.mmap | None = mm
        try:
            self._header = lay.parse_header(mm, size, where)
        except BaseException:
            self.close()
            raise
        h = self._header
        self._size = size
        meta = h.meta
        self.meta: dict[str, Any] = meta
        self.pid = h.pid
        self.name = str(meta["name"])
        self.phases: tuple[str, ...] = tuple(meta["phases"])
        self.config: dict[str, Any] = dict(meta["config"])
        self.lap_cost_ns = float(meta["lap_cost_ns"])
        self._words = block_words(self.config)
        self._view = np.frombuffer(mm, dtype=np.int64, count=self._words, offset=h.header_bytes)
        try:
            StatsBlock.from_config(self._view, self.config)  # checks layout version and size
        except BaseException:
            self.close()
            raise
        self._layout = (
            int(self.config["lowest_ns"]),
            int(self.config["highest_ns"]),
            int(self.config["significant_figures"]),
        )

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

    def _require(self) -> mmap.mmap:
        if self._mm is None:
            raise ValueError(f"this reader of {self.path} is closed")
        return self._mm

    def _block(self, stats: np.ndarray) -> StatsBlock:
        return StatsBlock(stats, self.config["offsets"], len(self.phases))

    def counter_names(self) -> list[str]:
        return lay.read_name_slots(self._require(), self._header)

    # -- reading ---------------------------------------------------------------------

    def _copy(self) -> tuple[np.ndarray, int]:
        self._require()
        if os.fstat(self._fd).st_size < self._header.total_bytes:
            raise ValueError(f"{self.path} was truncated while mapped; it is no longer readable")
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
        return stats, taken

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
        names = self.counter_names()
        stats, taken = self._copy()
        self._fix_extremes(stats)
        block = self._block(stats)
        windows_closed = block.windows_closed
        if not windows:
            block.hide_windows()
        head = block.ring_head
        cap = int(self.config["capacity"])
        meta = {
            "pid": self.pid,
            "host": self.meta.get("host"),
            "label": self.name,
            "windows_closed": windows_closed if windows else 0,
            "live_path": str(self.path),
        }
        return Snapshot.from_stats(
            stats,
            self.config,
            self.phases,
            names,
            lap_cost_ns=self.lap_cost_ns,
            taken_ns=taken,
            overwritten=max(0, head - cap),
            meta=meta,
        )

    def summary(self) -> Summary:
        """Steady-state summary of the writer's run so far."""
        return self.snapshot().summary()

    def progress(self) -> Progress:
        """Step counters, the open phase and the counters, read without copying the whole
        block (see :class:`gyreprof._block.Progress`; times are CLOCK_MONOTONIC ns)."""
        self._require()
        slots = {name: i for i, name in enumerate(self.counter_names())}
        return self._block(self._view).progress(self.phases, slots, int(monotonic_ns()))

    def close(self) -> None:
        """Unmap the segment. Idempotent."""
        mm, self._mm = self._mm, None
        if mm is not None:
            self._view = np.zeros(0, dtype=np.int64)
            try:
                mm.close()
            except BufferError:  # a caller still holds a view; freed with it
                pass
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            os.close(fd)

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
    """
    if isinstance(target, bool):
        raise TypeError(f"attach needs a pid or a segment path, got {target!r}")
    if isinstance(target, (str, os.PathLike)) and not str(target).strip().isdigit():
        return LiveReader(target)
    try:
        pid = int(target)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"attach needs a pid or a segment path, got {target!r}") from None
    if pid <= 0:
        raise ValueError(f"a pid must be a positive integer, got {pid}")
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
        raise ValueError(e.error or f"the live segment {e.path} is unreadable")
    # a running process's own segment first; a stale one (a dead process that had this pid)
    # only when nothing else is there
    readable.sort(key=lambda e: not e.alive)
    return LiveReader(readable[0].path)


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
    for e in entries:
        if e.error is not None:
            missing[str(e.path)] = e.error
            continue
        try:
            with LiveReader(e.path) as r:
                snap = r.snapshot()
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
        raise TypeError(f"collect needs a pid or a list of pids, got {target!r}")
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
            raise TypeError(f"collect needs a pid or a list of pids, got {target!r}") from None
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
