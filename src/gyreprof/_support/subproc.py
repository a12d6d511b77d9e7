"""The child processes that sweeps and self-checks run, and everything those start.

Both sides of one rule: a run's processes and its temporary folder never outlive
the command that started them, whether it ends normally, by SIGTERM or SIGINT, or
by a crash.

Parent side (:class:`ChildTree`, :func:`sigterm_unwinds`):

* the child starts in its own session, so it and everything it starts (vector-env
  workers, servers) share one process group;
* while the child runs, its descendants are polled, so those that leave the group
  (``start_new_session``) are still known;
* :meth:`ChildTree.end` kills the group and every descendant seen *before* the
  child is reaped: the zombie leader keeps the group id from being reused, so the
  kill cannot reach an unrelated process;
* :func:`sigterm_unwinds` turns SIGTERM into an exception while a run is going, so
  ``finally`` blocks end the tree and remove the temporary folder; afterwards the
  process still dies by SIGTERM, as it would have.

Child side (:func:`bind_to_parent`, called first thing in the child):

* ``prctl(PR_SET_CHILD_SUBREAPER)`` (Linux): a process the sampler starts that
  daemonizes (forks twice) is re-parented to the child, not to init, so it stays
  in the tree that is polled and killed;
* ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` (Linux), so the child hears when its parent
  dies, even by SIGKILL. The kernel sends it when the parent *thread* that started
  the child exits; the parents here wait for the child in the thread that started
  it, so that thread outlives the child;
* on that SIGTERM (or any other) the child removes its run folder if the parent is
  gone (nobody else will), then kills its descendants and its process group,
  itself included. A thread watching the signal wake-up pipe does this too, so a
  main thread stuck in native code does not stop it;
* at a normal exit it kills its descendants: the orphans re-parented to it would
  otherwise pass to init before the parent's poll has seen them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

PARENT_PID_ENV = "GYREPROF_PARENT_PID"
"""The environment variable that tells a child which process it belongs to."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_POLL_S = 0.05


# ------------------------------------------------------------------ parent side


def package_root() -> str:
    """The folder that holds the ``gyreprof`` package (a child's ``PYTHONPATH`` entry)."""
    return str(Path(__file__).resolve().parent.parent.parent)


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that calls :func:`bind_to_parent`."""
    env = dict(os.environ if base is None else base)
    env[PARENT_PID_ENV] = str(os.getpid())
    return env


class ChildTree:
    """A child started in its own session, and every descendant of it seen so far.

    ``ChildTree.start(argv, **popen_kwargs)`` starts it (``start_new_session`` and the
    :func:`child_env` marker are added). :meth:`wait` waits for the child to exit
    *without reaping it*; :meth:`end` then kills what is left and reaps.
    """

    def __init__(self, proc: subprocess.Popen[Any]) -> None:
        self.proc = proc
        try:
            self._ps: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            self._ps = None
        self.known: list[psutil.Process] = []
        self._ended = False

    @classmethod
    def start(cls, argv: Sequence[str], **popen_kwargs: Any) -> ChildTree:
        popen_kwargs["env"] = child_env(popen_kwargs.get("env"))
        popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(list(argv), start_new_session=hasattr(os, "setsid"), **popen_kwargs)
        return cls(proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll_tree(self) -> list[psutil.Process]:
        """The child and its descendants now; every one is remembered for :meth:`end`."""
        if self._ps is None:
            return []
        try:
            tree = [self._ps, *self._ps.children(recursive=True)]
        except psutil.Error:
            tree = [self._ps]
        for p in tree:
            if p not in self.known:
                self.known.append(p)
        return tree

    def exited(self) -> bool:
        """Whether the child has exited (it is not reaped: see the module docstring)."""
        if self.proc.returncode is not None:
            return True
        if not hasattr(os, "waitid"):  # pragma: no cover - not POSIX
            return self.proc.poll() is not None
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def wait(self, timeout_s: float | None, poll_s: float = _POLL_S) -> bool:
        """Wait up to ``timeout_s`` (None: for ever) for the child to exit; True if it did.

        Descendants are polled meanwhile. An exception (KeyboardInterrupt, SIGTERM made
        one by :func:`sigterm_unwinds`) ends the tree before it propagates.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while not self.exited():
                self.poll_tree()
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(poll_s)
        except BaseException:
            self.end()
            raise
        return True

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's process group (nothing if it is gone)."""
        if self._ended:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def end(self) -> int:
        """Kill the child's group and every descendant seen, reap the child; its exit code."""
        if not self._ended:
            self.poll_tree()
            self.signal_group(signal.SIGKILL)  # the leader is not reaped yet: the id is ours
            for p in self.known:
                with contextlib.suppress(psutil.Error):
                    p.kill()  # psutil checks it is still the same process
            self._ended = True
        return self.proc.wait()


class Terminated(BaseException):
    """SIGTERM arrived while :func:`sigterm_unwinds` was active."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated`, so ``finally`` blocks run.

    Only where SIGTERM has its default action and this is the main thread (elsewhere
    the block runs unchanged: someone else owns SIGTERM). Once the block has unwound,
    the process dies by SIGTERM, as it would have without the block.
    """
    in_main = threading.current_thread() is threading.main_thread()
    if not in_main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        raise  # only reached where the signal is held back
    finally:
        if signal.getsignal(signal.SIGTERM) in (raise_terminated, signal.SIG_IGN):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def request_stacks(proc: subprocess.Popen[Any], stacks_path: Path, wait_s: float) -> str | None:
    """Ask a hung child for its Python stacks and return them (None if none came).

    The child must have registered ``faulthandler.register(SIGUSR1, file=...)`` on
    ``stacks_path``; this sends the signal and waits up to ``wait_s`` for the dump.
    """
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is not None:
        try:
            proc.send_signal(usr1)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if stacks_path.exists() and stacks_path.stat().st_size > 0:
                time.sleep(0.1)  # let faulthandler finish writing
                break
            time.sleep(0.02)
    try:
        return stacks_path.read_text(encoding="utf-8", errors="replace") or None
    except OSError:
        return None


# ------------------------------------------------------------------ child side


def _prctl(option: int, arg: int) -> bool:
    """``prctl(option, arg)`` on Linux; False where it is not available or failed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def bind_to_parent(run_dir: str | os.PathLike[str] | None = None) -> int | None:
    """In a child started through :class:`ChildTree`: end with the parent (see the
    module docstring). ``run_dir``: the folder the parent made for this run, removed
    when the parent is gone. Returns the parent's pid, or None when this process was
    not started by a :class:`ChildTree` (then nothing is changed).
    """
    text = os.environ.pop(PARENT_PID_ENV, None)  # not for the sampler's own children
    if not text or not text.isdigit():
        return None
    parent = int(text)
    folder = None if run_dir is None else os.fspath(run_dir)
    ending = threading.Lock()

    def end_group() -> None:
        if not ending.acquire(blocking=False):
            return
        me = os.getpid()
        # the sampler's processes first, so none of them still writes into the folder
        # while it is removed
        try:
            for p in psutil.Process(me).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    p.kill()
        except psutil.Error:
            pass
        if folder is not None and _parent_gone(parent):  # orphaned: nobody else cleans up
            for _ in range(3):  # a file that appears mid-removal fails one pass, not three
                shutil.rmtree(folder, ignore_errors=True)
                if not os.path.lexists(folder):
                    break
        if os.getpgid(0) == me:  # our own group: the run's processes, this one included
            os.killpg(me, signal.SIGKILL)
        os.kill(me, signal.SIGKILL)

    def on_signal(signum: int, frame: Any) -> None:
        end_group()

    def end_descendants() -> None:
        # a normal exit: the orphans re-parented to this subreaper (a daemon the sampler
        # started) would pass to init, out of the parent's sight, and keep its pipes open
        if os.getpid() != me:  # an os.fork() child that inherited the handler
            return
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(me).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    p.kill()

    me = os.getpid()
    atexit.register(end_descendants)
    signal.signal(signal.SIGTERM, on_signal)
    _watch_wakeups(end_group)
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    # orphans of the sampler's processes (a daemon that double-forked) become ours,
    # so they stay in the tree the parent polls and the group end above reaches
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:  # the parent died before the death signal was set
        end_group()
    return parent


def _parent_gone(parent: int, wait_s: float = 10.0, settle_s: float = 0.2) -> bool:
    """Whether ``parent`` has died, waiting up to ``wait_s`` for a dying one to finish.

    The death signal comes when the parent *thread* that started this process exits.
    Under SIGKILL a multithreaded parent's threads exit one by one: until the last
    one has, this process is re-parented to a sibling thread and ``getppid()`` still
    names the parent. So while the parent is exiting (a zombie leader, or SIGKILL
    pending), wait; a parent that is not (it sent the SIGTERM itself) is alive."""
    t0 = time.monotonic()
    while os.getppid() == parent:
        waited = time.monotonic() - t0
        if waited >= wait_s or (waited >= settle_s and not _exiting(parent)):
            return False
        time.sleep(0.005)
    return True


def _exiting(pid: int) -> bool:
    """Whether process ``pid`` is on its way out: its leader thread is a zombie, or it
    has a SIGKILL pending (Linux ``/proc``; False where that cannot be read)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError:
        return False
    if fields.get("State", "").strip()[:1] in ("Z", "X"):
        return True
    kill_bit = 1 << (int(signal.SIGKILL) - 1)
    for key in ("SigPnd", "ShdPnd"):
        try:
            if int(fields.get(key, "0").strip(), 16) & kill_bit:
                return True
        except ValueError:
            continue
    return False


def _watch_wakeups(end_group: Any) -> None:
    """A thread that sees SIGTERM through the signal wake-up pipe, so the group ends
    even while the main thread is stuck in native code and cannot run handlers."""
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (OSError, ValueError):  # not the main thread, or no pipes: the handler remains
        return

    def watch() -> None:
        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data:
                return
            if int(signal.SIGTERM) in data:
                end_group()

    threading.Thread(target=watch, name="gyreprof-parent-watch", daemon=True).start()
