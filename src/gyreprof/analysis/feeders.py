"""A trainer whose feeder died (issue 38): which death, if any, left it starving.

``gyreprof run`` keeps each thread or process of the run that died of an exception
(``integrations._auto.deaths``). A death is the trainer's *feeder's* when the trainer's
own timeline changed at it: from the death to the end of the run the trainer waited at
least :data:`STARVED` of the time, and as much in the first half of that time alone (it
starved from the death on, not only at the end), and at least :data:`RISE` more than
before it (or it had no step before it). The end of the run is when the trainer's profile was taken: the
time after its last step, with no step closed, was spent waiting (an open step's compute
is closed at save).

The rise and the first half are what make the rule: a thread that dies while the trainer
keeps its pace (a logger, a progress reporter) is not its feeder, even when the trainer
waits most of the time anyway (a sampler-bound loop), or starves later, when the real
feeder dies. A death in the trainer's own thread is the program's
own end, not a feeder's; those are left out by the caller.

**A backlog.** A feeder that dies with items left in its queue (``Death.backlog``)
starves the trainer only once those are taken: the trainer keeps its pace for a while
(each item ready, so a step is its compute alone), then waits to the end. The first
half after the death then holds that pace, and the rule above would reject the death
once the backlog lasts more than about a ninth of the stall. So the starvation may
start later, at a step's start after the death, but no later than the backlog allows:
(backlog + 1) of the trainer's mean computes, times :data:`DRAIN_SLACK`. A death that
left 3 items cannot explain a trainer that kept its pace for 2 s more (another feeder
fed it); one that left 40 items of 30 ms each explains 1.2 s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: from the death on, the trainer waited at least this share of the time
STARVED = 0.8
#: and this much more than before the death
RISE = 0.2
#: over at least this long (s): a death just before the end changes nothing measurable
MIN_AFTER_S = 0.3
#: a backlog is taken within this many times its items' worth of the trainer's compute
DRAIN_SLACK = 2.0
#: onsets tried after a death (each one a pass over the trainer's steps)
MAX_ONSETS = 256


@dataclass(frozen=True)
class DeadFeeder:
    """The death that left the trainer starving: who died, of what, where, when (s into the
    trainer's run), and the trainer's wait share after it (and before, when it stepped
    before). ``backlog`` items were left in its queue (-1: unknown), which the trainer
    took in the ``drained_s`` before it starved (0: it starved at once; ``after_s`` and
    ``wait_after`` are from then on). ``short`` is the headline's words, ``words`` the reason's, ``next`` the
    advice's."""

    who: str
    exc_type: str
    message: str
    where: str
    function: str
    at_s: float
    wait_after: float
    after_s: float
    wait_before: float | None
    backlog: int
    drained_s: float
    short: str
    words: str
    next: str


def _spans(trainer: Any) -> tuple[list[tuple[int, int, int]], int] | None:
    """The trainer's steps as (start, wait end, end) ns and the end of its run; None with
    no step."""
    out = []
    for w in trainer.windows():
        if w.steps != 1 or w.end_ns <= w.start_ns:
            return None  # windows of several steps: where the waits lie is unknown
        st = w.phases.get("wait")
        wait_ns = int(st.mean * st.count) if st is not None else 0
        out.append((w.start_ns, min(w.end_ns, w.start_ns + wait_ns), w.end_ns))
    if not out:
        return None
    end = max(int(trainer.times.taken_ns), out[-1][2])
    return out, end


def _waited(spans: Sequence[tuple[int, int, int]], lo: int, hi: int, end: int) -> int:
    """ns waited in [lo, hi): each step's wait, and the time after the last step (to
    ``end``), clipped."""
    total = 0
    for start, wait_end, _ in spans:
        a, b = max(start, lo), min(wait_end, hi)
        if b > a:
            total += b - a
    a, b = max(spans[-1][2], lo), min(end, hi)
    return total + max(0, b - a)


def find(deaths: Iterable[Any], trainer: Any) -> DeadFeeder | None:
    """The first death (``deaths.Death``, oldest first) after which ``trainer`` (a trainer
    snapshot of one-step windows, as ``gyreprof run`` closes them) starved, at once or once
    the backlog it left was taken; None when none did, or the trainer's timeline cannot
    say."""
    got = _spans(trainer) if trainer is not None else None
    if got is None:
        return None
    spans, end = got
    first = spans[0][0]
    compute = sum(e - w for _, w, e in spans) / len(spans)
    for d in sorted(deaths, key=lambda d: d.at_ns):
        at = max(int(d.at_ns), first)
        before = _waited(spans, first, at, end) / (at - first) if at - first > 0 else None
        backlog = int(getattr(d, "backlog", -1))
        latest = at + int(DRAIN_SLACK * (max(backlog, 0) + 1) * compute) if backlog > 0 else at
        for onset in _onsets(spans, at, latest):
            after = _starved(spans, onset, end)
            if after is None or (before is not None and after < before + RISE):
                continue
            return _feeder(
                d,
                (at - first) / 1e9,
                after,
                (end - onset) / 1e9,
                before,
                backlog,
                (onset - at) / 1e9,
            )
    return None


def _onsets(spans: Sequence[tuple[int, int, int]], at: int, latest: int) -> list[int]:
    """Where the starvation may start: the death itself, then each step's start up to
    ``latest`` (at most :data:`MAX_ONSETS`, evenly thinned: each is a pass over the
    steps)."""
    later = [s for s, _, _ in spans if at < s <= latest]
    if len(later) > MAX_ONSETS:
        later = later[:: -(-len(later) // MAX_ONSETS)]
    return [at, *later]


def _starved(spans: Sequence[tuple[int, int, int]], onset: int, end: int) -> float | None:
    """The trainer's wait share from ``onset`` to the end of its run when it starved from
    then on: at least :data:`STARVED` over the whole stretch and its first half alone, over
    at least :data:`MIN_AFTER_S`; None otherwise."""
    after_ns = end - onset
    if after_ns < MIN_AFTER_S * 1e9:
        return None
    after = _waited(spans, onset, end, end) / after_ns
    half = _waited(spans, onset, onset + after_ns // 2, end) / (after_ns // 2)
    return after if min(after, half) >= STARVED else None


def _feeder(
    d: Any,
    at_s: float,
    after: float,
    after_s: float,
    before: float | None,
    backlog: int,
    drained_s: float,
) -> DeadFeeder:
    from gyreprof._support.format import fmt_pct

    what = d.words()
    was = f" (against {fmt_pct(before)} before)" if before is not None else ""
    left = (
        f"it left {backlog} item{'s' if backlog != 1 else ''} in its queue, and the "
        f"trainer kept stepping on those for {drained_s:.2f} s; then "
        if drained_s > 0
        else "from then on "
    )
    return DeadFeeder(
        who=d.who,
        exc_type=d.exc_type,
        message=d.message,
        where=d.where(),
        function=d.function,
        at_s=at_s,
        wait_after=after,
        after_s=after_s,
        wait_before=before,
        backlog=backlog,
        drained_s=drained_s,
        short=f"its feeder, {d.who}, died: {d.exc_type} at {d.where()} ({d.function})",
        words=(
            f"{d.who} died {at_s:.2f} s into the trainer's run: {what}; {left}the "
            f"trainer waited {fmt_pct(after)} of {after_s:.2f} s{was}: what fed it is gone"
        ),
        next=(
            f"fix what ended {d.who}: {what}; the wait after it is starvation, so no sampler "
            "setting helps until it runs again"
        ),
    )
