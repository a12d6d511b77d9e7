"""Helpers for the child processes that sweeps and self-checks run."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def request_stacks(proc: subprocess.Popen[Any], stacks_path: Path, wait_s: float) -> str | None:
    """Ask a hung child for its Python stacks and return them (None if none came).

    The child must have registered ``faulthandler.register(SIGUSR1, file=...)`` on
    ``stacks_path``; this sends the signal and waits up to ``wait_s`` for the dump.
    """
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is not None:
        try:
            proc.send_signal(usr1)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if stacks_path.exists() and stacks_path.stat().st_size > 0:
                time.sleep(0.1)  # let faulthandler finish writing
                break
            time.sleep(0.02)
    try:
        return stacks_path.read_text(encoding="utf-8", errors="replace") or None
    except OSError:
        return None
