"""The training timeline (``gyreprof.integrations._auto.timeline.Timeline``, the base of
``state.ThreadState``) driven directly: the data wait's block, the default trainer's block
close into a trainer step and its counter, the gate of counted waits, the TSC-free request
wait, the no-grad classification, and its refusals (unbound, bad arguments, another
thread)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gyreprof.integrations._auto import records as rec
from gyreprof.integrations._auto.timeline import Timeline
from gyreprof.recording.profiler import Profiler

FWD = rec.SAMPLER_PHASES.index("fwd")


def _bound() -> tuple[Timeline, Profiler, Profiler]:
    sampler = Profiler(rec.SAMPLER_PHASES, capacity=1 << 8, label="test-timeline")
    trainer = Profiler(rec.TRAINER_PHASES, capacity=1 << 8, window_steps=1, label="test-timeline")
    t = Timeline()
    t.bind(sampler.recorder, trainer.recorder, trainer, FWD, threading.get_ident())
    return t, sampler, trainer


def _counters(trainer: Profiler) -> dict[str, int]:
    return dict(trainer.progress().counters)


def test_fields_start_empty_and_are_attributes() -> None:
    t, _, _ = _bound()
    assert (t.blk_start, t.blk_end, t.prev_end, t.pend_start, t.pend_end, t.last_start) == (
        -1,
        -1,
        -1,
        -1,
        -1,
        -1,
    )
    assert (t.blocks, t.trains, t.framework, t.in_wait, t.step_open) == (
        0,
        False,
        False,
        False,
        False,
    )
    assert t.ident == threading.get_ident()
    t.blk_start = 5
    assert t.blk_start == 5


def test_a_thread_that_does_not_train_keeps_its_block_open() -> None:
    t, _, trainer = _bound()
    t.data_wait(100, 200, False, 0)
    t.data_wait(50, 150, True, 0)
    assert (t.blk_start, t.blk_end, t.blk_own) == (50, 200, True)
    t.data_wait(250, 400, False, 0)  # the block spans the earliest start to the latest end
    assert (t.blk_start, t.blk_end, t.blk_own) == (50, 400, True)
    assert t.blocks == 0 and not t.step_open
    assert trainer.recorder.progress()[0] == 0  # no trainer step begun
    assert _counters(trainer) == {}


def test_the_default_trainer_closes_a_block_per_wait() -> None:
    t, _, trainer = _bound()
    me = threading.get_ident()
    t.data_wait(1_000, 3_000, False, me)  # fed: made elsewhere
    assert (t.blocks, t.step_open, t.prev_end, t.last_start, t.last_own) == (
        1,
        True,
        3_000,
        1_000,
        False,
    )
    assert (t.blk_start, t.blk_end, t.blk_own) == (-1, -1, False)
    assert t.provisional
    t.data_wait(5_000, 9_000, True, me)  # own: a request the thread made itself
    assert (t.blocks, t.prev_end, t.last_start, t.last_own) == (2, 9_000, 5_000, True)
    assert _counters(trainer) == {"loop.fed": 1, "loop.own": 1}
    trainer.recorder.end_at(12_000)
    ev = trainer.recorder.events()
    got = [
        (int(p), int(s), int(d))
        for p, s, d in zip(ev["phase"], ev["start_ns"], ev["duration_ns"], strict=True)
    ]
    # the first step: wait 1000..3000, compute 3000..5000 (closed at the next block's start)
    assert (0, 1_000, 2_000) in got and (1, 3_000, 2_000) in got and (-1, 1_000, 4_000) in got
    assert (0, 5_000, 4_000) in got  # the second step's wait
    assert trainer.recorder.progress()[1] == 2


def test_a_training_thread_closes_only_on_update() -> None:
    t, _, trainer = _bound()
    me = threading.get_ident()
    t.trains = True
    t.data_wait(1_000, 2_000, True, me)
    assert t.blocks == 0 and t.blk_end == 2_000
    t.close_block()
    assert t.blocks == 1 and not t.provisional
    t.close_block()  # nothing since: a further minibatch changes nothing
    assert t.blocks == 1
    assert _counters(trainer) == {"loop.own": 1}


def test_a_framework_thread_never_closes_on_a_wait() -> None:
    t, _, _ = _bound()
    t.framework = True
    t.data_wait(1_000, 2_000, True, threading.get_ident())
    assert t.blocks == 0


@pytest.mark.parametrize(
    ("trains", "framework", "in_wait", "default", "expected"),
    [
        (False, False, False, "me", True),
        (False, False, False, "other", False),
        (False, False, False, "none", False),
        (True, False, False, "none", True),
        (True, True, False, "none", False),
        (True, False, True, "none", False),
        (False, False, True, "me", False),
    ],
)
def test_waits_count(
    trains: bool, framework: bool, in_wait: bool, default: str, expected: bool
) -> None:
    t, _, _ = _bound()
    t.trains, t.framework, t.in_wait = trains, framework, in_wait
    main = {"me": threading.get_ident(), "other": threading.get_ident() + 1, "none": 0}[default]
    assert t.waits_count(main) is expected


def test_request_wait_is_a_gated_own_wait() -> None:
    t, _, trainer = _bound()
    t.request_wait(1_000, 2_000, 0)  # neither trains nor the default trainer: nothing
    assert (t.blk_start, t.blk_end, t.blocks) == (-1, -1, 0)
    t.trains = True
    t.request_wait(1_000, 2_000, 0)
    assert (t.blk_start, t.blk_end, t.blk_own, t.blocks) == (1_000, 2_000, True, 0)
    t2, _, trainer2 = _bound()
    t2.request_wait(1_000, 2_000, threading.get_ident())
    assert t2.blocks == 1 and _counters(trainer2) == {"loop.own": 1}


def test_classify_records_a_forward_only_when_the_sampler_wrote_after() -> None:
    t, sampler, _ = _bound()
    now = sampler.recorder.now_ns()
    t.pend_start, t.pend_end = now - 500, now - 100
    sampler.recorder.record_span(0, now - 50, now)  # an env step after the block
    t.classify()
    assert t.pend_end == -1
    ev = sampler.recorder.events()
    assert [
        (int(s), int(d))
        for p, s, d in zip(ev["phase"], ev["start_ns"], ev["duration_ns"], strict=True)
        if p == FWD
    ] == [(now - 500, 400)]
    t.pend_start, t.pend_end = now + 10, now + 20  # nothing written after it: update work
    t.classify()
    assert sum(1 for p in sampler.recorder.events()["phase"] if p == FWD) == 1


def test_the_first_block_start_goes_through_the_trim_hook() -> None:
    seen: list[tuple[int, int]] = []

    class Trimmed(Timeline):
        def _trim_start_up(self, start: int, end: int) -> int:
            seen.append((start, end))
            return start + 10

    sampler = Profiler(rec.SAMPLER_PHASES, capacity=1 << 8, label="test-timeline")
    trainer = Profiler(rec.TRAINER_PHASES, capacity=1 << 8, window_steps=1, label="test-timeline")
    t = Trimmed()
    t.bind(sampler.recorder, trainer.recorder, trainer, FWD, threading.get_ident())
    now = sampler.recorder.now_ns()
    sampler.recorder.record_span(0, now - 1_000, now - 500)  # sampled since the mark
    t.trains = True
    t.close_block()
    assert seen == [(now - 1_000, now - 500)]
    assert t.last_start == now - 990
    sampler.recorder.record_span(0, now - 400, now - 300)
    t.close_block()  # not the first block: no trim
    assert len(seen) == 1


def test_unbound_and_bad_arguments_raise_value_error() -> None:
    t = Timeline()
    for call in (
        lambda: t.data_wait(1, 2, True, 0),
        lambda: t.request_wait(1, 2, 0),
        t.close_block,
        t.classify,
    ):
        with pytest.raises(ValueError, match="not bound"):
            call()
    sampler = Profiler(rec.SAMPLER_PHASES, label="test-timeline")
    trainer = Profiler(rec.TRAINER_PHASES, label="test-timeline")
    with pytest.raises(ValueError, match="fwd phase id"):
        t.bind(sampler.recorder, trainer.recorder, trainer, 99, 1)
    with pytest.raises(ValueError, match="wait and compute"):
        t.bind(sampler.recorder, Profiler(["only"]).recorder, trainer, FWD, 1)
    with pytest.raises(TypeError):
        t.bind(None, trainer.recorder, trainer, FWD, 1)  # type: ignore[arg-type]
    b, _, _ = _bound()
    b.trains = True
    b.blk_start, b.blk_end = -5, 10  # a block with a time before the clock's zero
    with pytest.raises(ValueError, match=">= 0 ns"):
        b.close_block()


def test_a_trainer_written_by_another_thread_is_refused() -> None:
    t, _, trainer = _bound()
    t.trains = True
    t.data_wait(1_000, 2_000, True, 0)
    t.close_block()  # this thread is the trainer recorder's writer now
    t.data_wait(3_000, 4_000, True, 0)
    out: dict[str, Any] = {}

    def other() -> None:
        try:
            t.close_block()
        except RuntimeError as exc:
            out["error"] = exc

    th = threading.Thread(target=other)
    th.start()
    th.join(30)
    assert "another thread" in str(out.get("error"))
    assert t.blocks == 1 and _counters(trainer) == {"loop.own": 1}
