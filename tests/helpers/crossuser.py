"""Acting as a second local user in the adversarial tests, and a process to attack.

The attacking side runs as another uid in a forked child that drops its privileges
(``os.setuid``); tests that use it need root and carry ``needs_root``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gyreprof.live import _layout as lay

NOBODY = 65534
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another uid needs root"
)


def as_user(uid: int, fn: Callable[[], object], *, wait: bool = True) -> tuple[int, str]:
    """Run ``fn`` in a forked child as ``uid``; (child pid, its result or error text)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                msg = repr(fn())
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                msg = f"{type(exc).__name__}: {exc}"
            os.write(w, msg.encode())
            os.close(w)
        finally:
            os._exit(code)
    os.close(w)
    if not wait:
        os.close(r)
        return pid, ""
    with os.fdopen(r, "rb") as fh:
        data = fh.read().decode()
    os.waitpid(pid, 0)
    return pid, data


@pytest.fixture(name="shared_dir")
def shared_dir_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A world-writable sticky folder like /dev/shm, used as GYREPROF_LIVE_DIR (the
    fixture ``shared_dir`` of a test module that imports this)."""
    d = Path(tempfile.mkdtemp(prefix="gyreprof-shared-", dir="/tmp"))
    d.chmod(0o1777)
    home = Path(tempfile.mkdtemp(prefix="gyreprof-home-"))
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    monkeypatch.setenv("HOME", str(home))
    yield d
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


VICTIM = """
import sys, time
import gyreprof as gp
live = sys.argv[1] == "live"
prof = gp.Profiler(["env"], live=live)
for _ in range(10):
    prof.begin(); prof.lap(0)
prof.end()
print(prof.live.path if live else "-", flush=True)
time.sleep(60)  # stays alive (its segment live) until the test ends it
"""


@contextlib.contextmanager
def victim(live: bool) -> Iterator[tuple[int, str]]:
    """A process that did 10 steps and hangs; (pid, its segment path or '-')."""
    p = subprocess.Popen(
        [sys.executable, "-c", VICTIM, "live" if live else "no"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        yield p.pid, p.stdout.readline().strip()
    finally:
        p.kill()
        p.wait(timeout=30)


def plant(path: Path, data: bytes) -> Callable[[], object]:
    def go() -> object:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.close(fd)
        return "planted"

    return go
