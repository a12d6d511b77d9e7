"""Wait-ratio edges the easy cases miss, on profiles built from known durations."""

from __future__ import annotations

import pytest

import gyreprof as gp

MS = 1_000_000


def _trainer(waits_ns: list[int], compute_ns: int) -> gp.Profiler:
    tp = gp.Profiler(["wait", "compute"], window_steps=10)
    for w in waits_ns:
        tp.begin()
        tp.record("wait", w)
        tp.record("compute", compute_ns)
    tp.end()
    return tp


def test_a_window_at_exactly_the_spike_factor_spikes() -> None:
    """'At least 3x the median' includes 3x itself; just below it does not spike."""
    waits = [3 * MS] * 100
    for i in range(30, 40):
        waits[i] = 9 * MS  # exactly 3.0x the median window
    for i in range(70, 80):
        waits[i] = 9 * MS - 1_000  # just under 3x
    rep = gp.wait_report(_trainer(waits, MS), window_steps=10)
    assert rep.thresholds["spike_factor"] == 3.0
    assert [s.first_step for s in rep.spikes] == [31]
    assert rep.spikes[0].factor == pytest.approx(3.0)
    assert rep.ratio == pytest.approx(sum(waits) / (sum(waits) + 100 * MS))
