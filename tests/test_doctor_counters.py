"""gyreprof doctor: progress is a counter that moves (growth alone, a repeated value, a
heartbeat never is), read from every log found, with and without ``--log``.

Each case is a real process (tests/helpers/procs/nothing_moves.py) doing what it says;
each is diagnosed as ``doctor PID`` finds it (the file it holds open for writing) and
with the file named by ``log=``.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from gyreprof.diagnostics.doctor import EXIT_CODES, doctor
from test_doctor_moves import moves, silent_server

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the doctor's evidence reads /proc"
)
WITH_LOG = pytest.mark.parametrize("named", [False, True], ids=["plain", "log"])


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def _look(proc_pid: int, log: Path, named: bool, interval_s: float = 0.8):  # type: ignore[no-untyped-def]
    return doctor(proc_pid, log=log if named else None, interval_s=interval_s, stacks=False)


@WITH_LOG
def test_refused_with_retries_is_retrying(tmp_path: Path, named: bool) -> None:
    port = _free_port()
    with moves(tmp_path, "refused", str(port)) as (proc, log):
        d = _look(proc.pid, log, named)
    assert d.state == "retrying", str(d)
    assert d.exit_code == EXIT_CODES["retrying"]
    assert f"127.0.0.1:{port}" in str(d)


@WITH_LOG
def test_timeouts_with_retries_are_retrying(tmp_path: Path, named: bool) -> None:
    with silent_server() as port:
        with moves(tmp_path, "timeout", f"http://127.0.0.1:{port}/rollout") as (proc, log):
            d = _look(proc.pid, log, named)
    assert d.state == "retrying", str(d)
    assert f"127.0.0.1:{port}" in str(d)


@WITH_LOG
def test_retry_storm_is_retrying(tmp_path: Path, named: bool) -> None:
    with moves(tmp_path, "storm") as (proc, log):
        d = _look(proc.pid, log, named, 0.6)
    assert d.state == "retrying", str(d)
    assert d.exit_code == 7


@WITH_LOG
def test_constant_heartbeat_is_not_progress(tmp_path: Path, named: bool) -> None:
    with moves(tmp_path, "heartbeat") as (proc, log):
        d = _look(proc.pid, log, named, 0.6)
    assert d.state != "progressing", str(d)
    assert d.exit_code != 0
    assert d.progress_lines == 0, str(d)
    assert any("alive, writes, no step moves" in e and "heartbeat" in e for e in d.evidence), str(d)


@WITH_LOG
def test_waiting_for_ranks_lines_are_not_progress(tmp_path: Path, named: bool) -> None:
    with moves(tmp_path, "ranks") as (proc, log):
        d = _look(proc.pid, log, named, 0.6)
    assert d.state != "progressing", str(d)
    assert d.state in ("blocked", "spinning"), str(d)  # idle, or a low-CPU poll loop
    assert any("alive, writes, no step moves" in e for e in d.evidence), str(d)


@WITH_LOG
def test_healthy_loop_with_one_retry_among_moving_step_lines_is_progressing(
    tmp_path: Path, named: bool
) -> None:
    with moves(tmp_path, "healthy") as (proc, log):
        d = _look(proc.pid, log, named, 0.6)
    assert d.state == "progressing", str(d)
    assert d.failure_lines.get("retry", 0) >= 1, d.failure_lines


@WITH_LOG
def test_a_step_line_that_repeats_while_its_value_moves_is_progressing(
    tmp_path: Path, named: bool
) -> None:
    """The slow loop repeats "step N (working)" many times a step: a rule that wants
    every line to differ calls it a heartbeat."""
    with moves(tmp_path, "slow") as (proc, log):
        d = _look(proc.pid, log, named, 1.0)
    assert d.state == "progressing", str(d)
    assert d.progress_lines is not None and d.progress_lines >= 1


def test_counters_and_still_lines() -> None:
    from gyreprof.diagnostics import _loglines

    assert _loglines.counters("step 120 loss=0.31") == {"step": "120", "loss": "0.31"}
    assert _loglines.counters(" 5%| | 50/1000 [00:05<01:35]")["(done)"] == "50"
    assert _loglines.counters("waiting for ranks 1/2") == {}
    r = _loglines.LineReport()
    r.add("step=0 waiting\nstep=0 waiting\n", None, {"step": "0"})
    assert (r.progress, r.still) == (0, 2)
    r = _loglines.LineReport()
    r.add("step 4\nstep 4\n", None, {"step": "3"})  # moved since the line before the added ones
    assert (r.progress, r.still) == (1, 1)
    r = _loglines.LineReport()
    r.add("beat\nbeat\n", _loglines.compile_progress("beat"))
    assert r.progress == 2


def test_values_before_the_added_lines_are_read(tmp_path: Path) -> None:
    from gyreprof.diagnostics import _loglines

    f = tmp_path / "train.log"
    f.write_text("step 1\nstep 2\n")
    start = f.stat().st_size
    with f.open("a") as fh:
        fh.write("step 2\nstep 2\n")
    report = _loglines.read_lines([(str(f), start, f.stat().st_size)], None)
    assert (report.progress, report.still) == (0, 2)
    b = tmp_path / "events"
    b.write_bytes(b"step 1\n\0step 2\n")
    assert _loglines.read_lines([(str(b), 0, b.stat().st_size)], None).lines == 0


@WITH_LOG
def test_a_buffered_slow_start_is_busy_not_spinning(tmp_path: Path, named: bool) -> None:
    """An empty, block-buffered stdout of a busy process is a reason (run python -u),
    not evidence of a spin; stderr, line-buffered since Python 3.9, gets no hint."""
    out = tmp_path / "train.out"
    with moves(tmp_path, "loading", stdout=out, unbuffered=False) as (proc, _):
        d = _look(proc.pid, out, named, 0.6)
    assert out.stat().st_size == 0
    assert d.state == "busy", str(d)
    assert d.exit_code == 6
    text = str(d)
    assert "stdout (" in text and "never written: output is block-buffered" in text, text
    assert "stderr (" not in text, text


def test_doctor_answers_within_5_s_reading_at_most_1_mib_of_a_flooded_log(
    tmp_path: Path,
) -> None:
    """The default look (2 s) at a process that adds 40 MiB/s to its log: the last 1 MiB
    of the file is read, and the answer comes within 5 s."""
    import time

    from gyreprof.diagnostics import _loglines

    assert _loglines.MAX_READ_BYTES == 1024 * 1024
    with moves(tmp_path, "flood") as (proc, log):
        t0 = time.monotonic()
        d = doctor(proc.pid)
        took = time.monotonic() - t0
    assert took < 5.0, (took, str(d))
    assert d.state == "progressing", str(d)
    assert any("the last 1024 KiB of the file" in e for e in d.evidence), str(d)


def test_a_cut_read_still_compares_with_the_value_before_the_added_lines(
    tmp_path: Path,
) -> None:
    """More was added than is read: the counter's value just before the added lines is
    read too (within the 1 MiB), so one new step line is a move, not a heartbeat."""
    from gyreprof.diagnostics import _loglines

    f = tmp_path / "train.log"
    f.write_text("step 1\n")
    start = f.stat().st_size
    with f.open("a") as fh:
        fh.write(("x" * 999 + "\n") * 1500 + "step 2\n")
    end = f.stat().st_size
    report = _loglines.read_lines([(str(f), start, end)], None)
    assert report.truncated and (report.progress, report.still) == (1, 0), report
    head, text, cut = _loglines.read_region(f, start, end)
    assert cut and len(head.encode()) + len(text.encode()) <= _loglines.MAX_READ_BYTES
    assert head == "step 1\n" and text.endswith("step 2\n")
