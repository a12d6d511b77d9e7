"""gyreprof doctor probes from the target's network namespace: a process inside
``unshare -n`` that is refused on 127.0.0.1:PORT is probed there (nothing listens), not
from ours (where something does listen on that port). Where the namespace cannot be
entered, the probe is said not to be valid for that process, and nothing is probed.

Skipped where a network namespace cannot be made (no ``unshare``, no privilege).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

import gyreprof as gp
from gyreprof.diagnostics import _probe
from gyreprof.diagnostics.doctor import doctor

from helpers.waiting import wait_for

PROCS = Path(__file__).parent / "helpers" / "procs"
SRC = Path(gp.__file__).resolve().parent.parent


def _can_unshare() -> bool:
    if not sys.platform.startswith("linux") or not shutil.which("unshare"):
        return False
    if not shutil.which("ip"):
        return False
    try:
        done = subprocess.run(
            ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _can_unshare(), reason="cannot make a network namespace")


@contextmanager
def listening_here() -> Iterator[int]:
    """Something listens on 127.0.0.1:PORT in our namespace."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()


@contextmanager
def refused_inside(tmp_path: Path, port: int) -> Iterator[tuple[int, Path]]:
    """nothing_moves.py refused PORT, inside a network namespace of its own (loopback up)."""
    ready, log = tmp_path / "ready", tmp_path / "refused.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    script = f"ip link set lo up && exec {sys.executable} {PROCS / 'nothing_moves.py'} "
    script += f"refused {ready} {log} {port}"
    sh = subprocess.Popen(["unshare", "-n", "sh", "-c", script], env=env)
    try:
        wait_for(lambda: log.exists() and log.stat().st_size > 0, "the refused loop", 30)
        procs = [sh.pid] + [c.pid for c in psutil.Process(sh.pid).children(recursive=True)]
        (pid,) = [p for p in procs if "nothing_moves.py" in " ".join(psutil.Process(p).cmdline())]
        yield pid, log
    finally:
        for c in psutil.Process(sh.pid).children(recursive=True):
            c.kill()
        sh.kill()
        sh.wait(10)


@pytest.mark.parametrize("named", [False, True], ids=["plain", "log"])
def test_a_refused_endpoint_inside_unshare_is_probed_there(tmp_path: Path, named: bool) -> None:
    with listening_here() as port, refused_inside(tmp_path, port) as (pid, log):
        d = doctor(pid, log=log if named else None, interval_s=0.6, stacks=False)
    assert d.state == "retrying", str(d)
    probes = " ".join(d.probes)
    assert f"nothing listens on 127.0.0.1:{port}" in probes, probes
    assert "probed from the target's network namespace]" in probes, probes
    assert " answers:" not in probes, probes  # ours listens: not the target's answer


def test_where_the_namespace_cannot_be_entered_the_probe_is_not_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(fd: int, nstype: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(_probe, "_setns", lambda: denied)
    with listening_here() as port, refused_inside(tmp_path, port) as (pid, log):
        d = doctor(pid, log=log, interval_s=0.6, stacks=False)
    probes = " ".join(d.probes)
    assert f"probe of 127.0.0.1:{port} not valid for this process" in probes, probes
    assert "Operation not permitted" in probes and f"nsenter -t {pid} -n" in probes, probes
    assert " answers:" not in probes and "nothing listens" not in probes, probes


def test_the_c_librarys_setns_is_found_before_312() -> None:
    assert _probe._libc_setns() is not None
