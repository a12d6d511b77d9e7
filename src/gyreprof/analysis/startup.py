"""Start-up told apart from the steady state when no warm-up rule was given.

``gyreprof run`` starts its trainer profiler with no warm-up unless it is asked for
one (``--warmup-steps`` / ``--warmup-s``). The trainer's first step then holds
whatever the first batch had to wait for: collector workers starting, a replay
buffer filled before the first update, a server's first compile. One such wait can
outweigh every later one together, and it turns a trainer-bound run sampler-bound
(a TorchRL MultiAsync collector: 1.17 s for the first batch, 5 ms for each later one;
a wait ratio of 28% where the steady state waits 2.5%).

:func:`find` reads a trainer snapshot and says whether its first step was such a
start-up: its wait at least ``OVER_MEDIAN`` times the median wait of the other steps
*and* ``OVER_MAX`` times the longest of them (a stall that comes back later is the
run's own, not start-up), with at least ``MIN_REST`` steps after it, and leaving it
out moving the wait ratio by at least ``MIN_MOVE``. It then gives the snapshot with
that step counted as warm-up, as ``warmup_steps=1`` would have recorded it
(:meth:`Snapshot.first_step_as_warmup`), and the figures both ways, so a report can judge the
steady state and still say what the run reads with its start-up in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gyreprof._support.errors import InvalidValueError
from gyreprof.model.snapshot import Snapshot

__all__ = ["MIN_MOVE", "MIN_REST", "OVER_MAX", "OVER_MEDIAN", "StartUp", "find"]

#: the first wait is start-up when it is at least this many times the others' median
OVER_MEDIAN = 10.0
#: ... and at least this many times the longest of the others
OVER_MAX = 3.0
#: ... with at least this many steps after it to compare with
MIN_REST = 3
#: ... and leaving it out moves the wait ratio by at least this much
MIN_MOVE = 0.01


@dataclass(frozen=True)
class StartUp:
    """The trainer's first step, told apart as start-up (ns; ratios 0..1).

    ``wait_ns`` is the first step's wait, ``rest_p50_ns`` / ``rest_max_ns`` the median
    and the longest wait of the ``rest_steps`` steps after it; ``ratio_with`` the wait
    ratio with the first step in, ``ratio_without`` without it; ``bound_with`` what the
    verdict reads with it in (filled in by the caller that judged both)."""

    wait_ns: float
    rest_p50_ns: float
    rest_max_ns: float
    rest_steps: int
    ratio_with: float
    ratio_without: float
    bound_with: str | None = None
    # the trainer's snapshot with its first step counted as warm-up (never written)
    _snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            raise InvalidValueError("this start-up was read back from a record: no snapshot")
        return self._snapshot


def _ratio(snap: Snapshot, wait: str, compute: str) -> float:
    w, c = snap.row(wait).sum, snap.row(compute).sum
    return w / (w + c) if w + c > 0 else float("nan")


def find(snap: Snapshot, wait: str = "wait", compute: str = "compute") -> StartUp | None:
    """The trainer's first step as start-up (see the module's rules), or None when it was
    not one, or the snapshot cannot say (a warm-up rule of its own, several stepping
    sources, too few steps)."""
    if wait not in snap.phases or compute not in snap.phases:
        return None
    try:
        steady = snap.first_step_as_warmup()
    except InvalidValueError:
        return None
    first = float(snap.row(wait).first)
    rest = steady.summary().phases[wait]
    if rest.count < MIN_REST:
        return None
    if first < OVER_MEDIAN * rest.p50 or first < OVER_MAX * rest.max:
        return None
    with_it, without = _ratio(snap, wait, compute), _ratio(steady, wait, compute)
    if not abs(with_it - without) >= MIN_MOVE:
        return None
    return StartUp(
        wait_ns=first,
        rest_p50_ns=float(rest.p50),
        rest_max_ns=float(rest.max),
        rest_steps=int(rest.count),
        ratio_with=with_it,
        ratio_without=without,
        _snapshot=steady,
    )
