"""The stall watchdog on real Profiler loops (in this process and in a subprocess)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import pytest

import gyreprof as gp
from gyreprof.recording.watchdog import Watchdog

from helpers.waiting import wait_for

PROCS = Path(__file__).parent / "helpers" / "procs"
SRC = Path(gp.__file__).resolve().parent.parent
STALL = re.compile(r"gyreprof watchdog: stalled \d+\.\d s in phase '(\w+)' of step (\d+)")


def _steps(prof: gp.Profiler, n: int, stall_at: int | None = None, stall_s: float = 0.0) -> None:
    env, fwd, xfer = prof.ids("env", "fwd", "xfer")
    for i in range(n):
        prof.begin()
        time.sleep(0.002)
        prof.lap(env)
        prof.lap(fwd)
        if i == stall_at:
            time.sleep(stall_s)  # stuck inside 'xfer'
        prof.lap(xfer)
    prof.end()


def test_fires_once_per_stall_and_names_the_open_phase(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "stall.txt"
    prof = gp.Profiler(["env", "fwd", "xfer"])
    dog = prof.watchdog(0.25, dump_to=dump)
    try:
        assert isinstance(dog, Watchdog) and dog.running
        _steps(prof, 10, stall_at=6, stall_s=1.2)  # one stall of ~5 poll periods
        wait_for(lambda: dump.exists(), timeout_s=20.0)
    finally:
        dog.stop()
    assert not dog.running
    assert dog.stalls == 1
    text = dump.read_text()
    match = STALL.search(text)
    assert match, text
    assert match.group(1) == "xfer"
    assert int(match.group(2)) == 7  # the 7th step begun is the one stuck
    # every thread's Python stack, including the stuck loop in this test
    assert "most recent call first" in text
    assert "_steps" in text and "test_watchdog.py" in text
    err = capsys.readouterr().err
    assert STALL.search(err) and "most recent call first" in err


def test_each_stall_reported_once_then_resumes(tmp_path: Path) -> None:
    dump = tmp_path / "stalls.txt"
    prof = gp.Profiler(["env", "fwd", "xfer"])
    with Watchdog(prof, 0.2, dump_to=dump, poll_s=0.02) as dog:
        _steps(prof, 3, stall_at=1, stall_s=0.7)
        # the watchdog has seen the steps complete again
        wait_for(lambda: dump.exists() and "resumed after" in dump.read_text(), "resumed")
        _steps(prof, 3, stall_at=1, stall_s=0.7)
        wait_for(lambda: dog.stalls == 2, "the second stall reported")
    assert dog.stalls == 2
    text = dump.read_text()
    assert len(STALL.findall(text)) == 2
    assert "resumed after" in text


def test_healthy_loop_never_fires(capsys: pytest.CaptureFixture[str]) -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"])
    with prof.watchdog(0.5) as dog:
        _steps(prof, 150)  # ~2 ms a step, far below the limit
    assert dog.stalls == 0 and dog.last_report is None
    assert "stalled" not in capsys.readouterr().err


def test_loop_that_never_starts_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    prof = gp.Profiler(["env"])
    with Watchdog(prof, 0.1, poll_s=0.02) as dog:
        wait_for(lambda: dog.stalls == 1, timeout_s=20.0)
    assert dog.last_report is not None
    assert "before the first step began" in dog.last_report
    assert "before the first step" in capsys.readouterr().err


def test_stop_is_prompt_and_idempotent() -> None:
    prof = gp.Profiler(["env"])
    dog = Watchdog(prof, 60.0)  # poll_s defaults to at most 1 s
    assert not dog.running
    assert dog.start() is dog and dog.start() is dog
    t0 = time.monotonic()
    dog.stop()
    dog.stop()
    assert time.monotonic() - t0 < 3.0
    assert not dog.running
    assert "stopped" in repr(dog)
    assert not any(t.name == "gyreprof-watchdog" and t.is_alive() for t in threading.enumerate())


class _Progress(NamedTuple):
    step: int
    steps_completed: int
    phase: str | None
    phase_since_ns: int
    now_ns: int
    counters: dict[str, int]


class _StuckBetweenSteps:
    """Any object with progress() can be watched; this one sits after step 3."""

    def progress(self) -> _Progress:
        now = time.monotonic_ns()
        return _Progress(3, 3, None, -1, now, {})


def test_watches_any_object_with_progress() -> None:
    with Watchdog(_StuckBetweenSteps(), 0.05, poll_s=0.01) as dog:
        wait_for(lambda: dog.stalls == 1, timeout_s=20.0)
    assert dog.last_report is not None and "between steps, after step 3" in dog.last_report


class _Broken:
    def progress(self) -> _Progress:
        raise RuntimeError("recorder closed")


def test_progress_that_raises_stops_the_watchdog_with_a_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dog = Watchdog(_Broken(), 0.05, poll_s=0.01).start()
    wait_for(lambda: not dog.running, timeout_s=20.0)
    assert isinstance(dog.error, RuntimeError)
    assert "recorder closed" in capsys.readouterr().err


def test_bad_arguments(tmp_path: Path) -> None:
    prof = gp.Profiler(["env"])
    with pytest.raises(TypeError, match="progress"):
        Watchdog(object(), 1.0)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="stall_after_s"):
            Watchdog(prof, bad)
    for wrong in ("5", True, None):
        with pytest.raises(TypeError, match="stall_after_s must be a number of seconds"):
            Watchdog(prof, wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll_s"):
        Watchdog(prof, 1.0, poll_s=0)
    with pytest.raises(ValueError, match="does not exist"):
        Watchdog(prof, 1.0, dump_to=tmp_path / "no" / "such" / "dir.txt")
    with pytest.raises(ValueError, match="directory"):
        prof.watchdog(1.0, dump_to=tmp_path)


def test_stall_in_a_subprocess_goes_to_stderr_and_the_dump_file(tmp_path: Path) -> None:
    dump = tmp_path / "dump.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    res = subprocess.run(
        [sys.executable, str(PROCS / "gyreprof_loop.py"), "stall", str(tmp_path / "s"), str(dump)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "done" in res.stdout
    for text in (res.stderr, dump.read_text()):
        match = STALL.search(text)
        assert match, text
        assert match.group(1) == "xfer" and match.group(2) == "5"
        assert "gyreprof_loop.py" in text  # the stuck frame is in the stack dump
    assert len(STALL.findall(res.stderr)) == 1
