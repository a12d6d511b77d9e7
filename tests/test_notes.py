"""gyreprof._support.notes: the data-quality notes, worded once, and where they are used."""

from __future__ import annotations

from dataclasses import dataclass

import gyreprof as gp
from gyreprof._support import notes as _notes


@dataclass
class Counts:
    overwritten: int = 0
    out_of_range: int = 0
    negative: int = 0
    nonfinite: int = 0


def test_one_note_per_counter_that_is_not_zero() -> None:
    assert _notes.data_quality(Counts()) == []
    notes = _notes.data_quality(Counts(overwritten=3, negative=2, nonfinite=1))
    assert notes == [
        "3 events overwritten in the ring (histograms keep them)",
        "2 negative durations ignored",
        "1 NaN/inf durations ignored",
    ]
    # readers of the histograms only: an overwritten ring loses them nothing
    assert _notes.data_quality(Counts(overwritten=3), overwritten=False) == []


def test_a_real_summary_is_read_the_same_way() -> None:
    prof = gp.Profiler(["env"], capacity=16)
    for _ in range(40):
        prof.begin()
        prof.record("env", 1000)
    prof.record("env", -1)
    prof.end()
    notes = _notes.data_quality(prof.summary())
    assert "1 negative durations ignored" in notes
    assert any("overwritten in the ring" in n for n in notes)


def test_overhead_and_warmup_wording() -> None:
    assert _notes.overhead(0.125) == "the profiler itself took 12.5% of the wall time"
    assert "(above 5.0%): time fewer" in _notes.overhead(0.125, 0.05)
    assert _notes.warmup_not_excluded("; e.g. X").startswith("warm-up was not excluded")
    assert "; e.g. X; pass Profiler(warmup_steps=...)" in _notes.warmup_not_excluded("; e.g. X")
    assert "overwrote 7 old events" in _notes.ring_overwritten(7)
