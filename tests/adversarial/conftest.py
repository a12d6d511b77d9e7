"""Fixtures shared by the adversarial tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gyreprof.live import _layout as lay


@pytest.fixture
def shared_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A world-writable sticky folder like /dev/shm, used as GYREPROF_LIVE_DIR."""
    d = Path(tempfile.mkdtemp(prefix="gyreprof-shared-", dir="/tmp"))
    d.chmod(0o1777)
    home = Path(tempfile.mkdtemp(prefix="gyreprof-home-"))
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    monkeypatch.setenv("HOME", str(home))
    yield d
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
