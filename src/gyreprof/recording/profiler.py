"""Profiler: named phases over one compiled Recorder (or one per thread).

The fastest form is one call per phase boundary::

    ENV, FWD = prof.ids("env", "fwd")
    lap = prof.lap                     # the Recorder's own method: no Python frame
    for _ in range(n):
        prof.begin()
        env.step(a); lap(ENV)
        policy(obs); lap(FWD)

Everything here except ``lap``/``begin``/``end`` and the phase timers' enter/exit
is convenience on the read side or at set-up.
"""

from __future__ import annotations

import functools
import os
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from gyreprof._core import EVENT_DTYPE, PhaseTimer, Recorder, TimedFunction, monotonic_ns
from gyreprof._support import limits as _limits
from gyreprof._support.block import Progress, StatsBlock
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, UnknownPhaseError
from gyreprof._support.validate import check_live, check_recorder_config
from gyreprof.model.histogram import STEP
from gyreprof.model.snapshot import ProfilerIdentity, Snapshot
from gyreprof.model.summary import Summary
from gyreprof.model.window import Window, windows_from_events
from gyreprof.recording import _autosave
from gyreprof.recording._recorders import FOLD_AFTER as _FOLD_AFTER
from gyreprof.recording._recorders import RecorderSet

F = TypeVar("F", bound=Callable[..., Any])

_MAX_PHASES = 255


# ---------------------------------------------------- cost of each form (calibrated)

_FORM_COSTS: dict[str, dict[str, float]] = {}
FORMS = ("lap", "begin", "with", "timed", "record")


def _noop() -> None:
    return None


def _no_pad(a: Any, b: Any) -> None:
    return None


def _time_form(form: str, n: int, fns: tuple[Any, ...], pad: Any, a: Any, b: Any) -> float:
    """ns for ``n`` events of ``form``, each after ``pad(a, b)`` (``none``: the pads
    alone; ``call``: a plain call of the function ``@timed`` would wrap). The loops are
    written out: a call per event that is not the form's own would be measured too."""
    lap, begin, timer, timed, record = fns
    rng = range(n)
    pc = time.perf_counter_ns
    t0 = pc()
    if form == "none":
        for _ in rng:
            pad(a, b)
    elif form == "lap":
        for _ in rng:
            pad(a, b)
            lap(0)
    elif form == "begin":
        for _ in rng:
            pad(a, b)
            begin()
    elif form == "with":
        for _ in rng:
            pad(a, b)
            with timer:
                pass
    elif form == "timed":
        for _ in rng:
            pad(a, b)
            timed()
    elif form == "call":
        for _ in rng:
            pad(a, b)
            _noop()
    else:
        for _ in rng:
            pad(a, b)
            record(0, 1000)
    return float(pc() - t0)


_KINDS = ("none", *FORMS, "call")


def _costs_from(per_event: dict[str, float]) -> dict[str, float]:
    """Each form's cost per event: its time less the pads', ``timed`` less a plain call."""
    costs = {f: per_event[f] - per_event["none"] for f in FORMS}
    costs["timed"] = per_event["timed"] - per_event["call"]
    return costs


def _tight_costs(fns: tuple[Any, ...]) -> dict[str, float]:
    """ns per call of each form in a tight loop (no pad): lower bounds. The least of 3
    short runs per form (a run that was preempted only reads longer)."""
    n = 300
    runs = [{k: _time_form(k, n, fns, _no_pad, None, None) for k in _KINDS} for _ in range(3)]
    return _costs_from({k: min(r[k] for r in runs) / n for k in _KINDS})


def _measure_form_costs(clock: str, n: int = 50, rounds: int = 7) -> dict[str, float]:
    """ns per event of each recording form, as a real loop pays it, measured now
    (:func:`form_costs` takes them once per process).

    In a real loop the work between two boundaries evicts what a boundary touches
    (its lines of the stats block, the ring slot, the timer), so a boundary costs
    about twice what it costs in a tight loop. Each form is timed between copies of
    32 KB (an L1 data cache's worth of traffic), minus the copies alone; the lower
    quartile of ``rounds`` short runs per form, the forms interleaved. About 10 ms in all.
    """
    rec = Recorder(2, 1024, clock=clock, window_steps=1 << 40)
    fns = (rec.lap, rec.begin, rec.timer(0), TimedFunction(rec.timer(1), _noop), rec.record)
    a, b = np.zeros(4096), np.ones(4096)
    for k in _KINDS:  # warm up: first calls, page faults, the copy's code path
        _time_form(k, n, fns, np.copyto, a, b)
    res: dict[str, list[float]] = {k: [] for k in _KINDS}
    for _ in range(rounds):
        for k in _KINDS:
            res[k].append(_time_form(k, n, fns, np.copyto, a, b) / n)
    # lower quartiles: preemption only ever adds time, the least-disturbed runs tell most
    costs = _costs_from({k: statistics.quantiles(v, n=4)[0] for k, v in res.items()})
    # never below what the form costs in a tight loop (a cheap lower bound, 1000 calls)
    tight = _tight_costs(fns)
    return {f: max(costs[f], tight[f], 1.0) for f in FORMS}


#: ``source(clock, forms, measure)``: where this process's form costs come from
#: (``measure()`` measures them here); None: measured here (:func:`set_form_cost_source`)
FormCostSource = Callable[[str, tuple[str, ...], Callable[[], dict[str, float]]], dict[str, float]]
_FORM_COST_SOURCE: FormCostSource | None = None


def set_form_cost_source(source: FormCostSource | None) -> None:
    """Get the costs of the recording ``forms`` (:data:`FORMS`) for each clock from
    ``source(clock, forms, measure)`` (``measure()`` measures them in this process) instead
    of measuring them here; None: measure. The
    recording layer knows no caller: under ``gyreprof run`` the process's bootstrap sets
    the one that shares one process's measurement with the run's other processes of the
    same Python (``integrations._auto.calibration``). Costs a process has already taken
    are kept."""
    global _FORM_COST_SOURCE
    _FORM_COST_SOURCE = source


def form_costs(clock: str = "monotonic") -> dict[str, float]:
    """ns per event of each recording form (:data:`FORMS`) for ``clock``, taken once per
    process: from the source :func:`set_form_cost_source` set, else measured here."""
    costs = _FORM_COSTS.get(clock)
    if costs is None:

        def measure() -> dict[str, float]:
            return _measure_form_costs(clock)

        source = _FORM_COST_SOURCE
        costs = _FORM_COSTS[clock] = source(clock, FORMS, measure) if source else measure()
    return dict(costs)


_EXTRA_COSTS: dict[str, float] = {}


def add_form_costs(costs: dict[str, float]) -> None:
    """Per-call costs of this process's instrumentation outside the recorder (the env
    calls' wrappers of ``gyreprof run``, ``libs.gymnasium.wrapper_costs``), by the counter
    name their calls are counted under: every Profiler made from now on carries them in
    its ``form_cost_ns`` (and so in its live segment's config), and its snapshots price
    those counters with them (``gyreprof.model.snapshot.wrapper_overhead``)."""
    _EXTRA_COSTS.update({str(k): float(v) for k, v in costs.items()})


# ------------------------------------------------------- per-thread: finished threads


class _ThreadGone:
    """Lives in a per_thread profiler's thread-local storage; dies with its thread."""

    __slots__ = ("__weakref__",)


# -------------------------------------------------------------------- profiler


def _validate_phases(phases: Iterable[str]) -> tuple[str, ...]:
    if isinstance(phases, str):
        raise ArgumentTypeError(
            "phases must be a list of names, e.g. ['env', 'fwd'], not one string"
        )
    try:
        names = tuple(phases)
    except TypeError:
        raise ArgumentTypeError(
            f"phases must be a list of names, got {type(phases).__name__}"
        ) from None
    if not names:
        raise InvalidValueError("a Profiler needs at least one phase name")
    if len(names) > _MAX_PHASES:
        raise InvalidValueError(f"at most {_MAX_PHASES} phases, got {len(names)}")
    for i, n in enumerate(names):
        if not isinstance(n, str):
            raise ArgumentTypeError(f"phases[{i}] must be a str, got {type(n).__name__} {n!r}")
        if not n.strip():
            raise InvalidValueError(f"phases[{i}] must be a non-empty name, got {n!r}")
        try:
            n.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidValueError(
                f"phases[{i}] must be text that UTF-8 can encode (no lone surrogates), got {n!r}"
            ) from None
        if n == STEP:
            raise InvalidValueError(f"{STEP!r} is reserved for whole steps")
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InvalidValueError(f"phase names must be unique; repeated: {sorted(dup)}")
    return names


#: called with every Profiler once it is set up, in the order added (:func:`on_create`)
_on_create: list[Callable[[Profiler], object]] = []


def on_create(hook: Callable[[Profiler], object]) -> None:
    """Call ``hook(profiler)`` for every Profiler created from now on (a hook added twice
    runs once). The recording layer knows no caller: under ``gyreprof run`` the process's
    bootstrap adds the hook that makes the user's own Profilers join the run's report
    (``integrations/_auto/bootstrap.py``). An exception a hook raises reaches the caller
    of ``Profiler(...)``."""
    if hook not in _on_create:
        _on_create.append(hook)


class Profiler:
    """Times named phases of a loop into per-phase histograms and a ring of events.

    Parameters
    ----------
    phases: the phase names, in the order a step runs through them.
    capacity: ring size in events (rounded up to a power of two). Older events
        are overwritten (and counted); histograms always keep every value.
    warmup_steps / warmup_s: exclude the first steps (or seconds) from steady
        state; reported apart. At most one of them.
    significant_figures: 1..5; percentiles are within 10**-sf relative error.
    clock: "monotonic" (default), "tsc" (invariant-TSC x86 only) or "auto" (the TSC
        where it is invariant, else CLOCK_MONOTONIC; drift-checked, see BENCHMARKS.md).
    per_thread: give every thread its own Recorder and merge them on read.
    live: publish the stats block in shared memory for other processes
        (``True`` or a segment name; see gyreprof.live). With ``per_thread``
        every thread's Recorder gets a segment of its own, and finished threads
        one shared retired segment; readers merge them.
    autosave: path written at exit, when the profiler is collected, on an
        uncaught exception, on SIGTERM and at the exit of a multiprocessing
        child; ``{pid}``/``{host}`` are filled in per process (a forked child
        writes only to a ``{pid}`` path). ``*.json`` gets the Summary as
        JSON, any other name the snapshot bytes. See gyreprof.recording._autosave.
    window_steps / max_windows: rolling windows of ``window_steps`` steps; the
        last ``max_windows`` are kept (fixed memory).
    """

    def __init__(
        self,
        phases: Sequence[str],
        *,
        capacity: int = 1 << 16,
        warmup_steps: int | None = None,
        warmup_s: float | None = None,
        significant_figures: int = 3,
        clock: str = "monotonic",
        per_thread: bool = False,
        autosave: str | os.PathLike[str] | None = None,
        window_steps: int = 1000,
        max_windows: int = 512,
        lowest_ns: int = 1,
        highest_ns: int = 3_600_000_000_000,
        max_counters: int = 32,
        label: str | None = None,
        live: bool | str = False,
    ) -> None:
        self.phases: tuple[str, ...] = _validate_phases(phases)
        # a Recorder's configuration is checked in one place (gyreprof._support.validate)
        self._rec_kwargs: dict[str, Any] = check_recorder_config(
            capacity=capacity,
            significant_figures=significant_figures,
            lowest_ns=lowest_ns,
            highest_ns=highest_ns,
            warmup_steps=warmup_steps,
            warmup_s=warmup_s,
            window_steps=window_steps,
            max_windows=max_windows,
            max_counters=max_counters,
            clock=clock,
        )
        live = check_live(live)
        if not isinstance(per_thread, bool):
            raise ArgumentTypeError(f"per_thread must be True or False, got {per_thread!r}")
        if label is not None:
            if not isinstance(label, str):
                raise ArgumentTypeError(
                    f"label must be a str or None, got {type(label).__name__} {label!r}"
                    + ("; decode it first (label=x.decode())" if isinstance(label, bytes) else "")
                )
            try:
                label.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidValueError(
                    f"label must be text that UTF-8 can encode (no lone surrogates), got {label!r}"
                ) from None
        _limits.check_profiler_budget(len(self.phases), **self._rec_kwargs)
        self.per_thread = bool(per_thread)
        self.label = label
        self._index = {name: i for i, name in enumerate(self.phases)}
        # what each recording form costs, for overhead_share (calibrated once per process)
        self.form_cost_ns: dict[str, float] = {**form_costs(clock), **_EXTRA_COSTS}
        self.lap_cost_ns = self.form_cost_ns["lap"]
        # the one owner of the recordings and of who this profiler is (phases, label,
        # lap cost, counter names): thread retirement, autosave and live publishing share it
        self._recs = RecorderSet(
            ProfilerIdentity(self.phases, label, self.lap_cost_ns),
            self._rec_kwargs,
            self.form_cost_ns,
        )
        self._counter_slots = self._recs.counter_slots
        self._lock = self._recs.lock
        if self.per_thread:
            self._local = threading.local()
            self.lap: Callable[[int], None] = self._lap_threaded
            self.begin: Callable[[], None] = self._begin_threaded
            self.end: Callable[[], None] = self._end_threaded
        else:
            rec = self._recs.new()
            self._recorder = rec
            self.lap = rec.lap
            self.begin = rec.begin
            self.end = rec.end
            self._timers = self._recs.timers(rec)
            self.phase = self._timers.__getitem__  # type: ignore[method-assign,assignment]
        self.live: Any = None
        if live:
            from gyreprof.live.publish import publish_profiler

            self.live = publish_profiler(self, name=None if live is True else live)
            if self.per_thread:
                self._recs.on_fold = self.live.threads_folded
        self._autosave: _autosave.AutosaveState | None = None
        if autosave is not None:
            template, templated = _autosave.check_template(autosave)
            self._autosave = _autosave.AutosaveState(
                template, templated=templated, recordings=self._recs
            )
            _autosave.register(self, self._autosave)
        for hook in _on_create:  # e.g. under gyreprof run: it joins the run's report
            hook(self)

    # -- recorders -------------------------------------------------------------

    @property
    def identity(self) -> ProfilerIdentity:
        """Who this profiler is in every snapshot of it (phases, label, lap cost)."""
        return self._recs.identity

    def _thread_recorder(self) -> Recorder:
        try:
            return self._local.rec  # type: ignore[no-any-return]
        except AttributeError:
            recs = self._recs
            if recs.pending >= _FOLD_AFTER:
                recs.fold()
            rec = recs.new()
            if self.live is not None:
                self.live.thread_started(rec)  # its own live segment (never raises OSError)
            token = _ThreadGone()
            fin = weakref.finalize(token, recs.thread_ended, rec)
            fin.atexit = False
            self._local.rec = rec
            self._local.gone = token
            return rec

    def _lap_threaded(self, phase: int) -> None:
        self._thread_recorder().lap(phase)

    def _begin_threaded(self) -> None:
        self._thread_recorder().begin()

    def _end_threaded(self) -> None:
        self._thread_recorder().end()

    @property
    def recorder(self) -> Recorder:
        """The Recorder of this thread (per_thread) or the only one."""
        return self._thread_recorder() if self.per_thread else self._recorder

    @property
    def recorders(self) -> tuple[Recorder, ...]:
        """Every Recorder now in the profiler (see gyreprof.recording._recorders.RecorderSet)."""
        return self._recs.all()

    # -- names -----------------------------------------------------------------

    def id(self, name: str) -> int:
        """Integer id of phase ``name`` (for ``lap``)."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise UnknownPhaseError(
                f"unknown phase {name!r}; known phases: {list(self.phases)}"
            ) from None

    def ids(self, *names: str) -> tuple[int, ...]:
        """Integer ids of the named phases; with no names, all of them in order."""
        if not names:
            return tuple(range(len(self.phases)))
        return tuple(self.id(n) for n in names)

    # -- convenient forms ------------------------------------------------------

    def phase(self, name: str) -> PhaseTimer:
        """Context manager timing phase ``name`` (two clock reads; nestable).

        Without per_thread, __init__ replaces this with the timer map's own
        ``__getitem__`` (no Python frame per call).
        """
        return self._recs.timers(self._thread_recorder())[name]

    def timed(self, name: str) -> Callable[[F], F]:
        """Decorator: every call of the function is timed as phase ``name``."""
        self.id(name)  # fail now, not at the first call

        def deco(fn: F) -> F:
            if not self.per_thread:
                # one recorder: the timer is fixed, entered and left in C at every call
                timed_fn = TimedFunction(self._timers[name], fn)
                functools.update_wrapper(timed_fn, fn)
                return timed_fn  # type: ignore[return-value]

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.phase(name):
                    return fn(*args, **kwargs)

            return wrapper  # type: ignore[return-value]

        return deco

    def record(self, phase: str | int, duration_ns: int | float) -> None:
        """Record a duration measured elsewhere. Bad values are counted, not recorded."""
        pid = phase if isinstance(phase, int) and not isinstance(phase, bool) else self.id(phase)  # type: ignore[arg-type]
        self.recorder.record(pid, duration_ns)

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to event counter ``name`` (retries, timeouts, empty results...)."""
        slot = self._counter_slots.get(name)
        if slot is None:
            slot = self._counter_slot(name)
        self.recorder.count(slot, n)

    def _counter_slot(self, name: str) -> int:
        if not isinstance(name, str) or not name:
            raise InvalidValueError(f"counter names must be non-empty strings, got {name!r}")
        with self._lock:
            slot = self._counter_slots.get(name)
            if slot is None:
                if len(self._counter_slots) >= self._rec_kwargs["max_counters"]:
                    raise InvalidValueError(
                        f"too many counters (max_counters={self._rec_kwargs['max_counters']}); "
                        f"existing: {list(self._counter_slots)}"
                    )
                slot = len(self._counter_slots)
                self._counter_slots[name] = slot
        if self.live is not None:
            self.live.counter_added(name, slot)
        return slot

    @property
    def counter_names(self) -> tuple[str, ...]:
        return self._recs.counter_names

    # -- read side -------------------------------------------------------------

    def progress(self) -> Progress:
        """Where the loop is now: step, open phase and since when, counters (see
        :class:`gyreprof._support.block.Progress`); all threads together with ``per_thread``."""
        now = int(monotonic_ns())
        recs = self.recorders
        if not recs:
            return Progress(0, 0, None, -1, now, -1, dict.fromkeys(self._counter_slots, 0))
        parts = [StatsBlock.of(r).progress(self.phases, self._counter_slots, now) for r in recs]
        return parts[0] if len(parts) == 1 else Progress.combine(parts)

    def snapshot(self) -> Snapshot:
        """Immutable copy of everything counted so far (merged across threads)."""
        return self._recs.snapshot()

    def summary(self) -> Summary:
        """Steady-state summary (warm-up reported apart)."""
        return self.snapshot().summary()

    def events(self) -> np.ndarray:
        """Raw events still in the ring(s), in time order (structured array: phase,
        step, start_ns, duration_ns; phase -1 marks whole steps)."""
        arrays = [r.events() for r in self.recorders]
        if not arrays:
            return np.zeros(0, dtype=EVENT_DTYPE)
        ev = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
        if len(arrays) > 1:
            ev = ev[np.argsort(ev["start_ns"], kind="stable")]
        return ev

    def windows(self, *, steps: int | None = None, seconds: float | None = None) -> list[Window]:
        """Per-window percentiles.

        With no argument: the rolling windows the recorder closed every
        ``window_steps`` steps over the whole run (fixed memory, ~3% buckets).
        With ``steps=N`` or ``seconds=S``: exact windows computed from the raw
        events still in the ring.
        """
        if steps is not None and seconds is not None:
            raise InvalidValueError("give steps= or seconds=, not both")
        if steps is None and seconds is None:
            recs = self.recorders
            if len(recs) == 1:
                return self._recs.snapshot_of(recs[0]).windows()
            out: list[Window] = []
            for r in recs:
                out.extend(self._recs.snapshot_of(r).windows())
            return sorted(out, key=lambda w: w.start_ns)
        ev = self.events()
        warm_end = max((StatsBlock.of(r).warmup_end_step for r in self.recorders), default=-1)
        in_warm = any(r.in_warmup_now for r in self.recorders)
        return windows_from_events(
            ev,
            self.phases,
            steps=steps,
            seconds=seconds,
            warmup_end_step=warm_end,
            still_warming=in_warm,
        )

    # -- watchdog, lifetime --------------------------------------------------------

    def watchdog(
        self, stall_after_s: float, dump_to: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> Any:
        """Start a background thread that reports a stalled step (see gyreprof.recording.watchdog)."""
        from gyreprof.recording.watchdog import Watchdog

        dog = Watchdog(self, stall_after_s, dump_to=dump_to, **kwargs)
        dog.start()
        return dog

    def reset(self) -> None:
        """Forget everything recorded (all threads' recorders)."""
        for r in self.recorders:
            r.reset()

    @property
    def autosave(self) -> Path | None:
        """The file this process autosaves to ({pid}/{host} filled in); None without
        autosave, or in a forked child whose path has no {pid}."""
        return None if self._autosave is None else self._autosave.path()

    def save_autosave(self) -> Path | None:
        """Write the autosave file now (also done at exit; see gyreprof.recording._autosave).
        Returns the path written, or None (no autosave, or nothing to write here)."""
        if self._autosave is None:
            return None
        return self._autosave.save()

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc: object) -> None:
        for r in self.recorders:
            try:
                r.end()
            except RuntimeError:
                pass
        if self.autosave is not None:
            self.save_autosave()

    def __repr__(self) -> str:
        return f"Profiler(phases={list(self.phases)}, per_thread={self.per_thread})"
