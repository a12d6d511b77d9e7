"""Decision rules on constructed evidence, where the naive rule answers wrongly.

- the verdict's loop shape, read from where the sampler's work falls in the
  trainer's time, and the rule for each shape (a synchronous loop waiting 30% is
  trainer-bound; an overlapped one waiting 30% is sampler-bound);
- the doctor's states from its evidence (no progress signal and a busy CPU is
  ``busy``, never ``progressing`` nor ``spinning``);
- the first dimension of an array is its sample count.

The event time lines are built here (the profiles' own durations, placed on a
schedule), so each case is exact and fast; the real threads, processes and SB3
runs are in test_verdict.py and test_doctor.py.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import psutil
import pytest

import gyreprof as gp
from gyreprof._support.sample_count import count_samples
from gyreprof.analysis.verdict import diagnose
from gyreprof.diagnostics.doctor import SPIN_CPU_SHARE, _Progress, _state
from gyreprof.recording.events import EventsFile

MS = 1_000_000
T0 = 10**12  # an arbitrary monotonic start, ns
STEPS = 60


def _events(dtype: np.dtype, rows: list[tuple[int, int, int, int]]) -> np.ndarray:
    """Events (phase, step, start_ns, duration_ns) in start order; phase -1 is a whole step."""
    ev = np.zeros(len(rows), dtype=dtype)
    for i, (phase, step, start, dur) in enumerate(sorted(rows, key=lambda r: r[2])):
        ev[i]["phase"], ev[i]["step"] = phase, step
        ev[i]["start_ns"], ev[i]["duration_ns"] = start, dur
    return ev


def _trainer(wait_ns: int, compute_ns: int) -> EventsFile:
    """A trainer that waits, then computes, ``STEPS`` times back to back."""
    tp = gp.Profiler(["wait", "compute"])
    for _ in range(STEPS):
        tp.begin()
        tp.record("wait", wait_ns)
        tp.record("compute", compute_ns)
    tp.end()
    ef = EventsFile.from_profiler(tp)
    period = wait_ns + compute_ns
    rows = []
    for k in range(STEPS):
        t = T0 + k * period
        rows += [
            (0, k + 1, t, wait_ns),
            (1, k + 1, t + wait_ns, compute_ns),
            (-1, k + 1, t, period),
        ]
    return replace(ef, events=_events(ef.events.dtype, rows), unix_offset_ns=0)


def _sampler(work_ns: int, period_ns: int, offset_ns: int) -> EventsFile:
    """A sampler that works ``work_ns`` of every ``period_ns`` (from ``offset_ns`` into each
    trainer step) and marks steps that span the whole period, idle time included (a worker
    waiting for the next request until its next begin())."""
    sp = gp.Profiler(["env"])
    for _ in range(STEPS):
        sp.begin()
        sp.record("env", work_ns)
    sp.end()
    ef = EventsFile.from_profiler(sp)
    rows = []
    for k in range(STEPS):
        t = T0 + k * period_ns + offset_ns
        rows += [(0, k + 1, t, work_ns), (-1, k + 1, t, period_ns)]
    return replace(ef, events=_events(ef.events.dtype, rows), unix_offset_ns=0)


# ------------------------------------------------------------- the verdict's loop shape


def test_synchronous_loop_waiting_30_percent_is_trainer_bound() -> None:
    # collect (3 ms, inside the trainer's wait), then train (7 ms): the sampler is idle
    # while the trainer computes, though its marked steps span that idle time
    tr = _trainer(3 * MS, 7 * MS)
    v = diagnose(sampler=_sampler(int(2.7 * MS), 10 * MS, 0), trainer=tr)
    assert v.loop == "sync" and v.loop_source == "detected", v.loop_evidence
    assert v.wait_ratio == pytest.approx(0.3)
    # the naive rule (waiting >= 10% -> sampler-bound) calls this sampler-bound
    assert v.bound == "trainer", str(v)
    assert "synchronous loop" in str(v)


def test_overlapped_pipeline_waiting_30_percent_is_sampler_bound() -> None:
    # the sampler works 9 ms of every 10, across the trainer's wait and compute alike
    tr = _trainer(3 * MS, 7 * MS)
    v = diagnose(sampler=_sampler(9 * MS, 10 * MS, 2 * MS), trainer=tr)
    assert v.loop == "overlapped" and v.loop_source == "detected", v.loop_evidence
    assert v.bound == "sampler", str(v)


def test_synchronous_rule_is_the_larger_share_of_wall_time() -> None:
    # waits 60%: in a synchronous loop collecting holds the larger share
    tr = _trainer(6 * MS, 4 * MS)
    v = diagnose(sampler=_sampler(int(5.5 * MS), 10 * MS, 0), trainer=tr)
    assert v.loop == "sync", v.loop_evidence
    assert v.bound == "sampler", str(v)
    # and 30% declared synchronous, without a sampler: trainer-bound by the same rule
    assert diagnose(trainer=_trainer(3 * MS, 7 * MS), loop="sync").bound == "trainer"
    assert diagnose(trainer=_trainer(3 * MS, 7 * MS), loop="overlapped").bound == "sampler"


# ------------------------------------------------------------------ the doctor's states


def _progress(progressed: bool | None) -> _Progress:
    return _Progress("test", progressed, ["constructed evidence"])


RUNNING = psutil.STATUS_RUNNING


@pytest.mark.parametrize(
    ("progressed", "cpu_share", "running_share", "state"),
    [
        (True, 0.9, 1.0, "progressing"),  # busy and moving: work
        (True, 0.0, 0.0, "progressing"),
        (None, 0.9, 1.0, "busy"),  # no signal: CPU time alone is not progress, nor a stall
        (None, 0.01, 0.0, "blocked"),
        (False, 0.9, 1.0, "spinning"),  # a signal that stands still, CPU burning
        (False, 0.9, 0.0, "spinning"),
        (False, 0.01, 0.0, "blocked"),
        (False, 0.01, 0.9, "spinning"),  # a crowded machine: runnable, little CPU
        (False, None, 0.0, "blocked"),
    ],
)
def test_doctor_state_from_its_evidence(
    progressed: bool | None, cpu_share: float | None, running_share: float, state: str
) -> None:
    got, _ = _state(RUNNING, _progress(progressed), cpu_share, running_share, 12345)
    assert got == state


def test_doctor_cpu_threshold_is_inclusive() -> None:
    at = _state(RUNNING, _progress(False), SPIN_CPU_SHARE, 0.0, 1)[0]
    below = _state(RUNNING, _progress(False), SPIN_CPU_SHARE * 0.5, 0.0, 1)[0]
    assert (at, below) == ("spinning", "blocked")
    busy, why = _state(RUNNING, _progress(None), SPIN_CPU_SHARE, 0.0, 1)
    assert busy == "busy" and "no progress signal" in why[0]


def test_stopped_process_is_blocked_whatever_its_evidence() -> None:
    state, why = _state(psutil.STATUS_STOPPED, _progress(True), 0.9, 1.0, 77)
    assert state == "blocked" and "kill -CONT 77" in why[0]


# ---------------------------------------------------------------- a sampler's return value


def test_an_array_counts_its_first_dimension() -> None:
    assert count_samples(np.zeros((5, 3))).n == 5
    assert count_samples(np.zeros((2, 7, 4))).n == 2
    assert count_samples({"obs": np.zeros((6, 2)), "rew": np.zeros(6)}).n == 6


# ------------------------------------------------------------- a rollout service's cause

UNDERFED = {
    "kind": "under-concurrency",
    "endpoint": "http://127.0.0.1:8000/v1/chat/completions",
    "short": "the client sends too few requests at once (2)",
    "words": "the client keeps at most 2 requests in flight; the server queued none",
    "next": "raise the rollout concurrency from 2 to about 16",
}


def test_a_rollout_cause_leads_only_where_the_trainer_waits_the_larger_share() -> None:
    """The naive rule names a found cause always. A real vLLM answering in 16 ms beside a
    20 ms update waited 44%: trainer-bound, and raising the concurrency is not the first
    thing to do; at 60% the cause leads the advice."""
    sync = {"loop": "sync", "rollout_cause": UNDERFED}  # the real run's shape, from its timeline
    low = diagnose(trainer=_trainer(44 * MS // 10, 56 * MS // 10), **sync)
    assert low.bound == "trainer" and low.rollout_cause is None, str(low)
    assert UNDERFED["next"] not in low.advice
    high = diagnose(trainer=_trainer(6 * MS, 4 * MS), **sync)
    assert high.bound == "sampler" and high.rollout_cause == UNDERFED, str(high)
    assert high.advice[0] == UNDERFED["next"]
    assert f"rollouts: {UNDERFED['words']}" in high.reasons
