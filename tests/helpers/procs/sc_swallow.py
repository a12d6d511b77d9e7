"""Sampler factories for selfcheck whose failures hide: a swallowed exception, an empty
result whose data came under another key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class SwallowingSampler:
    """Casts each reward with ``np.float_`` (removed in NumPy 2): every cast raises
    AttributeError, a broad ``except`` drops it, and the batch comes back empty."""

    def sample(self) -> list[Any]:
        out = []
        for r in (1.0, 0.5, 0.0, 2.0):
            try:
                out.append(np.float_(r))  # type: ignore[attr-defined]
            except Exception:
                continue  # "skip bad samples"
        return out


@dataclass
class Reply:
    """What a rollout server answered: the client reads ``samples``, the server filled ``data``."""

    samples: list[Any] = field(default_factory=list)
    data: list[Any] = field(default_factory=list)
    status: str = "ok"

    def __len__(self) -> int:
        return len(self.samples)


class OtherKeySampler:
    def sample(self) -> Reply:
        return Reply(data=[{"obs": i} for i in range(8)])


def make_swallowing() -> SwallowingSampler:
    return SwallowingSampler()


def make_other_key() -> OtherKeySampler:
    return OtherKeySampler()
