"""A sampler whose throughput does not depend on the batch size, with run-to-run noise.

Every call waits ``batch_size * per_sample_s`` seconds (a deadline, so the wait
does not depend on how the machine schedules it), scaled by one factor drawn per
run (per factory call) from ``1 +- noise``: the true samples/s is the same at every
batch size, and each run lands up to ``noise`` above or below it, as runs on a
busy machine do. The largest median is then a matter of luck.
"""

from __future__ import annotations

import random
import time


class FlatSampler:
    def __init__(self, batch_size: int, per_sample_s: float, factor: float) -> None:
        self.batch_size = int(batch_size)
        self.call_s = self.batch_size * per_sample_s * factor

    def sample(self) -> int:
        deadline = time.perf_counter() + self.call_s
        time.sleep(self.call_s * 0.8)
        while time.perf_counter() < deadline:
            pass
        return self.batch_size


def make_flat(batch_size: int, per_sample_s: float = 1e-4, noise: float = 0.1) -> FlatSampler:
    return FlatSampler(batch_size, per_sample_s, 1.0 + random.uniform(-noise, noise))
