"""What to tune next: the bottleneck verdict, in plain words, with the numbers behind it.

``gp.diagnose(sampler=prof, trainer=tp)`` follows a fixed order:

1. **How is the loop built?** The same wait ratio means different things in
   two shapes:

   - a *synchronous* loop (SB3, CleanRL: collect, then train) runs the sampler
     only while the trainer waits, so the trainer's wait ratio *is* the
     sampler's share of wall time;
   - an *overlapped* pipeline (a sampler thread or process feeding a queue
     while the trainer computes) hides the sampler behind compute, so any
     sustained wait means the sampler cannot keep up.

   ``loop="sync"`` or ``loop="overlapped"`` declares the shape. Otherwise it is
   detected from the timestamps of the two sides' raw events (one clock,
   ``CLOCK_MONOTONIC``): the sampler's work (its timed phases) either falls
   inside the trainer's ``wait`` or overlaps its ``compute``. A sampler working during at least ``overlap_above`` (default
   0.2) of the trainer's compute time means overlapped, less means
   synchronous. A side profiled in another process is passed as its saved
   events file (``gp.export.save_events`` there, ``gp.export.load_events``
   here); the two time lines are aligned by their wall-clock offsets. The
   detection gives up (and says why) when fewer than ``min_aligned`` (0.5) of
   the sampler's time in the common stretch lies inside either trainer phase,
   when a side's events overlap each other (durations given to ``record()``),
   or when a side is a Snapshot or Summary (they carry no raw events). The
   overlapped rule is then used (the stricter reading), and the verdict says
   what the synchronous rule would have said.
2. **Is the trainer waiting?** With wait ratio ``r`` (see
   :func:`gyreprof.analysis.wait.wait_report`):

   - synchronous: sampler-bound when ``r > sync_sampler_above`` (default 0.5:
     the side with the larger share of wall time), else trainer-bound. Both
     ceilings are printed: an infinitely fast sampler saves at most ``r`` of
     wall time; compute is ``1 - r``.
   - overlapped: sampler-bound when ``r >= trainer_bound_below`` (default
     0.10), trainer-bound below it. A sampler fast enough to remove the wait
     saves up to ``r``; a faster trainer saves nothing until the sampler keeps up.
3. **Where does the sampler's wall time go?** ``sampler_shares`` are shares of
   the sampler's *wall* time: its marked steps (``prof.begin()``); without
   marked steps, the trainer's wait in a synchronous loop, else the sampler
   profile's elapsed time. The sampler's idle time (its ``idle_ns`` counter: blocked
   handing its data over, a put into a full queue) is ``"(idle)"``, waiting and not
   work; the rest is ``"(untimed)"`` and ``coverage`` is the timed fraction of the
   time it worked (wall minus idle). Below ``min_coverage`` (default 0.8) the verdict leads with
   the untimed share and says what to time next (the policy forward, buffer
   writes), and never calls a timed phase "dominant". Otherwise: an
   env-stepping phase (by name: ``env_phases``, or a name starting with
   ``env``) means look at how the env is called and whether the parallelism
   took effect; any other phase means sweep batch size and parallelism.
4. **Caveats:** warm-up not excluded, too few steady samples for the
   percentiles quoted (< ``min_samples_p99`` = 100 for p99, <
   ``min_samples_p999`` = 1000 for p99.9), profiler overhead above
   ``overhead_limit`` (5%), and GPU-looking phases timed without CUDA
   synchronisation while CUDA is in use.

Either side may be missing; the verdict then says what can and cannot be
concluded (``bound="unknown"`` without a trainer profile).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof._support import advice as _advice
from gyreprof._support import forms as _forms
from gyreprof._support import notes as _notes
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof._support.format import IDLE, UNTIMED, fmt_ns, fmt_pct, fmt_speedup
from gyreprof._support.validate import check_fraction, check_positive_int
from gyreprof.analysis import sites as _sites
from gyreprof.analysis import workers as _workers
from gyreprof.analysis.wait import WaitOptions, WaitReport, _busy_before, replaced, report_of
from gyreprof.model._serial import Record, serial_format
from gyreprof.model.summary import Summary
from gyreprof.recording.source import Source, resolve

if TYPE_CHECKING:
    from gyreprof.model.snapshot import Snapshot
    from gyreprof.recording.profiler import Profiler

VERDICT_FORMAT = "gyreprof.verdict/2"
#: /1 wrote a missing figure as the string "nan"; /2 writes null (gyreprof.model._serial)
VERDICT_FORMAT_V1 = "gyreprof.verdict/1"

#: phase names that mean "stepping the environment" (compared in lower case);
#: a name starting with "env" counts as well.
DEFAULT_ENV_PHASES: tuple[str, ...] = (
    "env",
    "env_step",
    "env_reset",
    "step",
    "step_async",
    "step_wait",
    "reset",
    "reset_wait",
    "sim",
    "simulate",
    "simulation",
    "physics",
)
#: substrings of phase names that suggest GPU work (checked for CUDA synchronisation).
DEFAULT_GPU_HINTS: tuple[str, ...] = (
    "fwd",
    "forward",
    "bwd",
    "backward",
    "policy",
    "infer",
    "gpu",
    "cuda",
    "optim",
    "train",
    "compute",
    "learn",
    "update",
    "model",
    "loss",
    "grad",
    "xfer",
    "transfer",
    "h2d",
    "d2h",
)
#: phase names that mean "handing a batch over" (a queue put, a send to the learner).
DEFAULT_HANDOFF_PHASES: tuple[str, ...] = ("put", "queue", "enqueue", "push", "handoff", "send")
DEFAULT_TRAINER_BOUND_BELOW = 0.10
DEFAULT_OVERHEAD_LIMIT = 0.05
DEFAULT_MIN_SAMPLES_P99 = 100
DEFAULT_MIN_SAMPLES_P999 = 1000

DEFAULT_SYNC_SAMPLER_ABOVE = 0.5
DEFAULT_OVERLAP_ABOVE = 0.2
DEFAULT_MIN_ALIGNED = 0.5
DEFAULT_MIN_COVERAGE = 0.8


@dataclass(frozen=True)
class DiagnoseOptions:
    """The knobs of :func:`diagnose`, each with its default (see its parameters);
    ``wait_options`` are passed on to the wait report.

    ``gp.diagnose(sampler=s, trainer=t, options=DiagnoseOptions(band=0.0))`` and
    ``gp.diagnose(sampler=s, trainer=t, band=0.0)`` are the same call: a keyword named
    after a field of this record or of :class:`~gyreprof.analysis.wait.WaitOptions`
    (``window_steps=``, ``other=``, ...) replaces that field.
    """

    env_phases: Sequence[str] = DEFAULT_ENV_PHASES
    sampler_idle: Sequence[str] = ()
    trainer_bound_below: float = DEFAULT_TRAINER_BOUND_BELOW
    sync_sampler_above: float = DEFAULT_SYNC_SAMPLER_ABOVE
    overlap_above: float = DEFAULT_OVERLAP_ABOVE
    min_aligned: float = DEFAULT_MIN_ALIGNED
    min_coverage: float = DEFAULT_MIN_COVERAGE
    overhead_limit: float = DEFAULT_OVERHEAD_LIMIT
    min_samples_p99: int = DEFAULT_MIN_SAMPLES_P99
    min_samples_p999: int = DEFAULT_MIN_SAMPLES_P999
    gpu: bool | None = None
    gpu_hints: Sequence[str] = DEFAULT_GPU_HINTS
    band: float | None = None
    loop_evidence: str | None = None
    rollout_cause: Mapping[str, Any] | None = None
    dead_feeder: Mapping[str, Any] | None = None
    command: Sequence[str] | None = None
    vector_workers: Mapping[str, float] | None = None
    sites: _sites.ProcessSites | None = None
    collector_workers: _workers.CollectorWorkers | None = None
    worker_sites: _sites.ProcessSites | None = None
    wait_options: WaitOptions = field(default_factory=WaitOptions)

    def replaced(self, knobs: Mapping[str, Any]) -> DiagnoseOptions:
        """These options with the fields named in ``knobs`` replaced, the wait report's
        among them; a name that is neither is an ``ArgumentTypeError`` naming it."""
        wait_names = {f.name for f in fields(WaitOptions)}
        own = {k: v for k, v in knobs.items() if k not in wait_names}
        passed = {k: v for k, v in knobs.items() if k in wait_names}
        out = replaced(self, own, "diagnose")
        if passed:
            out = replace(out, wait_options=out.wait_options.replaced(passed, what="diagnose"))
        return out


#: the "balanced" band around the bound threshold: half the interquartile range of the
#: trainer's per-window wait ratios, held within [BAND_MIN, BAND_MAX]; with fewer than
#: BAND_MIN_WINDOWS steady windows, BAND_FEW_WINDOWS
BAND_MIN = 0.02
BAND_MAX = 0.10
BAND_FEW_WINDOWS = 0.05
BAND_MIN_WINDOWS = 4

BOUNDS = ("trainer", "sampler", "balanced", "unknown")
#: loop shapes: collect-then-train, or a sampler feeding a queue while the trainer computes
LOOPS = ("sync", "overlapped")
#: the sampler counter of ns it spent idle, handing its data over while nobody took it (a
#: put into a full queue: waiting for the trainer, not work); ``gyreprof run`` counts it
#: on every sampling thread, a hand-made sampler may count it too (``prof.count``)
IDLE_COUNTER = "idle_ns"


@serial_format(VERDICT_FORMAT, reads=(VERDICT_FORMAT_V1,))
@dataclass(frozen=True)
class Verdict(Record):
    """The bottleneck, in plain words.

    ``bound`` is ``"trainer"`` (tune compute), ``"sampler"`` (the trainer
    waits for batches: tune the sampler), ``"balanced"`` (the wait lies within
    the noise of the threshold, see below) or ``"unknown"`` (no trainer
    profile to tell).

    The balanced band: a wait ratio within ``band`` of the rule's threshold
    (``sync_sampler_above`` in a synchronous loop, ``trainer_bound_below`` in an
    overlapped one, the threshold included) is ``"balanced"``, not a side
    picked by noise. ``band`` is half the interquartile range of the trainer's
    steady per-window wait ratios, at least ``BAND_MIN`` (2 points) and at
    most ``BAND_MAX`` (10 points); with fewer than ``BAND_MIN_WINDOWS`` (4)
    windows it is ``BAND_FEW_WINDOWS`` (5 points). ``diagnose(band=...)``
    fixes it (0 turns the band off). ``ceilings`` holds what a 2x faster side
    gives at most (``"sampler_2x"``, ``"trainer_2x"``: speed-up factors of
    training), stated for every bound the trainer's profile decides. ``loop`` is the shape judged (``"sync"``: collect, then train;
    ``"overlapped"``: a sampler feeding a queue; None without a trainer
    profile), ``loop_source`` how it was known (``"declared"``,
    ``"timeline"`` when the caller read it from the training thread's timeline
    and said how in ``diagnose(loop_evidence=...)``, ``"detected"`` from the
    timestamps, or ``"default"`` when it could not be detected) and
    ``loop_evidence`` the words behind it. ``dominant_phase`` is
    the phase to look at first (``"(untimed)"`` when the sampler's untimed
    time is its largest part). ``sampler_shares`` are shares of the sampler's
    wall time (see ``sampler_wall``), its idle time under ``"(idle)"`` when it counted
    any (``IDLE_COUNTER``), the rest under ``"(untimed)"``; ``coverage`` is the timed
    fraction of the time it worked (its wall time minus idle). ``reasons`` are the steps taken, each
    with its numbers; ``advice`` what to do next; ``unknowns`` what cannot be
    concluded from the profiles given; ``caveats`` what may make the numbers
    mislead. ``sampler_sites`` / ``compute_sites`` (``gyreprof run``'s stack samples,
    see ``gyreprof.analysis.sites``): the code the sampler's untimed time and the
    trainer's compute went to, each ``{"function", "file", "line", "share",
    "samples"}``, largest share first; a share is of the sampler's (the compute's) wall
    time, and the sampler's add up to at most its untimed share. ``rollout_cause``
    (``gyreprof run`` of a trainer fed by a rollout service, see
    ``gyreprof.analysis.rollout_cause``): why it waits, ``{"kind", "endpoint", "short",
    "words", "next"}``. ``dead_feeder`` (``gyreprof run``, see
    ``gyreprof.analysis.feeders``): the thread or process that fed the trainer and died,
    after which it starved, ``{"who", "exc_type", "message", "where", "function", "at_s",
    "wait_after", "after_s", "wait_before", "backlog", "drained_s", "short", "words",
    "next"}``: then the wait is
    no sampler's to tune, and the verdict says so first.
    """

    bound: str
    dominant_phase: str | None
    reasons: list[str]
    caveats: list[str]
    advice: list[str] = field(default_factory=list)
    unknowns: list[str] = field(default_factory=list)
    wait_ratio: float | None = None
    sampler_shares: dict[str, float] = field(default_factory=dict)
    dominant_kind: str | None = None  # "env", "forward/transfer", "untimed", "trainer" or None
    wait_report: WaitReport | None = None
    thresholds: dict[str, float] = field(default_factory=dict)
    loop: str | None = None
    loop_source: str | None = None
    loop_evidence: str | None = None
    coverage: float | None = None
    sampler_wall: str | None = None  # what the sampler's wall time was taken from
    band: float | None = None  # half-width of the balanced band around the threshold
    band_basis: str | None = None  # what the band was taken from
    ceilings: dict[str, float] = field(default_factory=dict)  # sampler_2x, trainer_2x
    # where the sampler's untimed time and the trainer's compute went, from stack samples
    # (gyreprof run; analysis.sites): {function, file, line, share, samples}, by share
    sampler_sites: list[dict[str, Any]] = field(default_factory=list)
    compute_sites: list[dict[str, Any]] = field(default_factory=list)
    # the sampler is a rollout service (gyreprof run; analysis.rollout_cause): why the
    # trainer waits on it, {kind, endpoint, short, words, next}; None otherwise
    rollout_cause: dict[str, Any] | None = None
    # the trainer's feeder died and it starved after (gyreprof run; analysis.feeders)
    dead_feeder: dict[str, Any] | None = None
    # the advice written from the sampler's own phases (a part of ``advice``): where the
    # sampler's time is read elsewhere (a collector's workers), these are what it replaces
    sampler_advice: list[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        return _forms.text("text.verdict_headline", self)

    def to_markdown(self) -> str:
        return _forms.text("markdown.verdict", self)

    def to_metrics(self, prefix: str = "gyreprof/") -> dict[str, float]:
        return _forms.metrics("metrics.verdict", self, prefix)

    def __str__(self) -> str:
        return _forms.text("text.verdict", self)


# ------------------------------------------------------------------ helpers


def _is_env_phase(name: str, env_phases: Sequence[str]) -> bool:
    low = name.lower()
    return low in {p.lower() for p in env_phases} or low.startswith("env")


def _cuda_in_use() -> bool:
    """True when this process imported torch and initialised CUDA (never imports torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        # initialised, not merely available: the analysing process on a GPU machine may be
        # looking at a CPU-only run
        return bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken CUDA setup is "not in use" here
        return False


def _warmup_caveat(summary: Summary, side: str | None = None) -> str | None:
    """Warm-up left in the numbers (with the slowest first call), or still running."""
    w = summary.warmup
    if w.rule == "none":
        first = ""
        slow = [
            (n, v)
            for n, v in w.first_ns.items()
            if n in summary.phases and summary.phases[n].count and v > 3 * summary.phases[n].p50
        ]
        if slow:
            n, v = max(slow, key=lambda kv: kv[1] / max(1.0, summary.phases[kv[0]].p50))
            first = (
                f"; e.g. the first {n!r} took {fmt_ns(v)} against a steady p50 of "
                f"{fmt_ns(summary.phases[n].p50)}"
            )
        return _notes.warmup_not_excluded(first, steps_marked=summary.step.count > 0, side=side)
    if not w.done:
        return f"still in warm-up ({w.rule}); its steady-state numbers are partial"
    return None


def _samples_caveat(
    summary: Summary, quoted: Sequence[str], min_p99: int, min_p999: int
) -> str | None:
    """Too few steady samples of a quoted phase for its tail percentiles."""
    counts = {n: summary.phases[n].count for n in quoted if n in summary.phases}
    if not counts:
        return None
    fewest, k = min(counts.items(), key=lambda kv: kv[1])
    if k < min_p99:
        return (
            f"only {k} steady sample{'' if k == 1 else 's'} of {fewest!r}: its p99 "
            f"(and p99.9) rest on fewer than {min_p99} samples and are little more than its "
            "max; run longer"
        )
    if k < min_p999:
        return (
            f"{k} steady samples of {fewest!r}: enough for p99, but p99.9 needs at least {min_p999}"
        )
    return None


def _gpu_caveat(source: Source, summary: Summary, gpu_hints: Sequence[str]) -> str | None:
    """GPU-looking phases timed without CUDA synchronised (or unknown from a saved profile)."""
    names = [
        n for n, st in summary.phases.items() if st.count and any(h in n.lower() for h in gpu_hints)
    ]
    if source.profiler is not None:
        synced = source.synced_phases
        names = [n for n in names if n not in synced]
        if names:
            return (
                f"CUDA is in use but {names} were timed without synchronising it; "
                "GPU work is asynchronous, so its time lands in whichever phase next waits "
                f"for the GPU: {_advice.gpu_sync()}"
            )
    elif names:
        return (
            f"CUDA is in use and this profile is a {_kind(source)}, so "
            f"whether {names} were timed with CUDA synchronised is unknown"
        )
    return None


def _side_caveats(
    side: str,
    source: Source,
    summary: Summary,
    quoted: Sequence[str],
    *,
    overhead_limit: float,
    min_p99: int,
    min_p999: int,
    gpu: bool,
    gpu_hints: Sequence[str],
) -> list[str]:
    """What may make one side's numbers mislead, each prefixed with the side."""
    found = [_warmup_caveat(summary, side), _samples_caveat(summary, quoted, min_p99, min_p999)]
    if summary.overhead_share > overhead_limit:
        found.append(_notes.overhead(summary.overhead_share, overhead_limit))
    # the histograms keep overwritten events, so only values lost or clamped matter here
    found += _notes.data_quality(summary, overwritten=False)
    if gpu:
        found.append(_gpu_caveat(source, summary, gpu_hints))
    return [f"{side}: {text}" for text in found if text is not None]


def _kind(source: Source) -> str:
    """What a side's numbers were read from, as the verdict words it (an events file is
    read as its snapshot)."""
    return "Snapshot" if source.given == "EventsFile" else source.given


# ------------------------------------------------------------ the loop's shape


@dataclass(frozen=True)
class _Shape:
    """The loop shape used, how it was known, and in words why."""

    loop: str
    source: str  # "declared", "timeline", "detected" or "default"
    words: str


def _intervals(ev: np.ndarray) -> np.ndarray:
    """(n, 2) float64 [start, end) of events, sorted by start."""
    start = ev["start_ns"].astype(np.float64)
    iv = np.stack((start, start + ev["duration_ns"].astype(np.float64)), axis=1)
    return iv[np.argsort(iv[:, 0], kind="stable")]


def _union(iv: np.ndarray) -> np.ndarray:
    """The union of sorted intervals, as disjoint sorted intervals."""
    if len(iv) == 0:
        return iv
    ends = np.maximum.accumulate(iv[:, 1])
    new = np.ones(len(iv), dtype=bool)
    new[1:] = iv[1:, 0] > ends[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(iv) - 1)
    return np.stack((iv[first, 0], ends[last]), axis=1)


def _length(iv: np.ndarray) -> float:
    return float((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0.0


def _overlap_ns(a: np.ndarray, b: np.ndarray) -> float:
    """Total time the disjoint intervals ``a`` and ``b`` share."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    busy = _busy_before(b[:, 0], b[:, 1] - b[:, 0], np.concatenate((a[:, 0], a[:, 1])))
    return float((busy[len(a) :] - busy[: len(a)]).sum())


def _clip(iv: np.ndarray, lo: float, hi: float) -> np.ndarray:
    out: np.ndarray = np.clip(iv, lo, hi)
    kept: np.ndarray = out[out[:, 1] > out[:, 0]]
    return kept


def _undetected(why: str) -> _Shape:
    return _Shape("overlapped", "default", f"not detected ({why})")


@dataclass(frozen=True)
class _Events:
    """A side's raw events, its phase names, and how its clock maps to Unix time."""

    events: np.ndarray
    phases: tuple[str, ...]
    unix_offset_ns: int | None  # Unix-epoch ns minus monotonic ns; None: unknown
    in_process: bool  # a Profiler of this process (same clock as the other side's)


def _events_of(source: Source) -> _Events | None:
    """A side's raw events: a live Profiler's rings (read once, by the Source) or a saved
    events file; None for a Snapshot or Summary."""
    rings = source.rings
    if rings is not None:
        offset = time.time_ns() - time.monotonic_ns()
        return _Events(rings.events, rings.phases, offset, True)
    ef = source.events
    if ef is not None:
        off = ef.unix_offset_ns
        return _Events(ef.events, tuple(ef.phases), int(off) if off is not None else None, False)
    return None


def _aligned(s: _Events, t: _Events) -> tuple[np.ndarray, np.ndarray, str]:
    """Both sides' events on one time line, and how they were put there."""
    if s.in_process and t.in_process:
        return s.events, t.events, "one process, one clock"
    if s.unix_offset_ns is None or t.unix_offset_ns is None:
        return s.events, t.events, "assuming one host's monotonic clock (no wall-clock offset)"
    out = []
    for side in (s, t):
        ev = side.events.copy()
        ev["start_ns"] = ev["start_ns"] + int(side.unix_offset_ns or 0)
        out.append(ev)
    return out[0], out[1], "aligned across processes by their wall-clock offsets"


def _detect_loop(
    sampler: Source,
    trainer: Source,
    wait: str,
    compute: str,
    *,
    overlap_above: float,
    min_aligned: float,
    sampler_idle: Sequence[str] = (),
) -> _Shape:
    """Synchronous or overlapped, from where the sampler's work falls in the trainer's time.

    ``sampler_idle``: sampler phases that are waiting, not work (a worker's ``recv`` of
    the next request): left out, or a synchronous loop reads as overlapped."""
    s_src, t_src = _events_of(sampler), _events_of(trainer)
    if s_src is None or t_src is None:
        return _undetected(
            "the shape is read from both sides' raw events, which a Profiler or a saved "
            "events file (gp.export.save_events) holds, not a Snapshot or Summary"
        )
    sev, tev, clock = _aligned(s_src, t_src)
    if wait not in t_src.phases or compute not in t_src.phases:
        return _undetected(f"the trainer's events have no {wait!r} or {compute!r} phase")
    w_ev = tev[tev["phase"] == t_src.phases.index(wait)]
    c_ev = tev[tev["phase"] == t_src.phases.index(compute)]
    # the timed phases are the sampler's work; a marked step may also hold its idle
    # time (a worker waiting for the next request until its next begin())
    idle = [s_src.phases.index(p) for p in sampler_idle if p in s_src.phases]
    s_ev = sev[(sev["phase"] >= 0) & ~np.isin(sev["phase"], idle)]
    basis = f"its timed phases; {clock}"
    if idle:
        basis = f"its timed phases but {', '.join(repr(p) for p in sampler_idle)}; {clock}"
    if len(w_ev) == 0 or len(c_ev) == 0 or len(s_ev) == 0:
        return _undetected("the rings hold no sampler events or no trainer wait/compute events")
    s_iv, t_iv = _intervals(s_ev), _intervals(np.concatenate((w_ev, c_ev)))
    for side, iv in (("sampler", s_iv), ("trainer", t_iv)):
        if _length(iv) > 1.02 * _length(_union(iv)) + 1e3:
            return _undetected(
                f"the {side}'s events overlap each other (durations given to record(), or "
                "several threads), so their timestamps do not place its work"
            )
    lo = max(s_iv[0, 0], t_iv[0, 0])
    hi = min(float(s_iv[:, 1].max()), float(t_iv[:, 1].max()))
    s_common = _clip(_union(s_iv), lo, hi) if hi > lo else s_iv[:0]
    s_total = _length(s_common)
    if s_total <= 0:
        return _undetected("the sampler's and the trainer's events share no stretch of time")
    c_common = _clip(_union(_intervals(c_ev)), lo, hi)
    in_c = _overlap_ns(s_common, c_common)
    in_w = _overlap_ns(s_common, _union(_intervals(w_ev)))
    aligned = in_c + in_w
    if aligned < min_aligned * s_total:
        return _undetected(
            f"only {fmt_pct(aligned / s_total)} of the sampler's time falls inside the "
            f"trainer's {wait!r} or {compute!r} (at least {fmt_pct(min_aligned)} needed)"
        )
    c_total = _length(c_common)
    busy = in_c / c_total if c_total > 0 else 0.0
    if busy >= overlap_above:
        return _Shape(
            "overlapped",
            "detected",
            f"detected from the timestamps: the sampler ({basis}) was working during "
            f"{fmt_pct(busy)} of the trainer's {compute!r} time (at least "
            f"{fmt_pct(overlap_above)} means the two overlap)",
        )
    return _Shape(
        "sync",
        "detected",
        f"detected from the timestamps: the sampler ({basis}) was working during only "
        f"{fmt_pct(busy)} of the trainer's {compute!r} time (below {fmt_pct(overlap_above)}); "
        f"{fmt_pct(in_w / aligned)} of its work ran inside the trainer's {wait!r}",
    )


def _loop_shape(
    loop: str | None,
    sampler: Source | None,
    trainer: Source,
    wait: str,
    compute: str,
    *,
    overlap_above: float,
    min_aligned: float,
    sampler_idle: Sequence[str] = (),
    loop_evidence: str | None = None,
) -> _Shape:
    if loop is not None:
        if loop_evidence is not None:
            return _Shape(loop, "timeline", loop_evidence)
        return _Shape(loop, "declared", f"declared: loop={loop!r}")
    if sampler is None:
        return _undetected("no sampler profile to compare the trainer's phases with")
    return _detect_loop(
        sampler,
        trainer,
        wait,
        compute,
        overlap_above=overlap_above,
        min_aligned=min_aligned,
        sampler_idle=sampler_idle,
    )


# ----------------------------------------------------------- the trainer's side


@dataclass
class _Findings:
    """What the steps of ``diagnose`` found so far."""

    bound: str = "unknown"
    dominant: str | None = None
    kind: str | None = None
    reasons: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    unknowns: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    band: float | None = None
    band_basis: str | None = None
    ceilings: dict[str, float] = field(default_factory=dict)
    #: the trainer's feeder died (``DiagnoseOptions.dead_feeder``): its wait is starvation,
    #: so no step writes advice to make the sampler faster
    starved: bool = False
    #: the run's command line (``DiagnoseOptions.command``): a sweep is advised on it
    command: Sequence[str] | None = None
    #: a vector env's worker processes (``DiagnoseOptions.vector_workers``)
    workers: Mapping[str, float] | None = None
    #: the part of ``advice`` written from the sampler's own phases
    sampler_advice: list[str] = field(default_factory=list)
    #: the sampler's untimed time by site (``DiagnoseOptions.sites`` or ``worker_sites``)
    sampler_sites: list[dict[str, Any]] = field(default_factory=list)
    #: the trainer's compute by site (``DiagnoseOptions.sites``)
    compute_sites: list[dict[str, Any]] = field(default_factory=list)
    #: the sampler was judged from a collector's workers (``DiagnoseOptions.collector_workers``)
    workers_judged: bool = False


def _measured_words(report: WaitReport, wait: str, compute: str) -> str:
    ws, cs = report.wait_per_step, report.compute_per_step
    spread = ""
    if report.window_ratios:
        d = report.window_distribution
        spread = (
            f"; per window (of {report.window_size}) p10 {fmt_pct(d['p10'])}, "
            f"p90 {fmt_pct(d['p90'])}"
        )
    return (
        f"the trainer spends {fmt_pct(report.ratio)} of its time waiting for batches ({wait!r} "
        f"p50 {fmt_ns(ws['p50'])}, p99 {fmt_ns(ws['p99'])} per step, against {compute!r} p50 "
        f"{fmt_ns(cs['p50'])}{spread})"
    )


def _sync_bound(r: float, sync_sampler_above: float, band: float = 0.0) -> str:
    if band > 0 and abs(r - sync_sampler_above) <= band:
        return "balanced"
    return "sampler" if r > sync_sampler_above else "trainer"


def _band(report: WaitReport, band: float | None) -> tuple[float, str]:
    """Half-width of the balanced band around the threshold, and what it came from."""
    if band is not None:
        return float(band), f"given: band={band:g}"
    ratios = [x for x in report.window_ratios if np.isfinite(x)]
    if len(ratios) < BAND_MIN_WINDOWS:
        return BAND_FEW_WINDOWS, (
            f"only {len(ratios)} steady window{'' if len(ratios) == 1 else 's'} (fewer than "
            f"{BAND_MIN_WINDOWS}), so the fixed {fmt_pct(BAND_FEW_WINDOWS)}"
        )
    q1, q3 = (float(x) for x in np.percentile(ratios, [25, 75]))
    h = min(BAND_MAX, max(BAND_MIN, (q3 - q1) / 2))
    return h, (
        f"half the interquartile range of {len(ratios)} windows' wait ratios ({fmt_pct(q1)} "
        f"to {fmt_pct(q3)}), held within {fmt_pct(BAND_MIN)} to {fmt_pct(BAND_MAX)}"
    )


def _ceilings(r: float, loop: str) -> dict[str, float]:
    """What a 2x faster sampler and a 2x faster trainer give at most (speed-up factors).

    ``r``: the wait's share of the trainer's time. A 2x faster trainer halves compute at
    best (``1 / (1 - (1 - r) / 2)``; in an overlapped pipeline only once the sampler keeps
    up). A 2x faster sampler halves the wait in a synchronous loop (``1 / (1 - r / 2)``); in
    an overlapped pipeline it halves the sampler's period, so a step takes at least the
    longer of compute and half the step (``1 / max(1 - r, 0.5)``)."""
    r = min(1.0, max(0.0, r))
    trainer = 1.0 / (1.0 - (1.0 - r) / 2.0)
    sampler = 1.0 / (1.0 - r / 2.0) if loop == "sync" else 1.0 / max(1.0 - r, 0.5)
    return {"sampler_2x": sampler, "trainer_2x": trainer}


def _ceiling_words(c: dict[str, float]) -> str:
    return (
        f"a 2x faster sampler makes training at most {fmt_speedup(c['sampler_2x'])}, a 2x "
        f"faster trainer at most {fmt_speedup(c['trainer_2x'])}"
    )


def _balanced_words(r: float, threshold: float, band: float, basis: str) -> str:
    return (
        f"{fmt_pct(r)} is within {fmt_pct(band)} of the {fmt_pct(threshold)} threshold (the "
        f"noise band: {basis}), so the run is balanced: neither side clearly limits it, and a "
        "rerun could land on either side"
    )


def _wait_share(report: WaitReport, t_summary: Summary, wait: str) -> float:
    """The wait's share of all the trainer's time: of its marked steps, or of all its
    timed phases when those add up to more (durations given to ``record``). Equal to
    the wait ratio when the trainer times nothing but ``wait`` and ``compute``; smaller
    when it spends time in other phases (backward, optimiser, logging)."""
    totals = {n: st.mean * st.count for n, st in t_summary.phases.items() if st.count > 0}
    step = t_summary.step
    total = max(sum(totals.values()), step.mean * step.count if step.count > 0 else 0.0)
    if wait not in totals or total <= 0:
        return report.ratio
    return min(1.0, totals[wait] / total)


def _judge_sync(
    report: WaitReport,
    measured: str,
    sync_sampler_above: float,
    share: float,
    band: tuple[float, str] = (0.0, ""),
) -> tuple[str, str]:
    """``share``: the wait's share of the trainer's whole time (``_wait_share``), which is
    the sampler's share of wall time in a synchronous loop."""
    r = share
    bound = _sync_bound(r, sync_sampler_above, band[0])
    ceilings = (
        f"an infinitely fast sampler saves at most {fmt_pct(r)} of wall time; compute is "
        f"{fmt_pct(1.0 - r)}"
    )
    if abs(share - report.ratio) > 0.005:
        ceilings += (
            f" (wait / (wait + {report.compute_phase!r}) is {fmt_pct(report.ratio)}; the "
            "trainer's other phases count as compute here)"
        )
    if bound == "balanced":
        why = "the wait " + _balanced_words(r, sync_sampler_above, *band)
    elif bound == "sampler":
        why = (
            f"collecting holds the larger share (above {fmt_pct(sync_sampler_above)}), so "
            "the run is sampler-bound"
        )
    else:
        why = (
            f"compute holds the larger share (the wait is not above "
            f"{fmt_pct(sync_sampler_above)}), so the run is trainer-bound although the "
            "trainer waits"
        )
    text = (
        f"{measured}. In a synchronous loop the sampler runs only while the trainer waits, so "
        f"the wait is the sampler's share of wall time: {ceilings}; {why}"
    )
    return bound, text


def _judge_overlapped(
    report: WaitReport,
    measured: str,
    trainer_bound_below: float,
    band: tuple[float, str] = (0.0, ""),
) -> tuple[str, str]:
    r = report.ratio
    if band[0] > 0 and abs(r - trainer_bound_below) <= band[0]:
        return "balanced", (
            f"{measured}: the wait ratio "
            + _balanced_words(r, trainer_bound_below, *band)
            + "; in an overlapped pipeline a faster sampler removes at most the wait, and a "
            "faster trainer helps only once the sampler keeps up"
        )
    if r < trainer_bound_below:
        return "trainer", (
            f"{measured}: below the {fmt_pct(trainer_bound_below)} threshold, so training is "
            f"trainer-bound; even an infinitely fast sampler would save at most {fmt_pct(r)} "
            f"(make it at most {fmt_speedup(report.speedup_bound)}); compute is "
            f"{fmt_pct(1.0 - r)} of the trainer's time"
        )
    return "sampler", (
        f"{measured}: at or above the {fmt_pct(trainer_bound_below)} threshold, so in an "
        f"overlapped pipeline the trainer is held back by the sampler; a sampler fast enough "
        f"to remove the wait saves up to {fmt_pct(r)} (training up to "
        f"{fmt_speedup(report.speedup_bound)}); a faster trainer saves nothing until the sampler "
        "keeps up"
    )


def _spike_words(report: WaitReport, bound: str) -> str | None:
    if not report.spikes:
        return None
    if bound == "trainer":
        worst = max(report.spikes, key=lambda s: s.wait_per_step_ns)
        return (
            f"the waits come in bursts: {len(report.spikes)} window(s) spike, the worst "
            f"at t=+{worst.start_s:.3g} s with {fmt_ns(worst.wait_per_step_ns)} per step "
            f"({fmt_pct(worst.ratio)} of that window)"
        )
    co = sum(1 for s in report.spikes if s.coincident)
    return (
        f"{len(report.spikes)} window(s) spike to at least "
        f"{report.thresholds['spike_factor']:g}x the median wait"
        + (f", {co} of them together with {sorted(report.other)}" if co else "")
    )


def _trainer_step(
    found: _Findings,
    report: WaitReport,
    t_summary: Summary,
    shape: _Shape,
    *,
    wait: str,
    compute: str,
    trainer_bound_below: float,
    sync_sampler_above: float,
    band: float | None = None,
) -> None:
    """Step 2: trainer- or sampler-bound (or balanced, within the noise of the threshold),
    by the rule of the loop's shape."""
    measured = _measured_words(report, wait, compute)
    share = _wait_share(report, t_summary, wait)
    found.band, found.band_basis = _band(report, band)
    the_band = (found.band, found.band_basis)
    if shape.loop == "sync":
        bound, text = _judge_sync(report, measured, sync_sampler_above, share, the_band)
        found.ceilings = _ceilings(share, "sync")
    else:
        bound, text = _judge_overlapped(report, measured, trainer_bound_below, the_band)
        found.ceilings = _ceilings(report.ratio, "overlapped")
    text += f"; {_ceiling_words(found.ceilings)}"
    shape_name = "synchronous loop" if shape.loop == "sync" else "overlapped pipeline"
    found.reasons.append(f"loop shape: {shape_name}, {shape.words}")
    found.reasons.append(text)
    found.bound = bound
    spikes = _spike_words(report, bound)
    if spikes:
        found.reasons.append(spikes)
    if shape.source == "default":
        other = _sync_bound(share, sync_sampler_above, found.band)
        found.unknowns.append(
            "the loop's shape: judged as an overlapped pipeline (the stricter reading); if the "
            f"loop collects and then trains (SB3, CleanRL), {_advice.loop_sync()}; it would "
            "then be " + ("balanced" if other == "balanced" else f"{other}-bound")
        )
    if bound in ("trainer", "balanced"):
        others = {n: st.share for n, st in t_summary.phases.items() if n != wait and st.count > 0}
        found.dominant = max(others, key=lambda n: others[n]) if others else compute
        found.kind = "trainer"
        if bound == "trainer":
            found.advice.append(
                f"sampler tuning will not speed training up much; look at {found.dominant!r}: "
                "the compute itself, the optimizer step, data movement inside the train step"
            )
        else:
            found.advice.append(
                f"either side pays about as much ({_ceiling_words(found.ceilings)}); on the "
                f"trainer's side look at {found.dominant!r}"
            )


# ----------------------------------------------------------- the sampler's side


@dataclass(frozen=True)
class _Foreign:
    """The part of the sampler's marked steps spent in another Profiler's phases on the
    same thread (phases holding none of the sampler's work: a trainer's ``compute``
    stepped between two sampler steps), and the words saying so."""

    share: float
    words: str


def _covered_upto(iv: np.ndarray, x: np.ndarray) -> np.ndarray:
    """How much of the disjoint sorted intervals ``iv`` lies before each time in ``x``."""
    starts, ends = iv[:, 0], iv[:, 1]
    cum = np.concatenate(([0.0], np.cumsum(ends - starts)))
    i = np.searchsorted(starts, x, side="right")
    prev = np.maximum(i - 1, 0)
    part = np.clip(x - starts[prev], 0.0, (ends - starts)[prev])
    out: np.ndarray = np.where(i > 0, cum[prev] + part, 0.0)
    return out


def _foreign(sampler: Source, trainer: Source | None) -> _Foreign | None:
    """Issue 38 item 5: a sampler Profiler and another Profiler stepped on one thread (both
    live, one writer each, the same writer thread). The other's phases in which the
    sampler did no work are that Profiler's time, never the sampler's untimed time: their
    overlap with the sampler's marked steps (within the span both rings cover) is left
    out of the sampler's wall time. None when that cannot be told (a Snapshot, a
    ``per_thread`` Profiler, other threads)."""
    if trainer is None:
        return None
    s, t = sampler.rings, trainer.rings
    if s is None or t is None or len(s.writers) != 1 or len(t.writers) != 1:
        return None
    if not s.writers[0] or s.writers[0] != t.writers[0]:
        return None
    sev, tev = s.events, t.events
    steps, work, other = sev[sev["phase"] < 0], sev[sev["phase"] >= 0], tev[tev["phase"] >= 0]
    if len(steps) == 0 or len(other) == 0:
        return None
    step_iv = _union(_intervals(steps))
    work_iv = _union(_intervals(work))
    o_iv = _intervals(other)
    phase_of = other["phase"][np.argsort(other["start_ns"], kind="stable")]
    if len(work_iv):
        inside = _covered_upto(work_iv, o_iv[:, 1]) - _covered_upto(work_iv, o_iv[:, 0])
    else:
        inside = np.zeros(len(o_iv))
    theirs = inside <= 0
    if not theirs.any():
        return None
    lo, hi = max(step_iv[0, 0], o_iv[0, 0]), min(step_iv[-1, 1], o_iv[-1, 1])
    steps_in = _clip(step_iv, lo, hi)
    span = _length(steps_in)
    if span <= 0:
        return None
    share = min(1.0, _overlap_ns(steps_in, _clip(_union(o_iv[theirs]), lo, hi)) / span)
    if share <= 0:
        return None
    names = sorted({t.phases[int(p)] for p in phase_of[theirs] if 0 <= int(p) < len(t.phases)})
    words = (
        f"the {fmt_pct(share)} of them spent in the other Profiler's "
        f"{', '.join(repr(n) for n in names)} on the same thread (that Profiler's time, "
        "not the sampler's untimed time)"
    )
    return _Foreign(share, words)


@dataclass(frozen=True)
class _Wall:
    """The sampler's wall time, what it was taken from, and the timed shares of it."""

    ns: float
    basis: str
    shares: dict[str, float]  # timed phases, then IDLE (when counted), then UNTIMED
    coverage: float  # timed share of the working time (wall minus idle)
    note: str | None

    @property
    def idle(self) -> float:
        """Share of the wall time idle (blocked handing data over)."""
        return self.shares.get(IDLE, 0.0)


def _sampler_wall(
    s_summary: Summary,
    loop: str | None,
    report: WaitReport | None,
    wait: str,
    foreign: _Foreign | None = None,
) -> _Wall:
    """Step 3: the sampler's wall time and each phase's share of it (``foreign``: the
    part of its marked steps another Profiler's phases took on the same thread)."""
    live = {n: st for n, st in s_summary.phases.items() if st.count > 0}
    timed = {n: float(st.sum_ns) for n, st in live.items()}
    timed_ns = sum(timed.values())
    if s_summary.steps > 0 and s_summary.step.sum_ns > 0:
        wall, basis = float(s_summary.step.sum_ns), "its marked steps"
        if foreign is not None and foreign.share > 0:
            wall *= 1.0 - foreign.share
            basis += f", less {foreign.words}"
    elif loop == "sync" and report is not None and report.wait_ns > 0:
        wall = float(report.wait_ns)
        basis = (
            f"the trainer's {wait!r} time: the sampler marks no steps, and in a synchronous "
            "loop it runs while the trainer waits"
        )
    else:
        wall, basis = s_summary.elapsed_s * 1e9, "its profile's elapsed time (no steps marked)"
    note = None
    if wall <= 0 or timed_ns > 1.05 * wall:
        note = (
            f"the sampler's phases add up to more than {basis} ({fmt_ns(timed_ns)} against "
            f"{fmt_ns(max(wall, 0.0))}: durations given to record(), or phases timed outside the steps): "
            "shares are of the timed time"
        )
        wall, basis = timed_ns, "its timed phases (see the caveat)"
    elif timed_ns > wall:
        # a little more than the wall (a block still open when the steps or the waits
        # were last closed, at the end of a run): the phases fill it; shares sum to 100%
        wall = timed_ns
    # idle time is outside the timed phases: at most the wall time they leave
    idle_ns = 0.0
    if wall > 0:
        idle_ns = min(float(s_summary.counters.get(IDLE_COUNTER, 0)), max(0.0, wall - timed_ns))
    work = wall - idle_ns
    coverage = min(1.0, timed_ns / work) if work > 0 else 0.0
    shares = {n: v / wall for n, v in timed.items()} if wall > 0 else dict.fromkeys(timed, 0.0)
    idle = idle_ns / wall if wall > 0 else 0.0
    if idle > 0:
        shares[IDLE] = idle
    shares[UNTIMED] = max(0.0, 1.0 - min(1.0, timed_ns / wall if wall > 0 else 0.0) - idle)
    return _Wall(wall, basis, shares, coverage, note)


#: the two halves of one vector-env step (gymnasium's and SB3's ``step_async`` sends the
#: actions, ``step_wait`` waits for the workers): one env step where the sampler's parts
#: are ranked, the halves kept apart in the words
VECTOR_HALVES: tuple[str, str] = ("step_async", "step_wait")


def _vector_step(timed: Mapping[str, float]) -> float | None:
    """The share of one vector-env step (both halves timed), or None."""
    if all(timed.get(h, 0.0) > 0 for h in VECTOR_HALVES):
        return sum(timed[h] for h in VECTOR_HALVES)
    return None


def _top_part(timed: Mapping[str, float]) -> tuple[str, float, bool]:
    """The sampler's largest part: (the phase to look at, its share, whether it is a vector
    step's half standing for the whole step). The two halves of a vector step rank as one
    env step: a forward of 34% does not outrank a step of 32% + 25%."""
    vec = _vector_step(timed)
    parts = {n: v for n, v in timed.items() if vec is None or n not in VECTOR_HALVES}
    best = max(parts, key=lambda n: parts[n]) if parts else None
    if vec is not None and (best is None or vec >= parts[best]):
        return max(VECTOR_HALVES[::-1], key=lambda h: timed[h]), vec, True  # ties: the wait
    assert best is not None
    return best, parts[best], False


#: one vector step's time above this many times each worker's stepping: the round trip
#: to the workers (sending the actions, pickling the results, waking them) costs more
ROUND_TRIP_X = 2.0
#: and one vector step at least this share of the sampler's wall time (said even when
#: another part is larger)
ROUND_TRIP_SHARE = 0.2


def _round_trip(found: _Findings, wall: _Wall) -> tuple[str, list[str]] | None:
    """When one vector step costs more than ``ROUND_TRIP_X`` times what each of its
    worker processes spent stepping: the reason's words and the settings to change."""
    w = found.workers
    vec = _vector_step(wall.shares)
    if w is None or vec is None or vec < ROUND_TRIP_SHARE or w.get("workers", 0) < 1:
        return None
    step_s = vec * wall.ns / 1e9
    each_s = float(w["env_s"]) / float(w["workers"])
    if step_s <= 0 or each_s * ROUND_TRIP_X > step_s:
        return None
    n = int(w["workers"])
    words = (
        f"the round trip to the vector env's {n} worker processes costs more than their "
        f"stepping: one vector step (step_async + step_wait) took {fmt_ns(step_s * 1e9)} in "
        f"all, while each worker spent {fmt_ns(each_s * 1e9)} stepping its envs "
        f"({each_s / step_s:.0%} of it); the rest is sending actions, pickling observations "
        "and waking the workers"
    )
    advice = [
        "step the envs in this process: an in-process vector env (SB3 DummyVecEnv, "
        "gymnasium SyncVectorEnv or vectorization_mode='sync'), or fewer worker processes "
        "each stepping more envs (SubprocVecEnv / AsyncVectorEnv of larger sub-vectors): the "
        "env steps are too short for a process round trip each"
    ]
    return words, advice


def _sweep_next(found: _Findings, what: str) -> str:
    """How to try other settings of the sampler: with the run's command line, the
    ``gyreprof sweep`` of that command as it is, on its flag for the number of envs, the
    rollout's steps or the batch (``analysis.sweep.script``); with none visible, the
    setting to change by hand and what this run predicts of a faster sampler; with no
    command (the Python API), the factory sweep."""
    if found.command is None:
        return f"sweep {what}: " + _advice.sweep()
    from gyreprof.analysis.sweep.script import find_sweepable_flag, sweep_command

    cmd = sweep_command(found.command)
    flag = find_sweepable_flag(found.command)
    if cmd is not None and flag is not None:
        return (
            f"sweep {what} with no code change, {flag.flag} around its {flag.value} (each value "
            f"run under the launcher: samples/s, phases, peak memory): {cmd}"
        )
    gain = (
        f" (this run predicts that a 2x faster sampler makes training at most "
        f"{fmt_speedup(found.ceilings['sampler_2x'])})"
        if "sampler_2x" in found.ceilings
        else ""
    )
    return (
        f"no flag of the command sets the number of envs or the batch: change {what} by hand "
        f"(the vector env's num_envs, the steps per rollout) and compare{gain}; a flag for it "
        "makes it a sweep: gyreprof sweep -- python train.py --num-envs '{1,2,4,8}'"
    )


def _phase_kind_and_tuning(
    top: str,
    shares: dict[str, float],
    env_phases: Sequence[str],
    found: _Findings,
    trip: tuple[str, list[str]] | None = None,
) -> tuple[str, str, list[str]]:
    """The top part's kind, the words saying what it is, and the advice for it (``trip``:
    a vector step whose round trip to its workers costs more than their stepping)."""
    sweep = [_sweep_next(found, "the number of envs")] if found.command is not None else []
    if trip is not None:
        return "env", f"it is the vector env's round trip; {trip[0]}", trip[1] + sweep
    if _is_env_phase(top, env_phases):
        what = "it is env stepping"
        if top.lower() == "step_wait" and "step_async" in shares:
            what += (
                " - waiting for the slowest vector-env worker (step_async, the send, takes "
                f"{fmt_pct(shares['step_async'])})"
            )
        elif top.lower() == "step_async" and "step_wait" in shares:
            what += (
                " - mostly sending the actions to the vector-env workers (step_wait, the "
                f"wait for their results, takes {fmt_pct(shares['step_wait'])})"
            )
        return (
            "env",
            what,
            [
                "look at how the env is called (per-step Python overhead, observation copies, "
                "resets) and whether the parallelism took effect: " + _advice.check_parallelism(),
                "a bigger batch will help little while env stepping dominates",
            ]
            + sweep,
        )
    return (
        "forward/transfer",
        "it is not env stepping (forward pass / transfer / other)",
        [_sweep_next(found, "batch size and parallelism")],
    )


def _sampler_words(
    wall: _Wall,
    s_summary: Summary,
    top: str,
    min_coverage: float,
    vector: bool = False,
    named: bool = False,
) -> tuple[str, bool]:
    """The sampler's reason (untimed first when coverage is low) and whether untimed leads.
    ``vector``: ``top`` is a half of the vector-env step that leads, both halves said.
    ``named``: stack samples name where the untimed part went (their line follows)."""
    shares = wall.shares
    halves = VECTOR_HALVES if vector else (top,)
    order = sorted(
        (n for n in shares if n not in (UNTIMED, IDLE, *halves)),
        key=lambda n: shares[n],
        reverse=True,
    )
    st = s_summary.phases[top]
    top_share = sum(shares[h] for h in halves)
    rest = ", ".join(f"{n!r} {fmt_pct(shares[n])}" for n in order[:3])
    untimed = shares[UNTIMED]
    if vector:
        name = "one vector env step (step_async + step_wait)"
        stats = ", ".join(
            f"{h!r} {fmt_pct(shares[h])}, p50 {fmt_ns(s_summary.phases[h].p50)}"
            for h in sorted(halves, key=lambda h: shares[h], reverse=True)
        )
    else:
        name = repr(top)
        stats = f"p50 {fmt_ns(st.p50)}, p99 {fmt_ns(st.p99)}"
    idle = ""
    if wall.idle >= 0.005:
        idle = (
            f"; it was idle {fmt_pct(wall.idle)} of its wall time, blocked handing its data "
            "over (a put into a full queue: the trainer was not ready for more), which is "
            "waiting, not work"
        )
    if wall.coverage < min_coverage:
        untimed_leads = untimed > top_share
        place = "the largest part" if untimed_leads else "a large part"
        worked = "timed" if wall.idle <= 0 else "of the time it worked is timed"
        nxt = (
            "the stack samples name where it went (below)"
            if named
            else "time the rest next (the policy forward, buffer writes, observation "
            "conversion: whatever runs between the timed phases)"
        )
        text = (
            f"sampler: {fmt_pct(untimed)} of the sampler's wall time (from {wall.basis}) is "
            f"untimed, {place}: only {fmt_pct(wall.coverage)} {worked} (below "
            f"{fmt_pct(min_coverage)}), so no timed phase can be called dominant; {nxt}. "
            f"Timed: {name} {fmt_pct(top_share)} ({stats})"
            + (f", then {rest}" if rest else "")
            + idle
        )
        return text, untimed_leads
    lead = "the largest" if top_share < 0.5 else "dominant"
    text = (
        f"sampler: {name} takes {fmt_pct(top_share)} of the sampler's wall time (from "
        f"{wall.basis}; {lead}; {stats})"
        + (f", then {rest}" if rest else "")
        + (f", untimed {fmt_pct(untimed)}" if untimed >= 0.005 else "")
        + idle
    )
    return text, False


def _sampler_step(
    found: _Findings,
    s_summary: Summary,
    wall: _Wall,
    *,
    env_phases: Sequence[str],
    min_coverage: float,
    sites: _sites.ProcessSites | None = None,
) -> str:
    """Step 3's verdict: which part of the sampler to look at; returns the top timed phase.
    ``sites``: the stack samples, which name where its untimed time went."""
    timed = {n: v for n, v in wall.shares.items() if n not in (UNTIMED, IDLE)}
    top, _, vector = _top_part(timed)
    trip = _round_trip(found, wall)
    top_kind, what, tune = _phase_kind_and_tuning(
        top, wall.shares, env_phases, found, trip if vector else None
    )
    if trip is not None and not vector:  # not the largest part, but a large one
        what, tune = f"{what}; {trip[0]}", tune + trip[1]
    if sites is not None:
        found.sampler_sites = _sites.sampler_rows(sites, wall.shares[UNTIMED])
    named = bool(found.sampler_sites)
    seen, untimed_leads = _sampler_words(wall, s_summary, top, min_coverage, vector, named)
    if untimed_leads:
        top_kind, what = "untimed", "the untimed part is the largest"
        tune = [_advice.time_untimed()]
        if named and found.bound != "trainer" and not found.starved:
            # the largest site is the first thing to look at, whatever the bound's doubt
            first = _sites.sampler_advice(found.sampler_sites[0])
            found.advice.insert(0, first)
            found.sampler_advice.append(first)
            tune = []
    look = UNTIMED if untimed_leads else top
    if wall.note:
        found.caveats.append(f"sampler: {wall.note}")
    if found.starved:
        tune = []
    if found.bound in ("sampler", "balanced"):
        found.dominant, found.kind = look, top_kind
        found.reasons.append(f"{seen}; {what}")
        found.advice += tune
        found.sampler_advice += tune
    elif found.bound == "trainer":
        found.reasons.append(
            f"{seen}; this does not matter until the trainer waits for the sampler"
        )
    else:
        found.dominant, found.kind = look, top_kind
        found.reasons.append(f"{seen}; {what}")
        cond = [f"if the trainer turns out to wait for the sampler: {t}" for t in tune]
        found.advice += cond
        found.sampler_advice += cond
        if top.lower() in DEFAULT_HANDOFF_PHASES:
            found.reasons.append(
                f"{top!r} looks like handing batches over: if it blocks on a full queue, "
                "the sampler is waiting for its consumer, which points to a trainer-bound run"
            )
        if not found.starved:
            found.unknowns.append(
                "whether tuning the sampler pays off at all: " + _advice.profile_trainer()
            )
    return top


def _trainer_side(
    found: _Findings,
    trainer: Source,
    sampler: Source | None,
    loop: str | None,
    wait: str,
    compute: str,
    thresholds: dict[str, float],
    side_kw: dict[str, Any],
    wait_options: WaitOptions,
    sampler_idle: Sequence[str] = (),
    band: float | None = None,
    loop_evidence: str | None = None,
) -> tuple[WaitReport, _Shape]:
    """Steps 1-2 on the trainer's profile: the wait report, the loop's shape, the bound."""
    t_summary = trainer.summary
    report = report_of(trainer, wait, compute, wait_options)
    shape = _loop_shape(
        loop,
        sampler,
        trainer,
        wait,
        compute,
        overlap_above=thresholds["overlap_above"],
        min_aligned=thresholds["min_aligned"],
        sampler_idle=sampler_idle,
        loop_evidence=loop_evidence,
    )
    _trainer_step(
        found,
        report,
        t_summary,
        shape,
        wait=wait,
        compute=compute,
        trainer_bound_below=thresholds["trainer_bound_below"],
        sync_sampler_above=thresholds["sync_sampler_above"],
        band=band,
    )
    found.caveats += _side_caveats("trainer", trainer, t_summary, [wait, compute], **side_kw)
    return report, shape


def _sampler_side(
    found: _Findings,
    sampler: Source,
    loop: str | None,
    report: WaitReport | None,
    wait: str,
    env_phases: Sequence[str],
    thresholds: dict[str, float],
    side_kw: dict[str, Any],
    trainer: Source | None = None,
    sites: _sites.ProcessSites | None = None,
) -> _Wall:
    """Step 3 on the sampler's profile: shares of its wall time, what to look at."""
    s_summary = sampler.summary
    if not any(st.count > 0 for st in s_summary.phases.values()):
        fix = "time its loop first"
        if not s_summary.warmup.done:
            fix = f"its warm-up ({s_summary.warmup.rule}) never ended: {_advice.shorter_warmup()}"
        raise InvalidValueError(
            "the sampler profile has no steady-state samples in any phase (phases: "
            f"{list(s_summary.phases)}); {fix}"
        )
    wall = _sampler_wall(s_summary, loop, report, wait, _foreign(sampler, trainer))
    top = _sampler_step(
        found,
        s_summary,
        wall,
        env_phases=env_phases,
        min_coverage=thresholds["min_coverage"],
        sites=sites,
    )
    found.caveats += _side_caveats("sampler", sampler, s_summary, [top], **side_kw)
    return wall


def _workers_step(
    found: _Findings, cw: _workers.CollectorWorkers, sites: _sites.ProcessSites | None
) -> _Wall:
    """Step 3 where a multi-process collector's workers collect: the sampler's time is
    theirs (``analysis.workers``), shares of their collection wall time, its untimed
    part by their stack samples' sites; the training process's own sampler phases (a
    start-up reset) are not judged."""
    shares = cw.shares
    untimed = shares[UNTIMED]
    if sites is not None:
        found.sampler_sites = _sites.sampler_rows(sites, untimed)
    line = _workers.line(cw, found.sampler_sites)
    if found.bound == "trainer":
        line += "; this does not matter until the trainer waits for the sampler"
    found.reasons.append(line)
    found.workers_judged = True
    if found.bound in ("sampler", "balanced", "unknown") and not found.starved:
        top = cw.leading
        first = _workers.advice(cw, found.sampler_sites)
        found.advice.insert(0, first)
        found.sampler_advice.append(first)
        found.dominant = top
        found.kind = (
            "env"
            if top in ("env_step", "env_reset")
            else "untimed"
            if top == UNTIMED
            else "forward/transfer"
        )
    if found.bound == "unknown" and not found.starved:
        found.unknowns.append(
            "whether tuning the sampler pays off at all: " + _advice.profile_trainer()
        )
    n = len(cw.workers)
    basis = f"the {n} collector worker{'s' if n != 1 else ''}' collection wall time"
    return _Wall(float(cw.wall_ns), basis, dict(shares), 1.0 - untimed, None)


def _site_lines(found: _Findings, wall: _Wall | None, sites: _sites.ProcessSites | None) -> None:
    """The stack samples' lines: the sampler's untimed time by site (when its own phases
    were judged), the trainer's compute by site, and, in a trainer-bound run, the
    compute's largest site as the first advice."""
    if wall is not None:
        line = _sites.sampler_line(wall.shares.get(UNTIMED), found.sampler_sites)
        if line is not None and not found.workers_judged:
            found.reasons.append(line)
    found.compute_sites = _sites.rows(sites.compute, sites.compute_samples) if sites else []
    line = _sites.compute_line(found.compute_sites)
    if line is not None:
        found.reasons.append(line)
        if found.bound == "trainer":
            found.advice.insert(0, _sites.compute_advice(found.compute_sites[0]))


def _no_sampler(found: _Findings) -> None:
    if found.starved:
        return
    if found.bound == "sampler":
        found.unknowns.append(
            "which sampler phase to tune: no sampler profile; " + _advice.profile_sampler()
        )
    elif found.bound == "trainer":
        found.unknowns.append(
            "how the sampler spends its time (no sampler profile); it does not limit training now"
        )


# ---------------------------------------------------------------------- entry


def _check_arguments(
    sampler: object,
    trainer: object,
    loop: str | None,
    fractions: dict[str, float],
    counts: dict[str, int],
    env_phases: Sequence[str],
    gpu_hints: Sequence[str],
    sampler_idle: Sequence[str] = (),
) -> None:
    if sampler is None and trainer is None:
        raise InvalidValueError(
            "diagnose needs at least one profile: diagnose(sampler=prof, trainer=tp) "
            "(a Profiler, Snapshot or Summary for each side)"
        )
    for name, value in fractions.items():
        check_fraction(name, value)
    for name, n in counts.items():
        check_positive_int(name, n)
    if loop is not None and loop not in LOOPS:
        raise InvalidValueError(
            f"loop must be 'sync' (collect, then train), 'overlapped' (a sampler feeding a "
            f"queue while the trainer computes) or None (detect it), got {loop!r}"
        )
    if isinstance(env_phases, str):
        raise ArgumentTypeError("env_phases must be a list of names, not one string")
    if isinstance(gpu_hints, str):
        raise ArgumentTypeError("gpu_hints must be a list of substrings, not one string")
    if isinstance(sampler_idle, str) or not all(isinstance(p, str) for p in sampler_idle):
        raise ArgumentTypeError("sampler_idle must be a list of phase names, not one string")


def diagnose(
    sampler: Profiler | Snapshot | Summary | Source | None = None,
    trainer: Profiler | Snapshot | Summary | Source | None = None,
    *,
    wait: str = "wait",
    compute: str = "compute",
    loop: str | None = None,
    options: DiagnoseOptions | None = None,
    **knobs: Any,
) -> Verdict:
    """Where the time goes and what to tune next, in plain words (see the module doc).

    Parameters
    ----------
    sampler / trainer: Profiler, Snapshot or Summary of each side (either may
        be None, not both), or a saved events file
        (``gp.export.load_events(path)``) of another process: its raw events
        and wall-clock offset let the loop's shape be detected across processes.
    wait / compute: the trainer's phase names (see ``wait_report``).
    loop: ``"sync"`` (collect, then train: SB3, CleanRL), ``"overlapped"`` (a
        sampler thread or process feeding a queue) or None: detect it from
        both Profilers' event timestamps.
    env_phases: sampler phase names that mean env stepping (lower case;
        names starting with "env" count too).
    sampler_idle: sampler phases in which it waits for the trainer rather than
        works (a worker's ``recv`` of the next request): left out of its work
        when the loop's shape is detected, which would otherwise read a
        synchronous loop whose sampler times its waiting as overlapped.
    trainer_bound_below: overlapped pipeline: a wait ratio below this is
        trainer-bound, at or above it sampler-bound (default 0.10).
    sync_sampler_above: synchronous loop: a wait ratio above this is
        sampler-bound, else trainer-bound (default 0.5: the larger share).
    overlap_above: detection: a sampler working during at least this share
        of the trainer's compute time means overlapped (default 0.2).
    min_aligned: detection gives up when less than this share of the
        sampler's time falls inside the trainer's wait or compute (0.5).
    min_coverage: below this timed share of the sampler's wall time the
        verdict leads with the untimed share (default 0.8).
    overhead_limit: profiler overhead share above this is a caveat.
    min_samples_p99 / min_samples_p999: fewer steady samples than this make
        the p99 / p99.9 a caveat.
    gpu: whether the profiled run used CUDA; None: this process imported
        torch and CUDA is available.
    band: half-width of the "balanced" band around the threshold; None: from the
        trainer's windows (half their wait ratios' interquartile range, 2 to 10 points;
        5 points with fewer than 4 windows; see :class:`Verdict`); 0: no band.
    loop_evidence: with ``loop``, the words saying how the shape was read (from the
        training thread's timeline, as ``gyreprof run`` does): the verdict's
        ``loop_source`` is then ``"timeline"`` instead of ``"declared"``.
    rollout_cause: the sampler is a rollout service, and this is why the trainer waits on
        it (``gyreprof.analysis.rollout_cause.RolloutCause`` as a dict: ``kind``,
        ``endpoint``, ``short``, ``words``, ``next``): a sampler-bound or balanced
        verdict says it and leads its advice with its ``next``; with no sampler
        profile, nothing is said about sampler phases (a service has none).
    vector_workers: a vector env's worker processes (``gyreprof run``): ``{"workers": N,
        "env_s": S}``, their env stepping in all (s). When one vector step (``step_async`` +
        ``step_wait``) leads and takes more than twice what each worker stepped, the round
        trip to the workers is said to cost more than their stepping, with the settings
        that change it.
    command: the run's command line (``gyreprof run``): the advice to try other settings
        is the ``gyreprof sweep`` of that command on its flag for the number of envs, the
        steps per rollout or the batch, or says which setting to change by hand.
    dead_feeder: the thread or process that fed the trainer died, and it starved after
        (``gyreprof.analysis.feeders.DeadFeeder`` as a dict): the verdict names it first,
        its fix is the first advice, and no advice to tune the sampler follows.
    sites: the stack samples of the processes judged (``gyreprof run``;
        ``gyreprof.analysis.sites.ProcessSites``): the sampler's untimed time and the
        trainer's compute by code site, in ``sampler_sites`` / ``compute_sites`` and a
        line each; where untimed time leads the sampler (or compute holds a
        trainer-bound run back) the largest site is the first advice.
    collector_workers: a multi-process collector's workers
        (``gyreprof.analysis.workers.CollectorWorkers``): the sampler's part is read from
        their collection time (shares of their collection wall time, which replace the
        training process's own sampler phases), its untimed part by ``worker_sites``,
        their stack samples.
    options: the knobs above (``env_phases`` to ``worker_sites``) as one
        :class:`DiagnoseOptions`, the wait report's in its ``wait_options``.
    knobs: any of those knobs as a keyword (``band=0.0``), or one of ``wait_report``'s
        (``window_steps=``, ``other=``, ...): it replaces that field of ``options``.
    """
    o = (options or DiagnoseOptions()).replaced(knobs)
    env_phases, sampler_idle, gpu, gpu_hints = o.env_phases, o.sampler_idle, o.gpu, o.gpu_hints
    band, loop_evidence = o.band, o.loop_evidence
    trainer_bound_below, sync_sampler_above = o.trainer_bound_below, o.sync_sampler_above
    overlap_above, min_aligned, min_coverage = o.overlap_above, o.min_aligned, o.min_coverage
    overhead_limit = o.overhead_limit
    min_samples_p99, min_samples_p999 = o.min_samples_p99, o.min_samples_p999
    fractions = {
        "trainer_bound_below": trainer_bound_below,
        "sync_sampler_above": sync_sampler_above,
        "overlap_above": overlap_above,
        "min_aligned": min_aligned,
        "min_coverage": min_coverage,
        "overhead_limit": overhead_limit,
    }
    counts = {"min_samples_p99": min_samples_p99, "min_samples_p999": min_samples_p999}
    if band is not None:
        check_fraction("band", band)
    if loop_evidence is not None and (loop is None or not isinstance(loop_evidence, str)):
        raise ArgumentTypeError("loop_evidence is the words behind a given loop=: a string")
    _check_arguments(sampler, trainer, loop, fractions, counts, env_phases, gpu_hints, sampler_idle)
    # each side is resolved once, here; everything below reads only the Source
    s_src = resolve(sampler, what="sampler", paths=False) if sampler is not None else None
    t_src = resolve(trainer, what="trainer", paths=False) if trainer is not None else None
    use_gpu = _cuda_in_use() if gpu is None else bool(gpu)
    thresholds = {k: float(v) for k, v in {**fractions, **counts}.items()}
    side_kw: dict[str, Any] = dict(
        overhead_limit=float(overhead_limit),
        min_p99=int(min_samples_p99),
        min_p999=int(min_samples_p999),
        gpu=use_gpu,
        gpu_hints=tuple(gpu_hints),
    )
    command = tuple(str(a) for a in o.command) if o.command is not None else None
    found = _Findings(starved=o.dead_feeder is not None, command=command, workers=o.vector_workers)
    report: WaitReport | None = None
    shape: _Shape | None = None

    # 1-2. the loop's shape; is the trainer waiting?
    if t_src is not None:
        report, shape = _trainer_side(
            found,
            t_src,
            s_src,
            loop,
            wait,
            compute,
            thresholds,
            side_kw,
            o.wait_options,
            tuple(sampler_idle),
            band,
            loop_evidence,
        )
    else:
        found.unknowns.append(
            "whether the trainer waits for the sampler: without a trainer profile (phases "
            f"{wait!r} around the batch fetch and {compute!r} around the train step) a faster "
            "sampler may or may not speed training up"
        )
    # 3. where does the sampler's wall time go? (a collector's workers' time, when it
    # collects in worker processes)
    wall: _Wall | None = None
    if o.collector_workers is not None:
        wall = _workers_step(found, o.collector_workers, o.worker_sites)
    elif s_src is not None:
        wall = _sampler_side(
            found,
            s_src,
            shape.loop if shape else loop,
            report,
            wait,
            env_phases,
            thresholds,
            side_kw,
            t_src,
            o.sites,
        )
    elif o.rollout_cause is None:
        _no_sampler(found)
    # 4. a rollout service's cause, when the trainer waits on it
    cause = o.rollout_cause if found.bound in ("sampler", "balanced") else None
    if cause is not None:
        found.reasons.append(f"rollouts: {cause['words']}")
        found.advice.insert(0, str(cause["next"]))
    # 5. where the untimed time and the compute went, from stack samples
    _site_lines(found, wall, o.sites)
    # 6. a feeder that died: the wait after it is starvation, not a slow sampler
    dead = o.dead_feeder
    if dead is not None:
        found.reasons.insert(0, f"feeder: {dead['words']}")
        found.advice.insert(0, str(dead["next"]))
    # 7. caveats are gathered with each side
    return _verdict(found, report, shape, wall, thresholds, cause, dead)


def _verdict(
    found: _Findings,
    report: WaitReport | None,
    shape: _Shape | None,
    wall: _Wall | None,
    thresholds: dict[str, float],
    cause: Mapping[str, Any] | None = None,
    dead: Mapping[str, Any] | None = None,
) -> Verdict:
    """The findings of both sides as one Verdict."""
    return Verdict(
        bound=found.bound,
        dominant_phase=found.dominant,
        reasons=found.reasons,
        caveats=found.caveats,
        advice=found.advice,
        unknowns=found.unknowns,
        wait_ratio=report.ratio if report is not None else None,
        sampler_shares=dict(wall.shares) if wall is not None else {},
        dominant_kind=found.kind,
        wait_report=report,
        thresholds=thresholds,
        loop=shape.loop if shape is not None else None,
        loop_source=shape.source if shape is not None else None,
        loop_evidence=shape.words if shape is not None else None,
        coverage=wall.coverage if wall is not None else None,
        sampler_wall=wall.basis if wall is not None else None,
        band=found.band,
        band_basis=found.band_basis,
        ceilings=dict(found.ceilings),
        rollout_cause=dict(cause) if cause is not None else None,
        dead_feeder=dict(dead) if dead is not None else None,
        sampler_advice=[a for a in found.sampler_advice if a in found.advice],
        sampler_sites=list(found.sampler_sites),
        compute_sites=list(found.compute_sites),
    )
