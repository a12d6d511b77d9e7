"""The note ``gyreprof run`` leaves for ``gyreprof top PID`` once the run has ended
(``live/_ended.py``: ``remember_run`` / ``ended_run``), read back only as what it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gyreprof.live import _ended as _top
from gyreprof.live import _layout as lay


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_run_that_ended_names_its_command_and_records(tmp_path: Path) -> None:
    pid = _dead_pid()
    out = tmp_path / "run.json"
    _top.remember_run([pid], ["python", "train.py"], 0, {"--json": str(out), "--save": None})
    said = _top.ended_run(pid)
    assert said is not None
    assert "python train.py" in said and "exit code 0" in said and str(out) in said


def test_a_note_of_another_format_is_not_read_as_ours() -> None:
    pid = _dead_pid()
    path = lay.segment_dir(create=True) / f"{_top.ENDED_PREFIX}{pid}.json"
    note = {"command": ["x"], "exit_code": 0, "ended_unix_s": time.time(), "records": {}}
    path.write_text(json.dumps({**note, "format": "gyreprof.run-ended/99"}))
    assert _top.ended_run(pid) is None
    path.write_text(json.dumps([1, 2]))  # not even an object
    assert _top.ended_run(pid) is None
    path.write_text(json.dumps({**note, "format": _top.ENDED_FORMAT}))
    assert _top.ended_run(pid) is not None


def test_notes_older_than_a_week_go_at_most_once_an_hour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run would stat a week of notes; the sweep runs once an hour instead."""
    monkeypatch.setenv(lay.ENV_DIR, str(tmp_path / "live"))
    folder = lay.segment_dir(create=True)
    week_ago = time.time() - _top.ENDED_KEEP_S - 60

    def old_note(pid: int) -> Path:
        path = folder / f"{_top.ENDED_PREFIX}{pid}.json"
        path.write_text("{}")
        os.utime(path, (week_ago, week_ago))
        return path

    first, fresh = old_note(1), folder / f"{_top.ENDED_PREFIX}2.json"
    fresh.write_text("{}")
    _top.remember_run([_dead_pid()], ["python", "a.py"], 0, {})
    assert not first.exists() and fresh.exists()
    second = old_note(3)
    _top.remember_run([_dead_pid()], ["python", "b.py"], 0, {})
    assert second.exists()  # swept less than an hour ago
    hour_ago = time.time() - _top.ENDED_SWEEP_S - 60
    os.utime(folder / _top.ENDED_SWEPT, (hour_ago, hour_ago))
    _top.remember_run([_dead_pid()], ["python", "c.py"], 0, {})
    assert not second.exists() and fresh.exists()
