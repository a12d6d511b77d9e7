"""Autosave under faults: os._exit children, SIGTERM in native code, planted links, a full disk.

Every case is a real subprocess with a timeout; root-only parts (mounting a
tiny tmpfs) fall back or skip when not root.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import gyreprof as gp

from helpers.waiting import wait_for

TIMEOUT_S = 120


def script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def steps_in(path: Path) -> int:
    return gp.Snapshot.from_bytes(path.read_bytes()).summary().steps


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_children_that_leave_through_os_exit_save(
    tmp_path: Path, method: str
) -> None:
    """Pool-like workers (SB3's SubprocVecEnv) end with os._exit: no atexit runs there."""
    s = script(
        tmp_path,
        "mp_children.py",
        """
        import multiprocessing as mp, os, sys
        import gyreprof as gp

        def worker(folder, n):
            prof = gp.Profiler(["env"], autosave=folder + "/w-{pid}.snap")
            for _ in range(n):
                prof.begin(); prof.lap(0)
            prof.end()

        if __name__ == "__main__":
            ctx = mp.get_context(sys.argv[2])
            procs = [ctx.Process(target=worker, args=(sys.argv[1], 50 + i)) for i in range(3)]
            for p in procs:
                p.start()
            for p in procs:
                p.join(60)
                assert p.exitcode == 0, p.exitcode
            print(*[p.pid for p in procs])
        """,
    )
    r = subprocess.run(
        [sys.executable, str(s), str(tmp_path), method],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert r.returncode == 0, r.stderr
    pids = [int(x) for x in r.stdout.split()]
    for i, pid in enumerate(pids):
        assert steps_in(tmp_path / f"w-{pid}.snap") == 50 + i


def test_fork_child_saves_a_profiler_inherited_from_its_parent(tmp_path: Path) -> None:
    s = script(
        tmp_path,
        "mp_inherit.py",
        """
        import multiprocessing as mp, sys
        import gyreprof as gp

        prof = gp.Profiler(["env"], autosave=sys.argv[1] + "/i-{pid}.snap")

        def worker():
            for _ in range(7):
                prof.begin(); prof.lap(0)
            prof.end()

        if __name__ == "__main__":
            p = mp.get_context("fork").Process(target=worker)
            p.start(); p.join(60)
            assert p.exitcode == 0
            print(p.pid)
        """,
    )
    r = subprocess.run(
        [sys.executable, str(s), str(tmp_path)], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert r.returncode == 0, r.stderr
    assert steps_in(tmp_path / f"i-{int(r.stdout)}.snap") == 7


STUCK = """
import ctypes, os, sys
import gyreprof as gp
prof = gp.Profiler(["env"], autosave=sys.argv[1])
for _ in range(200):
    prof.begin(); prof.lap(0)
prof.end()
libc = ctypes.CDLL(None)
mutex = ctypes.create_string_buffer(64)          # PTHREAD_MUTEX_INITIALIZER is all zeros
assert libc.pthread_mutex_lock(mutex) == 0
print("stuck", flush=True)
libc.pthread_mutex_lock(mutex)                   # relocks: blocks forever in native code,
print("unreachable", flush=True)                 # GIL released, signals restart the wait
"""


def test_sigterm_while_the_main_thread_is_stuck_in_native_code(tmp_path: Path) -> None:
    out = tmp_path / "stuck.snap"
    s = script(tmp_path, "stuck.py", STUCK)
    p = subprocess.Popen(
        [sys.executable, str(s), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "stuck"
        main = psutil.Process(p.pid)  # its status is the main thread's
        wait_for(lambda: main.status() == psutil.STATUS_SLEEPING, "the main thread in the lock")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)  # without the helper thread it would never end
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == -signal.SIGTERM, (rc, p.stderr.read() if p.stderr else "")
    assert took < 10, took  # about 0.3 s; a wide bound for a loaded machine
    assert steps_in(out) == 200


def test_sigterm_in_python_code_saves_and_keeps_the_signal_status(tmp_path: Path) -> None:
    out = tmp_path / "busy.snap"
    s = script(
        tmp_path,
        "busy.py",
        """
        import sys
        import gyreprof as gp
        prof = gp.Profiler(["env"], autosave=sys.argv[1])
        for _ in range(3):  # begin() closes the step before it: two steps are complete
            prof.begin(); prof.lap(0)
        print("ready", flush=True)  # steps are recorded: the signal finds the loop in Python
        while True:
            prof.begin(); prof.lap(0)
        """,
    )
    p = subprocess.Popen([sys.executable, str(s), str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == -signal.SIGTERM
    assert steps_in(out) > 0


def test_a_program_handler_for_sigterm_still_runs_after_the_save(tmp_path: Path) -> None:
    out = tmp_path / "chained.snap"
    s = script(
        tmp_path,
        "chained.py",
        """
        import signal, sys, time
        import gyreprof as gp
        def mine(signum, frame):
            print("my handler", flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)
        prof = gp.Profiler(["env"], autosave=sys.argv[1])
        prof.begin(); prof.lap(0); prof.end()
        print("ready", flush=True)
        time.sleep(30)  # waits for the test's SIGTERM (its handler ends the sleep)
        """,
    )
    p = subprocess.Popen([sys.executable, str(s), str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
        rest = p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 7 and "my handler" in rest
    assert steps_in(out) == 1


def test_sigterm_to_a_forked_child_ends_the_child_not_its_parent(tmp_path: Path) -> None:
    """The child inherits the parent's wakeup fd number; it must not wake the parent's helper."""
    s = script(
        tmp_path,
        "forkterm.py",
        """
        import os, signal, sys, time
        import gyreprof as gp
        prof = gp.Profiler(["env"], autosave=sys.argv[1] + "/f-{pid}.snap")
        prof.begin(); prof.lap(0); prof.end()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            prof.begin(); prof.lap(0); prof.end()
            os.write(w, b"1")            # its step is recorded
            time.sleep(30)               # waits for the parent's SIGTERM
            os._exit(0)
        assert os.read(r, 1) == b"1"
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        # nothing must happen here: a wrongly woken helper acts within its grace
        # (_autosave._SIGTERM_GRACE_S, 0.25 s) and ends the parent; a wait for an event
        # that must not come can only be a duration
        time.sleep(1.0)
        print(os.waitstatus_to_exitcode(status), pid, flush=True)
        """,
    )
    r = subprocess.run(
        [sys.executable, str(s), str(tmp_path)], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert r.returncode == 0, r.stderr
    status, child = (int(x) for x in r.stdout.split())
    assert status == -signal.SIGTERM
    assert steps_in(tmp_path / f"f-{child}.snap") == 2


def test_planted_links_are_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "run.snap"
    # the old predictable temp name, and the target itself, both planted as links
    (folder / "run.snap.tmp").symlink_to(victim)
    (folder / ".run.snap.tmp").symlink_to(victim)
    target.symlink_to(victim)
    s = script(
        tmp_path,
        "links.py",
        """
        import sys
        import gyreprof as gp
        prof = gp.Profiler(["env"], autosave=sys.argv[1])
        prof.begin(); prof.lap(0); prof.end()
        """,
    )
    r = subprocess.run(
        [sys.executable, str(s), str(target)], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    assert not target.is_symlink() and steps_in(target) == 1
    assert sorted(p.name for p in folder.iterdir()) == [".run.snap.tmp", "run.snap", "run.snap.tmp"]


def test_a_guessed_temp_name_fails_instead_of_following_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even an attacker who guessed the 64 random bits finds O_EXCL | O_NOFOLLOW."""
    from gyreprof._support import io as _io

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    monkeypatch.setattr(_io, "_random_hex", lambda n: "guessed")
    target = tmp_path / "run.snap"
    (tmp_path / f".run.snap.{os.getpid()}.guessed.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        _io.write_atomic(target, b"data")
    assert victim.read_text() == "precious" and not target.exists()


@contextlib.contextmanager
def tiny_disk(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A 64 KiB tmpfs when root may mount one, else a folder plus an RLIMIT_FSIZE prelude."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    mounted = False
    if os.geteuid() == 0:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
            capture_output=True,
            timeout=30,
        )
        mounted = r.returncode == 0
    prelude = (
        ""
        if mounted
        else "import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))"
    )
    try:
        yield mnt, prelude
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_a_full_disk_keeps_the_previous_file_and_says_so(tmp_path: Path) -> None:
    with tiny_disk(tmp_path) as (mnt, prelude):
        target = mnt / "run.snap"
        old = gp.Profiler(["env"])
        old.begin()
        old.lap(0)
        old.end()
        target.write_bytes(old.snapshot().to_bytes())
        if not prelude:  # fill the tmpfs so the next write cannot fit
            with open(mnt / "filler", "wb", buffering=0) as fh:
                with contextlib.suppress(OSError):
                    fh.write(b"\0" * (64 << 10))
        s = script(
            tmp_path,
            "full.py",
            prelude
            + """
import sys
import gyreprof as gp
prof = gp.Profiler([f"p{i}" for i in range(64)], autosave=sys.argv[1])
for _ in range(3000):
    prof.begin()
    for i in range(64):
        prof.lap(i)
prof.end()
print("done", flush=True)
""",
        )
        r = subprocess.run(
            [sys.executable, str(s), str(target)], capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert r.stdout.strip() == "done"
        assert "gyreprof: autosave to" in r.stderr and "failed" in r.stderr, r.stderr
        assert steps_in(target) == 1  # the previous file, whole
        assert [p.name for p in mnt.iterdir() if p.name.endswith(".tmp")] == []
