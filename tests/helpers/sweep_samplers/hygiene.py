"""A sampler that starts helper processes and then hangs, for the process-hygiene tests.

``make_holding(batch_size, pid_dir)`` writes the measuring process's pid to
``pid_dir/run.pid`` and starts three helpers, each writing its pid file and sleeping
with the run's stdout open: one in the run's process group (``helper.pid``), one in a
session of its own, as a server might (``escaped.pid``), and one that daemonizes: its
parent starts it in a new session and exits at once (``daemon.pid``). Once all pid
files are written it writes ``pid_dir/ready``; ``sample()`` then sleeps for a
long time, so the sweep is still running when the test signals it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

PID_FILES = ("run.pid", "helper.pid", "escaped.pid", "daemon.pid")

_HELPER = (
    "import os, sys, time; "
    "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); "
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1]); "
    "time.sleep(300)"  # alive until the run ends it (or the test finds it left behind)
)


# starts the helper in a new session and exits: the helper is orphaned at once
_DAEMONIZE = (
    "import subprocess, sys; "
    "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]], start_new_session=True)"
)


def start_helpers(pid_dir: str) -> list[subprocess.Popen[bytes]]:
    """Start the helpers; return once all have written their pid files."""
    folder = Path(pid_dir)
    helpers = [
        subprocess.Popen([sys.executable, "-c", _HELPER, str(folder / "helper.pid")]),
        subprocess.Popen(
            [sys.executable, "-c", _HELPER, str(folder / "escaped.pid")], start_new_session=True
        ),
    ]
    subprocess.run(
        [sys.executable, "-c", _DAEMONIZE, _HELPER, str(folder / "daemon.pid")], check=True
    )
    deadline = time.monotonic() + 60
    while not all((folder / n).exists() for n in ("helper.pid", "escaped.pid", "daemon.pid")):
        if time.monotonic() > deadline:
            raise RuntimeError("the helper processes did not start within 60 s")
        time.sleep(0.02)
    (folder / "run.pid").write_text(str(os.getpid()))
    (folder / "ready").write_text("ready")
    return helpers


class HoldingSampler:
    def __init__(self, batch_size: int, pid_dir: str) -> None:
        self.batch_size = batch_size
        self.helpers = start_helpers(pid_dir)

    def sample(self) -> int:
        time.sleep(300)  # hangs: the test signals the run meanwhile
        return self.batch_size


def make_holding(batch_size: int, pid_dir: str) -> HoldingSampler:
    return HoldingSampler(batch_size, pid_dir)
