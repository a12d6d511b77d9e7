"""gyreprof doctor: a main thread waiting on what should feed it, which died. Said first:
the thread that died and its exception, or the dead (zombie) child and the traceback it
left; found in the process's own stderr file (plain ``doctor PID``), in the log named,
and under ``gyreprof run`` in the start-up trail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

import gyreprof as gp
from gyreprof.diagnostics import _feeders
from gyreprof.diagnostics.doctor import doctor

from helpers.waiting import wait_for

PROCS = Path(__file__).parent / "helpers" / "procs"
SRC = Path(gp.__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the doctor's evidence reads /proc"
)


def _line_of(text: str) -> int:
    """The line of dead_feeder.py that holds ``text``."""
    lines = (PROCS / "dead_feeder.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("GYREPROF_RUN_DIR", None)
    return env


@contextmanager
def feeder(tmp_path: Path, mode: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    out = tmp_path / f"{mode}.err"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "dead_feeder.py"), mode],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
    try:
        wait_for(lambda: "ready" in out.read_text() or proc.poll() is not None, f"{mode} ready")
        assert proc.poll() is None, out.read_text()
        yield proc, out
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("named", [False, True], ids=["plain", "log"])
def test_a_dead_producer_thread_is_said_first(tmp_path: Path, named: bool) -> None:
    with feeder(tmp_path, "thread") as (proc, out):
        d = doctor(proc.pid, log=out if named else None, interval_s=0.4, stacks=False)
    assert d.state == "blocked", str(d)
    first = d.evidence[0]
    assert "fed by thread `producer`, which died: ValueError at" in first, str(d)
    assert f"dead_feeder.py:{_line_of('q.put(int(text))')}" in first, first
    assert "queue" in first, first


@pytest.mark.parametrize("named", [False, True], ids=["plain", "log"])
def test_a_dead_worker_process_on_a_pipe_is_said_first(tmp_path: Path, named: bool) -> None:
    with feeder(tmp_path, "child") as (proc, out):
        d = doctor(proc.pid, log=out if named else None, interval_s=0.4, stacks=False)
    assert d.state == "blocked", str(d)
    first = d.evidence[0]
    assert "a pipe" in first and "is dead (a zombie, exit code 1)" in first, str(d)
    assert "JSONDecodeError at" in first, first
    line = _line_of("json.loads(")
    assert f"dead_feeder.py:{line}" in first, first


def test_tracebacks_are_read_from_output() -> None:
    text = (
        "step 1\n"
        "Exception in thread producer:\n"
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 9, in produce\n'
        "    q.put(int(x))\n"
        "ValueError: invalid literal\n"
        "Traceback (most recent call last):\n"
        '  File "/w/worker.py", line 4, in <module>\n'
        "json.decoder.JSONDecodeError: Expecting value\n"
    )
    got = _feeders.tracebacks(text, "/w")
    assert [(d.who, d.exc_type, d.where(), d.function) for d in got] == [
        ("thread `producer`", "ValueError", "train.py:9", "produce"),
        ("the program", "json.decoder.JSONDecodeError", "worker.py:4", "<module>"),
    ]
    assert _feeders.said(got[1]).startswith("JSONDecodeError at worker.py:4")


def test_under_gyreprof_run_the_trail_names_the_dead_thread(tmp_path: Path) -> None:
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
            str(PROCS / "dead_feeder.py"),
            "thread",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        cwd=tmp_path,
        text=True,
    )
    try:
        assert run.stdout is not None and run.stdout.readline().strip() == "ready"
        (child,) = [
            c
            for c in psutil.Process(run.pid).children(recursive=True)
            if "dead_feeder.py" in " ".join(c.cmdline())
        ]
        d = doctor(child.pid, interval_s=0.4, stacks=False)
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait(10)
    first = d.evidence[0]
    assert "fed by thread `producer`, which died: ValueError at" in first, str(d)
