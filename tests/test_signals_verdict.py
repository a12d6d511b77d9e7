"""``diagnose(loop=..., loop_evidence=...)``: a shape read from the training thread's
timeline is named as such (``loop_source="timeline"``), not as declared by the user."""

from __future__ import annotations

import pytest

import gyreprof as gp


def _trainer(wait_ns: int, compute_ns: int, steps: int = 20) -> gp.Snapshot:
    tp = gp.Profiler(["wait", "compute"])
    rec = tp.recorder
    t = rec.now_ns()
    for _ in range(steps):
        rec.begin_at(t)
        rec.lap_at(0, t + wait_ns)
        t += wait_ns + compute_ns
        rec.lap_at(1, t)
    rec.end_at(t)
    return tp.snapshot()


def test_a_timeline_shape_is_named_with_its_evidence() -> None:
    words = "from the training thread's timeline: it sampled itself in 20 of 20 blocks"
    v = gp.diagnose(trainer=_trainer(700_000, 300_000), loop="sync", loop_evidence=words)
    assert v.loop == "sync" and v.loop_source == "timeline"
    assert v.loop_evidence == words
    assert any(words in r for r in v.reasons)
    assert v.bound == "sampler"  # the synchronous rule: 70% wait is the larger share
    declared = gp.diagnose(trainer=_trainer(700_000, 300_000), loop="sync")
    assert declared.loop_source == "declared"


def test_evidence_needs_a_shape() -> None:
    with pytest.raises(TypeError, match="loop_evidence"):
        gp.diagnose(trainer=_trainer(1000, 1000), loop_evidence="words")
    with pytest.raises(TypeError, match="loop_evidence"):
        gp.diagnose(trainer=_trainer(1000, 1000), loop="sync", loop_evidence=3)  # type: ignore[arg-type]
