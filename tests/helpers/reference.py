"""Pure-Python twins of the native histogram and ring, obviously correct and slow.

Tests compare the compiled core against these; nothing in the package imports
them (there is no run-time fallback).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class RefLayout:
    lowest: int = 1
    highest: int = 3_600_000_000_000
    significant_figures: int = 3

    def __post_init__(self) -> None:
        single_unit = 2 * 10**self.significant_figures
        sbc_mag = math.ceil(math.log2(single_unit))
        self.unit_magnitude = self.lowest.bit_length() - 1
        self.half_mag = max(sbc_mag, 1) - 1
        self.sub_bucket_count = 1 << (self.half_mag + 1)
        self.half_count = self.sub_bucket_count // 2
        self.mask = (self.sub_bucket_count - 1) << self.unit_magnitude
        smallest_untrackable = self.sub_bucket_count << self.unit_magnitude
        buckets = 1
        while smallest_untrackable <= self.highest:
            smallest_untrackable <<= 1
            buckets += 1
        self.bucket_count = buckets
        self.counts_len = (buckets + 1) * self.half_count

    def index(self, v: int) -> int:
        pow2ceiling = (v | self.mask).bit_length()
        bucket = pow2ceiling - self.unit_magnitude - (self.half_mag + 1)
        sub = v >> (bucket + self.unit_magnitude)
        return ((bucket + 1) << self.half_mag) + (sub - self.half_count)

    def lowest_equivalent(self, i: int) -> int:
        bucket = (i >> self.half_mag) - 1
        sub = (i & (self.half_count - 1)) + self.half_count
        if bucket < 0:
            sub -= self.half_count
            bucket = 0
        return sub << (bucket + self.unit_magnitude)

    def width(self, i: int) -> int:
        bucket = max((i >> self.half_mag) - 1, 0)
        return 1 << (bucket + self.unit_magnitude)


@dataclass
class RefHistogram:
    layout: RefLayout = field(default_factory=RefLayout)

    def __post_init__(self) -> None:
        self.counts = [0] * self.layout.counts_len
        self.total = 0
        self.sum = 0
        self.min: int | None = None
        self.max: int | None = None
        self.out_of_range = 0
        self.negative = 0

    def record(self, v: int) -> None:
        if v < 0:
            self.negative += 1
            return
        c = v
        if v > self.layout.highest:
            self.out_of_range += 1
            c = self.layout.highest
        self.counts[self.layout.index(c)] += 1
        self.total += 1
        self.sum += v
        self.min = v if self.min is None else min(self.min, v)
        self.max = v if self.max is None else max(self.max, v)

    def percentile(self, q: float) -> float:
        if self.total == 0:
            return math.nan
        assert self.min is not None and self.max is not None
        rank = max(1, min(self.total, math.ceil(q / 100.0 * self.total)))
        # rank 1 and rank N are the exact extremes; other ranks read as their
        # bucket's integer midpoint, clamped to the extremes
        if rank == self.total:
            return float(self.max)
        if rank == 1:
            return float(self.min)
        cum = 0
        for i, c in enumerate(self.counts):
            cum += c
            if cum >= rank:
                mid = self.layout.lowest_equivalent(i) + (self.layout.width(i) - 1) // 2
                return float(min(max(mid, self.min), self.max))
        raise AssertionError("rank beyond total")


class RefRing:
    """Power-of-two ring that keeps the newest ``capacity`` items."""

    def __init__(self, capacity: int) -> None:
        cap = 1
        while cap < capacity:
            cap <<= 1
        self.capacity = cap
        self.items: list[object] = []
        self.written = 0

    def push(self, item: object) -> None:
        self.items.append(item)
        self.written += 1
        if len(self.items) > self.capacity:
            self.items.pop(0)

    @property
    def overwritten(self) -> int:
        return max(0, self.written - self.capacity)
