"""``gyreprof run`` against planted files, malformed records, signals and data loss (issue 25).

Each test is one defect of the second trust probe and fails on the code before it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.run_scripts.runhelp import gyreprof_run, script

NOBODY = 65534
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="plants another user's link (root)"
)


def _py(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------- 1: links planted by others


@as_root
def test_json_is_not_written_through_another_users_link_in_a_shared_folder(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = shared / "run.json"
    link.symlink_to(victim)
    os.lchown(link, NOBODY, NOBODY)  # planted by another user
    proc, _ = gyreprof_run(tmp_path, sys.executable, "-c", "pass", options=("--json", str(link)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert victim.read_text() == "precious\n"
    assert link.is_symlink()  # another user's link is not replaced either
    assert f"--json {link}" in proc.stderr and "owned by uid 65534" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_save_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    save = tmp_path / "save"
    save.mkdir()
    (save / "processes.json").symlink_to(victim)
    proc, _ = gyreprof_run(tmp_path, script("gym_loop.py"), "50", options=("--save", str(save)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert victim.read_text() == "precious\n"
    index = save / "processes.json"
    assert not index.is_symlink() and json.loads(index.read_text())[0]["role"] == "main"


def test_json_is_never_left_partial_under_a_file_size_limit(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    out.write_text('{"old": true}\n')
    # the limit is gyreprof run's (soft 1 KB); the command lifts it for itself
    cmd = _py(
        tmp_path,
        "lifted.py",
        "import resource, runpy, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)\n"
        f"sys.argv = [{script('gym_loop.py')!r}, '50']\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n",
    )
    launcher = (
        "import resource, runpy, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n"
        f"sys.argv = ['gyreprof', 'run', '--json', {str(out)!r}, '--', {cmd!r}]\n"
        "runpy.run_module('gyreprof', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", launcher], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "env_step" in proc.stderr  # the command was profiled: the report is over 4 KB
    assert out.read_text() == '{"old": true}\n'  # the old file, whole: not 4 KB of the new
    assert f"--json {out}" in proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.json")]


# ------------------------------------------------------------- 8: malformed records


def test_malformed_records_are_skipped_with_a_note_and_the_exit_code_is_the_commands(
    tmp_path: Path,
) -> None:
    proc, data = gyreprof_run(tmp_path, script("plant_records.py"))
    assert "PLANTED" in proc.stdout, proc.stderr[-3000:]
    assert proc.returncode == 7, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for name in (
        "1000001.start.json",
        "1000002.start.json",
        "1000003.trainer.snap",
        "1000003.sampler.snap",
    ):
        assert f"skipped {name}" in proc.stderr, name
    assert data is not None and data["exit_code"] == 7
    assert data["sampler"]["phases"]["env_step"]["count"] == 50  # the real process's
