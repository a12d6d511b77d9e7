"""``gyreprof run``'s watch goes on for the whole run: a trainer that stopped after its
first steps (its feeder dead) gets "nothing moved for S s" with the doctor's diagnosis
(the dead feeder first), and the final report says so first; a first ``env.reset()``
alone is not a start (the start-up report still comes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import gyreprof as gp

from helpers.waiting import wait_for

PROCS = Path(__file__).parent / "helpers" / "procs"
SCRIPTS = Path(__file__).parent / "helpers" / "run_scripts"
SRC = Path(gp.__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the watch reads /proc"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("GYREPROF_RUN_DIR", None)
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_a_trainer_whose_feeder_died_gets_nothing_moved_and_the_report_says_so_first(
    tmp_path: Path,
) -> None:
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gyreprof",
                "run",
                "--stall-s",
                "1",
                "--startup-timeout",
                "0",
                "--",
                sys.executable,
                str(PROCS / "dead_feeder.py"),
                "thread",
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env=_env(),
            cwd=tmp_path,
        )
    try:
        wait_for(lambda: "nothing moved for" in err.read_text(), "the stall report", 60)
        wait_for(lambda: "fed by thread `producer`" in err.read_text(), "its diagnosis", 30)
    finally:
        _stop(proc)
    text = err.read_text()
    stall = text[text.index("nothing moved for") :]
    assert "--stall-s 1" in stall and "doctor: BLOCKED" in stall, stall
    assert "which died: ValueError at" in stall, stall
    final = text[text.index("this run stalled") :]
    assert "up to its end; the numbers below cover the time it moved" in final, final
    assert final.index("this run stalled") < final.index("verdict:"), final


def test_a_first_reset_is_not_a_start(tmp_path: Path) -> None:
    pytest.importorskip("gymnasium")
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gyreprof",
                "run",
                "--startup-timeout",
                "1.5",
                "--",
                sys.executable,
                str(SCRIPTS / "reset_then_hang.py"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env=_env(),
            cwd=tmp_path,
        )
    try:
        wait_for(lambda: "doctor:" in err.read_text(), "the start-up report", 90)
    finally:
        _stop(proc)
    text = err.read_text()
    assert "no step or phase recorded" in text, text
    assert "BLOCKED" in text, text


def test_a_bad_stall_s_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from gyreprof.cli import main

    assert main(["run", "--stall-s", "-1", "--", sys.executable, "-c", "pass"]) == 2
    assert "--stall-s" in capsys.readouterr().err
