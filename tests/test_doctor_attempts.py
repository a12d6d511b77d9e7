"""gyreprof doctor: retries seen below the log. A loop that retries a connection and logs
nothing (DEBUG only) is ``retrying`` and the endpoint is named: from the socket layer
(connection attempts seen in SYN_SENT, coming and going), from the trail of a ``gyreprof
run`` process (its swallowed connection errors), and from new threads that all wait on
one peer.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

import gyreprof as gp
from gyreprof.diagnostics.doctor import doctor

PROCS = Path(__file__).parent / "helpers" / "procs"
SRC = Path(gp.__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the doctor's evidence reads /proc"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("GYREPROF_RUN_DIR", None)
    return env


@contextmanager
def full_backlog() -> Iterator[int]:
    """A listener whose accept queue is full: new connection attempts stay in SYN_SENT
    until they time out (their SYNs are dropped)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    fillers = []
    for _ in range(2):  # the queue holds backlog + 1; fill it
        c = socket.socket()
        c.settimeout(0.3)
        try:
            c.connect(("127.0.0.1", port))
        except OSError:
            pass
        fillers.append(c)
    try:
        yield port
    finally:
        for c in fillers:
            c.close()
        server.close()


@contextmanager
def started(*args: str, stdout: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, str(PROCS / "backoff.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize(
    "named", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["plain", "log"]
)
def test_debug_only_backoff_against_a_dropping_endpoint_is_retrying(
    tmp_path: Path, named: bool
) -> None:
    log = tmp_path / "client.log"
    log.write_text("")  # the DEBUG lines never reach it
    with full_backlog() as port, started("127.0.0.1", str(port)) as proc:
        d = doctor(proc.pid, log=log if named else None, interval_s=1.5, stacks=False)
    assert d.state == "retrying", str(d)
    assert d.exit_code == 7
    assert any(f"127.0.0.1:{port}" in e and "SYN_SENT" in e for e in d.evidence), str(d)
    assert any(e.startswith(f"127.0.0.1:{port}") for e in d.endpoints), d.endpoints


def test_new_threads_waiting_on_one_peer_are_retrying() -> None:
    """Each new thread's socket has its own local port: grouped by the whole socket,
    none waits on the same thing as another."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    port = int(server.getsockname()[1])
    try:
        with started("127.0.0.1", str(port), "40") as proc:
            d = doctor(proc.pid, interval_s=1.0, stacks=False)
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        server.close()
    assert d.state == "retrying", str(d)
    assert any(
        "threads started during the watch all" in e and f"127.0.0.1:{port}" in e for e in d.evidence
    ), str(d)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def test_under_gyreprof_run_the_trails_swallowed_connection_errors_are_retrying(
    tmp_path: Path,
) -> None:
    """Refused at once on loopback, no attempt is ever seen on a socket: the trail
    holds each swallowed ConnectionRefusedError, with the address it was trying."""
    port = _free_port()
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gyreprof",
            "run",
            "--startup-timeout",
            "0",
            "--",
            sys.executable,
            str(PROCS / "backoff.py"),
            "127.0.0.1",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
        cwd=tmp_path,
    )
    try:
        assert run.stdout is not None and run.stdout.readline().strip() == "ready"
        (child,) = [
            c
            for c in psutil.Process(run.pid).children(recursive=True)
            if "backoff.py" in " ".join(c.cmdline())
        ]
        d = doctor(child.pid, interval_s=0.5, stacks=False)
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait(10)
    assert d.state == "retrying", str(d)
    assert any(
        "swallowed ConnectionRefusedError" in e and f"127.0.0.1:{port}" in e for e in d.evidence
    ), str(d)
    assert any(e.startswith(f"127.0.0.1:{port}") for e in d.endpoints), d.endpoints


def test_gyreprof_runs_start_up_report_says_retrying_and_names_the_endpoint(
    tmp_path: Path,
) -> None:
    """The launcher's own report saw the swallowed ConnectionRefusedError three times and
    still printed "doctor: BLOCKED"."""
    from helpers.waiting import wait_for

    port = _free_port()
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gyreprof",
                "run",
                "--startup-timeout",
                "1",
                "--",
                sys.executable,
                str(PROCS / "backoff.py"),
                "127.0.0.1",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env=_env(),
            cwd=tmp_path,
        )
    try:
        wait_for(lambda: "doctor:" in err.read_text(), "the start-up report", 60)
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait(10)
    text = err.read_text()
    assert "doctor: RETRYING" in text, text
    assert f"swallowed ConnectionRefusedError against 127.0.0.1:{port}" in text, text


@pytest.mark.parametrize("named", [False, True], ids=["plain", "log"])
def test_debug_only_backoff_against_a_refused_loopback_is_retrying_from_the_stacks(
    tmp_path: Path, named: bool
) -> None:
    """Refused at once on loopback, no attempt shows on a socket and nothing is logged:
    the main thread sleeps in a frame that holds the caught ConnectionRefusedError
    (py-spy's locals), with the host and port it tried."""
    from gyreprof.diagnostics._doctor_evidence import _find_py_spy, _py_spy

    log = tmp_path / "client.log"
    log.write_text("")
    port = _free_port()
    with started("127.0.0.1", str(port)) as proc:
        if _find_py_spy(proc.pid) is None or _py_spy(proc.pid)[0] is None:
            pytest.skip("py-spy is missing or may not read the process here")
        d = doctor(proc.pid, log=log if named else None, interval_s=1.0)
    assert d.state == "retrying", str(d)
    assert any(
        "holding a caught ConnectionRefusedError" in e and f"127.0.0.1:{port}" in e
        for e in d.evidence
    ), str(d)
    assert any(f"nothing listens on 127.0.0.1:{port}" in p for p in d.probes), d.probes
