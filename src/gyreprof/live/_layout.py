"""The live segment: where it lives, who it may belong to, its versioned header.

A live segment is one file named ``gyreprof-live-<pid>-<serial>.seg``, mapped
with ``mmap`` by its writer (read-write); readers copy from it with ``pread``
(never a mapping, so a shrunk file is an error, never SIGBUS).

Where (trust)
-------------
Segments live only in a folder where no user but the owner (and root) can
create files. The base is ``$GYREPROF_LIVE_DIR``, else ``/dev/shm``, else
the temp directory. When the base itself is private (owned by the user or
root, not writable by group or others; the tests' folders) segments go there;
otherwise (``/dev/shm`` is world-writable) into ``<base>/gyreprof-<uid>``,
created with mode 0700 and checked (a real directory, not a link, owned by
the user, not writable by others) every time. If another user squatted that
name, ``~/.cache/gyreprof-live`` is used instead, then (no writable HOME) the
user's runtime folder ``$XDG_RUNTIME_DIR/gyreprof-live`` where it exists, then
``<tempdir>/gyreprof-live-<uid>``; when none can be had, the PermissionError
lists each folder tried and why. Files are created with
``O_EXCL | O_NOFOLLOW`` and mode 0600.

A reader believes a segment only when (``check_trust``): the file is a
regular file, not a link, not writable by group or others; it sits in a
folder where only its owner (or root) can create files; the header names the
owner's uid, the pid of its file name and this boot; and the process that
runs under that pid now runs as that uid (otherwise the segment is forged)
with the recorded start time (otherwise it is stale: the pid was reused).

What the same user can still do: that user (and root) can write, truncate
or delete the user's own segments, so they can feed readers wrong numbers
or kill the writer with SIGBUS by shrinking its file, as they could stop or
ptrace the process itself. Another user can do none of that: the folder and
the files are closed to them, and a segment they create is never believed
for a process of someone else.

Per-thread profilers
--------------------
A ``per_thread=True`` profiler publishes one segment per thread (each holds
that thread's Recorder) plus, once a finished thread was folded, one
*retired* segment ``gyreprof-live-<pid>-<serial>.ret``: the same header with
``meta["kind"] == "retired"``, whose data (``stats_bytes`` long at
``header_bytes``) is ``Snapshot.to_bytes()`` of all the folded threads. It is
rewritten (new file, renamed over the old) at every fold, and lists in
``meta["folded"]`` the serials of the thread segments it holds, so a reader
that still sees one of them skips it instead of counting it twice. Every
segment of one such profiler carries the same ``meta["group"]``. Readers of
this layout version that predate retired segments never list ``.ret`` files.

Layout
------
Every integer little-endian::

    offset  size  field
    0       8     magic b"GYRELIVE"
    8       4     u32  LIVE_VERSION (this header's layout version)
    12      4     u32  header_bytes: offset of the stats block (multiple of 4096)
    16      8     u64  stats_bytes: size of the stats block
    24      8     i64  pid of the writer process
    32      8     i64  start_ticks: the writer's start time in clock ticks after boot
                       (/proc/<pid>/stat field 22; -1 where unknown)
    40      8     f64  create_time_s: the writer's start time, seconds since the epoch
    48      4     u32  meta_offset: offset of the metadata (UTF-8 JSON)
    52      4     u32  meta_len
    56      4     u32  names_offset: offset of the counter-name table
    60      4     u32  name_slot_bytes: bytes per counter-name slot (NAME_SLOT_BYTES)
    64      4     u32  max_counters: slots in the counter-name table
    68      4     u32  state: STATE_LIVE, or STATE_CLOSED once its writer let go
    72      8     i64  closed_ns: CLOCK_MONOTONIC ns when closed (-1 while live)
    80      48    reserved (zero)
    128     ...   metadata JSON: name, phases, clock, start times, lap_cost_ns,
                  recorder config (incl. stats-block word offsets), gyreprof
                  version, host, command line, ``uid`` (the writer's effective
                  uid) and ``boot_id`` (/proc/sys/kernel/random/boot_id)
    names_offset  counter-name table: ``max_counters`` slots; slot ``k`` holds the
                  name of counter slot ``k``: one length byte (0: not yet named)
                  followed by up to ``NAME_SLOT_BYTES - 1`` bytes of UTF-8
    header_bytes  the Recorder's stats block (int64 words; see
                  gyreprof._core.recorder for its layout)

The metadata is written once, before the file gets its final name (segments
are built under a temporary name and renamed), so a reader never sees a
half-written header. Only ``state``/``closed_ns`` and the counter-name slots
change afterwards: a slot's bytes are written before its length byte.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import stat as stat_mod
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gyreprof._support.checks import loads_bounded
from gyreprof._support.errors import CorruptDataError, InvalidValueError
from gyreprof._support.limits import BudgetError, memory_budget
from gyreprof.live import _folder

# where segments live (``_folder``, which the launcher's end-of-run note loads alone)
ENV_DIR = _folder.ENV_DIR
base_dir = _folder.base_dir
candidate_dirs = _folder.candidate_dirs
euid = _folder.euid
folder_trusted_for = _folder.folder_trusted_for
segment_dir = _folder.segment_dir
trusted_dir_stat = _folder.trusted_dir_stat

LIVE_MAGIC = b"GYRELIVE"
LIVE_VERSION = 1
FIXED = struct.Struct("<8sIIQqqdIIIIIIq")  # the fields at offsets 0..79
FIXED_BYTES = 128  # fixed part incl. reserved bytes; the metadata starts here
STATE_OFFSET = 68
CLOSED_NS_OFFSET = 72
STATE_LIVE = 1
STATE_CLOSED = 2
NAME_SLOT_BYTES = 128
PAGE = 4096
PREFIX = "gyreprof-live-"
SUFFIX = ".seg"
RETIRED_SUFFIX = ".ret"
FILE_RE = re.compile(r"^gyreprof-live-(\d+)-(\d+)\.(?:seg|ret)$")
KIND_RETIRED = "retired"
MAX_COUNTERS = 4096  # the most counter slots a Recorder has (``gyreprof._support.limits``)
META_CAP = 1 << 20  # bytes of metadata JSON a reader parses at most
#: bytes of header (fixed part, metadata, counter-name table) a reader reads at most;
#: checked from the header-size field before anything past the fixed part is read
HEADER_CAP = ((FIXED_BYTES + META_CAP + MAX_COUNTERS * NAME_SLOT_BYTES) // PAGE + 1) * PAGE

Buffer = bytes | bytearray | memoryview | mmap.mmap


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class UntrustedSegmentError(CorruptDataError):
    """A segment that may not be believed: wrong owner, open folder, forged identity."""


class SegmentReadError(CorruptDataError):
    """A segment that shrank or could not be read while a reader used it."""


def boot_id() -> str:
    """This boot's id (Linux), '' elsewhere: a pid and start time repeat across boots."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
            return fh.read(64).decode("ascii", "replace").strip()
    except OSError:
        return ""


def process_uid(pid: int) -> int | None:
    """The effective uid of process ``pid``; None when gone or unknown."""
    import psutil  # here: the launcher's end-of-run note imports this module without it

    try:
        return int(psutil.Process(pid).uids().effective)
    except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
        return None


def segment_filename(pid: int, serial: int, *, retired: bool = False) -> str:
    return f"{PREFIX}{pid}-{serial}{RETIRED_SUFFIX if retired else SUFFIX}"


def parse_filename(name: str) -> tuple[int, int] | None:
    """(pid, serial) of a segment file name, or None for any other name."""
    m = FILE_RE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


# ------------------------------------------------------------------ process identity


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells one process apart from a later one that reuses its pid."""

    start_ticks: int  # clock ticks after boot (/proc/<pid>/stat field 22), -1 unknown
    create_time_s: float  # seconds since the epoch (psutil), nan unknown


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start ticks) from /proc/<pid>/stat; None without procfs or process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    tail = data[data.rfind(b")") + 2 :].split()
    try:
        return tail[0].decode("ascii", "replace"), int(tail[19])
    except (IndexError, ValueError):
        return None


def process_identity(pid: int) -> ProcessIdentity | None:
    """Identity of a running process; None when there is no such process (or a zombie)."""
    import psutil

    st = _proc_stat(pid) if sys.platform.startswith("linux") else None
    try:
        proc = psutil.Process(pid)
        create = proc.create_time()
        if st is None and proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        create = float("nan")
    if st is not None:
        if st[0] in ("Z", "X"):
            return None
        return ProcessIdentity(st[1], create)
    return ProcessIdentity(-1, create)


def same_process(recorded: ProcessIdentity, now: ProcessIdentity | None) -> bool:
    """Whether ``now`` (the process running under the pid today) is the recorded writer."""
    if now is None:
        return False
    if recorded.start_ticks >= 0 and now.start_ticks >= 0:
        return recorded.start_ticks == now.start_ticks
    a, b = recorded.create_time_s, now.create_time_s
    if a != a or b != b:  # nan: cannot tell, trust the pid
        return True
    return abs(a - b) < 1.0


def _check_file_and_folder(path: Path, fst: os.stat_result) -> None:
    """UntrustedSegmentError unless the open file (``fst``: its fstat) is a regular file
    that only its owner may write, in a folder where only that owner (or root) can
    create files: the part of ``check_owner`` and ``check_trust`` they share."""
    where = str(path)
    owner = fst.st_uid
    if not stat_mod.S_ISREG(fst.st_mode):
        raise UntrustedSegmentError(f"{where} is not a regular file")
    if fst.st_mode & (stat_mod.S_IWGRP | stat_mod.S_IWOTH):
        raise UntrustedSegmentError(
            f"{where} is writable by other users (mode {stat_mod.S_IMODE(fst.st_mode):o}); "
            "gyreprof writes segments with mode 600 and believes no other"
        )
    try:
        dst = os.stat(path.parent)
    except OSError as exc:
        raise UntrustedSegmentError(f"cannot check the folder of {where}: {exc}") from None
    if not folder_trusted_for(dst, owner):
        raise UntrustedSegmentError(
            f"{where} belongs to uid {owner} but sits in {path.parent}, where other users can "
            "create files (owner uid {0}, mode {1:o}); segments are believed only in a "
            "private folder".format(dst.st_uid, stat_mod.S_IMODE(dst.st_mode))
        )


def check_owner(path: Path, fst: os.stat_result, name_pid: int | None) -> None:
    """The checks that need no byte of the file, run before its header is parsed:
    UntrustedSegmentError unless the open file (``fst``: its fstat) is a regular file
    that only its owner may write, in a folder where only that owner (or root) can
    create files, and (when its name gives a pid that runs now) the process of that
    pid runs as the file's owner. A file of this user's own is read even when its pid
    now runs as someone else (a stale segment, for ``clean()``)."""
    where = str(path)
    owner = fst.st_uid
    _check_file_and_folder(path, fst)
    if name_pid is not None and owner != euid():
        runs_as = process_uid(name_pid)
        if runs_as is not None and runs_as != owner:
            raise UntrustedSegmentError(
                f"{where} belongs to uid {owner} and names pid {name_pid}, but that process "
                f"runs as uid {runs_as}: forged, ignored"
            )


def check_trust(path: Path, fst: os.stat_result, header: Header, name_pid: int | None) -> bool:
    """Whether the segment's writer is running; UntrustedSegmentError when it may not be
    believed at all (see the module doc). ``fst`` is the open file's fstat."""
    where = str(path)
    owner = fst.st_uid
    _check_file_and_folder(path, fst)
    meta_uid = header.meta.get("uid")
    if not isinstance(meta_uid, int) or isinstance(meta_uid, bool) or meta_uid != owner:
        raise UntrustedSegmentError(
            f"{where} belongs to uid {owner} but its header names uid {meta_uid!r}"
        )
    if name_pid is not None and header.pid != name_pid:
        raise UntrustedSegmentError(
            f"{where} names pid {name_pid} but its header says {header.pid}"
        )
    recorded_boot = header.meta.get("boot_id")
    here = boot_id()
    if isinstance(recorded_boot, str) and recorded_boot and here and recorded_boot != here:
        return False  # written before this boot
    if not same_process(header.identity, process_identity(header.pid)):
        return False  # gone, or the pid now belongs to a later process
    runs_as = process_uid(header.pid)
    if runs_as is not None and runs_as != owner:
        raise UntrustedSegmentError(
            f"{where} claims pid {header.pid} (with its start time), but that process runs as "
            f"uid {runs_as} and the segment belongs to uid {owner}: forged, ignored"
        )
    return True


# -------------------------------------------------------------------------- header


@dataclass(frozen=True)
class Header:
    """The parsed header of a live segment."""

    version: int
    header_bytes: int
    stats_bytes: int
    pid: int
    identity: ProcessIdentity
    meta_offset: int
    meta_len: int
    names_offset: int
    name_slot_bytes: int
    max_counters: int
    state: int
    closed_ns: int
    meta: dict[str, Any]

    @property
    def total_bytes(self) -> int:
        return self.header_bytes + self.stats_bytes

    @property
    def retired(self) -> bool:
        """A retired-threads segment: its data is ``Snapshot.to_bytes()``, not a stats block."""
        return self.meta.get("kind") == KIND_RETIRED

    @property
    def group(self) -> str | None:
        """The ``per_thread`` profiler this segment belongs to (None: a whole profiler)."""
        g = self.meta.get("group")
        return g if isinstance(g, str) and g else None


def build_header(
    *,
    pid: int,
    identity: ProcessIdentity,
    stats_bytes: int,
    max_counters: int,
    meta: dict[str, Any],
) -> tuple[bytes, int, int]:
    """(header bytes up to the stats block, header_bytes, names_offset)."""
    meta_json = json.dumps(meta, separators=(",", ":"), allow_nan=True).encode("utf-8")
    names_offset = _align(FIXED_BYTES + len(meta_json), 8)
    header_bytes = _align(names_offset + max_counters * NAME_SLOT_BYTES, PAGE)
    buf = bytearray(header_bytes)
    FIXED.pack_into(
        buf,
        0,
        LIVE_MAGIC,
        LIVE_VERSION,
        header_bytes,
        stats_bytes,
        pid,
        identity.start_ticks,
        identity.create_time_s,
        FIXED_BYTES,
        len(meta_json),
        names_offset,
        NAME_SLOT_BYTES,
        max_counters,
        STATE_LIVE,
        -1,
    )
    buf[FIXED_BYTES : FIXED_BYTES + len(meta_json)] = meta_json
    return bytes(buf), header_bytes, names_offset


def encode_name_slot(name: str) -> bytes:
    """A counter-name slot: length byte + UTF-8, cut at a character boundary to fit."""
    raw = name.encode("utf-8")
    limit = NAME_SLOT_BYTES - 1
    if len(raw) > limit:
        raw = raw[:limit].decode("utf-8", "ignore").encode("utf-8")
    return bytes([len(raw)]) + raw


_REQUIRED_META = ("name", "phases", "config", "lap_cost_ns", "clock")


def parse_header(buf: Buffer, size: int, where: str) -> Header:
    """Parse and validate a segment header; ValueError naming what is wrong.

    ``buf`` holds at least the first ``min(size, header_bytes)`` bytes of the
    file and ``size`` is the file's size in bytes.
    """
    if size < FIXED_BYTES:
        raise InvalidValueError(
            f"{where} is truncated: {size} bytes, a gyreprof live segment has at least "
            f"{FIXED_BYTES}"
        )
    (
        magic,
        version,
        header_bytes,
        stats_bytes,
        pid,
        start_ticks,
        create_time_s,
        meta_offset,
        meta_len,
        names_offset,
        slot_bytes,
        max_counters,
        state,
        closed_ns,
    ) = FIXED.unpack_from(buf, 0)
    if magic != LIVE_MAGIC:
        raise InvalidValueError(
            f"{where} is not a gyreprof live segment (magic {bytes(magic)!r}, "
            f"expected {LIVE_MAGIC!r})"
        )
    if version != LIVE_VERSION:
        raise InvalidValueError(
            f"{where} has live-segment layout version {version}; this gyreprof reads version "
            f"{LIVE_VERSION}. Read it with the gyreprof version its writer uses."
        )
    if header_bytes < FIXED_BYTES or header_bytes % 8:
        raise InvalidValueError(f"{where} is corrupted: stats offset {header_bytes}")
    if header_bytes > HEADER_CAP or meta_len > META_CAP:
        raise CorruptDataError(
            f"{where} is corrupted: a header of {header_bytes:,} bytes with {meta_len:,} of "
            f"metadata (a reader takes at most {HEADER_CAP:,} and {META_CAP:,})"
        )
    if max_counters > MAX_COUNTERS:
        raise CorruptDataError(
            f"{where} is corrupted: {max_counters} counter slots (at most {MAX_COUNTERS})"
        )
    if header_bytes + stats_bytes > size:
        raise InvalidValueError(
            f"{where} is truncated: {size} bytes, its header says {header_bytes + stats_bytes}"
        )
    if (
        meta_offset < FIXED_BYTES
        or meta_offset + meta_len > names_offset
        or slot_bytes != NAME_SLOT_BYTES
        or names_offset + max_counters * slot_bytes > header_bytes
    ):
        raise InvalidValueError(f"{where} is corrupted: inconsistent header offsets")
    if state not in (STATE_LIVE, STATE_CLOSED):
        raise InvalidValueError(f"{where} is corrupted: unknown state {state}")
    meta = loads_bounded(
        bytes(buf[meta_offset : meta_offset + meta_len]),
        what=f"{where} is corrupted: its metadata",
        max_bytes=META_CAP,
    )
    if not isinstance(meta, dict) or any(k not in meta for k in _REQUIRED_META):
        raise InvalidValueError(f"{where} is corrupted: metadata lacks {list(_REQUIRED_META)}")
    cfg = meta["config"]
    phases = meta["phases"]
    if (
        not isinstance(cfg, dict)
        or not isinstance(phases, list)
        or not all(isinstance(p, str) for p in phases)
        or len(phases) != cfg.get("n_phases")
        or not isinstance(cfg.get("offsets"), dict)
    ):
        raise InvalidValueError(f"{where} is corrupted: phases and recorder config disagree")
    from gyreprof._support.block import block_words  # numpy: readers only, not the end note

    try:
        words = block_words(cfg)
        cfg_counters = int(cfg["max_counters"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise InvalidValueError(f"{where} is corrupted: recorder config incomplete") from None
    retired = meta.get("kind") == KIND_RETIRED
    if (not retired and 8 * words > stats_bytes) or cfg_counters != max_counters:
        raise InvalidValueError(f"{where} is corrupted: stats block size does not match its config")
    _check_declared_layout(cfg, words, stats_bytes, retired=retired, where=where)
    return Header(
        version=version,
        header_bytes=header_bytes,
        stats_bytes=stats_bytes,
        pid=pid,
        identity=ProcessIdentity(start_ticks, create_time_s),
        meta_offset=meta_offset,
        meta_len=meta_len,
        names_offset=names_offset,
        name_slot_bytes=slot_bytes,
        max_counters=max_counters,
        state=state,
        closed_ns=closed_ns,
        meta=meta,
    )


_LAYOUT_KEYS = ("significant_figures", "lowest_ns", "highest_ns", "max_windows", "max_counters")


def _check_declared_layout(
    cfg: dict[str, Any], words: int, stats_bytes: int, *, retired: bool, where: str
) -> None:
    """The stats block the config declares is the one a Recorder with those settings
    has, and a reader may copy it within the memory budget (``gyreprof._support.limits``):
    CorruptDataError / BudgetError, checked before anything is allocated."""
    need = stats_bytes if retired else 8 * words
    budget = memory_budget()
    if need > budget:
        raise BudgetError(
            f"{where} declares a stats block of {need:,} bytes, above the memory budget of "
            f"{budget:,} bytes; not read (set GYREPROF_MEMORY_BUDGET to allow more)"
        )
    if retired:
        return
    from gyreprof._core import Recorder, stats_layout

    offsets = cfg.get("offsets")
    if not isinstance(offsets, dict):
        raise CorruptDataError(f"{where} is corrupted: config.offsets is not an object")
    for key in stats_layout(1, 1, 1, 1, 1):  # every region a stats block has
        if key not in offsets:
            raise CorruptDataError(f"{where} is corrupted: config.offsets lacks {key!r}")
    try:
        n_phases = int(cfg["n_phases"])
        settings = {k: int(cfg[k]) for k in _LAYOUT_KEYS}
        if not 1 <= n_phases <= 255 or not all(-(2**62) < v < 2**62 for v in settings.values()):
            raise ValueError("out of range")
        expected = int(Recorder.required_bytes(n_phases, **settings)) // 8
        offsets = cfg["offsets"]
        inside = all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= words
            for k, v in offsets.items()
        )
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
        raise CorruptDataError(f"{where} is corrupted: recorder config incomplete") from None
    if expected != words or not inside:
        raise CorruptDataError(
            f"{where} is corrupted: its config declares a stats block of {words} words, "
            f"a Recorder with those settings has {expected}"
        )


def read_name_slots(buf: Any, header: Header) -> list[str]:
    """Counter names in slot order, up to the first slot not yet named.

    ``buf`` is anything that slices into bytes (a mapping, bytes, a pread view)."""
    out: list[str] = []
    slot = header.name_slot_bytes
    table = bytes(buf[header.names_offset : header.names_offset + header.max_counters * slot])
    for k in range(header.max_counters):
        off = k * slot
        if off >= len(table):
            break
        n = table[off]
        if n == 0 or n >= slot:
            break
        raw = table[off + 1 : off + 1 + n]
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(f"counter{k}")
    return out
