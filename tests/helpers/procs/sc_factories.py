"""Small sampler factories for the selfcheck tests: ok, empty, raising, hanging, broken build."""

from __future__ import annotations

import threading
from typing import Any


class ListSampler:
    """Returns ``batch_size`` fake transitions; has an endpoint like a rollout client."""

    def __init__(self, batch_size: int = 4, endpoint: str = "http://127.0.0.1:8000/rollout"):
        self.batch_size = batch_size
        self.endpoint = endpoint

    def sample(self) -> list[dict[str, Any]]:
        return [{"obs": i, "reward": 1.0} for i in range(self.batch_size)]


class RaisingSampler:
    def sample(self) -> list[int]:
        raise ConnectionRefusedError("rollout server at 127.0.0.1:9 refused the connection")


class HangingSampler:
    def __init__(self) -> None:
        self._never = threading.Event()

    def sample(self) -> list[int]:
        self._never.wait()  # nobody sets it: the call hangs
        return []


def make_ok(batch_size: int = 4) -> ListSampler:
    return ListSampler(batch_size=batch_size)


def make_empty() -> ListSampler:
    return ListSampler(batch_size=0)


def make_raises() -> RaisingSampler:
    return RaisingSampler()


def make_hangs() -> HangingSampler:
    return HangingSampler()


def make_broken() -> ListSampler:
    raise RuntimeError("config file sampler.yaml not found")


NOT_CALLABLE = 42


class HangingWithChild(HangingSampler):
    """Starts a helper process (like an env worker), then hangs; its pid is in ``pidfile``."""

    def __init__(self, pidfile: str) -> None:
        import subprocess
        import sys

        super().__init__()
        # a helper that stays alive until the run ends it (the test checks that it does)
        self.worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(pidfile, "w", encoding="ascii") as fh:
            fh.write(str(self.worker.pid))


def make_hangs_with_child(pidfile: str) -> HangingWithChild:
    return HangingWithChild(pidfile)


def make_hangs_in_build() -> HangingSampler:
    threading.Event().wait()
    return HangingSampler()


class ArraySampler:
    host = "127.0.0.1"
    port = 5555

    def sample(self) -> dict[str, Any]:
        import numpy as np

        return {"obs": np.zeros((8, 3)), "reward": np.ones(8)}


def make_array() -> ArraySampler:
    return ArraySampler()


class HoldingStdout:
    """Starts helpers that keep stdout open (see ``helpers/sweep_samplers/hygiene.py``);
    ``sample()`` hangs when ``hang``, else returns a batch at once."""

    def __init__(self, pid_dir: str, hang: bool) -> None:
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/
        from helpers.sweep_samplers.hygiene import start_helpers

        self.hang = hang
        self.helpers = start_helpers(pid_dir)

    def sample(self) -> list[int]:
        if self.hang:
            threading.Event().wait()
        return [1, 2, 3]


def make_holds_stdout(pid_dir: str, hang: bool = True) -> HoldingStdout:
    return HoldingStdout(pid_dir, hang)
