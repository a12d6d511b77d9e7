"""Waiting on a condition (tests wait on events, never on a fixed duration)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    cond: Callable[[], object], what: str = "the condition", timeout_s: float = 30.0
) -> None:
    """Poll ``cond`` until it is true (backing off from 10 ms to 100 ms); AssertionError
    naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(delay)
        delay = min(0.1, delay * 2)
