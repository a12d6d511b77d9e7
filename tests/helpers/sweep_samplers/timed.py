"""A sampler whose costs are known: a slow build, slow first calls, then a fixed sleep per call."""

from __future__ import annotations

import time


class Sleeper:
    def __init__(self, batch_size: int, sleep_s: float, slow_calls: int, slow_s: float) -> None:
        self.batch_size = batch_size
        self.sleep_s = sleep_s
        self.slow_left = slow_calls
        self.slow_s = slow_s

    def sample(self) -> int:
        if self.slow_left > 0:
            self.slow_left -= 1
            time.sleep(self.slow_s)
        else:
            time.sleep(self.sleep_s)
        return self.batch_size


def make_sleeper(
    batch_size: int,
    sleep_s: float = 0.005,
    slow_calls: int = 2,
    slow_s: float = 0.1,
    build_s: float = 0.4,
) -> Sleeper:
    time.sleep(build_s)  # harness-side cost: must not count as sampling time
    return Sleeper(batch_size, sleep_s, slow_calls, slow_s)
