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

import atexit
import functools
import math
import os
import signal
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from gyreprof._block import StatsBlock
from gyreprof._core import EVENT_DTYPE, PhaseTimer, Recorder, TimedFunction, monotonic_ns
from gyreprof.snapshot import (
    STEP,
    Snapshot,
    Window,
    current_unix_offset_ns,
    merge,
    windows_from_events,
)
from gyreprof.summary import Summary, default_meta

F = TypeVar("F", bound=Callable[..., Any])

_MAX_PHASES = 255


class UnknownPhaseError(KeyError, ValueError):
    """A phase name the profiler was not given."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Progress(NamedTuple):
    step: int  # steps begun
    steps_completed: int
    phase: str | None  # the phase now open, as far as the profiler knows
    phase_since_ns: int  # when it opened (-1: unknown)
    now_ns: int
    counters: dict[str, int]


class _TimerMap(dict):  # type: ignore[type-arg]
    """name -> PhaseTimer; a miss raises UnknownPhaseError listing the known names."""

    def __missing__(self, key: object) -> Any:
        raise UnknownPhaseError(f"unknown phase {key!r}; known phases: {list(self)}")


# ---------------------------------------------------- cost of each form (calibrated)

_FORM_COSTS: dict[str, dict[str, float]] = {}
FORMS = ("lap", "begin", "with", "timed", "record")


def _noop() -> None:
    return None


def _tight_costs(lap: Any, begin: Any, timer: Any, timed: Any, record: Any) -> dict[str, float]:
    """ns per call of each form in a tight loop, minus the empty loop: lower bounds.

    The least of 3 short runs per form (a run that was preempted only reads longer).
    """
    n = 300
    rng = range(n)
    pc = time.perf_counter_ns

    def once() -> dict[str, float]:
        out: dict[str, float] = {}
        t0 = pc()
        for _ in rng:
            pass
        out["empty"] = pc() - t0
        t0 = pc()
        for _ in rng:
            lap(0)
        out["lap"] = pc() - t0
        t0 = pc()
        for _ in rng:
            begin()
        out["begin"] = pc() - t0
        t0 = pc()
        for _ in rng:
            with timer:
                pass
        out["with"] = pc() - t0
        t0 = pc()
        for _ in rng:
            _noop()
        out["call"] = pc() - t0
        t0 = pc()
        for _ in rng:
            timed()
        out["timed"] = pc() - t0
        t0 = pc()
        for _ in rng:
            record(0, 1000)
        out["record"] = pc() - t0
        return out

    runs = [once() for _ in range(3)]
    best = {k: min(r[k] for r in runs) for k in runs[0]}
    costs = {f: (best[f] - best["empty"]) / n for f in FORMS}
    costs["timed"] = (best["timed"] - best["call"]) / n
    return costs


def _measure_form_costs(clock: str, n: int = 50, rounds: int = 7) -> dict[str, float]:
    """ns per event of each recording form, as a real loop pays it; cached per clock.

    In a real loop the work between two boundaries evicts what a boundary touches
    (its lines of the stats block, the ring slot, the timer), so a boundary costs
    about twice what it costs in a tight loop. Each form is timed between copies of
    32 KB (an L1 data cache's worth of traffic), minus the copies alone; the median
    of ``rounds`` short runs per form, the forms interleaved. About 10 ms in all.
    """
    if clock in _FORM_COSTS:
        return _FORM_COSTS[clock]
    rec = Recorder(2, 1024, clock=clock, window_steps=1 << 40)
    lap, begin, record = rec.lap, rec.begin, rec.record
    timer = rec.timer(0)
    timed = TimedFunction(rec.timer(1), _noop)
    a, b = np.zeros(4096), np.ones(4096)
    copy = np.copyto
    pc = time.perf_counter_ns
    rng = range(n)

    def run(form: str) -> float:
        t0 = pc()
        if form == "none":
            for _ in rng:
                copy(a, b)
        elif form == "lap":
            for _ in rng:
                copy(a, b)
                lap(0)
        elif form == "begin":
            for _ in rng:
                copy(a, b)
                begin()
        elif form == "with":
            for _ in rng:
                copy(a, b)
                with timer:
                    pass
        elif form == "timed":
            for _ in rng:
                copy(a, b)
                timed()
        elif form == "call":  # what a call of the undecorated function costs
            for _ in rng:
                copy(a, b)
                _noop()
        else:
            for _ in rng:
                copy(a, b)
                record(0, 1000)
        return (pc() - t0) / n

    kinds = ("none", *FORMS, "call")
    for k in kinds:  # warm up: first calls, page faults, the copy's code path
        run(k)
    res: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(rounds):
        for k in kinds:
            res[k].append(run(k))
    # lower quartiles: preemption only ever adds time, the least-disturbed runs tell most
    q25 = {k: statistics.quantiles(v, n=4)[0] for k, v in res.items()}
    costs = {f: q25[f] - q25["none"] for f in FORMS}
    costs["timed"] = q25["timed"] - q25["call"]
    # never below what the form costs in a tight loop (a cheap lower bound, 1000 calls)
    tight = _tight_costs(lap, begin, timer, timed, record)
    costs = {f: max(costs[f], tight[f], 1.0) for f in FORMS}
    _FORM_COSTS[clock] = costs
    return costs


def _measure_lap_cost_ns(clock: str) -> float:
    """Cost of one ``lap()`` as a real loop pays it (see ``_measure_form_costs``)."""
    return _measure_form_costs(clock)["lap"]


# -------------------------------------------------------------------- autosave

_AUTOSAVE: weakref.WeakSet[Profiler] = weakref.WeakSet()
_AUTOSAVE_LOCK = threading.Lock()
_HOOKS_INSTALLED = False
_PREV_SIGTERM: Any = None


def _autosave_all() -> None:
    for prof in list(_AUTOSAVE):
        try:
            prof.save_autosave()
        except Exception as exc:  # noqa: BLE001 - at exit, report and go on
            print(f"gyreprof: autosave to {prof.autosave} failed: {exc}", flush=True)


def _on_sigterm(signum: int, frame: Any) -> None:
    _autosave_all()
    prev = _PREV_SIGTERM
    if callable(prev):
        prev(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_autosave_hooks() -> None:
    global _HOOKS_INSTALLED, _PREV_SIGTERM
    with _AUTOSAVE_LOCK:
        if _HOOKS_INSTALLED:
            return
        atexit.register(_autosave_all)
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGTERM)
            if prev in (signal.SIG_DFL, None) or callable(prev):
                _PREV_SIGTERM = prev if callable(prev) else None
                signal.signal(signal.SIGTERM, _on_sigterm)
        _HOOKS_INSTALLED = True


# -------------------------------------------------------------------- profiler


def _validate_phases(phases: Iterable[str]) -> tuple[str, ...]:
    if isinstance(phases, str):
        raise TypeError("phases must be a list of names, e.g. ['env', 'fwd'], not one string")
    try:
        names = tuple(phases)
    except TypeError:
        raise TypeError(f"phases must be a list of names, got {type(phases).__name__}") from None
    if not names:
        raise ValueError("a Profiler needs at least one phase name")
    if len(names) > _MAX_PHASES:
        raise ValueError(f"at most {_MAX_PHASES} phases, got {len(names)}")
    for n in names:
        if not isinstance(n, str) or not n.strip():
            raise ValueError(f"phase names must be non-empty strings, got {n!r}")
        if n == STEP:
            raise ValueError(f"{STEP!r} is reserved for whole steps")
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"phase names must be unique; repeated: {sorted(dup)}")
    return names


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
        (``True`` or a segment name; see gyreprof.live).
    autosave: path written at exit (also on an uncaught exception or SIGTERM):
        ``*.json`` gets the Summary as JSON, any other name the snapshot bytes.
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
        if warmup_steps is not None and warmup_s is not None:
            raise ValueError("give warmup_steps or warmup_s, not both")
        for name, val in (
            ("capacity", capacity),
            ("window_steps", window_steps),
            ("max_windows", max_windows),
            ("significant_figures", significant_figures),
        ):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
                raise TypeError(f"{name} must be an int, got {type(val).__name__}")
        if capacity <= 0:
            raise ValueError(f"capacity must be a positive number of events, got {capacity}")
        if not 1 <= significant_figures <= 5:
            raise ValueError(f"significant_figures must be 1..5, got {significant_figures}")
        wsteps = 0
        if warmup_steps is not None:
            if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, (int, np.integer)):
                raise TypeError(f"warmup_steps must be an int, got {type(warmup_steps).__name__}")
            if warmup_steps < 0:
                raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
            wsteps = int(warmup_steps)
        wns = 0
        if warmup_s is not None:
            try:
                ws = float(warmup_s)
            except (TypeError, ValueError):
                raise TypeError(f"warmup_s must be a number of seconds, got {warmup_s!r}") from None
            if not math.isfinite(ws) or ws < 0:
                raise ValueError(f"warmup_s must be a finite number >= 0, got {warmup_s!r}")
            if ws * 1e9 > 9.2e18:
                raise OverflowError(f"warmup_s={warmup_s!r} is too long (at most ~292 years)")
            wns = int(ws * 1e9)
        if clock not in ("monotonic", "tsc", "auto"):
            raise ValueError(f"clock must be 'monotonic', 'tsc' or 'auto', got {clock!r}")
        self._rec_kwargs: dict[str, Any] = dict(
            capacity=int(capacity),
            significant_figures=int(significant_figures),
            lowest_ns=int(lowest_ns),
            highest_ns=int(highest_ns),
            warmup_steps=wsteps,
            warmup_ns=wns,
            window_steps=int(window_steps),
            max_windows=int(max_windows),
            max_counters=int(max_counters),
            clock=clock,
        )
        self.per_thread = bool(per_thread)
        self.label = label
        self._index = {name: i for i, name in enumerate(self.phases)}
        self._counter_slots: dict[str, int] = {}
        self._lock = threading.Lock()
        self._recorders: list[Recorder] = []
        self._timers_by_rec: dict[int, _TimerMap] = {}
        # what each recording form costs, for overhead_share (calibrated once per process)
        self.form_cost_ns: dict[str, float] = dict(_measure_form_costs(clock))
        self.lap_cost_ns = self.form_cost_ns["lap"]
        if self.per_thread:
            self._local = threading.local()
            self.lap: Callable[[int], None] = self._lap_threaded
            self.begin: Callable[[], None] = self._begin_threaded
            self.end: Callable[[], None] = self._end_threaded
        else:
            rec = self._new_recorder()
            self._recorder = rec
            self.lap = rec.lap
            self.begin = rec.begin
            self.end = rec.end
            self._timers = self._timers_by_rec[id(rec)]
            self.phase = self._timers.__getitem__  # type: ignore[method-assign,assignment]
        self.live: Any = None
        if live:
            if live is not True and not isinstance(live, str):
                raise TypeError(f"live must be True, False or a segment name, got {live!r}")
            from gyreprof.live.publish import publish_profiler

            self.live = publish_profiler(self, name=None if live is True else live)
        self.autosave: Path | None = Path(autosave) if autosave is not None else None
        if self.autosave is not None:
            _AUTOSAVE.add(self)
            _install_autosave_hooks()

    # -- recorders -------------------------------------------------------------

    def _new_recorder(self) -> Recorder:
        rec = Recorder(len(self.phases), **self._rec_kwargs)
        rec.form_cost_ns = self.form_cost_ns
        timers = _TimerMap({name: rec.timer(i) for i, name in enumerate(self.phases)})
        with self._lock:
            self._recorders.append(rec)
            self._timers_by_rec[id(rec)] = timers
        return rec

    def _thread_recorder(self) -> Recorder:
        try:
            return self._local.rec  # type: ignore[no-any-return]
        except AttributeError:
            rec = self._new_recorder()
            self._local.rec = rec
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
        with self._lock:
            return tuple(self._recorders)

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
        return self._timers_by_rec[id(self._thread_recorder())][name]

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
            raise ValueError(f"counter names must be non-empty strings, got {name!r}")
        with self._lock:
            slot = self._counter_slots.get(name)
            if slot is None:
                if len(self._counter_slots) >= self._rec_kwargs["max_counters"]:
                    raise ValueError(
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
        return tuple(self._counter_slots)

    # -- read side -------------------------------------------------------------

    def progress(self) -> Progress:
        """Where the loop is now: step, open phase and since when, counters."""
        recs = self.recorders
        if not recs:
            now = monotonic_ns()
            return Progress(0, 0, None, -1, now, {})
        best = None
        for rec in recs:
            step, done, ph, since, now = rec.progress()
            if best is None or since > best[3]:
                best = (step, done, ph, since, now)
        assert best is not None
        step = sum(r.progress()[0] for r in recs)
        done = sum(r.progress()[1] for r in recs)
        ph = best[2]
        counters: dict[str, int] = {}
        for rec in recs:
            block = StatsBlock.of(rec)
            for name, slot in self._counter_slots.items():
                counters[name] = counters.get(name, 0) + block.counter(slot)
        return Progress(
            step,
            done,
            self.phases[ph] if 0 <= ph < len(self.phases) else None,
            best[3],
            best[4],
            counters,
        )

    def _snapshot_of(self, rec: Recorder) -> Snapshot:
        taken = monotonic_ns()
        stats = rec.stats_array()
        cfg = rec.config()
        meta = default_meta(self.label)
        # wall-clock time of the monotonic clock's zero, so saved snapshots can be dated
        meta["unix_offset_ns"] = current_unix_offset_ns()
        meta["windows_closed"] = StatsBlock(stats, rec.offsets, rec.n_phases).windows_closed
        return Snapshot.from_stats(
            stats,
            cfg,
            self.phases,
            self.counter_names,
            lap_cost_ns=self.lap_cost_ns,
            taken_ns=taken,
            overwritten=rec.overwritten,
            meta=meta,
        )

    def snapshot(self) -> Snapshot:
        """Immutable copy of everything counted so far (merged across threads)."""
        recs = self.recorders
        if not recs:  # per_thread before any thread wrote: an empty snapshot
            return self._snapshot_of(Recorder(len(self.phases), **self._rec_kwargs))
        snaps = [self._snapshot_of(r) for r in recs]
        return snaps[0] if len(snaps) == 1 else merge(snaps)

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
            raise ValueError("give steps= or seconds=, not both")
        if steps is None and seconds is None:
            recs = self.recorders
            if len(recs) == 1:
                return self._snapshot_of(recs[0]).windows()
            out: list[Window] = []
            for r in recs:
                out.extend(self._snapshot_of(r).windows())
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
        """Start a background thread that reports a stalled step (see gyreprof.diagnostics.watchdog)."""
        from gyreprof.diagnostics.watchdog import Watchdog

        dog = Watchdog(self, stall_after_s, dump_to=dump_to, **kwargs)
        dog.start()
        return dog

    def reset(self) -> None:
        """Forget everything recorded (all threads' recorders)."""
        for r in self.recorders:
            r.reset()

    def save_autosave(self) -> Path | None:
        """Write the autosave file now (also done at exit)."""
        if self.autosave is None:
            return None
        snap = self.snapshot()
        path = self.autosave
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        if path.suffix.lower() == ".json":
            tmp.write_text(snap.summary().to_json())
        else:
            tmp.write_bytes(snap.to_bytes())
        os.replace(tmp, path)
        return path

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
