"""Read what a thread is waiting on (private helper of the doctor): psutil for what it
offers, Linux ``/proc`` by hand for the rest.

psutil gives the threads and their CPU time, the main thread's wakeups and the
regular files open with their flags. ``/proc`` is read by hand only for what psutil
has no call for: a thread's scheduler state and name, its kernel wait channel and
system call, what a descriptor that is not a regular file points to, and the size
of the open file itself.

Everything here is best effort: on other systems, or where ``/proc`` hides a
field (another user's process, a hardened kernel), the functions return
``None`` or empty values instead of raising, and the doctor says what it could
not read.

Read by hand, per thread ``/proc/<pid>/task/<tid>/``:

- ``stat``: scheduler state (``R`` running, ``S`` sleeping, ``D`` uninterruptible,
  ``T`` stopped, ``Z`` zombie) and name.
- ``wchan``: the kernel function the thread sleeps in (``0`` when running or hidden).
- ``syscall``: the system call number and arguments of a blocked thread (readable
  by the same user unless ptrace is restricted); the first argument of calls
  such as ``recvfrom`` is the file descriptor, which ``/proc/<pid>/fd`` and the
  process's sockets turn into a path or an address pair.

Per process, psutil's open files (path, descriptor, open flags) and the size of
each through ``/proc/<pid>/fd/<n>`` tell which regular files the process writes:
its stdout and stderr when redirected to a file, logs, TensorBoard event files,
checkpoints. Their growth is progress evidence.
"""

from __future__ import annotations

import os
import platform
import stat
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

# System call numbers of the calls a blocked Python thread usually sits in.
_SYSCALLS_X86_64: dict[int, str] = {
    0: "read",
    1: "write",
    2: "open",
    7: "poll",
    17: "pread64",
    19: "readv",
    23: "select",
    34: "pause",
    35: "nanosleep",
    42: "connect",
    43: "accept",
    44: "sendto",
    45: "recvfrom",
    46: "sendmsg",
    47: "recvmsg",
    61: "wait4",
    72: "fcntl",
    73: "flock",
    128: "rt_sigtimedwait",
    130: "rt_sigsuspend",
    202: "futex",
    230: "clock_nanosleep",
    232: "epoll_wait",
    247: "waitid",
    257: "openat",
    270: "pselect6",
    271: "ppoll",
    281: "epoll_pwait",
    288: "accept4",
    299: "recvmmsg",
    441: "epoll_pwait2",
    449: "futex_waitv",
}
# The generic table (aarch64, riscv64, loongarch64).
_SYSCALLS_GENERIC: dict[int, str] = {
    22: "epoll_pwait",
    25: "fcntl",
    32: "flock",
    56: "openat",
    63: "read",
    64: "write",
    65: "readv",
    67: "pread64",
    72: "pselect6",
    73: "ppoll",
    95: "waitid",
    98: "futex",
    101: "nanosleep",
    115: "clock_nanosleep",
    133: "rt_sigsuspend",
    137: "rt_sigtimedwait",
    202: "accept",
    203: "connect",
    206: "sendto",
    207: "recvfrom",
    211: "sendmsg",
    212: "recvmsg",
    242: "accept4",
    243: "recvmmsg",
    260: "wait4",
    441: "epoll_pwait2",
    449: "futex_waitv",
}

# Calls whose first argument is a file descriptor.
_FD_CALLS = frozenset(
    {
        "read",
        "write",
        "pread64",
        "readv",
        "connect",
        "accept",
        "accept4",
        "sendto",
        "recvfrom",
        "sendmsg",
        "recvmsg",
        "recvmmsg",
        "fcntl",
        "flock",
    }
)

# What each call usually means for a stuck Python thread, in plain words.
_MEANING: dict[str, str] = {
    "futex": "waits on a lock or condition (threading.Lock, Queue.get, Thread.join, the GIL)",
    "futex_waitv": "waits on a lock or condition",
    "read": "waits to read",
    "readv": "waits to read",
    "pread64": "waits to read",
    "recvfrom": "waits to receive from a socket",
    "recvmsg": "waits to receive from a socket",
    "recvmmsg": "waits to receive from a socket",
    "write": "waits to write (a full pipe or socket buffer: the reader is not reading)",
    "sendto": "waits to send (the peer is not reading)",
    "sendmsg": "waits to send (the peer is not reading)",
    "connect": "waits for a connection to be accepted",
    "accept": "waits for a client to connect",
    "accept4": "waits for a client to connect",
    "poll": "waits in poll (a socket or pipe with a timeout, or an event loop)",
    "ppoll": "waits in poll (a socket or pipe with a timeout, or an event loop)",
    "select": "waits in select (a socket or pipe with a timeout)",
    "pselect6": "waits in select (a socket or pipe with a timeout)",
    "epoll_wait": "waits in epoll (an event loop: asyncio, grpc, zmq, a web server)",
    "epoll_pwait": "waits in epoll (an event loop: asyncio, grpc, zmq, a web server)",
    "epoll_pwait2": "waits in epoll (an event loop)",
    "nanosleep": "sleeps (time.sleep)",
    "clock_nanosleep": "sleeps (time.sleep)",
    "pause": "waits for a signal",
    "rt_sigsuspend": "waits for a signal",
    "rt_sigtimedwait": "waits for a signal",
    "wait4": "waits for a child process to exit",
    "waitid": "waits for a child process to exit",
    "open": "waits to open a file (a FIFO with no writer, or a slow file system)",
    "openat": "waits to open a file (a FIFO with no writer, or a slow file system)",
    "fcntl": "waits for a file lock",
    "flock": "waits for a file lock",
}


def _syscall_table() -> dict[int, str]:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return _SYSCALLS_X86_64
    if machine in ("aarch64", "arm64", "riscv64", "loongarch64"):
        return _SYSCALLS_GENERIC
    return {}


@dataclass(frozen=True)
class ThreadSample:
    """One thread at one instant: state letter, CPU seconds, kernel wait channel, system call."""

    tid: int
    name: str
    state: str
    cpu_s: float
    wchan: str | None
    syscall: str | None
    fd: int | None


def proc_available(pid: int) -> bool:
    """Whether ``/proc/<pid>`` exists (Linux-style procfs)."""
    # the question is whether the hand reads below can work, not a fact about the process
    return os.path.isdir(f"/proc/{pid}/task")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def read_wchan(pid: int, tid: int | None = None) -> str | None:
    """The kernel wait channel of a process or one of its threads; None when hidden or running."""
    # by hand: psutil has no wait channel
    path = f"/proc/{pid}/wchan" if tid is None else f"/proc/{pid}/task/{tid}/wchan"
    text = _read(path)
    if text is None:
        return None
    text = text.strip()
    return None if text in ("", "0") else text


def _parse_stat(text: str) -> tuple[str, str] | None:
    """(comm, state) from a ``stat`` line; the name may contain spaces and parentheses."""
    open_paren = text.find("(")
    close_paren = text.rfind(")")
    if open_paren < 0 or close_paren < 0:
        return None
    comm = text[open_paren + 1 : close_paren]
    fields = text[close_paren + 2 :].split()
    if not fields:
        return None
    return comm, fields[0]


def _parse_syscall(text: str | None) -> tuple[str | None, int | None]:
    if text is None:
        return None, None
    parts = text.split()
    if not parts:
        return None, None
    if parts[0] == "running":
        return "running", None
    try:
        number = int(parts[0])
    except ValueError:
        return None, None
    if number < 0:
        return None, None
    name = _syscall_table().get(number, f"syscall {number}")
    fd: int | None = None
    if name in _FD_CALLS and len(parts) > 1:
        try:
            fd = int(parts[1], 16)
        except ValueError:
            fd = None
    return name, fd


def main_thread_wakeups(pid: int) -> int | None:
    """How many times the main thread has given up the CPU to wait and been woken
    (``voluntary_ctxt_switches``): a thread stuck in one wait wakes never, one that
    keeps receiving data or replies wakes each time. None where unreadable.

    On Linux psutil's count is the one of ``/proc/<pid>/status``: the thread-group
    leader's own, that is the main thread's. Elsewhere it adds up every thread, so
    there is no answer (None)."""
    if not psutil.LINUX:
        return None
    try:
        return int(psutil.Process(pid).num_ctx_switches().voluntary)
    except (psutil.Error, OSError):
        return None


def thread_samples(pid: int) -> list[ThreadSample]:
    """Every thread of ``pid`` now (psutil: the threads and their CPU time; ``/proc``:
    the rest); the main thread first, then the others in tid order (tids wrap, so the
    main thread's need not be the smallest); an empty list where unreadable."""
    try:
        threads = psutil.Process(pid).threads()
    except (psutil.Error, OSError):
        return []
    out: list[ThreadSample] = []
    for th in sorted(threads, key=lambda t: (t.id != pid, t.id)):
        base = f"/proc/{pid}/task/{th.id}"
        # by hand: psutil has no per-thread scheduler state, name or system call
        stat_line = _read(f"{base}/stat")
        parsed = _parse_stat(stat_line) if stat_line else None
        if parsed is None:
            continue  # the thread ended between the listing and the read
        comm, state = parsed
        syscall, fd = _parse_syscall(_read(f"{base}/syscall"))
        out.append(
            ThreadSample(
                tid=th.id,
                name=comm,
                state=state,
                cpu_s=float(th.user_time + th.system_time),
                wchan=read_wchan(pid, th.id),
                syscall=syscall,
                fd=fd,
            )
        )
    return out


def meaning(syscall: str | None) -> str | None:
    """Plain-words reading of a blocking system call, or None for unknown ones."""
    if syscall is None:
        return None
    return _MEANING.get(syscall)


def fd_target(pid: int, fd: int, sockets: Mapping[int, str]) -> str | None:
    """What file descriptor ``fd`` of ``pid`` refers to: a path, a pipe or a socket's addresses."""
    if fd in sockets:
        return sockets[fd]
    try:
        # by hand: psutil lists regular files only, not the pipe or socket this may be
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    if target.startswith("pipe:"):
        return f"a pipe ({target})"
    if target.startswith("socket:"):
        return f"a socket ({target})"
    return target


STATE_WORDS: dict[str, str] = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible wait (disk or driver)",
    "T": "stopped by a signal",
    "t": "stopped by a debugger",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
}


@dataclass(frozen=True)
class OpenFile:
    """A regular file a process holds open for writing, as seen now."""

    fd: int
    path: str
    role: str  # "stdout", "stderr" or "open for writing"
    size: int
    mtime_ns: int


#: at most this many written files are watched (a process with thousands of open files
#: still costs a bounded number of reads per look)
MAX_WATCHED_FILES = 64
#: at most this many open files are examined per look
MAX_EXAMINED_FDS = 4096
#: paths never watched: shared memory (the live segment is read as such) and the procfs
_SKIP_PREFIXES = ("/dev/", "/proc/", "/sys/")


# files gyreprof itself writes for a process under `gyreprof run`: never the process's
# own output, so never progress (a start-up trail grows while the process is stuck)
_OWN_SUFFIXES = (".trail",)


def written_files(pid: int, limit: int = MAX_WATCHED_FILES) -> list[OpenFile]:
    """Regular files ``pid`` writes: its stdout / stderr when redirected to a file, and
    other files it holds open for writing (logs, event files, checkpoints).

    Best effort: an empty list where its open files cannot be read (another user's
    process, not Linux). One entry per path; stdout and stderr first.
    """
    try:
        files = psutil.Process(pid).open_files()
    except (psutil.Error, OSError):
        return []
    out: dict[str, OpenFile] = {}
    for f in sorted(files, key=lambda f: f.fd)[:MAX_EXAMINED_FDS]:
        if len(out) >= limit:
            break
        fd, path = f.fd, f.path
        # shared memory (the live segment is read as such), devices, the procfs
        if not path.startswith("/") or path.startswith(_SKIP_PREFIXES):
            continue
        if fd > 2 and path.endswith(_OWN_SUFFIXES):
            continue  # gyreprof run's own records of the process (its start-up trail)
        role = {1: "stdout", 2: "stderr"}.get(fd, "open for writing")
        flags = getattr(f, "flags", None)  # Linux only: elsewhere no way to tell
        if fd > 2 and (flags is None or (flags & 0o3) not in (0o1, 0o2)):
            continue  # not opened for writing (O_WRONLY or O_RDWR)
        try:
            # by hand: psutil gives no size; through the descriptor it is the open file
            # itself, even if renamed since
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if path in out:
            if out[path].role == "stdout" and role == "stderr":
                out[path] = OpenFile(fd, path, "stdout and stderr", st.st_size, st.st_mtime_ns)
            continue
        out[path] = OpenFile(fd, path, role, st.st_size, st.st_mtime_ns)
    return list(out.values())
