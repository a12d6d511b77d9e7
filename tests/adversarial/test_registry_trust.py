"""Worker registrations under attack: entries planted as another uid, in folders others
can write, or as links are ignored and reported as untrusted; genuine ones still count.

Planting as another uid (65534) needs root; those tests skip cleanly otherwise.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof.analysis.parallelism import registry as reg

NOBODY = 65534
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another uid needs root"
)

WORKER = """
import sys, time
import gyreprof as gp
gp.register_worker("env_worker", registry=sys.argv[1], seed=7)
print("ready", flush=True)
time.sleep(60)  # a registered worker, alive until the test ends it
"""


@pytest.fixture
def registry_folder() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-reg-"))
    yield d / "workers"
    subprocess.run(["rm", "-rf", str(d)], check=False)


@pytest.fixture
def worker(registry_folder: Path) -> Iterator[subprocess.Popen[str]]:
    """A real process that registered itself as an env_worker in ``registry_folder``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(registry_folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _read(pid: int, folder: Path) -> tuple[dict[int, reg.WorkerRecord], list[str]]:
    import psutil

    return reg.read_registry({pid: psutil.Process(pid).create_time()}, folder, prune=False)


def test_registry_files_are_private(worker: subprocess.Popen[str], registry_folder: Path) -> None:
    entry = registry_folder / f"{worker.pid}.json"
    assert stat.S_IMODE(os.lstat(registry_folder).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o600
    records, problems = _read(worker.pid, registry_folder)
    assert records[worker.pid].role == "env_worker"  # the genuine entry is believed
    assert problems == []


def test_entry_in_a_folder_others_can_write_is_untrusted(
    worker: subprocess.Popen[str], registry_folder: Path
) -> None:
    registry_folder.chmod(0o1777)  # like /tmp: anyone could have planted it
    records, problems = _read(worker.pid, registry_folder)
    assert worker.pid not in records
    assert len(problems) == 1 and "untrusted" in problems[0]
    assert "where other users can create files" in problems[0]


def test_group_writable_entry_is_untrusted(
    worker: subprocess.Popen[str], registry_folder: Path
) -> None:
    (registry_folder / f"{worker.pid}.json").chmod(0o666)
    records, problems = _read(worker.pid, registry_folder)
    assert worker.pid not in records
    assert "writable by other users" in problems[0]


def test_link_entry_is_untrusted(worker: subprocess.Popen[str], registry_folder: Path) -> None:
    entry = registry_folder / f"{worker.pid}.json"
    real = registry_folder / "elsewhere.json"
    entry.rename(real)
    entry.symlink_to(real)
    records, problems = _read(worker.pid, registry_folder)
    assert worker.pid not in records
    assert "symbolic link" in problems[0]


def test_fifo_entry_does_not_hang(worker: subprocess.Popen[str], registry_folder: Path) -> None:
    entry = registry_folder / f"{worker.pid}.json"
    entry.unlink()
    os.mkfifo(entry, 0o600)
    records, problems = _read(worker.pid, registry_folder)
    assert worker.pid not in records
    assert "not a regular file" in problems[0]


@needs_root
def test_entry_owned_by_another_uid_is_untrusted_and_reported(
    worker: subprocess.Popen[str], registry_folder: Path
) -> None:
    """The entry's content is a faithful copy (right pid, right start time), but the file
    belongs to uid 65534 while the worker runs as root: someone else wrote it."""
    entry = registry_folder / f"{worker.pid}.json"
    data = json.loads(entry.read_text())
    data["role"] = "learner"
    data["config"] = {"seed": 666}
    entry.unlink()
    entry.write_text(json.dumps(data))
    os.chown(entry, NOBODY, NOBODY)
    entry.chmod(0o600)
    records, problems = _read(worker.pid, registry_folder)
    assert worker.pid not in records
    assert "belongs to uid 65534" in problems[0] and "runs as uid 0" in problems[0]
    census = gp.census(worker.pid, interval_s=0, registry=registry_folder)
    assert census.processes[0].role is None  # the planted role is not shown
    assert any("untrusted" in n for n in census.notes)
    assert "untrusted" in str(census)
    report = gp.check_parallelism(worker.pid, registry=registry_folder)
    assert any("untrusted" in n for n in report.notes)
    # the same file given back to the worker's uid is believed again: the owner is the reason
    os.chown(entry, 0, 0)
    records, _ = _read(worker.pid, registry_folder)
    assert records[worker.pid].role == "learner"


@needs_root
def test_registering_into_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    os.chown(folder, NOBODY, NOBODY)
    with pytest.raises(PermissionError, match="not a private folder"):
        gp.register_worker("env_worker", registry=folder)
    assert list(folder.iterdir()) == []


def test_own_folder_others_can_write_is_taken_back(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    folder.chmod(0o777)
    try:
        gp.register_worker("env_worker", registry=folder)
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
        entry = folder / f"{os.getpid()}.json"
        assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o600
    finally:
        reg.unregister_worker(folder)
