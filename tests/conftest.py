from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# A test run started in the background of a non-interactive shell (``cmd &``) or under
# ``nohup`` inherits SIGINT / SIGHUP ignored, and every command the tests start would
# inherit that too: an ignored signal is dropped, so the tests that send Ctrl-C or a
# hang-up to a command would wait for an answer that cannot come. The tests are about
# what our commands do with these signals, so their commands start with the defaults.
for _sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    if signal.getsignal(_sig) is signal.SIG_IGN:
        signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT else signal.SIG_DFL)

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
