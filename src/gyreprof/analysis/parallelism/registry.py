"""The worker registry: what each worker process says about itself.

``register_worker(role, **config)`` runs inside a worker and writes one small
JSON file, ``<registry>/<pid>.json``, with the role, the config values the
worker actually read, and the thread settings it actually runs with. Another
process (``census`` / ``check_parallelism`` / ``gyreprof check``) reads the
files of the pids it finds in a process tree.

The registry directory is ``$GYREPROF_REGISTRY_DIR`` when set, otherwise
``<tempdir>/gyreprof-<uid>/workers``. Files are written atomically (temporary
file + ``os.replace``), so a reader never sees half an entry.

Trust: folders are created with mode 0700 and entries with mode 0600 through
``O_CREAT | O_EXCL | O_NOFOLLOW``. A reader believes an entry only when the file
is a regular file (not a link) owned by the uid the process it names runs as,
writable by no one else, in a folder where only that user (or root) can create
files. Any other entry is ignored and reported as untrusted in the census notes:
another local user cannot give your workers a role or config they do not have. Each entry holds
the process's start time, so an entry left behind by a dead process is never
attributed to a new process that got the same pid; such entries are ignored
and removed when the registry is read.
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import getpass
import json
import math
import os
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gyreprof._support.errors import CorruptDataError, InvalidValueError
from gyreprof.live._layout import folder_trusted_for, process_uid
from gyreprof.model._serial import Record, decode, serial_format

__all__ = [
    "FORMAT",
    "THREAD_ENV_VARS",
    "WorkerRecord",
    "registry_dir",
    "register_worker",
    "unregister_worker",
    "read_registry",
    "validate_config",
]

FORMAT = "gyreprof-worker/1"

# Environment variables that size the thread pools of numeric libraries.
THREAD_ENV_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

# Two readings of one process's start time agree to the clock tick (10 ms on Linux).
_CREATE_TIME_TOLERANCE_S = 0.05

_ENV_DIR = "GYREPROF_REGISTRY_DIR"
# An entry is a few KiB of JSON; anything much larger is not ours (bounded read).
_MAX_ENTRY_BYTES = 1 << 20
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_atexit_installed: set[tuple[int, str]] = set()
_register_lock = threading.Lock()


def _fresh_lock_in_child() -> None:
    """A child forked while another thread held the lock gets one that is free."""
    global _register_lock
    _register_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_lock_in_child)


def registry_dir(path: str | os.PathLike[str] | None = None, *, create: bool = False) -> Path:
    """The registry directory: ``path``, else ``$GYREPROF_REGISTRY_DIR``, else a per-user temp dir.

    With ``create=True`` the directory is made (mode 0700). A default directory
    owned by another user is refused with ``PermissionError``: it could hold
    entries written to mislead the census.
    """
    if path is not None:
        directory = Path(path)
    elif os.environ.get(_ENV_DIR):
        directory = Path(os.environ[_ENV_DIR])
    elif not hasattr(os, "getuid"):  # pragma: no cover - not Unix
        directory = Path(tempfile.gettempdir()) / f"gyreprof-{getpass.getuser()}" / "workers"
    else:
        return _default_registry(os.getuid(), create=create)
    if create:
        _make_private(directory)
    return directory


def _default_candidates(uid: int) -> list[Path]:
    """The folders (each holding ``workers/``) the default registry may be in, in order:
    ``<tempdir>/gyreprof-<uid>``, then the user's runtime folder, then ``~/.cache``. A
    worker takes the first that is private to it (or that it can create so); a reader
    the first that is private or absent: both skip one another user squatted."""
    out = [Path(tempfile.gettempdir()) / f"gyreprof-{uid}"]
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}")
    if runtime.is_dir():  # never created here: the session manager owns it
        out.append(runtime / "gyreprof")
    home = os.environ.get("HOME")
    if home:
        out.append(Path(home) / ".cache" / "gyreprof")
    return out


def _owner_dir_state(path: Path, uid: int) -> str:
    """'absent', 'private' (a real folder of ``uid`` only it can write; taken back to
    0700 when it is ours but open) or 'squatted' (a link, a file, another user's)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "squatted"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        return "squatted"  # a link (lstat), a file, or a folder of someone else
    if st.st_mode & 0o022:
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077, follow_symlinks=False)
        except (OSError, NotImplementedError):
            return "squatted"
    return "private"


def _default_registry(uid: int, *, create: bool) -> Path:
    tried: list[str] = []
    for owner_dir in _default_candidates(uid):
        state = _owner_dir_state(owner_dir, uid)
        if state == "absent" and not create:
            return owner_dir / "workers"  # nothing registered there yet
        if state == "absent":
            try:
                os.makedirs(owner_dir.parent, 0o700, exist_ok=True)
                os.mkdir(owner_dir, 0o700)
            except FileExistsError:
                pass  # made meanwhile (by us or someone else): checked below
            except OSError as exc:
                tried.append(f"{owner_dir} ({exc.strerror or exc})")
                continue
            state = _owner_dir_state(owner_dir, uid)
        if state != "private":
            tried.append(f"{owner_dir} (a link, a file or another user's folder)")
            continue
        directory = owner_dir / "workers"
        if create:
            try:
                _make_private(directory)
            except OSError as exc:
                tried.append(f"{directory} ({exc})")
                continue
        return directory
    raise PermissionError(
        errno.EACCES,
        "no private folder for the worker registry: tried " + "; ".join(tried) + f"; set "
        f"{_ENV_DIR} to a folder only you can write",
    )


def _euid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _make_private(directory: Path) -> None:
    """Create ``directory`` (and missing parents) with mode 0700; take back a folder of
    ours that others can write; refuse (``PermissionError``) a folder where other users
    can create files, since readers would not believe entries written there."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    uid = _euid()
    if uid is None:
        return
    st = os.lstat(directory)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o022:
        os.chmod(directory, stat.S_IMODE(st.st_mode) & ~0o077, follow_symlinks=False)
        st = os.lstat(directory)
    if not folder_trusted_for(st, uid):
        raise PermissionError(
            f"the worker registry {directory} is not a private folder (owner uid {st.st_uid}, "
            f"mode {stat.S_IMODE(st.st_mode):o}{', a link' if stat.S_ISLNK(st.st_mode) else ''}); "
            f"readers would not believe entries there: set {_ENV_DIR} to a folder only you "
            "can write"
        )


@serial_format(FORMAT)
@dataclass(frozen=True)
class WorkerRecord(Record):
    """One worker's registration, as written by ``register_worker``.

    ``config`` holds the values the worker read (JSON types only).
    ``thread_env`` holds the thread-count environment variables that were set
    in the worker (name -> value, only those set). ``torch_threads`` /
    ``torch_interop_threads`` are ``torch.get_num_threads()`` /
    ``get_num_interop_threads()`` when torch was already imported, else
    ``None``. ``threadpools`` is threadpoolctl's view of loaded BLAS/OpenMP
    pools (``user_api``, ``internal_api``, ``num_threads``, ``prefix``,
    ``version``) or ``None`` without threadpoolctl. ``os_threads`` is the
    worker's OS thread count at registration. ``registrations`` counts the
    calls under the same role in this process: the envs built in it.
    """

    pid: int
    role: str
    config: dict[str, Any]
    create_time_s: float
    registered_at_s: float
    thread_env: dict[str, str] = field(default_factory=dict)
    torch_threads: int | None = None
    torch_interop_threads: int | None = None
    threadpools: list[dict[str, Any]] | None = None
    os_threads: int | None = None
    process_name: str | None = None
    registrations: int = 1
    # envs registered by the user's own calls (None in entries written before this was
    # kept: all of them) and by ``gyreprof run`` itself (config registered_by=_RUN_MARK);
    # both count the same envs, so ``registrations`` is the larger of the two
    user_registrations: int | None = None
    run_registrations: int = 0
    # where the record was read from: not part of its value, not written
    path: str | None = field(default=None, compare=False, metadata={"serial": False})

    def compute_threads(self) -> int | None:
        """Threads one unit of numeric work may run in this worker, or ``None`` when unknown.

        The largest of the BLAS/OpenMP pool sizes threadpoolctl saw and torch's
        intra-op thread count. ``None`` when neither was recorded (no pools
        loaded, or threadpoolctl not installed and torch not imported).
        """
        sizes: list[int] = []
        for pool in self.threadpools or []:
            n = pool.get("num_threads")
            if isinstance(n, int) and n > 0:
                sizes.append(n)
        if self.torch_threads:
            sizes.append(self.torch_threads)
        return max(sizes) if sizes else None

    def declared_threads(self) -> int | None:
        """The ``num_threads`` the user's ``register_worker(..., num_threads=N)`` declared
        (an int >= 1), else ``None``. ``gyreprof run``'s own registration records torch's
        pool size under that key: a pool size, not a declaration, so it does not count."""
        if self.user_registrations == 0:
            return None
        n = self.config.get("num_threads")
        if isinstance(n, str) and n.strip().isdigit():
            n = int(n)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return None
        return n

    def lookup(self, key: str) -> tuple[bool, Any]:
        """The value this worker runs with for ``key``: its config, then its thread settings.

        Thread settings answer to the environment variable names
        (``OMP_NUM_THREADS``, ...) and to ``torch_num_threads``,
        ``torch_num_interop_threads``, ``blas_num_threads`` (largest pool) and
        ``os_threads``. Returns ``(found, value)``.
        """
        if key in self.config:
            return True, self.config[key]
        if key in self.thread_env:
            return True, self.thread_env[key]
        derived = {
            "torch_num_threads": self.torch_threads,
            "torch_num_interop_threads": self.torch_interop_threads,
            "blas_num_threads": self.compute_threads() if self.threadpools else None,
            "os_threads": self.os_threads,
        }
        if derived.get(key) is not None:
            return True, derived[key]
        return False, None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | None = None) -> WorkerRecord:
        """Rebuild a record from ``to_dict()`` output; ``CorruptDataError`` (a
        ``ValueError``) naming the field when it is not one."""
        record = decode(cls, data)
        return record if path is None else dataclasses.replace(record, path=path)


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return a JSON-ready copy of ``config``; ``ValueError`` naming the first bad key.

    Allowed: ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists and
    tuples of those, and dicts with ``str`` keys. NumPy scalars are converted
    to Python numbers.
    """
    return {key: _clean(value, f"config[{key!r}]") for key, value in _items(config, "config")}


def _items(mapping: Mapping[Any, Any], where: str) -> Iterable[tuple[str, Any]]:
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise InvalidValueError(
                f"{where} has a key {key!r} of type {type(key).__name__}; "
                "worker config keys must be strings"
            )
        yield key, value


def _clean(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # numpy scalar -> Python number / bool
        if isinstance(value, bool):
            return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(
                f"{where} is {value!r}, which JSON cannot hold; register it as a string instead"
            )
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_clean(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        return {k: _clean(v, f"{where}[{k!r}]") for k, v in _items(value, where)}
    raise InvalidValueError(
        f"{where} is a {type(value).__name__}, which cannot be registered; worker config "
        "values must be None, bool, int, float, str, or lists/dicts of those "
        "(register the value you read, e.g. str(x) or int(x))"
    )


def _thread_settings() -> dict[str, Any]:
    """Thread settings of the calling process, without importing anything heavy."""
    env = {name: os.environ[name] for name in THREAD_ENV_VARS if name in os.environ}
    torch_threads: int | None = None
    torch_interop: int | None = None
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch_threads = int(torch.get_num_threads())
            torch_interop = int(torch.get_num_interop_threads())
        except Exception:  # a half-imported or stubbed torch: record nothing rather than fail
            torch_threads = torch_interop = None
    pools: list[dict[str, Any]] | None
    try:
        import threadpoolctl
    except ImportError:
        pools = None
    else:
        pools = [
            {
                key: info.get(key)
                for key in ("user_api", "internal_api", "num_threads", "prefix", "version")
            }
            for info in threadpoolctl.threadpool_info()
        ]
    return {
        "thread_env": env,
        "torch_threads": torch_threads,
        "torch_interop_threads": torch_interop,
        "threadpools": pools,
    }


def _process_name() -> str | None:
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return None
    name = str(mp.current_process().name)
    return None if name == "MainProcess" else name


def _entry_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}.json"


class UntrustedEntryError(CorruptDataError):
    """A registration that may have been written by someone other than the worker it names."""


def _read_bytes(path: Path) -> tuple[bytes, os.stat_result]:
    """The file's bytes (never through a link, never blocking on a FIFO, at most
    ``_MAX_ENTRY_BYTES``) and its fstat."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedEntryError(
                f"worker registration {path} is a symbolic link: untrusted, ignored"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedEntryError(f"worker registration {path} is not a regular file")
        if st.st_size > _MAX_ENTRY_BYTES:
            raise CorruptDataError(
                f"worker registration {path} is {st.st_size} bytes; entries are at most "
                f"{_MAX_ENTRY_BYTES}"
            )
        chunks = []
        left = _MAX_ENTRY_BYTES + 1
        while left > 0:
            b = os.read(fd, min(left, 65536))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > _MAX_ENTRY_BYTES:
            raise CorruptDataError(f"worker registration {path} grew past {_MAX_ENTRY_BYTES} bytes")
        return data, st
    finally:
        os.close(fd)


def _check_trust(path: Path, st: os.stat_result, pid: int) -> None:
    """``UntrustedEntryError`` unless the entry of ``pid`` is owned by the uid ``pid`` runs
    as, writable by its owner only, in a folder only that owner (or root) can create in."""
    where = str(path)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedEntryError(
            f"worker registration {where} is writable by other users "
            f"(mode {stat.S_IMODE(st.st_mode):o}): untrusted, ignored"
        )
    runs_as = process_uid(pid)
    if runs_as is None:
        raise UntrustedEntryError(
            f"worker registration {where}: cannot tell which uid pid {pid} runs as: "
            "untrusted, ignored"
        )
    if st.st_uid != runs_as:
        raise UntrustedEntryError(
            f"worker registration {where} belongs to uid {st.st_uid}, but pid {pid} runs as "
            f"uid {runs_as}: untrusted, ignored"
        )
    try:
        dst = os.stat(path.parent)
    except OSError as exc:
        raise UntrustedEntryError(f"cannot check the folder of {where}: {exc}") from None
    if not folder_trusted_for(dst, st.st_uid):
        raise UntrustedEntryError(
            f"worker registration {where} sits in {path.parent}, where other users can create "
            f"files (owner uid {dst.st_uid}, mode {stat.S_IMODE(dst.st_mode):o}): "
            "untrusted, ignored"
        )


def _read_entry(path: Path, *, trust_pid: int | None = None) -> WorkerRecord:
    """The record in ``path``; with ``trust_pid``, only if it passes :func:`_check_trust`
    for that pid (``UntrustedEntryError`` otherwise)."""
    raw, st = _read_bytes(path)
    if trust_pid is not None:
        _check_trust(path, st, trust_pid)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptDataError(f"corrupted worker registration {path}: not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise CorruptDataError(
            f"corrupted worker registration {path}: not JSON ({exc.msg})"
        ) from None
    return WorkerRecord.from_dict(data, path=str(path))


def _matches(record: WorkerRecord, create_time_s: float) -> bool:
    return abs(record.create_time_s - create_time_s) <= _CREATE_TIME_TOLERANCE_S


def register_worker(
    role: str,
    *,
    replace: bool = False,
    registry: str | os.PathLike[str] | None = None,
    **config: Any,
) -> WorkerRecord:
    """Record this process as a worker with ``role`` and the config values it actually read.

    Call it at worker start, after the worker has read its settings; inside an
    env factory is fine::

        gp.register_worker("env_worker", num_threads=torch.get_num_threads(), env_id=env_id)

    Besides ``config`` it records the thread settings the process runs with
    (thread-count environment variables, torch's intra/inter-op threads when
    torch is already imported, threadpoolctl's BLAS pools when threadpoolctl is
    installed) and the OS thread count. ``census`` / ``check_parallelism``
    running in any process of the same user then see this worker's role.

    Calling it again in the same process is never an error: with the same
    role it counts one more env built in this process (``registrations``;
    ``SyncVectorEnv`` builds all its envs in one process), with another role
    the new role replaces the old one. The latest config is kept. ``replace``
    is accepted for compatibility and changes nothing. Config keys
    ``replace`` and ``registry`` are reserved. Raises ``ValueError`` naming the
    key for config values that JSON cannot hold.
    """
    del replace  # a second call always counts one more env; kept for old call sites
    if not isinstance(role, str) or not role.strip():
        raise InvalidValueError(
            f"role must be a non-empty string such as 'env_worker', got {role!r}"
        )
    if any(ch in role for ch in "\n\r\t\0"):
        raise InvalidValueError(f"role must be one line of text, got {role!r}")
    clean = validate_config(config)
    directory = registry_dir(registry, create=True)
    pid = os.getpid()
    me = psutil.Process(pid)
    create_time = me.create_time()
    path = _entry_path(directory, pid)
    with _register_lock:  # envs built in several threads of one process count each
        previous = _own_entry(path, create_time)
        role, clean, user_n, run_n = _merge_registration(previous, role, clean)
        threads = _thread_settings()
        record = WorkerRecord(
            pid=pid,
            role=role,
            config=clean,
            create_time_s=create_time,
            registered_at_s=time.time(),
            thread_env=threads["thread_env"],
            torch_threads=threads["torch_threads"],
            torch_interop_threads=threads["torch_interop_threads"],
            threadpools=threads["threadpools"],
            os_threads=me.num_threads(),
            process_name=_process_name(),
            registrations=max(user_n, run_n),
            user_registrations=user_n,
            run_registrations=run_n,
            path=str(path),
        )
        _write_entry(directory, path, record)
    _install_atexit(directory)
    return record


# gyreprof run registers vector-env workers itself (integrations/_auto/workers.py)
_RUN_MARK = "gyreprof run"


def _merge_registration(
    previous: WorkerRecord | None, role: str, config: dict[str, Any]
) -> tuple[str, dict[str, Any], int, int]:
    """(role, config, user registrations, run registrations) after one more call.

    ``gyreprof run`` registers the same envs the user's own calls do (at worker start,
    and after a vector env's ``__init__`` in the main process): each kind is counted
    apart, and a run's registration never replaces the role or config the user gave.
    """
    by_run = config.get("registered_by") == _RUN_MARK
    if previous is None:
        return role, config, 0 if by_run else 1, 1 if by_run else 0
    user_n = previous.user_registrations
    if user_n is None:  # written before the two were kept apart: all the user's
        user_n = previous.registrations
    run_n = previous.run_registrations
    if by_run:
        run_n = run_n + 1 if previous.role == role or user_n else 1
        if user_n:
            return previous.role, previous.config, user_n, run_n
        return role, config, 0, run_n
    user_n = user_n + 1 if user_n and previous.role == role else 1
    return role, config, user_n, run_n


def _own_entry(path: Path, create_time_s: float) -> WorkerRecord | None:
    """This process's current registration, or ``None`` (none, unreadable, or a dead pid's)."""
    try:
        previous = _read_entry(path)
    except (OSError, ValueError):
        return None  # absent, or an unreadable leftover that is overwritten
    return previous if _matches(previous, create_time_s) else None


def _write_entry(directory: Path, path: Path, record: WorkerRecord) -> None:
    """Write ``record`` atomically: a temporary file, then ``os.replace``."""
    tmp = directory / f".{record.pid}.{time.monotonic_ns()}.tmp"
    data = json.dumps(record.to_dict(), sort_keys=True).encode("utf-8")
    # O_EXCL | O_NOFOLLOW: never write through a link or into a file someone else made
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def unregister_worker(registry: str | os.PathLike[str] | None = None) -> bool:
    """Remove this process's registration; returns whether there was one.

    Use it when a registered object is closed in a process that keeps running
    and should no longer be listed. (The env gymnasium's ``AsyncVectorEnv``
    builds in the parent to read the spaces needs no call: the census counts
    it as an env built in the main process, not as a worker.) A process that exits needs no call: its entry
    is removed at exit, or ignored and cleaned once the process is gone.
    """
    directory = registry_dir(registry)
    path = _entry_path(directory, os.getpid())
    try:
        record = _read_entry(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        record = None
    if record is not None and not _matches(record, psutil.Process().create_time()):
        return False  # a dead predecessor's entry; the reader cleans it
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def _remove_own_entry_at_exit(pid: int, directory: str) -> None:
    if os.getpid() != pid:  # a forked child inherited the hook; its entry is its own business
        return
    try:
        unregister_worker(directory)
    except Exception:  # exit path: never turn an orderly exit into a traceback
        pass


def _install_atexit(directory: Path) -> None:
    key = (os.getpid(), str(directory))
    if key in _atexit_installed:
        return
    _atexit_installed.add(key)
    atexit.register(_remove_own_entry_at_exit, *key)


def read_registry(
    pids: Mapping[int, float],
    registry: str | os.PathLike[str] | None = None,
    *,
    prune: bool = True,
) -> tuple[dict[int, WorkerRecord], list[str]]:
    """Registrations of the given live processes (pid -> create time in s).

    Returns ``(records by pid, problems)`` where problems are plain-words
    notes about entries that could not be read. With ``prune=True``, entries
    of processes that no longer exist (or whose pid now belongs to another
    process) are deleted.
    """
    directory = registry_dir(registry)
    records: dict[int, WorkerRecord] = {}
    problems: list[str] = []
    if not directory.is_dir():
        return records, problems
    for pid, create_time in pids.items():
        path = _entry_path(directory, pid)
        try:
            record = _read_entry(path, trust_pid=pid)
        except FileNotFoundError:
            continue
        except UntrustedEntryError as exc:
            problems.append(f"registry entry of pid {pid} untrusted: {exc}")
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"registry entry of pid {pid} unreadable: {exc}")
            continue
        if record.pid == pid and _matches(record, create_time):
            records[pid] = record
    if prune:
        _prune(directory)
    return records, problems


def _prune(directory: Path) -> None:
    """Delete entries (and stray temp files) of processes that are gone."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        stem = name[:-5] if name.endswith(".json") else None
        if stem is None and name.startswith(".") and name.endswith(".tmp"):
            stem = name[1:].split(".", 1)[0]
            stale_tmp = True
        else:
            stale_tmp = False
        if stem is None or not stem.isdigit():
            continue
        path = directory / name
        pid = int(stem)
        try:
            alive_since = psutil.Process(pid).create_time()
        except psutil.NoSuchProcess:
            alive_since = None
        except psutil.Error:
            continue
        if alive_since is not None:
            if stale_tmp:
                continue  # its writer may still be writing it
            try:
                record = _read_entry(path)
            except (OSError, ValueError):
                continue
            if _matches(record, alive_since):
                continue
        try:
            path.unlink()
        except OSError:
            pass
