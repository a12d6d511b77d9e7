"""Folders squatted by another local user (issue 25, item 10).

- the worker registry never follows a ``<tmp>/gyreprof-<uid>`` link another user
  planted (it used to create ``workers/`` wherever the link pointed), and falls back
  to another private folder;
- a squatted ``/dev/shm/gyreprof-<uid>`` does not block ``live=True`` for a user
  with no writable HOME; when no folder at all can be had, the error says which
  were tried (it was "[Errno None] ... (None)").

The other user is uid 65534, taken on in a forked child; the tests need root and
skip with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gyreprof.analysis.parallelism import registry as reg

from helpers.crossuser import NOBODY, as_user, needs_root


@pytest.fixture
def sticky_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A world-writable sticky folder used as the temp dir (like /tmp), and a HOME."""
    d = Path(tempfile.mkdtemp(prefix="gyreprof-sticky-", dir="/tmp"))
    d.chmod(0o1777)
    home = Path(tempfile.mkdtemp(prefix="gyreprof-home-"))
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("GYREPROF_REGISTRY_DIR", raising=False)
    yield d
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


@needs_root
@pytest.mark.parametrize("points_to", ["victim_folder", "attacker_folder"])
def test_the_registry_does_not_follow_a_planted_link(
    sticky_tmp: Path, tmp_path: Path, points_to: str
) -> None:
    victim_folder = tmp_path / "victim-data"  # root's own folder, chosen by the attacker
    victim_folder.mkdir(mode=0o700)
    attacker_folder = sticky_tmp / "trap"
    target = victim_folder if points_to == "victim_folder" else attacker_folder
    link = sticky_tmp / f"gyreprof-{os.getuid()}"

    def squat() -> object:
        attacker_folder.mkdir(mode=0o777)
        attacker_folder.chmod(0o777)
        os.symlink(target, link)
        return "planted"

    assert as_user(NOBODY, squat)[1] == "'planted'"
    assert link.is_symlink()
    record = reg.register_worker("env_worker", seed=3)  # PermissionError or followed before
    try:
        where = Path(record.path or "").parent
        assert not (victim_folder / "workers").exists()  # was created there
        assert list(attacker_folder.iterdir()) == []
        assert where.parent != link and os.path.realpath(where).startswith(
            os.path.realpath(os.environ["HOME"])
        ), where
        assert reg.registry_dir() == where
        records, problems = reg.read_registry(
            {os.getpid(): psutil.Process().create_time()}, prune=False
        )
        assert records[os.getpid()].role == "env_worker", problems
    finally:
        reg.unregister_worker()


def test_the_registry_takes_its_own_folder_when_nothing_is_squatted(sticky_tmp: Path) -> None:
    record = reg.register_worker("env_worker", seed=1)
    try:
        assert Path(record.path or "").parent == sticky_tmp / f"gyreprof-{os.getuid()}" / "workers"
    finally:
        reg.unregister_worker()


LIVE = """
import gyreprof as gp
try:
    prof = gp.Profiler(["env"], live=True)
except OSError as exc:
    print("ERROR", exc)
else:
    print("OK", prof.live.path)
    prof.live.close()
"""


def _live_child(live_dir: Path, tmp: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env.update(GYREPROF_LIVE_DIR=str(live_dir), TMPDIR=str(tmp), HOME="/dev/null")
    got = subprocess.run(
        [sys.executable, "-c", LIVE], env=env, capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, got.stderr[-2000:]
    return got.stdout.strip()


@needs_root
def test_a_squatted_live_folder_and_no_home_still_publish(sticky_tmp: Path) -> None:
    shm = Path(tempfile.mkdtemp(prefix="gyreprof-shm-", dir="/tmp"))
    shm.chmod(0o1777)
    try:
        mine = shm / f"gyreprof-{os.getuid()}"

        def squat() -> object:
            mine.mkdir(mode=0o777)
            mine.chmod(0o777)
            return "squatted"

        assert as_user(NOBODY, squat)[1] == "'squatted'"
        out = _live_child(shm, sticky_tmp)  # "[Errno None] ... (None)" before
        assert out.startswith("OK "), out
        seg = Path(out[3:])
        assert seg.parent == sticky_tmp / f"gyreprof-live-{os.getuid()}", seg

        # every fallback squatted too: a clear error naming what was tried
        fallback = sticky_tmp / f"gyreprof-live-{os.getuid()}"
        shutil.rmtree(fallback)

        def squat_fallback() -> object:
            fallback.mkdir(mode=0o777)
            return "squatted"

        assert as_user(NOBODY, squat_fallback)[1] == "'squatted'"
        out = _live_child(shm, sticky_tmp)
        assert out.startswith("ERROR"), out
        assert "None" not in out and "tried" in out and str(mine) in out, out
        assert "GYREPROF_LIVE_DIR" in out
    finally:
        shutil.rmtree(shm, ignore_errors=True)
