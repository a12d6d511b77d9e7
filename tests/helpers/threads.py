"""Running a test body in a thread of its own (a thread's state is the thread's: a
training timeline, a request log), its result or its error brought back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def in_thread(body: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """``body()`` run in a new thread; its result, or its exception raised here."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = body()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = exc

    th = threading.Thread(target=run)
    th.start()
    th.join(timeout_s)
    if th.is_alive():
        raise AssertionError(f"the test body's thread did not end in {timeout_s:g} s")
    if "error" in out:
        raise out["error"]
    return out.get("value")
