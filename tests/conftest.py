from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

sys.path.insert(0, str(TESTS))


def run_cli(
    *args: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``gyreprof ARGS`` in a fresh interpreter and capture its output."""
    full_env = dict(os.environ)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(autouse=True, scope="session")
def _private_state_dirs(tmp_path_factory: pytest.TempPathFactory):
    """Live segments and worker registrations of this test run go to private folders, so
    processes the tests kill leave nothing behind in /dev/shm or the shared registry."""
    saved = {k: os.environ.get(k) for k in ("GYREPROF_LIVE_DIR", "GYREPROF_REGISTRY_DIR")}
    os.environ["GYREPROF_LIVE_DIR"] = str(tmp_path_factory.mktemp("live"))
    os.environ["GYREPROF_REGISTRY_DIR"] = str(tmp_path_factory.mktemp("workers"))
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
