"""RecorderSet: the one owner of a Profiler's recordings.

A Profiler has one compiled Recorder (or, with ``per_thread=True``, one per
thread). Everything that reads or keeps them goes through the Profiler's
:class:`RecorderSet`: the Profiler's read side, thread retirement (finished
threads folded into one Snapshot), autosave (``gyreprof.recording._autosave``) and live
publishing (``gyreprof.live.publish``). The set holds the profiler's identity
(phases, label, lap cost) and its counter names, so no one keeps a copy.

One builder, :meth:`RecorderSet.snapshot`, serves three forms:

- ``"copy"``: every recorder's stats block copied whole (``Profiler.snapshot``);
- ``"in_place"``: the counts rows are a view of each recorder's live block, the
  rolling windows cut to ``window_words`` (autosave encodes it at once and checks
  the row sums afterwards; valid only while no one writes);
- ``"compact"``: as ``"in_place"`` but the counts copied (thread retirement, and an
  autosave that lost its race against a writer ``_TRIES`` times).

The hot path (``lap``/``begin``/``end``) never comes here: the Profiler binds the
Recorder's own methods, and a per-thread profiler's thread-local lookup only calls
:meth:`RecorderSet.new` the first time a thread records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

from gyreprof._core import PhaseTimer, Recorder, monotonic_ns
from gyreprof._support.block import StatsBlock
from gyreprof._support.errors import UnknownPhaseError
from gyreprof.model.snapshot import (
    Meta,
    ProfilerIdentity,
    Snapshot,
    SourceRecord,
    build_snapshot,
    merge,
)
from gyreprof.recording._autosave import WINDOW_WORDS_CAP

Form = Literal["copy", "in_place", "compact"]

FOLD_AFTER = 8  # finished threads' recorders kept before they are folded


class TimerMap(dict[str, PhaseTimer]):
    """name -> PhaseTimer; a miss raises UnknownPhaseError listing the known names."""

    def __missing__(self, key: object) -> PhaseTimer:
        raise UnknownPhaseError(f"unknown phase {key!r}; known phases: {list(self)}")


class RecorderSet:
    """A Profiler's recorders, its identity and counter names, and its finished threads.

    Thread retirement: a thread's recorder is queued when the thread ends (its
    thread-local storage is dropped, :meth:`thread_ended`) and folded,
    ``FOLD_AFTER`` at a time, into ``retired`` (one Snapshot) with ``merge``; then
    it leaves the set and is freed. Memory is thus bounded by the live threads plus
    ``FOLD_AFTER`` recorders and one merged histogram set. Their raw events (ring)
    are not kept.
    """

    def __init__(
        self,
        identity: ProfilerIdentity,
        rec_kwargs: dict[str, Any],
        form_cost_ns: dict[str, float],
    ) -> None:
        self.identity = identity
        self._rec_kwargs = rec_kwargs
        self._form_cost_ns = form_cost_ns
        # name -> slot; grows as the program counts new names (guarded by ``lock``)
        self.counter_slots: dict[str, int] = {}
        self.lock = threading.RLock()  # re-entrant: an autosave on SIGTERM may interrupt it
        self._recs: list[Recorder] = []
        self._timers: dict[int, TimerMap] = {}
        self._dead: list[Recorder] = []
        self._fold_lock = threading.RLock()
        self.retired: Snapshot | None = None  # the folded finished threads
        self.retired_threads = 0
        # called with (folded recorders, new folded Snapshot) under the fold lock, before
        # the recorders are freed: a live profiler republishes its finished threads there
        self.on_fold: Callable[[list[Recorder], Snapshot], None] | None = None

    # -- membership ----------------------------------------------------------------

    def new(self) -> Recorder:
        """A new Recorder of the profiler's layout, joined to the set."""
        rec = self.empty()
        rec.form_cost_ns = self._form_cost_ns
        timers = TimerMap({name: rec.timer(i) for i, name in enumerate(self.identity.phases)})
        with self.lock:
            self._recs.append(rec)
            self._timers[id(rec)] = timers
        return rec

    def empty(self) -> Recorder:
        """A Recorder of the same layout that is not part of the set (nothing recorded)."""
        return Recorder(len(self.identity.phases), **self._rec_kwargs)

    def all(self) -> tuple[Recorder, ...]:
        """The recorders now in the set (live threads and not yet folded finished ones)."""
        with self.lock:
            return tuple(self._recs)

    def timers(self, rec: Recorder) -> TimerMap:
        return self._timers[id(rec)]

    @property
    def counter_names(self) -> tuple[str, ...]:
        return tuple(self.counter_slots)

    # -- finished threads ------------------------------------------------------------

    def thread_ended(self, rec: Recorder) -> None:
        self._dead.append(rec)  # list.append is atomic; runs as the thread's state is torn down

    @property
    def pending(self) -> int:
        return len(self._dead)

    def fold(self) -> None:
        """Fold the queued recorders into ``retired`` and free them."""
        with self._fold_lock:
            if not self._dead:
                return
            dead = list(self._dead)
            names = self.counter_names
            snaps = [self.snapshot_of(r, "compact", names) for r in dead]
            if self.retired is not None:
                snaps.insert(0, self.retired)
            m = merge(snaps) if len(snaps) > 1 else snaps[0]
            src = m.sources
            retired = self.retired_threads + len(dead)
            one = SourceRecord(
                steady_ns=sum(x.steady_ns for x in src),
                rate=sum(x.rate for x in src),
                overhead_ns=sum(x.overhead_ns for x in src),
                wrapper_ns=sum(x.wrapper_ns or 0.0 for x in src) or None,
                warmup_ns=max((x.warmup_ns for x in src), default=0),
                warmup_done=all(x.warmup_done for x in src),
                label=self.identity.label,
                retired_threads=retired,
            )
            folded = m.replace(rolling=None, sources=(one,), meta=Meta(retired_threads=retired))
            gone = {id(r) for r in dead}
            with self.lock:
                self._recs[:] = [r for r in self._recs if id(r) not in gone]
                for k in gone:
                    self._timers.pop(k, None)
                self.retired = folded
                self.retired_threads += len(dead)
                del self._dead[: len(dead)]
            hook = self.on_fold
            if hook is not None:
                hook(dead, folded)

    def sources(self) -> tuple[list[Recorder], Snapshot | None]:
        """(recorders, folded snapshot of finished threads), taken together; the recorders
        of up to ``FOLD_AFTER`` finished threads are still among the recorders."""
        if len(self._dead) >= FOLD_AFTER:
            self.fold()
        with self.lock:
            return list(self._recs), self.retired

    # -- the one snapshot builder ------------------------------------------------------

    def snapshot_of(
        self,
        rec: Recorder,
        form: Form = "copy",
        counter_names: tuple[str, ...] | None = None,
        *,
        window_words: int = WINDOW_WORDS_CAP,
    ) -> Snapshot:
        """A Snapshot of one recorder in ``form`` (see the module doc)."""
        names = self.counter_names if counter_names is None else counter_names
        taken = monotonic_ns()
        if form == "copy":
            return build_snapshot(
                rec.stats_array(), rec.config(), self.identity, names, taken_ns=taken
            )
        cfg = rec.config()
        block = StatsBlock.of(rec)
        small = block.compact(window_words)
        counts = small.counts if form == "in_place" else small.counts.copy()
        small_cfg = dict(cfg)
        small_cfg.update(counts_len=1, max_windows=small.windows_kept, offsets=small.offsets)
        s = build_snapshot(
            small.stats,
            small_cfg,
            self.identity,
            names,
            taken_ns=taken,
            windows_closed=small.windows_closed,
            windows_dropped=small.windows_dropped,
            overwritten=max(0, block.ring_head - int(cfg["capacity"])),
        )
        return s.replace(counts=counts)

    def snapshot(
        self,
        form: Form = "copy",
        *,
        window_words: int = WINDOW_WORDS_CAP,
        sources: tuple[list[Recorder], Snapshot | None] | None = None,
    ) -> Snapshot:
        """Everything counted so far, every recorder and the finished threads merged.

        ``sources`` is a pair :meth:`sources` returned earlier (autosave compares row
        sums of the same recorders before and after encoding an ``"in_place"`` form).
        """
        recs, retired = self.sources() if sources is None else sources
        names = self.counter_names
        snaps = [self.snapshot_of(r, form, names, window_words=window_words) for r in recs]
        if retired is not None:
            snaps.append(retired)
        if not snaps:  # per_thread before any thread wrote: an empty snapshot
            empty_form: Form = "copy" if form == "copy" else "compact"
            return self.snapshot_of(self.empty(), empty_form, names, window_words=window_words)
        return merge(snaps)
