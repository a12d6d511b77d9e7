"""gyreprof doctor against real processes in each state (tests/helpers/procs/*.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
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
from gyreprof._support.errors import CorruptDataError
from gyreprof.cli import main as cli_main
from gyreprof.diagnostics.doctor import EXIT_CODES, ProcessDiagnosis, doctor

from helpers.livecheck import needs_live
from helpers.waiting import wait_for

PROCS = Path(__file__).parent / "helpers" / "procs"
SRC = Path(gp.__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def running(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Start tests/helpers/procs/<script> and wait for its 'ready' line; kill it afterwards."""
    proc = subprocess.Popen(
        [sys.executable, str(PROCS / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # never a file that grows (pytest's own output may be one)
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ready"), f"{script} did not start: {line!r}"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def _crash(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "train.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "crash_at_start.py")],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
    return proc, log


# ------------------------------------------------------------------------ absent
def test_process_that_exits_at_once_is_absent_with_log_tail(tmp_path: Path) -> None:
    proc, log = _crash(tmp_path)
    assert proc.wait(30) != 0
    d = doctor(proc.pid, log=log, interval_s=0.5)
    assert isinstance(d, ProcessDiagnosis)
    assert d.state == "absent"
    assert d.exit_code == EXIT_CODES["absent"] == 3
    assert any("KeyError" in line and "learning_rate" in line for line in d.log_tail)
    assert any("loading config" in line for line in d.log_tail)
    text = str(d)
    assert "ABSENT" in text and "learning_rate" in text
    assert json.loads(d.to_json())["state"] == "absent"
    assert ProcessDiagnosis.from_dict(json.loads(d.to_json())) == d
    with pytest.raises(CorruptDataError, match=r"\.exit_code"):
        ProcessDiagnosis.from_dict({**d.to_dict(), "exit_code": "3"})


def test_exited_but_unreaped_child_is_absent(tmp_path: Path) -> None:
    proc, log = _crash(tmp_path)
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "child did not exit"
            time.sleep(0.02)
        d = doctor(proc.pid, log=log, interval_s=0.5)
        assert d.state == "absent"
        assert any("zombie" in e for e in d.evidence)
    finally:
        proc.wait(10)


def test_absent_with_missing_log_says_so(tmp_path: Path) -> None:
    proc, _ = _crash(tmp_path)
    proc.wait(30)
    d = doctor(proc.pid, log=tmp_path / "never-written.log", interval_s=0.5)
    assert d.state == "absent"
    assert any("does not exist" in e for e in d.evidence)
    assert d.log_tail == []


# ------------------------------------------------------------------------ spinning
def test_busy_loop_without_progress_is_spinning(tmp_path: Path) -> None:
    log = tmp_path / "spin.log"
    with running("spin.py", str(log)) as proc:
        d = doctor(proc.pid, log=log, interval_s=1.0)
    assert d.state == "spinning", str(d)
    assert d.exit_code == 5
    assert d.progress_source == "log"
    # it burns CPU: how much of a core it gets depends on the machine's load (below
    # SPIN_CPU_SHARE on a crowded one, where the doctor goes by its being runnable)
    assert d.cpu_share is not None and d.cpu_share > 0.0, d.cpu_share
    if LINUX:
        main = next(t for t in d.threads if t.tid == proc.pid)
        assert main.state == "R" and main.cpu_s > 0.0, d.threads
    assert any("did not change" in e for e in d.evidence)
    assert d.stacks or d.stacks_hint  # py-spy output, or how to get stacks


def test_cpu_time_alone_is_never_progress(tmp_path: Path) -> None:
    # a busy loop with no log, no live segment and no output file: the old doctor called
    # this PROGRESSING from the CPU time alone
    with running("spin.py", str(tmp_path / "spin.log")) as proc:
        d = doctor(proc.pid, interval_s=0.5, stacks=False)
    assert d.progress_source == "none"
    assert d.state == "busy", str(d)
    assert d.exit_code == EXIT_CODES["busy"] == 6
    assert any("CPU time alone cannot tell" in e for e in d.evidence)
    assert any("no progress signal to tell work from spinning" in e for e in d.evidence)


# ------------------------------------------------------------------------ blocked
def test_blocked_on_socket_recv_nobody_writes_to() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        with running("block_socket.py", str(port)) as proc:
            conn, _ = server.accept()  # accepted, never written to
            try:
                d = doctor(proc.pid, interval_s=0.8, stacks=False)
            finally:
                conn.close()
    finally:
        server.close()
    assert d.state == "blocked", str(d)
    assert d.exit_code == 4
    assert d.cpu_share is not None and d.cpu_share < 0.2
    if LINUX:
        assert d.threads and d.threads[0].syscall, d.threads
        main = d.threads[0]
        assert main.syscall in ("recvfrom", "read", "recvmsg", "poll", "ppoll")
        assert main.waits_on is not None
        assert str(port) in main.waits_on, main.waits_on
        assert any(str(port) in e for e in d.evidence)
        # connected, no bytes moving: the peer is probed, and it does listen
        assert any(f"127.0.0.1:{port} (connected, no bytes moving)" == e for e in d.endpoints)
        assert any(f"127.0.0.1:{port} answers" in p for p in d.probes), d.probes


def test_an_idle_process_reading_a_stream_is_busy_not_blocked() -> None:
    """Idle on its own CPU and with no progress signal, the naive rule says blocked; but
    bytes keep arriving and it keeps reading them (a rollout client, a data loader)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    stop = threading.Event()
    try:
        with running("stream_socket.py", str(port)) as proc:
            conn, _ = server.accept()

            def feed() -> None:
                while not stop.is_set():
                    conn.sendall(b"x" * 16384)
                    time.sleep(0.01)

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
            try:
                d = doctor(proc.pid, interval_s=0.8, stacks=False)
            finally:
                stop.set()
                feeder.join(5)
                conn.close()
    finally:
        server.close()
    assert d.cpu_share is not None and d.cpu_share < 0.2, d.cpu_share  # the naive rule's input
    assert d.state == "busy", str(d)
    assert d.exit_code == EXIT_CODES["busy"]
    assert "main thread woken" in str(d)


def test_a_parent_waiting_on_working_children_is_busy_not_blocked() -> None:
    """A SubprocVecEnv-like parent waits in a pipe read while its worker computes."""
    with running("busy_children.py") as proc:
        d = doctor(proc.pid, interval_s=0.8, stacks=False)
    assert d.cpu_share is not None and d.cpu_share < 0.2, d.cpu_share
    assert d.state == "busy", str(d)
    assert "child processes busy" in str(d)


@pytest.mark.slow
def test_sb3_subproc_parent_waiting_on_its_workers_is_busy_not_blocked() -> None:
    """Real stack: SB3 PPO over SubprocVecEnv whose env steps take 200 ms in the workers,
    stdout to /dev/null (no progress signal). The parent spends most of its time in pipe
    reads while collecting; how much CPU it still uses depends on the machine."""
    pytest.importorskip("stable_baselines3")
    script = Path(__file__).resolve().parent / "helpers" / "run_scripts" / "sb3_ppo.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "subproc", "env", "100000000", "0.2", "4096"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    try:
        p = psutil.Process(proc.pid)

        def stepping() -> bool:  # past the first reset: a worker sleeps in a slow step
            assert proc.poll() is None, "SB3 ended"
            return any(_in_sleep(c.pid) for c in p.children(recursive=True))

        wait_for(stepping, "SB3's workers in their first env step", timeout_s=120)
        d = doctor(proc.pid, interval_s=2.0, stacks=False)
    finally:
        proc.kill()
        proc.wait(30)
    # working, with no progress signal: busy (by its own CPU, its pipe traffic or its
    # main thread's wakeups, whichever shows on the machine), never blocked
    assert d.state == "busy", str(d)


def _in_sleep(pid: int) -> bool:
    """Whether process ``pid`` is in a sleep call (time.sleep), from /proc on Linux."""
    try:
        if LINUX:
            return "nanosleep" in Path(f"/proc/{pid}/wchan").read_text()
        return psutil.Process(pid).status() == psutil.STATUS_SLEEPING
    except (OSError, psutil.Error):
        return False


def test_blocked_on_a_lock() -> None:
    with running("block_lock.py") as proc:
        d = doctor(proc.pid, interval_s=0.8, stacks=False)
    assert d.state == "blocked", str(d)
    assert d.exit_code == 4
    if LINUX:
        assert d.threads and d.threads[0].syscall == "futex", d.threads
        assert "lock" in (d.threads[0].waits_on or "")
    assert "BLOCKED" in str(d)


def test_stopped_process_is_blocked_and_says_how_to_resume() -> None:
    with running("progress_log.py", os.devnull) as proc:
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            d = doctor(proc.pid, interval_s=0.5, stacks=False)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    assert d.state == "blocked"
    assert any("kill -CONT" in e for e in d.evidence)


# ------------------------------------------------------------------------ progressing
def test_loop_writing_its_log_is_progressing(tmp_path: Path) -> None:
    log = tmp_path / "progress.log"
    with running("progress_log.py", str(log)) as proc:
        d = doctor(proc.pid, log=log, interval_s=0.6)
    assert d.state == "progressing", str(d)
    assert d.exit_code == 0
    assert d.progress_source == "log"
    assert any("grew by" in e for e in d.evidence)
    assert d.stacks is None and d.stacks_hint is None  # no stacks for a healthy process


def test_gyreprof_loop_is_progressing_by_its_step_counter(tmp_path: Path) -> None:
    step_file = tmp_path / "step"
    with running("gyreprof_loop.py", "progress", str(step_file)) as proc:
        deadline = time.monotonic() + 30
        while not step_file.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        d = doctor(proc.pid, step_file=step_file, interval_s=0.6)
    assert d.state == "progressing", str(d)
    assert d.progress_source in ("live", "step_file")
    assert d.steps is not None and d.steps[1] > d.steps[0]


# ------------------------------------------------------------------------ threads
def test_growing_thread_count_is_reported() -> None:
    with running("threads_grow.py") as proc:
        d = doctor(proc.pid, interval_s=1.0, stacks=False)
    assert d.thread_trend == "growing", d.thread_counts
    assert d.thread_counts[-1] >= d.thread_counts[0] + 2
    assert any("thread count growing" in e for e in d.evidence)


def test_steady_thread_count() -> None:
    with running("block_lock.py") as proc:
        d = doctor(proc.pid, interval_s=0.5, stacks=False)
    assert d.thread_trend == "steady"
    assert len(d.thread_counts) >= 2


# ------------------------------------------------------------------------ live segment
def _wait_steps(step_file: Path, n: int) -> None:
    """Until gyreprof_loop.py has written at least ``n`` completed steps to ``step_file``."""

    def done() -> bool:
        try:
            return int(step_file.read_text() or 0) >= n
        except FileNotFoundError:
            return False

    wait_for(done, f"{n} steps of gyreprof_loop.py")


@needs_live
def test_retrying_finding_from_live_counters(tmp_path: Path) -> None:
    step_file = tmp_path / "step"
    with running("gyreprof_loop.py", "retry", str(step_file)) as proc:
        _wait_steps(step_file, 2)  # its two steps done: only retries from here
        d = doctor(proc.pid, interval_s=0.8, stacks=False)
    assert d.progress_source == "live", str(d)
    assert d.state == "retrying"  # a retry counter rising while the step counter stands
    assert d.exit_code == EXIT_CODES["retrying"] == 7
    assert d.retrying
    assert d.counter_rates.get("retry", 0.0) > 0.0
    assert any(e.startswith("retrying") for e in d.evidence)


@needs_live
def test_live_segment_is_the_preferred_evidence(tmp_path: Path) -> None:
    step_file = tmp_path / "step"
    with running("gyreprof_loop.py", "progress", str(step_file)) as proc:
        _wait_steps(step_file, 1)
        d = doctor(proc.pid, log=os.devnull, interval_s=0.6)
    assert d.progress_source == "live"
    assert d.state == "progressing"


@needs_live
def test_a_step_longer_than_the_interval_still_progresses_by_its_phases(tmp_path: Path) -> None:
    # the step counter stands still (as in a stall), but the open phase keeps changing:
    # a naive "no step completed -> stuck" rule calls this blocked
    step_file = tmp_path / "step"
    with running("gyreprof_loop.py", "phases", str(step_file)) as proc:
        _wait_steps(step_file, 2)  # its two steps done: the long one has begun
        d = doctor(proc.pid, interval_s=0.6, stacks=False)
    assert d.progress_source == "live", str(d)
    assert d.state == "progressing", str(d)
    assert any("but phases did" in e for e in d.evidence), d.evidence


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("pid", [0, -5, "abc", 1.5j])
def test_bad_pid_is_a_value_error(pid: object) -> None:
    with pytest.raises(ValueError, match="pid"):
        doctor(pid, interval_s=0.1)  # type: ignore[arg-type]


def test_bad_interval_and_log_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        doctor(os.getpid(), interval_s=0)
    with pytest.raises(ValueError, match="directory"):
        doctor(os.getpid(), log=tmp_path, interval_s=0.1)


# ------------------------------------------------------------------------ command line
def test_cli_exit_code_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running("block_lock.py") as proc:
        code = cli_main(["doctor", str(proc.pid), "--interval", "0.5", "--json", "--no-stacks"])
    out = json.loads(capsys.readouterr().out)
    assert code == 4 and out["state"] == "blocked" and out["exit_code"] == 4
    proc2, log = _crash(tmp_path)
    proc2.wait(30)
    code = cli_main(["doctor", str(proc2.pid), "--log", str(log), "--interval", "0.3"])
    text = capsys.readouterr().out
    assert code == 3 and "ABSENT" in text and "learning_rate" in text


def test_cli_bad_input_is_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["doctor", str(os.getpid()), "--log", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "directory" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        cli_main(["doctor", "notapid"])
    assert exc.value.code == 2
    assert "PID" in capsys.readouterr().err


@pytest.mark.skipif(
    shutil.which("py-spy") is None, reason="py-spy is not installed (gyreprof[doctor])"
)
def test_py_spy_stacks_name_the_blocked_line(tmp_path: Path) -> None:
    """With py-spy present (the doctor extra), a blocked process comes with its Python stack."""
    with running("block_lock.py") as proc:
        d = doctor(proc.pid, interval_s=0.5)
    assert d.state == "blocked", str(d)
    assert d.stacks, str(d)
    assert "block_lock.py" in d.stacks
    assert "py-spy" in str(d)


# ------------------------------------------------------------------------ found evidence
@contextmanager
def busy_output(
    tmp_path: Path, mode: str, stdout: Path | None, *extra: str
) -> Iterator[subprocess.Popen[bytes]]:
    """tests/helpers/procs/busy_output.py with stdout (and stderr) to ``stdout`` or /dev/null."""
    ready = tmp_path / f"ready-{mode}"
    target = open(stdout, "ab") if stdout is not None else open(os.devnull, "wb")  # noqa: SIM115
    with target:
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "busy_output.py"), mode, str(ready), *extra],
            stdout=target,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, "busy_output.py exited"
            assert time.monotonic() < deadline, "busy_output.py did not start"
            time.sleep(0.02)
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.skipif(not LINUX, reason="open files are found through /proc")
def test_busy_loop_printing_to_a_file_is_progressing_without_log(tmp_path: Path) -> None:
    out = tmp_path / "train.out"
    with busy_output(tmp_path, "print", out) as proc:
        d = doctor(proc.pid, interval_s=0.6, stacks=False)
    assert d.state == "progressing", str(d)
    assert d.exit_code == 0
    assert d.progress_source == "files"
    assert any(str(out) in e and "grew by" in e for e in d.evidence), d.evidence
    assert any(w.startswith(str(out)) and "stdout" in w for w in d.watched), d.watched
    assert json.loads(d.to_json())["watched"] == d.watched


@pytest.mark.skipif(not LINUX, reason="open files are found through /proc")
def test_busy_loop_printing_to_dev_null_is_busy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with busy_output(tmp_path, "print", None) as proc:
        d = doctor(proc.pid, interval_s=0.6, stacks=False)
        code = cli_main(["doctor", str(proc.pid), "--interval", "0.5", "--json", "--no-stacks"])
    assert d.state == "busy", str(d)
    assert d.exit_code == 6
    assert d.progress_source == "none" and d.progressed is None
    assert d.watched == []
    assert "BUSY" in str(d)
    out = json.loads(capsys.readouterr().out)
    assert code == 6 and out["state"] == "busy" and out["exit_code"] == 6
    again = ProcessDiagnosis.from_dict(out)  # the CLI's JSON reads back, threads included
    assert again.state == "busy" and again.threads and again.threads[0].tid > 0
    assert ProcessDiagnosis.from_dict(d.to_dict()) == d


@pytest.mark.skipif(not LINUX, reason="open files are found through /proc")
def test_busy_loop_writing_a_file_it_holds_open_is_progressing(tmp_path: Path) -> None:
    events = tmp_path / "events.out.tfevents"
    with busy_output(tmp_path, "file", None, str(events)) as proc:
        d = doctor(proc.pid, interval_s=0.6, stacks=False)
    assert d.state == "progressing", str(d)
    assert d.progress_source == "files"
    assert any(str(events) in e and "open for writing" in e for e in d.evidence), d.evidence


@pytest.mark.skipif(not LINUX, reason="open files are found through /proc")
def test_busy_loop_whose_output_file_stays_quiet(tmp_path: Path) -> None:
    """A found file that does not grow is not proof of a stall: busy, not spinning.

    Named with --log, the same silence counts: spinning.
    """
    out = tmp_path / "quiet.out"
    with busy_output(tmp_path, "quiet", out) as proc:
        found = doctor(proc.pid, interval_s=0.6, stacks=False)
        named = doctor(proc.pid, log=out, interval_s=0.6, stacks=False)
    assert found.state == "busy", str(found)
    assert found.exit_code == 6
    assert found.progress_source == "files"
    assert any(w.startswith(str(out)) for w in found.watched)
    assert any("not taken as a stall" in e for e in found.evidence)
    assert named.state == "spinning", str(named)
    assert named.progress_source == "log" and named.exit_code == 5


def test_a_start_up_trail_is_not_taken_for_the_process_own_output(tmp_path: Path) -> None:
    """A trail `gyreprof run` keeps for a stuck process grows while it is stuck: the files
    the doctor watches for progress leave it out, and keep the process's own log."""
    from gyreprof.diagnostics._procfs import written_files

    trail, log = tmp_path / "123.trail", tmp_path / "train.log"
    code = (
        "import sys, time\n"
        f"t = open({str(trail)!r}, 'a'); g = open({str(log)!r}, 'a')\n"
        "t.write('x'); t.flush(); g.write('y'); g.flush()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        paths = {f.path for f in written_files(proc.pid)}
        assert str(log) in paths and str(trail) not in paths
    finally:
        proc.communicate("\n", timeout=30)
