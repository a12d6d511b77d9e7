"""Is the trainer waiting? The wait ratio of a trainer loop, per window, with its spikes.

A slow sampler only matters when the trainer waits for it. Time the call that
fetches a batch as one phase (``wait``) and the train step as another
(``compute``), then::

    rep = gp.wait_report(tp, wait="wait", compute="compute")
    rep.ratio            # wait / (wait + compute) over steady state, 0..1
    rep.window_ratios    # the same per window of steps (or seconds)
    rep.spikes           # windows whose wait per step is far above the run's median
    print(rep); rep.to_dict(); rep.to_json(path)

Windows come from the profiler itself: exact windows computed from the raw
events in its ring when a ``Profiler`` is given, the fixed-memory rolling
windows (~3% resolution, whole run) when only a ``Summary`` or ``Snapshot`` is.

Default thresholds (all fields of :class:`WaitOptions`, each also a keyword of
:func:`wait_report`):

- ``spike_factor=3.0``: a window spikes when its wait per step is at least 3x
  the median window's wait per step ...
- ``spike_min_share=0.05``: ... and exceeds that median by at least 5% of the
  median window's step time (wait + compute per step), so that a trainer that
  hardly waits (a few us) does not report a 3x "spike" of a few more us.
- ``target_windows=20`` / ``min_window_steps=5``: without ``window_steps=`` or
  ``window_s=``, the steady steps still in the ring are cut into about 20
  windows of at least 5 steps each.
- ``coincide_windows=0``: a wait spike coincides with a spike of another phase
  (``other=``) when that phase spikes in the same window (or within this many
  windows of it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from gyreprof._support import advice as _advice
from gyreprof._support import forms as _forms
from gyreprof._support import notes as _notes
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, UnknownPhaseError
from gyreprof._support.validate import (
    check_int,
    check_number,
    check_positive_int,
    check_positive_number,
)
from gyreprof.model._serial import Record, serial_derived, serial_format
from gyreprof.model.snapshot import Snapshot
from gyreprof.model.summary import Summary
from gyreprof.model.window import Window
from gyreprof.recording.source import Source, is_profiler, resolve

if TYPE_CHECKING:
    from gyreprof.recording._rings import Rings
    from gyreprof.recording.profiler import Profiler

_Opts = TypeVar("_Opts")

WAIT_REPORT_FORMAT = "gyreprof.wait_report/2"
#: /1 wrote a missing figure as the string "nan"; /2 writes null (gyreprof.model._serial)
WAIT_REPORT_FORMAT_V1 = "gyreprof.wait_report/1"

DEFAULT_SPIKE_FACTOR = 3.0
DEFAULT_SPIKE_MIN_SHARE = 0.05
DEFAULT_TARGET_WINDOWS = 20
DEFAULT_MIN_WINDOW_STEPS = 5
DEFAULT_COINCIDE_WINDOWS = 0


@dataclass(frozen=True)
class WaitOptions:
    """The knobs of :func:`wait_report`, each with its default (see its parameters).

    ``gp.wait_report(tp, options=WaitOptions(window_steps=50))`` and
    ``gp.wait_report(tp, window_steps=50)`` are the same call: a keyword named after a
    field replaces that field of ``options``.
    """

    window_steps: int | None = None
    window_s: float | None = None
    spike_factor: float = DEFAULT_SPIKE_FACTOR
    spike_min_share: float = DEFAULT_SPIKE_MIN_SHARE
    other: str | Sequence[str] | None = None
    other_source: Profiler | Source | None = None
    coincide_windows: int = DEFAULT_COINCIDE_WINDOWS
    target_windows: int = DEFAULT_TARGET_WINDOWS
    min_window_steps: int = DEFAULT_MIN_WINDOW_STEPS

    def replaced(self, knobs: Mapping[str, Any], *, what: str = "wait_report") -> WaitOptions:
        """These options with the fields named in ``knobs`` replaced; a name that is no
        field is an ``ArgumentTypeError`` (a ``TypeError``) naming it."""
        return replaced(self, knobs, what)


def replaced(options: _Opts, knobs: Mapping[str, Any], what: str) -> _Opts:
    """The options record ``options`` (a dataclass) with the fields named in ``knobs``
    replaced; a name that is no field is an ``ArgumentTypeError`` naming it."""
    if not knobs:
        return options
    record: Any = options
    names = {f.name for f in fields(record)}
    for name in knobs:
        if name not in names:
            raise ArgumentTypeError(
                f"{what}() got an unexpected keyword argument {name!r} "
                f"(its options: {', '.join(sorted(names))})"
            )
    out: _Opts = replace(record, **knobs)
    return out


# --------------------------------------------------------------------- values


@serial_derived("duration_s")
@dataclass(frozen=True)
class WaitWindow:
    """One window of the trainer loop (durations in ns, times since run start in s)."""

    index: int
    start_ns: int
    end_ns: int
    start_s: float  # seconds since the start of the run (or of the first window)
    first_step: int
    steps: int  # trainer steps in the window (wait calls when no steps are marked)
    wait_ns: float  # total wait in the window
    compute_ns: float  # total compute in the window
    ratio: float  # wait / (wait + compute) in the window
    wait_per_step_ns: float
    other_ns: dict[str, float] = field(default_factory=dict)  # total per other phase

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9


@dataclass(frozen=True)
class Spike:
    """A window whose wait per step is far above the run's median."""

    window: int  # position in WaitReport.windows
    start_s: float  # seconds since the start of the run
    duration_s: float
    first_step: int
    steps: int
    wait_per_step_ns: float
    median_wait_per_step_ns: float
    factor: float  # wait_per_step_ns / median (inf when the median is 0)
    excess_ns: float  # wait per step above the median
    ratio: float  # the window's wait ratio
    coincident: tuple[str, ...] = ()  # other phases that spiked at the same time


@dataclass(frozen=True)
class OtherPhase:
    """Another named phase checked for spikes at the same time as the wait spikes."""

    name: str
    source: str  # "same profiler" or "other profiler"
    median_per_step_ns: float
    spike_windows: tuple[int, ...]  # positions in WaitReport.windows
    coincident_spikes: int  # wait spikes that coincide with a spike of this phase


@serial_format(WAIT_REPORT_FORMAT, reads=(WAIT_REPORT_FORMAT_V1,))
@dataclass(frozen=True)
class WaitReport(Record):
    """How much of its time the trainer spends waiting for batches (ns; ratios 0..1).

    ``ratio`` is wait / (wait + compute) over steady state. ``window_ratios``
    is the same per window (steady windows only) and ``window_distribution``
    their p10/p50/p90/max. ``wait_per_step`` holds p50/p90/p99/max/mean of one
    wait (ns). ``spikes`` are windows whose wait per step is far above the
    median window's; each says whether another named phase spiked with it.
    """

    wait_phase: str
    compute_phase: str
    ratio: float
    steps: int  # steady-state wait samples
    wait_ns: float  # steady-state totals
    compute_ns: float
    wait_per_step: dict[str, float]
    compute_per_step: dict[str, float]
    window_ratios: list[float]
    window_distribution: dict[str, float]
    windows: list[WaitWindow]
    window_source: str  # "ring" (exact), "rolling" or "none"
    window_size: str  # e.g. "50 steps" or "0.5 s"
    spikes: list[Spike]
    other: dict[str, OtherPhase]
    thresholds: dict[str, float]
    notes: list[str]
    warmup_rule: str = "none"

    # -- convenience -------------------------------------------------------------

    @property
    def wait_p50_ns(self) -> float:
        return self.wait_per_step["p50"]

    @property
    def wait_p99_ns(self) -> float:
        return self.wait_per_step["p99"]

    @property
    def speedup_bound(self) -> float:
        """How much faster training could get with an infinitely fast sampler (1/(1-ratio))."""
        return 1.0 / (1.0 - self.ratio) if self.ratio < 1.0 else math.inf

    # -- forms (gyreprof.model._serial, gyreprof.render) --------------------------------

    def to_markdown(self) -> str:
        return _forms.text("markdown.wait_report", self)

    def to_metrics(self, prefix: str = "gyreprof/") -> dict[str, float]:
        return _forms.metrics("metrics.wait_report", self, prefix)

    def __str__(self) -> str:
        return _forms.text("text.wait_report", self)


# ------------------------------------------------------------------ internals


@dataclass
class _Win:
    """Totals of one window: sums (ns) and counts per phase name."""

    start_ns: int
    end_ns: int
    first_step: int
    steps: int
    sums: dict[str, float]
    counts: dict[str, int]


def _from_window(w: Window) -> _Win:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for name, st in w.phases.items():
        counts[name] = int(st.count)
        sums[name] = float(st.mean) * st.count if st.count else 0.0
    return _Win(int(w.start_ns), int(w.end_ns), int(w.first_step), int(w.steps), sums, counts)


def _group(wins: list[_Win], keys: list[int]) -> list[_Win]:
    """Add up consecutive windows that share a key."""
    out: list[_Win] = []
    last: int | None = None
    for w, k in zip(wins, keys, strict=True):
        if out and k == last:
            g = out[-1]
            g.end_ns = max(g.end_ns, w.end_ns)
            g.start_ns = min(g.start_ns, w.start_ns)
            g.steps += w.steps
            for n, v in w.sums.items():
                g.sums[n] = g.sums.get(n, 0.0) + v
            for n, cnt in w.counts.items():
                g.counts[n] = g.counts.get(n, 0) + cnt
        else:
            out.append(
                _Win(w.start_ns, w.end_ns, w.first_step, w.steps, dict(w.sums), dict(w.counts))
            )
            last = k
    return out


def _percentile_dict(st: Any) -> dict[str, float]:
    return {
        "mean": float(st.mean),
        "p50": float(st.p50),
        "p90": float(st.p90),
        "p99": float(st.p99),
        "max": float(st.max),
    }


def _sum_ns(st: Any) -> float:
    s = float(getattr(st, "sum_ns", 0.0) or 0.0)
    if s <= 0 and st.count:
        s = float(st.mean) * st.count
    return s


def _auto_steps(n_steps: int, target_windows: int, min_window_steps: int) -> int:
    return max(int(min_window_steps), math.ceil(max(1, n_steps) / max(1, int(target_windows))))


def _spike_flags(per_step: np.ndarray, floor_ns: float, factor: float) -> tuple[np.ndarray, float]:
    """Which windows spike: value >= factor x median and value - median >= floor."""
    finite = per_step[np.isfinite(per_step)]
    if len(finite) == 0:
        return np.zeros(len(per_step), dtype=bool), math.nan
    med = float(np.median(finite))
    with np.errstate(invalid="ignore"):
        flags = (per_step >= factor * med) & (per_step - med >= floor_ns) & np.isfinite(per_step)
    return flags, med


def _ring_windows(
    rings: Rings,
    wait: str,
    *,
    window_steps: int | None,
    window_s: float | None,
    target_windows: int,
    min_window_steps: int,
    notes: list[str],
) -> tuple[list[_Win], str]:
    """Exact windows from the profiler's ring; steps are numbered by wait calls if unmarked."""
    from gyreprof.model.window import windows_from_events

    ev = rings.events
    if len(ev) == 0:
        return [], "-"
    if rings.overwritten:
        notes.append(_notes.ring_overwritten(rings.overwritten))
    marked = bool((ev["phase"] == -1).any())
    if marked:
        # a step still open (a live run, or begin() without end()) would add its phases to
        # the last window without counting the step: keep closed steps only
        closed = np.unique(ev["step"][ev["phase"] == -1])
        ev = ev[(ev["phase"] == -1) | np.isin(ev["step"], closed)]
    warm_end, warming = rings.warmup_end_step, rings.still_warming
    if not marked:
        # No prof.begin(): one trainer step = one wait call and what follows it.
        ev = ev.copy()
        wid = rings.phases.index(wait)
        ev["step"] = np.cumsum(ev["phase"] == wid)
        notes.append(
            f"no steps were marked (prof.begin()); a trainer step is counted from each {wait!r} "
            "call to the next"
        )
        warm_end, warming = -1, False
    offset = 0
    if warm_end > 0:
        # drop the warm-up steps and number the steady ones from 1, so the first
        # window starts at the first steady step instead of straddling warm-up
        ev = ev[ev["step"] > warm_end].copy()
        ev["step"] -= warm_end
        offset, warm_end = warm_end, -1
    if window_s is not None:
        windows = windows_from_events(
            ev, rings.phases, seconds=window_s, warmup_end_step=warm_end, still_warming=warming
        )
        size = f"{window_s:g} s"
    else:
        if window_steps is None:
            steps_in_ring = ev["step"][ev["step"] > 0]
            n = len(np.unique(steps_in_ring)) if len(steps_in_ring) else 0
            window_steps = _auto_steps(n, target_windows, min_window_steps)
        windows = windows_from_events(
            ev, rings.phases, steps=window_steps, warmup_end_step=warm_end, still_warming=warming
        )
        size = f"{window_steps} steps"
    wins = []
    for w in windows:
        if w.warmup:
            continue
        win = _from_window(w)
        win.first_step += offset
        if not marked:
            win.steps = win.counts.get(wait, 0)
        wins.append(win)
    return wins, size


def _rolling_windows(
    summary: Summary,
    snap: Snapshot | None,
    *,
    window_steps: int | None,
    window_s: float | None,
    notes: list[str],
) -> tuple[list[_Win], str]:
    """The fixed-memory rolling windows, added up into larger windows when asked."""
    raw = snap.windows() if snap is not None else list(summary.windows)
    raw = [w for w in raw if not w.warmup]
    if not raw:
        return [], "-"
    wins = [_from_window(w) for w in raw]
    base = max(w.steps for w in wins)
    if window_s is not None:
        t0 = wins[0].start_ns
        width_ns = max(1, int(window_s * 1e9))
        keys = [int((w.start_ns - t0) // width_ns) for w in wins]
        return _group(wins, keys), f"{window_s:g} s"
    if window_steps is not None:
        k = max(1, round(window_steps / base)) if base > 0 else 1
        if window_steps < base:
            notes.append(
                f"the rolling windows hold {base} steps each and cannot be split into windows "
                f"of {window_steps} steps; pass the Profiler itself for exact windows"
            )
        elif window_steps % base:
            notes.append(
                f"window_steps={window_steps} rounded to {k * base} (a multiple of the "
                f"{base}-step rolling windows)"
            )
        return _group(wins, [i // k for i in range(len(wins))]), f"{k * base} steps"
    return wins, f"{base} steps"


def _busy_before(es: np.ndarray, dur: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in ``t``: the total event time before it, sum(clip(t - start, 0, dur)).

    The overlap of the events with a window [a, b) is then busy(b) - busy(a);
    O((n + m) log n) instead of comparing every event with every window.
    """
    ee = es + dur
    by_start = np.argsort(es, kind="stable")
    s_sorted = es[by_start]
    s_cum = np.concatenate(([0.0], np.cumsum(s_sorted)))
    by_end = np.argsort(ee, kind="stable")
    e_sorted = ee[by_end]
    d_cum = np.concatenate(([0.0], np.cumsum(dur[by_end])))
    se_cum = np.concatenate(([0.0], np.cumsum(es[by_end])))
    n_start = np.searchsorted(s_sorted, t, side="right")
    n_end = np.searchsorted(e_sorted, t, side="right")
    # ended events count whole; open ones count from their start to t
    open_n = n_start - n_end
    open_start_sum = s_cum[n_start] - se_cum[n_end]
    result: np.ndarray = d_cum[n_end] + open_n * t - open_start_sum
    return result


def _other_from_rings(
    other: Rings, names: Sequence[str], wins: list[_Win]
) -> dict[str, np.ndarray]:
    """Per window, the time (ns) each named phase of the ``other`` rings overlaps it."""
    ev = other.events
    out: dict[str, np.ndarray] = {}
    for name in names:
        sel = ev[ev["phase"] == other.phases.index(name)]
        if len(sel) == 0 or len(wins) == 0:
            out[name] = np.zeros(len(wins))
            continue
        t0 = int(sel["start_ns"].min())
        es = (sel["start_ns"] - t0).astype(np.float64)
        dur = sel["duration_ns"].astype(np.float64)
        starts = np.array([w.start_ns - t0 for w in wins], dtype=np.float64)
        ends = np.array([w.end_ns - t0 for w in wins], dtype=np.float64)
        busy = _busy_before(es, dur, np.concatenate((starts, ends)))
        out[name] = np.clip(busy[len(wins) :] - busy[: len(wins)], 0.0, None)
    return out


def _names(value: str | Sequence[str] | None, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{what} must be a phase name or a list of names, got {value!r}"
        ) from None
    for n in names:
        if not isinstance(n, str):
            raise ArgumentTypeError(f"{what} must hold phase names (strings), got {n!r}")
    return names


# ---------------------------------------------------------------------- entry


def _check_options(wait: str, compute: str, o: WaitOptions) -> None:
    """Every option of ``wait_report``: a TypeError or ValueError naming it."""
    window_steps, window_s = o.window_steps, o.window_s
    spike_factor, spike_min_share = o.spike_factor, o.spike_min_share
    target_windows, min_window_steps = o.target_windows, o.min_window_steps
    coincide_windows, other_source = o.coincide_windows, o.other_source
    if window_steps is not None and window_s is not None:
        raise InvalidValueError("give window_steps= or window_s=, not both")
    if window_steps is not None:
        check_positive_int("window_steps", window_steps)
    if window_s is not None:
        check_positive_number("window_s", window_s, unit="seconds")
    check_positive_number("spike_factor", spike_factor)
    check_number("spike_min_share", spike_min_share, minimum=0.0)
    check_positive_int("target_windows", target_windows)
    check_positive_int("min_window_steps", min_window_steps)
    check_int("coincide_windows", coincide_windows, minimum=0)
    for what, name in (("wait", wait), ("compute", compute)):
        if not isinstance(name, str) or not name:
            raise ArgumentTypeError(
                f"{what} must be a phase name (a non-empty string), got {name!r}"
            )
    if wait == compute:
        raise InvalidValueError(f"wait and compute must be different phases, both are {wait!r}")
    live = other_source is None or is_profiler(other_source)
    if not live and not (isinstance(other_source, Source) and other_source.profiler is not None):
        raise ArgumentTypeError(
            "other_source must be a gyreprof Profiler (its events carry the times to match), "
            f"got {type(other_source).__name__}"
        )


def _check_phases(
    summary: Summary,
    wait: str,
    compute: str,
    other_names: Sequence[str],
    other_source: Source | None,
) -> None:
    """The named phases exist, and wait / compute have steady-state samples."""
    known = list(summary.phases)
    for what, name in (("wait", wait), ("compute", compute)):
        if name not in summary.phases:
            raise UnknownPhaseError(
                f"the trainer profile has no phase {name!r} (the {what} phase); known phases: "
                f"{known}. Pass {what}='<name>' to name it."
            )
    other_known = list(other_source.phases) if other_source is not None else known
    for name in other_names:
        if name not in other_known:
            where = (
                "the other_source profile" if other_source is not None else "the trainer profile"
            )
            raise UnknownPhaseError(
                f"{where} has no phase {name!r} (other=); known phases: {other_known}"
            )
        if other_source is None and name in (wait, compute):
            raise InvalidValueError(f"other={name!r} is the wait or compute phase itself")
    for what, name in (("wait", wait), ("compute", compute)):
        if summary.phases[name].count == 0:
            why = ""
            wu = summary.warmup
            if wu.rule != "none" and not wu.done:
                why = (
                    f" The profile is still in warm-up ({wu.rule}, {wu.steps} steps so far); "
                    "warm-up ends on step boundaries, so mark steps with prof.begin()."
                )
            raise InvalidValueError(
                f"the {what} phase {name!r} has no steady-state samples: nothing to compute a "
                f"wait ratio from (known phases: {known}).{why} Time it with "
                f"`with prof.phase({name!r}): ...`."
            )


def _trainer_windows(
    trainer: Source,
    wait: str,
    compute: str,
    *,
    window_steps: int | None,
    window_s: float | None,
    target_windows: int,
    min_window_steps: int,
    notes: list[str],
) -> tuple[list[_Win], str, str]:
    """The trainer's steady windows, their size in words, and where they came from."""
    rings = trainer.rings
    if rings is not None:
        wins, size = _ring_windows(
            rings,
            wait,
            window_steps=window_steps,
            window_s=window_s,
            target_windows=target_windows,
            min_window_steps=min_window_steps,
            notes=notes,
        )
        wsource = "ring"
    else:
        wins, size = _rolling_windows(
            trainer.summary,
            trainer.snapshot,
            window_steps=window_steps,
            window_s=window_s,
            notes=notes,
        )
        wsource = "rolling"
    wins = [w for w in wins if w.counts.get(wait, 0) > 0 or w.counts.get(compute, 0) > 0]
    if not wins:
        wsource, size = "none", "-"
        if rings is None:
            notes.append(
                "no per-window ratios: the summary holds no closed rolling windows (they close "
                f"every window_steps marked steps); {_advice.rolling_windows()}"
            )
        else:
            notes.append(
                "no per-window ratios: the ring holds no steady-state window (too few steady "
                "steps, or still warming up); run longer"
            )
    return wins, size, wsource


@dataclass(frozen=True)
class _PerWindow:
    """Per-window arrays (one entry per window)."""

    wait_ns: np.ndarray
    compute_ns: np.ndarray
    steps: np.ndarray
    ratios: np.ndarray
    wait_per_step: np.ndarray
    floor_ns: float  # the smallest excess over the median that counts as a spike


def _per_window(wins: list[_Win], wait: str, compute: str, spike_min_share: float) -> _PerWindow:
    wsum = np.array([w.sums.get(wait, 0.0) for w in wins], dtype=np.float64)
    csum = np.array([w.sums.get(compute, 0.0) for w in wins], dtype=np.float64)
    steps = np.array(
        [w.steps if w.steps > 0 else max(1, w.counts.get(wait, 0)) for w in wins],
        dtype=np.float64,
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(wsum + csum > 0, wsum / (wsum + csum), np.nan)
        wait_ps = wsum / steps
        step_ps = (wsum + csum) / steps
    finite_steps = step_ps[np.isfinite(step_ps)]
    med_step = float(np.median(finite_steps)) if len(finite_steps) else math.nan
    floor_ns = spike_min_share * med_step if math.isfinite(med_step) else math.inf
    return _PerWindow(wsum, csum, steps, ratios, wait_ps, floor_ns)


def _other_per_window(
    other_names: Sequence[str], other_source: Source | None, wins: list[_Win]
) -> dict[str, np.ndarray]:
    if not other_names:
        return {}
    if other_source is not None and other_source.rings is not None:
        return _other_from_rings(other_source.rings, other_names, wins)
    return {n: np.array([w.sums.get(n, 0.0) for w in wins], dtype=np.float64) for n in other_names}


def _run_start_ns(snap: Snapshot | None, wins: list[_Win]) -> int:
    """Times are reported in seconds since the run (or its first window) started."""
    t0 = snap.times.start_ns if snap is not None else 0
    if wins:
        first = min(w.start_ns for w in wins)
        t0 = first if t0 <= 0 else min(t0, first)
    return t0


def _wait_windows(
    wins: list[_Win], pw: _PerWindow, other_ns: dict[str, np.ndarray], t0: int
) -> list[WaitWindow]:
    return [
        WaitWindow(
            index=i,
            start_ns=w.start_ns,
            end_ns=w.end_ns,
            start_s=(w.start_ns - t0) / 1e9,
            first_step=w.first_step,
            steps=int(pw.steps[i]),
            wait_ns=float(pw.wait_ns[i]),
            compute_ns=float(pw.compute_ns[i]),
            ratio=float(pw.ratios[i]),
            wait_per_step_ns=float(pw.wait_per_step[i]),
            other_ns={n: float(v[i]) for n, v in other_ns.items()},
        )
        for i, w in enumerate(wins)
    ]


def _ratio_distribution(ratios: np.ndarray) -> dict[str, float]:
    finite = ratios[np.isfinite(ratios)]
    if not len(finite):
        return dict.fromkeys(("p10", "p50", "p90", "max", "min"), math.nan)
    p10, p50, p90 = np.percentile(finite, [10, 50, 90])
    return {
        "p10": float(p10),
        "p50": float(p50),
        "p90": float(p90),
        "max": float(finite.max()),
        "min": float(finite.min()),
    }


def _spikes(
    windows: list[WaitWindow],
    pw: _PerWindow,
    other_ns: dict[str, np.ndarray],
    *,
    spike_factor: float,
    coincide_windows: int,
    other_source: object,
) -> tuple[list[Spike], dict[str, OtherPhase]]:
    """Spikes of the wait, each checked against spikes of the other phases."""
    wflags, wmed = _spike_flags(pw.wait_per_step, pw.floor_ns, float(spike_factor))
    oflags: dict[str, np.ndarray] = {}
    omed: dict[str, float] = {}
    for n, v in other_ns.items():
        oflags[n], omed[n] = _spike_flags(v / pw.steps, pw.floor_ns, float(spike_factor))
    spikes: list[Spike] = []
    for i in np.flatnonzero(wflags):
        lo, hi = max(0, i - coincide_windows), min(len(windows), i + coincide_windows + 1)
        co = tuple(n for n, f in oflags.items() if bool(f[lo:hi].any()))
        w = windows[i]
        spikes.append(
            Spike(
                window=int(i),
                start_s=w.start_s,
                duration_s=w.duration_s,
                first_step=w.first_step,
                steps=w.steps,
                wait_per_step_ns=w.wait_per_step_ns,
                median_wait_per_step_ns=wmed,
                factor=(w.wait_per_step_ns / wmed) if wmed > 0 else math.inf,
                excess_ns=w.wait_per_step_ns - wmed,
                ratio=w.ratio,
                coincident=co,
            )
        )
    others = {
        n: OtherPhase(
            name=n,
            source="other profiler" if other_source is not None else "same profiler",
            median_per_step_ns=omed[n],
            spike_windows=tuple(int(i) for i in np.flatnonzero(oflags[n])),
            coincident_spikes=sum(1 for s in spikes if n in s.coincident),
        )
        for n in other_ns
    }
    return spikes, others


def _closing_notes(summary: Summary, windows: list[WaitWindow], notes: list[str]) -> None:
    if summary.warmup.rule == "none":
        notes.append(_notes.warmup_not_excluded())
    notes += _notes.data_quality(summary, overwritten=False)
    if len(windows) and len(windows) < 5:
        notes.append(
            f"only {len(windows)} window(s): the per-window distribution and the spike search "
            f"say little; {_advice.more_windows()}"
        )


def wait_report(
    trainer: Profiler | Snapshot | Summary | Source,
    wait: str = "wait",
    compute: str = "compute",
    *,
    options: WaitOptions | None = None,
    **knobs: Any,
) -> WaitReport:
    """How much the trainer waits for batches, overall and per window.

    Parameters
    ----------
    trainer: the trainer-side ``Profiler`` (exact windows from its ring), or a
        ``Snapshot`` / ``Summary`` of it (its rolling windows); resolved once, here
        (``gyreprof.recording.source.resolve``).
    wait / compute: the names of the phase around the batch fetch and of the
        train step.
    window_steps / window_s: window size in trainer steps or seconds (at most
        one). Default: about ``target_windows`` windows of at least
        ``min_window_steps`` steps over the steady steps in the ring (the
        rolling windows' own size for a Summary/Snapshot).
    spike_factor / spike_min_share: a window spikes when its wait per step is
        at least ``spike_factor`` x the median window's and exceeds it by at
        least ``spike_min_share`` of the median window's step time.
    other: phase name(s) to check for spikes at the same time as the wait
        spikes (e.g. a data-loading or checkpoint phase).
    other_source: the Profiler holding the ``other`` phases when it is not
        the trainer's (e.g. the sampler's, same clock); matched by time.
    coincide_windows: how many windows apart two spikes may be and still
        coincide (0: the same window).
    target_windows / min_window_steps: see window_steps.
    options: these knobs as one :class:`WaitOptions`; each knob given as a keyword
        (``window_steps=50``) replaces that field of it.

    Raises ``UnknownPhaseError`` (a ``ValueError`` and ``KeyError``) naming the phase and
    the known phases when a phase is
    missing or has no steady-state samples.
    """
    return report_of(
        resolve(trainer, what="trainer", paths=False),
        wait,
        compute,
        (options or WaitOptions()).replaced(knobs),
    )


def report_of(
    trainer: Source,
    wait: str = "wait",
    compute: str = "compute",
    options: WaitOptions | None = None,
) -> WaitReport:
    """:func:`wait_report` of a resolved trainer :class:`~gyreprof.recording.source.Source` (the
    form ``diagnose`` calls, so each input is resolved once, at the public door)."""
    o = options or WaitOptions()
    _check_options(wait, compute, o)
    window_steps, window_s = o.window_steps, o.window_s
    spike_factor, spike_min_share = o.spike_factor, o.spike_min_share
    target_windows, min_window_steps = o.target_windows, o.min_window_steps
    coincide_windows, other, other_source = o.coincide_windows, o.other, o.other_source
    other_names = _names(other, "other")
    other_src = (
        resolve(other_source, what="other_source", paths=False)
        if other_source is not None
        else None
    )

    # 1. the overall ratio
    summary, snap = trainer.summary, trainer.snapshot
    _check_phases(summary, wait, compute, other_names, other_src)
    ws, cs = summary.phases[wait], summary.phases[compute]
    wait_ns, compute_ns = _sum_ns(ws), _sum_ns(cs)
    if wait_ns + compute_ns <= 0:
        raise InvalidValueError(
            f"the phases {wait!r} and {compute!r} add up to 0 ns: nothing to compare"
        )

    # 2. per window
    notes: list[str] = []
    wins, size, wsource = _trainer_windows(
        trainer,
        wait,
        compute,
        window_steps=window_steps,
        window_s=window_s,
        target_windows=target_windows,
        min_window_steps=min_window_steps,
        notes=notes,
    )
    pw = _per_window(wins, wait, compute, spike_min_share)
    other_ns = _other_per_window(other_names, other_src, wins)
    windows = _wait_windows(wins, pw, other_ns, _run_start_ns(snap, wins))

    # 3. spikes of the wait, and of the other phases
    spikes, others = _spikes(
        windows,
        pw,
        other_ns,
        spike_factor=spike_factor,
        coincide_windows=coincide_windows,
        other_source=other_src,
    )
    _closing_notes(summary, windows, notes)
    thresholds = {
        "spike_factor": float(spike_factor),
        "spike_min_share": float(spike_min_share),
        "coincide_windows": float(coincide_windows),
        "target_windows": float(target_windows),
        "min_window_steps": float(min_window_steps),
    }
    return WaitReport(
        wait_phase=wait,
        compute_phase=compute,
        ratio=float(wait_ns / (wait_ns + compute_ns)),
        steps=int(summary.steps) if summary.steps > 0 else int(ws.count),
        wait_ns=float(wait_ns),
        compute_ns=float(compute_ns),
        wait_per_step=_percentile_dict(ws),
        compute_per_step=_percentile_dict(cs),
        window_ratios=[float(r) for r in pw.ratios],
        window_distribution=_ratio_distribution(pw.ratios),
        windows=windows,
        window_source=wsource,
        window_size=size,
        spikes=spikes,
        other=others,
        thresholds=thresholds,
        notes=notes,
        warmup_rule=summary.warmup.rule,
    )
