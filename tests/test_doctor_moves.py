"""gyreprof doctor when something looks alive but nothing moves: retries read as retries,
endpoints probed, low-CPU spins, old output, block-buffered output, gyreprof run's records.

Each case is a real process (tests/helpers/procs/nothing_moves.py) doing what it says.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

import gyreprof as gp
from gyreprof.cli import main as cli_main
from gyreprof.diagnostics.doctor import EXIT_CODES, doctor

from helpers.livecheck import needs_live
from helpers.waiting import wait_for

PROCS = Path(__file__).parent / "helpers" / "procs"
SRC = Path(gp.__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="the doctor's evidence reads /proc")


def _env(unbuffered: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def moves(
    tmp_path: Path, mode: str, arg: str = "", *, stdout: Path | None = None, unbuffered: bool = True
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """Start nothing_moves.py MODE; yield it and its log once it runs (and has logged)."""
    ready = tmp_path / f"ready-{mode}"
    log = tmp_path / f"{mode}.log"
    out = open(stdout, "wb") if stdout is not None else open(os.devnull, "wb")  # noqa: SIM115
    with out:
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "nothing_moves.py"), mode, str(ready), str(log), arg],
            stdout=out,
            stderr=subprocess.STDOUT if stdout is not None else subprocess.DEVNULL,
            env=_env(unbuffered),
        )
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, f"{mode} to start")
        assert proc.poll() is None, f"nothing_moves.py {mode} exited with {proc.returncode}"
        if mode not in ("buffered", "loading", "poll"):
            wait_for(lambda: log.exists() and log.stat().st_size > 0, f"{mode} to log")
        yield proc, log
    finally:
        proc.kill()
        proc.wait(10)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()  # nothing listens there now
    return port


# --------------------------------------------------------------------- retrying
def test_refused_endpoint_with_retries_is_retrying_and_probed(tmp_path: Path) -> None:
    port = _free_port()
    with moves(tmp_path, "refused", str(port)) as (proc, log):
        d = doctor(proc.pid, log=log, interval_s=0.8, stacks=False)
    assert d.state == "retrying", str(d)
    assert d.exit_code == EXIT_CODES["retrying"] == 7
    assert d.failure_lines.get("refused", 0) >= 3, d.failure_lines
    assert d.progress_lines == 0
    assert d.last_failure is not None and "Connection refused" in d.last_failure
    text = str(d)
    assert f"127.0.0.1:{port}" in text and "RETRYING" in text
    assert any(f"127.0.0.1:{port}" in e for e in d.endpoints), d.endpoints
    assert any(f"nothing listens on 127.0.0.1:{port}" in p for p in d.probes), d.probes
    assert any("network namespace" in p for p in d.probes), d.probes


@contextmanager
def silent_server() -> Iterator[int]:
    """A server on 127.0.0.1 that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        server.close()


def test_timeouts_with_retries_against_a_slow_server(tmp_path: Path) -> None:
    with silent_server() as port:
        url = f"http://127.0.0.1:{port}/rollout"
        with moves(tmp_path, "timeout", url) as (proc, log):
            d = doctor(
                proc.pid,
                log=log,
                interval_s=0.8,
                stacks=False,
                probe=[f"http://127.0.0.1:{port}/health"],
                probe_timeout_s=0.5,
            )
    assert d.state == "retrying", str(d)
    assert d.failure_lines.get("timeout", 0) >= 2, d.failure_lines
    assert f"127.0.0.1:{port}" in str(d)
    assert any(f"127.0.0.1:{port} answers" in p for p in d.probes), d.probes  # TCP: listening
    assert any("/health: listening, no answer in 0.5 s" in p for p in d.probes), d.probes


def test_retry_storm_of_info_lines_is_retrying_not_progressing(tmp_path: Path) -> None:
    with moves(tmp_path, "storm") as (proc, log):
        d = doctor(proc.pid, log=log, interval_s=0.6, stacks=False)
    assert d.state == "retrying", str(d)
    assert sum(d.failure_lines.values()) >= 5, d.failure_lines
    assert set(d.failure_lines) <= {"retry", "empty"}, d.failure_lines
    assert d.last_failure is not None and "INFO" in d.last_failure


def test_healthy_loop_with_one_retry_among_step_lines_is_progressing(tmp_path: Path) -> None:
    """The rule that calls any failure line a retry storm gets this wrong."""
    with moves(tmp_path, "healthy") as (proc, log):
        d = doctor(proc.pid, log=log, interval_s=0.6, stacks=False)
    assert d.state == "progressing", str(d)
    assert d.exit_code == 0
    assert d.progress_lines is not None and d.progress_lines >= 10
    assert d.failure_lines.get("retry", 0) >= 1, d.failure_lines
    assert d.probes == []


def test_user_progress_regex_counts_its_lines(tmp_path: Path) -> None:
    """Storm lines named as progress by --progress are progress."""
    with moves(tmp_path, "storm") as (proc, log):
        d = doctor(proc.pid, log=log, interval_s=0.4, stacks=False, progress=r"attempt \d+")
    assert d.state == "progressing", str(d)
    with pytest.raises(ValueError, match="regular expression"):
        doctor(proc.pid, progress="(", interval_s=0.1)


def test_growing_threads_waiting_on_one_thing_are_retrying() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(PROCS / "threads_grow.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        d = doctor(proc.pid, interval_s=0.8, stacks=False)
    finally:
        proc.kill()
        proc.wait(10)
    assert d.state == "retrying", str(d)
    assert any("threads started during the watch all" in e and "lock" in e for e in d.evidence)


# --------------------------------------------------------------------- spinning
def test_poll_loop_with_log_is_spinning_low_cpu(tmp_path: Path) -> None:
    with moves(tmp_path, "poll") as (proc, log):
        wait_for(lambda: log.exists() and log.stat().st_size > 0, "the poll loop's first line")
        d = doctor(proc.pid, log=log, interval_s=1.0, stacks=False)
    assert d.state == "spinning", str(d)
    assert d.exit_code == 5
    assert d.cpu_share is not None and d.cpu_share < 0.2
    assert any("spinning (low CPU)" in e and "times a second" in e for e in d.evidence)


def test_busy_process_with_old_stdout_file_is_spinning(tmp_path: Path) -> None:
    out = tmp_path / "quiet.out"
    ready = tmp_path / "ready-quiet"
    with open(out, "ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "busy_output.py"), "quiet", str(ready)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
    try:
        wait_for(lambda: ready.exists() and out.stat().st_size > 0, "busy_output.py")
        old = time.time() - 15 * 60
        os.utime(out, (old, old))  # written 15 minutes ago, as far as anyone can tell
        d = doctor(proc.pid, interval_s=0.5, stacks=False)
        assert d.state == "spinning", str(d)
        assert d.progress_source == "files"
        assert any("has not changed for 15.0 min" in e for e in d.evidence), d.evidence
        recent = doctor(proc.pid, interval_s=0.5, stacks=False, quiet_after_s=3600.0)
        assert recent.state == "busy", str(recent)  # within --quiet-after: not yet a stall
    finally:
        proc.kill()
        proc.wait(10)


def test_zero_byte_log_of_a_block_buffered_process(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    with moves(tmp_path, "buffered", stdout=log, unbuffered=False) as (proc, _):
        d = doctor(proc.pid, log=log, interval_s=0.4, stacks=False)
    assert log.stat().st_size == 0
    text = str(d)
    assert "never written: output is block-buffered, use `python -u`" in text, text
    assert "last written" not in text


def test_zero_byte_log_of_an_unbuffered_process_is_not_called_buffered(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    with moves(tmp_path, "buffered", stdout=log, unbuffered=True) as (proc, _):
        d = doctor(proc.pid, log=log, interval_s=0.3, stacks=False)
    assert "block-buffered" not in str(d)


# --------------------------------------------------------------------- CLI
def test_cli_retrying_exit_code_and_probe_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    with moves(tmp_path, "refused", str(port)) as (proc, log):
        code = cli_main(
            [
                "doctor",
                str(proc.pid),
                "--log",
                str(log),
                "--interval",
                "0.5",
                "--no-stacks",
                "--probe",
                f"http://127.0.0.1:{port}/health",
            ]
        )
    text = capsys.readouterr().out
    assert code == 7, text
    assert "/health: nothing listens" in text
    assert cli_main(["doctor", str(os.getpid()), "--probe", "ftp://x"]) == 2


# --------------------------------------------------------------------- line rules
@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("step 120 loss=0.31", "progress"),
        ("| iterations | 7 |", "progress"),
        ("1200 it/s", "progress"),
        ("ConnectionRefusedError: [Errno 111] Connection refused", "refused"),
        ("grpc: DEADLINE_EXCEEDED while calling /Sampler/Get", "timeout"),
        ("server returned HTTP 503", "http 5xx"),
        ("got 0 items from the queue", "empty"),
        ("INFO backoff 0.5 s before the next attempt", "retry"),
        ("Traceback (most recent call last):", "traceback"),
        ("step 40 done (1 retry)", "progress"),
        ("loading checkpoint", None),
    ],
)
def test_line_kinds(line: str, kind: str | None) -> None:
    from gyreprof.diagnostics import _loglines

    assert _loglines.classify(line) == kind


def test_endpoints_in_lines() -> None:
    from gyreprof.diagnostics import _loglines

    assert str(_loglines.endpoint_in("POST http://127.0.0.1:18004/rollout failed")) == (
        "127.0.0.1:18004"
    )
    assert str(_loglines.endpoint_in("connect ('localhost', 9000) refused")) == "localhost:9000"
    assert _loglines.endpoint_in("at 12:30:45 nothing") is None


def test_added_lines_are_read_bounded(tmp_path: Path) -> None:
    from gyreprof.diagnostics import _loglines

    f = tmp_path / "big.log"
    line = "x" * 10_000 + " connection refused\n"
    f.write_text(line * 120)  # more than the 1 MiB read
    text, cut = _loglines.read_added(f, 0, f.stat().st_size)
    assert cut and len(text.encode()) <= _loglines.MAX_READ_BYTES
    report = _loglines.read_lines([(str(f), 0, f.stat().st_size)], None)
    assert report.truncated
    assert report.last_failure is None or len(report.last_failure) <= _loglines.MAX_LINE_CHARS


# --------------------------------------------------------------------- gyreprof run
@needs_live
def test_under_gyreprof_run_the_launchers_records_are_progress(tmp_path: Path) -> None:
    """The launcher marks no sampler steps: the old doctor said "no step completed ...
    rerun with a longer --interval" for marks that never come."""
    pytest.importorskip("gymnasium")
    script = Path(__file__).parent / "helpers" / "run_scripts" / "forever.py"
    run = subprocess.Popen(
        [sys.executable, "-m", "gyreprof", "run", "--", sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
    )
    try:
        assert run.stdout is not None
        for line in run.stdout:
            if "READY" in line:
                break
        else:
            pytest.fail("the run did not start stepping")
        tree = [psutil.Process(run.pid), *psutil.Process(run.pid).children(recursive=True)]
        target = next(
            p for p in tree if p.pid != run.pid and any("forever.py" in a for a in p.cmdline())
        )
        d = doctor(target.pid, interval_s=0.6, stacks=False)
    finally:
        run.kill()
        for p in psutil.Process(os.getpid()).children(recursive=True):
            if p.pid != run.pid:
                try:
                    p.kill()
                except psutil.Error:
                    pass
        run.wait(10)
    assert d.state == "progressing", str(d)
    assert any("gyreprof run's records" in e and "env_step" in e for e in d.evidence), d.evidence
    assert "--interval" not in str(d)


# --------------------------------------------------------------------- py-spy lookup
def test_py_spy_is_found_in_the_targets_own_virtualenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed beside the target's interpreter but not on PATH (the venv not activated),
    py-spy was reported missing and the stacks were lost."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    spy = bin_dir / "py-spy"
    spy.write_text('#!/bin/sh\necho "Thread $3 (idle): MainThread"\necho "    wait (fake.py:1)"\n')
    spy.chmod(0o755)
    proc = subprocess.Popen(
        [str(python), str(PROCS / "block_lock.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
        monkeypatch.setattr(sys, "executable", str(tmp_path / "elsewhere" / "python"))
        d = doctor(proc.pid, interval_s=0.3)
    finally:
        proc.kill()
        proc.wait(10)
    assert d.state == "blocked", str(d)
    assert d.stacks is not None and f"Thread {proc.pid} (idle)" in d.stacks, str(d)
