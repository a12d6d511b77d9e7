"""The Recorder's placed-afterwards forms (``begin_at``/``lap_at``/``end_at``/``record_span``)
and its first-write-since-mark stamp, which the run's training-thread timeline reads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gyreprof._core import Recorder


def _whole_steps(rec: Recorder) -> np.ndarray:
    ev = rec.events()
    return ev[ev["phase"] == -1]


def test_at_forms_place_the_boundaries_given() -> None:
    rec = Recorder(2, window_steps=1)
    t = rec.now_ns()
    rec.begin_at(t)
    rec.lap_at(0, t + 100)
    rec.lap_at(1, t + 350)
    rec.begin_at(t + 400)  # closes step 1 at t + 400
    rec.lap_at(0, t + 450)
    rec.end_at(t + 1000)
    ev = rec.events()
    laps = ev[ev["phase"] >= 0]
    assert laps["start_ns"].tolist() == [t, t + 100, t + 400]
    assert laps["duration_ns"].tolist() == [100, 250, 50]
    steps = _whole_steps(rec)
    assert steps["duration_ns"].tolist() == [400, 600]
    assert rec.last_write_ns() == t + 1000
    assert rec.stats_array()[5] == 0  # H_NEGATIVE


def test_at_forms_agree_with_the_clock_forms() -> None:
    """The clock forms are the _at forms at now: the same events for the same times."""
    a, b = Recorder(2), Recorder(2)
    a.begin()
    a.lap(0)
    a.lap(1)
    a.end()
    ea = a.events()
    starts = ea["start_ns"].tolist()
    b.begin_at(starts[2])
    b.lap_at(0, starts[1])
    b.lap_at(1, starts[1] + int(ea["duration_ns"][1]))
    b.end_at(starts[2] + int(ea["duration_ns"][2]))
    eb = b.events()
    assert eb["phase"].tolist() == ea["phase"].tolist()
    assert eb["duration_ns"].tolist() == ea["duration_ns"].tolist()


def test_a_time_before_the_open_boundary_is_counted_never_raised() -> None:
    rec = Recorder(2)
    t = rec.now_ns()
    rec.begin_at(t + 1000)
    rec.lap_at(0, t + 500)  # before the step began: negative
    rec.begin_at(t)  # closes the step before it began: negative
    rec.end_at(t - 10 if t > 10 else 0)
    rec.record_span(1, t + 50, t + 20)  # ends before it starts
    assert rec.stats_array()[5] == 4  # H_NEGATIVE
    assert len(rec.events()) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True, 1 << 64])
def test_bad_timestamps_are_refused_clearly(bad: object) -> None:
    rec = Recorder(2)
    for call in (
        lambda: rec.begin_at(bad),  # type: ignore[arg-type]
        lambda: rec.lap_at(0, bad),  # type: ignore[arg-type]
        lambda: rec.end_at(bad),  # type: ignore[arg-type]
        lambda: rec.record_span(0, bad, 10),  # type: ignore[arg-type]
        lambda: rec.record_span(0, 10, bad),  # type: ignore[arg-type]
    ):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            call()
    assert rec.stats_array()[3] == 0  # nothing written


def test_since_mark_is_the_first_write_after_the_mark() -> None:
    rec = Recorder(3)
    timer = rec.timer(2)
    assert rec.since_mark_ns() == -1  # nothing written yet
    assert rec.last_write_ns() == 0
    with timer:
        pass
    first = rec.since_mark_ns()
    assert first > 0
    with timer:
        pass
    assert rec.since_mark_ns() == first  # only the first write stamps it
    rec.mark_since()
    assert rec.since_mark_ns() == -1
    assert rec.last_write_ns() >= first  # the last write is kept across a mark
    before = rec.now_ns()
    rec.record(1, 10)
    assert rec.since_mark_ns() >= before
    for write in (rec.begin, lambda: rec.lap(0), rec.end):
        rec.mark_since()
        t0 = rec.now_ns()
        write()
        assert rec.since_mark_ns() >= t0
    rec.mark_since()
    rec.end()  # no open step: not a write
    assert rec.since_mark_ns() == -1


def test_record_span_places_the_span_and_opens_the_since_span_at_its_start() -> None:
    rec = Recorder(2)
    t = rec.now_ns()
    with rec.timer(0):
        pass
    stamped = rec.since_mark_ns()
    rec.record_span(1, t - 500, t - 100)  # ran before the timed phase
    assert rec.since_mark_ns() == t - 500 < stamped
    ev = rec.events()
    span = ev[ev["phase"] == 1]
    assert span["start_ns"].tolist() == [t - 500]
    assert span["duration_ns"].tolist() == [400]
    assert rec.last_write_ns() >= t  # an earlier span does not move the last write back
    rec.record_span(1, rec.now_ns(), rec.now_ns() + 10**9)
    assert rec.last_write_ns() > t + 10**8


def test_the_at_forms_keep_the_single_writer_rule() -> None:
    rec = Recorder(2)
    rec.begin_at(rec.now_ns())
    errors: list[BaseException] = []

    def other() -> None:
        try:
            rec.lap_at(0, rec.now_ns())
        except RuntimeError as exc:
            errors.append(exc)

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert len(errors) == 1
