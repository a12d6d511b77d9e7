"""Samplers that fail in the ways a sweep must report per value."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

RELEASE = threading.Event()  # in-process hang tests set it to free the abandoned thread


class Counter:
    def __init__(self, batch_size: int, fail: str | None = None) -> None:
        self.batch_size = batch_size
        self.fail = fail
        self.calls = 0

    def sample(self) -> Any:
        self.calls += 1
        if self.fail == "abort":
            os.abort()
        if self.fail == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fail == "exit" and self.calls == 3:
            os._exit(7)
        if self.fail == "zero" and self.calls == 2:
            return 0
        if self.fail == "text":
            return "a batch"
        if self.fail == "raise_in_call" and self.calls == 5:
            raise RuntimeError("rollout worker 3 died")
        return self.batch_size


def make_crashy(
    batch_size: int, abort_at: int = -1, kill_at: int = -1, exit_at: int = -1
) -> Counter:
    fail = None
    if batch_size == abort_at:
        fail = "abort"
    elif batch_size == kill_at:
        fail = "sigkill"
    elif batch_size == exit_at:
        fail = "exit"
    return Counter(batch_size, fail)


def make_bad(
    batch_size: int,
    raise_at: int = -1,
    zero_at: int = -1,
    text_at: int = -1,
    call_raise_at: int = -1,
) -> Any:
    if batch_size == raise_at:
        raise ValueError(f"cannot build a sampler with batch_size={batch_size}")
    if batch_size == zero_at:
        return Counter(batch_size, "zero")
    if batch_size == text_at:
        return Counter(batch_size, "text")
    if batch_size == call_raise_at:
        return Counter(batch_size, "raise_in_call")
    return Counter(batch_size)


def make_none(batch_size: int) -> Any:
    return None


def make_hanging(batch_size: int, hang_at: int = -1) -> Counter:
    if batch_size == hang_at:
        RELEASE.wait()  # never set in a subprocess: the factory call hangs
    return Counter(batch_size)


class Drifting:
    """Reports num_envs it clamped to the batch, and starts batch-dependent threads."""

    def __init__(self, batch_size: int, num_envs: int) -> None:
        self.batch_size = batch_size
        self.num_envs = min(num_envs, batch_size)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._stop.wait, daemon=True) for _ in range(batch_size // 4)
        ]
        for t in self._threads:
            t.start()

    def sample(self) -> int:
        return self.batch_size

    def close(self) -> None:
        self._stop.set()


def make_drifting(batch_size: int, num_envs: int) -> Drifting:
    return Drifting(batch_size, num_envs)


def make_prof_no_phases(batch_size: int, prof: Any = None) -> Counter:
    return Counter(batch_size)


def make_mutating(batch_size: int, config: dict[str, Any]) -> Counter:
    """Changes the config it was given (a bug a shared process would carry to later values)."""
    config["lr"] = config.get("lr", 0.0) * 2 + batch_size
    return Counter(batch_size)


def make_clobbering(batch_size: int, payload: str = '{"format": "someone-else/9"}') -> Counter:
    """A sampler whose process, on exit, replaces the sweep worker's result file with
    ``payload`` (foreign or broken data crossing the process boundary)."""
    import atexit
    import sys
    from pathlib import Path

    run_dir = Path(sys.argv[-1])
    if (run_dir / "spec.json").exists():

        def clobber() -> None:
            (run_dir / "result.json").write_text(payload, encoding="utf-8")

        atexit.register(clobber)
    return Counter(batch_size)
