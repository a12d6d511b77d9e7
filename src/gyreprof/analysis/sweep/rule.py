"""The sweep's one distinguishability test, and the rule built on it.

The recommendation rule
-----------------------
The recommended value is **the smallest value whose median throughput is not
distinguishable from the best median**, among the values that ran cleanly and
stayed under ``memory_limit``.

Two medians ``a <= b`` are *distinguishable* when ``b / a > (1 + flat_within)
* (1 + noise)``: their ratio exceeds both ``flat_within`` and the sweep's
run-to-run noise, compounded. The noise is **twice the median** over the clean
values of the relative spread ``(max - min) / median`` of samples/s over each
value's repeats (0 with one repeat). It is pooled over the values because a
value's own few repeats say little about its noise and a flat sampler's values
share one noise; twice the typical spread keeps a sampler whose throughput
does not depend on the value from getting a different "best" on every rerun
(picking the largest median, argmax, follows the noise: simulated with 4-6
values, 3 repeats and +-10-20% noise, the smallest value is kept in 96-99% of
sweeps; ``test_a_flat_noisy_sampler_keeps_its_smallest_value`` holds it to 93%), and the median keeps one erratic value (a run that stalled) from
widening the band until a real 2x difference no longer counts. A real
difference larger than the noise still separates the values.

The same test marks neighbours in the table (``~16``: not distinguishable from
16), so no row contradicts the recommendation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # result -> report -> rule: the type is for annotations only
    from gyreprof.analysis.sweep.result import SweepPoint

RULE = (
    "the smallest value whose median throughput is not distinguishable from the best "
    "median; two medians are distinguishable when the larger exceeds the smaller by more "
    "than (1 + flat_within) x (1 + noise), the noise being twice the median over the values "
    "of the relative min-max spread of samples/s"
)


def noise(points: Sequence[SweepPoint]) -> float:
    """The sweep's run-to-run noise: twice the median, over the clean values, of the
    relative spread of samples/s over each value's repeats (0 when no value has two
    runs; see the module docstring)."""
    widths = [
        (p.spread[1] - p.spread[0]) / p.samples_per_s
        for p in points
        if p.ok and p.samples_per_s > 0 and not math.isnan(p.spread[1] - p.spread[0])
    ]
    return 2.0 * statistics.median(widths) if widths else 0.0


def distinguishable(a: float, b: float, flat_within: float, noise_: float) -> bool:
    """The larger of medians ``a`` and ``b`` exceeds the smaller by more than
    ``(1 + flat_within) * (1 + noise_)`` (see the module docstring)."""
    hi, lo = max(a, b), min(a, b)
    if not lo > 0:
        return hi > 0
    return hi / lo > (1.0 + flat_within) * (1.0 + noise_)
