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
