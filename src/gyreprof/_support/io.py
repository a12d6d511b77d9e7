"""Bounded reading of files users hand to gyreprof.

Every file a user names (a saved snapshot or summary, an HdrHistogram log, an
events file, a requirements file, a log to tail) is read through this module,
so that no input can make a command hang or read without end:

- only regular files are read. FIFOs, character and block devices, sockets
  and directories are refused with a ValueError before a byte is read. The
  type is checked with ``os.stat`` before opening, and again with ``fstat``
  on the open descriptor, which is opened with ``O_NONBLOCK`` so that a FIFO
  swapped in between cannot block the open;
- each kind of input has a size cap (:data:`INPUT_CAPS`). A larger file is
  refused with a message giving its size and the cap, and never more than
  ``cap + 1`` bytes are read, even from a file that grows while it is read;
- logs are tailed: :func:`read_tail` reads only the last bytes of a file.

And the one way gyreprof writes a file others may read while it is written:
:func:`write_atomic` (a fresh temp file in the same folder, then a rename).

``GYREPROF_MAX_INPUT_BYTES`` (a byte count, ``K``/``M``/``G`` suffixes
allowed) replaces every cap at once, to read an unusually large file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import signal
import stat
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gyreprof._support.errors import CorruptDataError, InvalidValueError, MissingFileError

if TYPE_CHECKING:
    import zipfile

__all__ = [
    "ENV_MAX_INPUT",
    "INPUT_CAPS",
    "input_cap",
    "open_events",
    "read_bytes",
    "read_head",
    "read_tail",
    "read_text",
    "tail_lines",
]

_KiB = 1 << 10
_MiB = 1 << 20
_GiB = 1 << 30

ENV_MAX_INPUT = "GYREPROF_MAX_INPUT_BYTES"

#: The largest file read for each kind of input, in bytes.
INPUT_CAPS: dict[str, int] = {
    "snapshot": 256 * _MiB,  # GYRS bytes (compressed; decoding has its own caps)
    "summary": 256 * _MiB,  # Summary JSON
    "hdr_log": 256 * _MiB,  # HdrHistogram interval log
    "events": 1 * _GiB,  # .npz written by save_events (the raw event ring)
    "requirements": 4 * _MiB,  # requirements*.txt, pyproject.toml, environment.yml
    "step_file": 64 * _KiB,  # doctor's step file: one integer
    "calibration": 64 * _KiB,  # a run's measured costs of its own instrumentation
}

#: What each kind is called in messages.
_WHAT = {
    "snapshot": "snapshot file",
    "summary": "summary file",
    "hdr_log": "HdrHistogram log",
    "events": "events file",
    "requirements": "requirements file",
    "step_file": "step file",
    "calibration": "calibration file",
    "log": "log file",
    "input": "input file",
}

#: Bytes :func:`read_tail` reads from the end of a log by default.
TAIL_BYTES = 64 * _KiB


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": _KiB, "M": _MiB, "G": _GiB, "T": _GiB * _KiB}


def parse_size(text: str, name: str) -> int:
    """``"512M"``, ``"2GiB"``, ``"1048576"`` -> bytes; ValueError naming ``name`` otherwise."""
    m = _SIZE.match(text)
    value = float(m.group(1)) * _UNITS[m.group(2).upper()] if m else 0.0
    if not 1 <= value < 2**62:
        raise InvalidValueError(
            f"{name}={text!r} is not a size in bytes; give a positive number, "
            "optionally with a K, M or G suffix (e.g. 512M or 4G)"
        )
    return int(value)


def input_cap(kind: str) -> int:
    """The size cap for ``kind`` (a key of :data:`INPUT_CAPS`), after the env override."""
    env = os.environ.get(ENV_MAX_INPUT)
    if env:
        return parse_size(env, ENV_MAX_INPUT)
    try:
        return INPUT_CAPS[kind]
    except KeyError:
        raise InvalidValueError(
            f"unknown input kind {kind!r}; one of {sorted(INPUT_CAPS)}"
        ) from None


def fmt_size(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    if n < _KiB:
        return f"{n} bytes"
    for unit, scale in (("TiB", _GiB * _KiB), ("GiB", _GiB), ("MiB", _MiB), ("KiB", _KiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"  # pragma: no cover - unreachable


def _file_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse_special(path: Path, mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        raise InvalidValueError(
            f"{what} {str(path)!r} is {_file_type(mode)}; gyreprof reads only regular files "
            "(save the data to a file and pass that)"
        )


def _open_regular(path: str | os.PathLike[str], what: str) -> tuple[int, int]:
    """Open ``path`` for reading if it is a regular file: (fd, size at open)."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError as exc:
        raise MissingFileError(exc.errno, f"no such {what}", str(p)) from None
    _refuse_special(p, mode, what)  # before opening: opening a device can act
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    fd = os.open(p, flags)
    try:
        st = os.fstat(fd)
        _refuse_special(p, st.st_mode, what)  # swapped in after the stat above
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _too_big(path: Path, size: str, cap: int, what: str) -> ValueError:
    return ValueError(
        f"{what} {str(path)!r} holds {size}, above the cap of {fmt_size(cap)} for this kind "
        f"of input; set {ENV_MAX_INPUT} (e.g. {ENV_MAX_INPUT}=4G) to read it anyway"
    )


def read_bytes(path: str | os.PathLike[str], kind: str, *, what: str | None = None) -> bytes:
    """All bytes of a regular file of at most :func:`input_cap` (``kind``) bytes.

    ValueError for a FIFO, device, socket or directory, or a file over the cap;
    FileNotFoundError / PermissionError pass through. Reads at most cap + 1 bytes.
    """
    what = what or _WHAT.get(kind, "input file")
    cap = input_cap(kind)
    p = Path(path)
    fd, size = _open_regular(p, what)
    try:
        if size > cap:
            raise _too_big(p, fmt_size(size), cap, what)
        data = _read_at_most(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise _too_big(p, f"more than {fmt_size(cap)} (it grew while read)", cap, what)
    return data


def read_text(
    path: str | os.PathLike[str],
    kind: str,
    *,
    what: str | None = None,
    encoding: str = "utf-8",
    errors: str = "strict",
) -> str:
    """:func:`read_bytes` decoded; UnicodeDecodeError (a ValueError) for bad text."""
    return read_bytes(path, kind, what=what).decode(encoding, errors)


def read_head(path: str | os.PathLike[str], n: int, *, what: str = "input file") -> bytes:
    """The first ``n`` bytes of a regular file (to sniff its format)."""
    fd, _ = _open_regular(path, what)
    try:
        return _read_at_most(fd, n)
    finally:
        os.close(fd)


def read_tail(
    path: str | os.PathLike[str], max_bytes: int = TAIL_BYTES, *, what: str = "log file"
) -> bytes:
    """The last ``max_bytes`` bytes of a regular file, without reading the rest."""
    if max_bytes < 0:
        raise InvalidValueError(f"max_bytes must be >= 0, got {max_bytes}")
    fd, _ = _open_regular(path, what)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, max(0, size - max_bytes), os.SEEK_SET)
        return _read_at_most(fd, max_bytes)
    finally:
        os.close(fd)


def tail_lines(
    path: str | os.PathLike[str], lines: int, max_bytes: int = TAIL_BYTES, *, what: str = "log file"
) -> list[str]:
    """The last ``lines`` lines among the final ``max_bytes`` bytes of a text file."""
    text = read_tail(path, max_bytes, what=what).decode("utf-8", errors="replace")
    return [line.rstrip("\r") for line in text.splitlines()[-lines:]] if lines > 0 else []


def open_events(path: str | os.PathLike[str]) -> io.BytesIO:
    """An events file (.npz) read under its cap, as a stream for ``np.load``.

    The archive's members may not declare more than the cap once inflated (a
    zip reader never inflates a member past its declared size), and each
    ``.npy`` member's header may not declare more data than the member holds:
    ``np.load`` allocates the declared shape before it reads a byte. Every
    member is inflated once here (in 1 MiB pieces), so corrupt data is a
    ``CorruptDataError`` (a ValueError) now rather than a zlib error inside ``np.load``.
    """
    import zipfile  # here: every gyreprof run launcher writes through this module

    data = read_bytes(path, "events")
    cap = input_cap("events")
    buf = io.BytesIO(data)
    try:
        with zipfile.ZipFile(buf) as zf:
            infos = zf.infolist()
            declared = sum(max(0, info.file_size) for info in infos)
            if declared > cap:
                raise InvalidValueError(
                    f"events file {str(path)!r} unpacks to {fmt_size(declared)}, above the cap "
                    f"of {fmt_size(cap)}; set {ENV_MAX_INPUT} (e.g. {ENV_MAX_INPUT}=4G) to read "
                    "it anyway"
                )
            for info in infos:
                if info.filename.endswith(".npy"):
                    _check_npy_member(zf, info, path)
                with zf.open(info) as member:  # inflate it all once: CRC and zlib errors here
                    while member.read(1 << 20):
                        pass
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        zlib.error,
        # flags and versions zipfile cannot read (encrypted, patched, a newer format)
        NotImplementedError,
        RuntimeError,
    ) as exc:
        raise CorruptDataError(
            f"{path} is not a gyreprof events file (not a readable .npz: {exc})"
        ) from None
    buf.seek(0)
    return buf


def _check_npy_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str | os.PathLike[str]
) -> None:
    import numpy.lib.format as npy_format

    with zf.open(info) as member:
        try:
            version = npy_format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = npy_format.read_array_header_1_0(member)
            else:
                shape, _, dtype = npy_format.read_array_header_2_0(member)
        except (ValueError, TypeError, SyntaxError) as exc:
            raise CorruptDataError(
                f"{path} is not a gyreprof events file: member {info.filename} has a bad "
                f".npy header ({exc})"
            ) from None
        header_len = member.tell()
    count = 1
    for n in shape:
        count *= int(n)
    need = count * dtype.itemsize
    if need > info.file_size - header_len:
        raise CorruptDataError(
            f"{path} is not a gyreprof events file: member {info.filename} declares {need} "
            f"bytes of data but holds {max(0, info.file_size - header_len)}"
        )


def check_target(path: str | os.PathLike[str], folder: Path | None = None) -> None:
    """Refuse to replace another user's file (or link) in a folder others may write to.

    In a shared folder (sticky, or writable by group or others) a file at ``path``
    that this user does not own was put there by someone else: renaming over it
    would destroy it (root may), and a planted link may aim at a victim's file.
    """
    path = Path(path)
    folder = path.parent if folder is None else folder
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError:
        return  # the rename reports what is wrong
    me = os.geteuid() if hasattr(os, "geteuid") else -1
    if me < 0 or st.st_uid == me:
        return
    try:
        fst = os.stat(folder)
    except OSError:
        return
    shared = bool(fst.st_mode & (stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH))
    if shared:
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a file"
        raise PermissionError(
            errno.EPERM,
            f"{str(path)!r} is {kind} owned by uid {st.st_uid}, not by this user (uid {me}), "
            "in a folder others can write to; gyreprof does not replace it. Remove it or "
            "choose another path",
        )


def _random_hex(nbytes: int) -> str:
    """``secrets.token_hex(nbytes)``: the same ``os.urandom`` bytes, without importing
    ``secrets`` (its ``hmac`` loads OpenSSL, a few ms of every launcher's start)."""
    return os.urandom(nbytes).hex()


def _open_temp(path: Path) -> tuple[Path, Path, int]:
    """For :func:`write_atomic` and :func:`atomic_open`: make ``path``'s folder, refuse
    another user's target there (:func:`check_target`), and create a fresh temp file
    beside it with an unpredictable name (O_EXCL | O_NOFOLLOW); (folder, temp, its fd)."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    check_target(path, folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    tmp = folder / f".{path.name}.{os.getpid()}.{_random_hex(8)}.tmp"
    return folder, tmp, os.open(tmp, flags, 0o666)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a fresh temp file in the same folder and rename.

    The temp name is unpredictable and created with O_EXCL | O_NOFOLLOW, so a
    file or link planted in the folder is never written through; ``os.replace``
    replaces ``path`` itself even when it is a symlink. A file or link at ``path``
    owned by another user in a shared folder (``/tmp``) is refused with a
    PermissionError instead of being replaced. The data is complete on disk under
    ``path`` or not at all (a full disk or a file-size limit leaves the old file).
    """
    path = Path(path)
    folder, tmp, fd = _open_temp(path)
    try:
        view = memoryview(data)
        while view:
            n = _write_no_sigxfsz(fd, view)
            view = view[n:]
        os.close(fd)
        fd = -1
        check_target(path, folder)  # planted between the first check and now
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """A file object to stream into; on a clean exit it replaces ``path`` the way
    :func:`write_atomic` does (fresh O_EXCL | O_NOFOLLOW temp, rename, another user's
    target in a shared folder refused); on an error the temp file goes and ``path`` stays."""
    path = Path(path)
    folder, tmp, fd = _open_temp(path)
    try:
        kw: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8"}
        with os.fdopen(fd, mode, **kw) as fh:
            yield fh
        check_target(path, folder)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_no_sigxfsz(fd: int, data: memoryview) -> int:
    """``os.write``, with a file-size limit (RLIMIT_FSIZE) an OSError, not a kill by SIGXFSZ."""
    sigxfsz = getattr(signal, "SIGXFSZ", None)
    if sigxfsz is None or threading.current_thread() is not threading.main_thread():
        return os.write(fd, data)
    try:
        previous = signal.signal(sigxfsz, signal.SIG_IGN)
    except (ValueError, OSError):
        return os.write(fd, data)
    try:
        return os.write(fd, data)
    finally:
        signal.signal(sigxfsz, previous)


# ------------------------------------------------------------------ descriptors of our own


def fd_identity(fd: int) -> tuple[int, int] | None:
    """(st_dev, st_ino) of what ``fd`` names now, or None for a closed number."""
    if fd < 0:
        return None
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


class OwnedFd:
    """A descriptor gyreprof opened, remembered with the file it named then.

    A program may close every descriptor (a daemon's ``os.closerange(3, ...)``)
    and open files of its own, which then get the same numbers. Every descriptor
    gyreprof keeps open past the call that opened it (the autosave helper's pipe,
    a live reader's segment) is closed, written and read only while :meth:`ours`
    proves it still names the same file (same device and inode); otherwise the
    number is the program's, and gyreprof forgets it without touching it.
    """

    __slots__ = ("fd", "ident")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ident = fd_identity(fd)

    def ours(self) -> bool:
        return self.ident is not None and fd_identity(self.fd) == self.ident

    def forget(self) -> None:
        self.fd, self.ident = -1, None

    def close(self) -> bool:
        """Close the descriptor if it is still ours (True); forget the number either way."""
        fd, mine = self.fd, self.ours()
        self.forget()
        if mine:
            try:
                os.close(fd)
            except OSError:
                return False
        return mine

    def __repr__(self) -> str:
        return f"OwnedFd({self.fd}, ident={self.ident})"
