"""Issue 38 item 7: env steps under gymnasium 1.x's next-step autoreset. A vector env
resets a finished sub-env inside its next step(); the report counts that call as an
env_reset and says so, with numbers that add up to the framework's own count."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers.run_scripts.runhelp import gyreprof_run, printed, script

gym = pytest.importorskip("gymnasium")
pytestmark = pytest.mark.skipif(
    int(gym.__version__.split(".")[0]) < 1, reason="next-step autoreset is gymnasium 1.x"
)


def test_autoresets_are_counted_apart_and_said(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, sys.executable, script("autoreset_vec.py"), "600")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    framework = printed(proc.stdout, "FRAMEWORK_STEPS")
    sub_steps = printed(proc.stdout, "SUB_STEPS")
    autoresets = printed(proc.stdout, "AUTORESETS")
    assert autoresets > 0  # CartPole ends episodes: the case the note is about
    phases = data["sampler"]["phases"]
    steps = phases["env_step"]["count"]
    resets = phases["env_reset"]["count"]
    assert steps == sub_steps
    assert resets == autoresets + 4  # and the vector env's own reset() of its 4 sub-envs
    assert steps + resets - 4 == framework
    notes = [n for n in data["notes"] if "next-step autoreset" in n]
    assert len(notes) == 1, data["notes"]
    assert f"env_step + env_reset = {steps + resets} ({steps} + {resets})" in notes[0]
    assert "next-step autoreset" in proc.stderr


def test_a_plain_env_loop_gets_no_autoreset_note(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, sys.executable, script("bare_cartpole.py"), "2000")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert not any("autoreset" in n for n in data["notes"])
