"""``when_imported`` (wrapt's post-import hooks, ``integrations/_instrument.py``): a
callback runs once its module has finished importing, or at once when it already has; a
callback that fails is a warning, never an error in the importing code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gyreprof.integrations._instrument import when_imported


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    (tmp_path / f"{name}.py").write_text("VALUE = 41\nVALUE += 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_a_callback_runs_after_the_import_or_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "gyreprof_hook_probe_a"
    _module(tmp_path, monkeypatch, name)
    seen: list[Any] = []
    when_imported(name, lambda m: seen.append(m.VALUE))
    assert seen == []  # not imported yet
    __import__(name)
    assert seen == [42]  # the module had finished executing
    when_imported(name, lambda m: seen.append(("now", m.VALUE)))
    assert seen == [42, ("now", 42)]  # already imported: at once


def test_a_failing_callback_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "gyreprof_hook_probe_b"
    _module(tmp_path, monkeypatch, name)

    def boom(module: Any) -> None:
        raise RuntimeError("no")

    when_imported(name, boom)
    module = __import__(name)  # the import itself succeeds
    assert module.VALUE == 42
    err = capsys.readouterr().err
    assert f"instrumenting {name} failed" in err and "runs uninstrumented" in err
