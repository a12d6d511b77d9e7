"""The raw events of a Profiler's rings, read once: the one reader of its recorders' rings.

A :class:`gyreprof.recording.source.Source` built from a live Profiler reads its rings through
:func:`read_rings` the first time analysis or an export asks for raw events; nothing
under ``gyreprof.analysis`` or ``gyreprof.export`` touches a Recorder itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gyreprof._core import EVENT_DTYPE
from gyreprof._support.block import StatsBlock

if TYPE_CHECKING:
    from gyreprof.recording.profiler import Profiler

__all__ = ["Rings", "read_rings"]


@dataclass(frozen=True)
class Rings:
    """What the rings of one Profiler held when read (times are monotonic-clock ns).

    ``parts`` are the events of each recorder (thread) in ring order, ``events`` all of
    them in time order. Recorder (thread) ``i`` is numbered ``i + 1`` in ``tids`` and
    ``steady_start_ns``.
    """

    phases: tuple[str, ...]
    parts: tuple[np.ndarray, ...]
    events: np.ndarray
    steady_start_ns: dict[int, int]  # tid -> ns its warm-up ended (only tids that did)
    warmup_end_step: int  # the last warm-up step over the recorders; -1: none
    still_warming: bool  # some recorder is still in warm-up
    overwritten: int  # events the rings dropped, over all recorders
    per_thread: bool
    # each recorder's writer thread (Recorder.writer_token; 0: never written): two
    # Profilers whose rings name the same single writer were stepped on one thread
    writers: tuple[int, ...] = ()

    @property
    def tids(self) -> np.ndarray:
        """The tid of each event of ``np.concatenate(parts)`` (1-based)."""
        if not self.parts:
            return np.zeros(0, dtype=np.int32)
        return np.concatenate(
            [np.full(len(p), i, dtype=np.int32) for i, p in enumerate(self.parts, start=1)]
        )


def read_rings(prof: Profiler) -> Rings:
    """Copy the rings of ``prof`` (running or finished) and their warm-up facts."""
    recs = list(prof.recorders)
    parts = tuple(r.events() for r in recs)
    steady: dict[int, int] = {}
    for i, rec in enumerate(recs, start=1):
        s = StatsBlock.of(rec).steady_start_ns
        if s > 0:
            steady[i] = s
    if not parts:
        events = np.zeros(0, dtype=EVENT_DTYPE)
    elif len(parts) == 1:
        events = parts[0]
    else:
        events = np.concatenate(parts)
        events = events[np.argsort(events["start_ns"], kind="stable")]
    return Rings(
        phases=tuple(prof.phases),
        parts=parts,
        events=events,
        steady_start_ns=steady,
        warmup_end_step=max((StatsBlock.of(r).warmup_end_step for r in recs), default=-1),
        still_warming=any(r.in_warmup_now for r in recs),
        overwritten=sum(int(r.overwritten) for r in recs),
        per_thread=bool(prof.per_thread),
        writers=tuple(int(r.writer_token) for r in recs),
    )
