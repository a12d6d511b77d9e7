"""Data and rendering behind ``gyreprof top``.

A :class:`TopModel` keeps one reader per live segment and the previous
snapshot of each, so every refresh reports two views of each process: *since
start* (the steady-state summary) and *last window* (exactly what was recorded
since the previous refresh: bucket counts only grow, so the difference of two
snapshots is the histogram of the interval; see ``gyreprof.live.interval``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.format import UNTIMED, fmt_ns, fmt_pct, fmt_rate, safe_name, text_table
from gyreprof.live import _layout as lay
from gyreprof.live._ended import ended_run
from gyreprof.live.reader import (
    LiveEntry,
    LiveReader,
    _tree,
    drop_folded,
    interval,
    list_segments,
)
from gyreprof.model._serial import encode, plain, serial_format
from gyreprof.model.histogram import STEP
from gyreprof.model.snapshot import Snapshot, merge
from gyreprof.model.summary import PhaseStats, Summary

TOP_FORMAT = "gyreprof.top/1"


def _num(x: Any) -> float | None:
    """NaN/inf -> None so the JSON is strict."""
    f = float(x)
    return f if math.isfinite(f) else None


# ------------------------------------------------------------- the --json record
# What ``top --json`` prints, one TopRecord per refresh; gyreprof.model._serial writes and
# reads it (``decode(TopRecord, json.loads(line))`` gives it back, checked).


@dataclass(frozen=True)
class PhaseRecord:
    """One phase (durations in ns; None where there is no number)."""

    count: int
    mean_ns: float | None
    p50_ns: float | None
    p99_ns: float | None
    max_ns: float | None
    share: float | None = None  # of the step; None for the step itself

    @classmethod
    def of(cls, st: PhaseStats, with_share: bool = True) -> PhaseRecord:
        return cls(
            count=int(st.count),
            mean_ns=_num(st.mean),
            p50_ns=_num(st.p50),
            p99_ns=_num(st.p99),
            max_ns=_num(st.max),
            share=_num(st.share) if with_share else None,
        )


@dataclass(frozen=True)
class StatsRecord:
    """The part of a Summary that ``top --json`` prints."""

    steps: int
    steps_per_s: float | None
    elapsed_s: float | None
    phases: dict[str, PhaseRecord]
    step: PhaseRecord
    overwritten: int
    out_of_range: int
    negative: int
    counters: dict[str, int]
    warming_up: bool
    interval_s: float | None = None  # the window's length; None for since-start

    @classmethod
    def of(cls, s: Summary, interval_s: float | None = None) -> StatsRecord:
        return cls(
            steps=int(s.steps),
            steps_per_s=_num(s.steps_per_s),
            elapsed_s=_num(s.elapsed_s),
            phases={k: PhaseRecord.of(v) for k, v in s.phases.items()},
            step=PhaseRecord.of(s.step, with_share=False),
            overwritten=int(s.overwritten),
            out_of_range=int(s.out_of_range),
            negative=int(s.negative),
            counters={str(k): int(v) for k, v in s.counters.items()},
            warming_up=not s.warmup.done,
            interval_s=interval_s,
        )


@dataclass(frozen=True)
class ProcessRecord:
    """One live segment at one refresh."""

    pid: int
    name: str
    path: str
    alive: bool
    stale: bool
    closed: bool
    step: int
    steps_completed: int
    open_phase: str | None
    open_for_ns: int | None
    since_start: StatsRecord | None
    last_window: StatsRecord | None
    error: str | None


@dataclass(frozen=True)
class MergedRecord:
    """All processes merged (when their layouts agree)."""

    since_start: StatsRecord
    last_window: StatsRecord | None


@serial_format(TOP_FORMAT)
@dataclass(frozen=True)
class TopRecord:
    """One refresh of ``gyreprof top``."""

    taken_unix_s: float
    target_pid: int | None
    processes: list[ProcessRecord]
    merged: MergedRecord | None
    stale: list[dict[str, Any]]  # LiveEntry.to_dict() of segments whose writer is gone
    errors: list[dict[str, Any]]  # ... and of segments that could not be read


@dataclass
class ProcessView:
    """One segment at one refresh."""

    entry: LiveEntry
    snapshot: Snapshot | None
    window: Snapshot | None  # since the previous refresh (None on the first)
    window_s: float
    step: int
    steps_completed: int
    open_phase: str | None
    open_for_ns: int | None
    closed: bool
    error: str | None = None

    def record(self) -> ProcessRecord:
        e = self.entry
        window = None
        if self.window is not None:
            window = StatsRecord.of(self.window.summary(), interval_s=self.window_s)
        return ProcessRecord(
            pid=int(e.pid),
            name=str(e.name),
            path=str(e.path),
            alive=bool(e.alive),
            stale=bool(e.stale),
            closed=self.closed,
            step=int(self.step),
            steps_completed=int(self.steps_completed),
            open_phase=self.open_phase,
            open_for_ns=None if self.open_for_ns is None else int(self.open_for_ns),
            since_start=StatsRecord.of(self.snapshot.summary()) if self.snapshot else None,
            last_window=window,
            error=self.error,
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = plain(self.record())
        return d


@dataclass
class Frame:
    """Everything one refresh shows."""

    processes: list[ProcessView]
    merged: Snapshot | None
    merged_window: Snapshot | None
    window_s: float
    stale: list[LiveEntry]
    errors: list[LiveEntry]
    target: int | None
    # how many segments the merged view merged (of one kind: the same phases)
    merged_segments: int = 0

    def record(self) -> TopRecord:
        merged = None
        if self.merged is not None:
            window = None
            if self.merged_window is not None:
                window = StatsRecord.of(self.merged_window.summary(), interval_s=self.window_s)
            merged = MergedRecord(StatsRecord.of(self.merged.summary()), window)
        return TopRecord(
            taken_unix_s=time.time(),
            target_pid=self.target,
            processes=[p.record() for p in self.processes],
            merged=merged,
            stale=[e.to_dict() for e in self.stale],
            errors=[e.to_dict() for e in self.errors],
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``gyreprof.top/1`` record as plain JSON types (strict: no NaN)."""
        return encode(self.record())


class TopModel:
    """Tracks the live segments of a process tree (or of the whole machine)."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self._readers: dict[Path, LiveReader] = {}
        self._prev: dict[Path, Snapshot] = {}
        self._last_t: float | None = None

    def _entries(self) -> list[LiveEntry]:
        # a per_thread profiler's threads already folded into its retired segment: once
        entries = drop_folded(list_segments())
        if self.pid is None:
            return entries
        try:
            pids = _tree(self.pid)
        except LookupError:
            own = [e for e in entries if e.pid == self.pid]
            if own:
                return own
            ended = ended_run(self.pid)
            if ended is not None:
                raise LookupError(ended) from None
            raise LookupError(
                f"no process with pid {self.pid} and no live segment of it "
                f"(looked in {lay.segment_dir()})"
            ) from None
        found = [e for e in entries if e.pid in pids]
        if not found:
            ended = ended_run(self.pid)
            if ended is not None:
                raise LookupError(ended)
            raise LookupError(
                f"no gyreprof live segment in the process tree of pid {self.pid}; create its "
                f"Profiler with live=True (looked in {lay.segment_dir()})"
            )
        return found

    def refresh(self) -> Frame:
        """Read every segment once. LookupError when there is nothing to show for ``pid``."""
        entries = self._entries()
        now_t = time.monotonic()
        window_s = (now_t - self._last_t) if self._last_t is not None else 0.0
        self._last_t = now_t
        views: list[ProcessView] = []
        stale: list[LiveEntry] = []
        errors: list[LiveEntry] = []
        seen = set()
        for e in entries:
            if e.error is not None:
                errors.append(e)
                continue
            if e.stale and self.pid is None:
                stale.append(e)
                continue
            seen.add(e.path)
            views.append(self._read(e, window_s))
        if self.pid is not None and not views and errors:
            msg = "; ".join(str(e.error) for e in errors)
            if any("permission denied" in str(e.error) for e in errors):
                raise PermissionError(msg)
            raise InvalidValueError(msg)
        for path in list(self._readers):
            if path not in seen:
                self._readers.pop(path).close()
                self._prev.pop(path, None)
        kind = _merge_group(views)
        snaps = [v.snapshot for v in kind if v.snapshot is not None]
        wins = [v.window for v in kind if v.window is not None]
        merged = _try_merge(snaps) if len(snaps) > 1 else None
        merged_w = _try_merge(wins) if len(wins) > 1 else None
        n = len(snaps) if merged is not None else 0
        return Frame(views, merged, merged_w, window_s, stale, errors, self.pid, n)

    def _read(self, e: LiveEntry, window_s: float) -> ProcessView:
        try:
            r = self._readers.get(e.path)
            if r is None:
                r = LiveReader(e.path)
                self._readers[e.path] = r
            snap = r.snapshot(windows=False)
            closed = r.closed
        except (LookupError, ValueError, OSError) as exc:
            self._readers.pop(e.path, None)
            return ProcessView(e, None, None, window_s, 0, 0, None, None, False, str(exc))
        prev = self._prev.get(e.path)
        self._prev[e.path] = snap
        win = interval(prev, snap) if prev is not None else None
        since = snap.open_since_ns
        taken = snap.times.taken_ns
        open_for = max(0, taken - since) if (snap.open_phase and since > 0) else None
        if e.stale or closed:
            open_for = None
        return ProcessView(
            entry=e,
            snapshot=snap,
            window=win,
            window_s=window_s,
            step=snap.totals.steps_begun,
            steps_completed=snap.totals.steps_completed,
            open_phase=snap.open_phase if open_for is not None else None,
            open_for_ns=open_for,
            closed=closed,
        )

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()
        self._prev.clear()


def _merge_group(views: list[ProcessView]) -> list[ProcessView]:
    """The segments the merged view adds up: those of one kind (the same phases), the
    most numerous kind that recorded something. A sampler's and a trainer's segments
    (each process under gyreprof run has both) time the same wall clock from two sides:
    added up, their shares would pass 100%."""
    kinds: dict[tuple[str, ...], list[ProcessView]] = {}
    for v in views:
        if v.snapshot is not None and _recorded(v.snapshot):
            kinds.setdefault(tuple(v.snapshot.phases), []).append(v)
    if not kinds:  # nothing recorded anywhere: every readable segment, as before
        return [v for v in views if v.snapshot is not None]
    return max(kinds.values(), key=len)


def _try_merge(snaps: list[Snapshot]) -> Snapshot | None:
    try:
        return merge(snaps)
    except ValueError:  # different histogram layouts: no merged view
        return None


# ------------------------------------------------------------------------- text


def _status(v: ProcessView) -> str:
    if v.error:
        return "unreadable"
    if v.entry.stale:
        return "stale (process gone)"
    if v.closed:
        return "closed"
    return "alive"


def _recorded(snap: Snapshot | None) -> bool:
    """Whether the segment holds anything: a step, a phase event or a counter."""
    if snap is None:
        return False
    s = snap.summary()
    return bool(s.steps or s.counters or any(st.count for st in s.phases.values()))


def shown(frame: Frame) -> tuple[list[ProcessView], list[ProcessView]]:
    """(views with a panel, views hidden). A segment with nothing recorded gets no panel
    while others hold something: under ``gyreprof run`` every process has a sampler and a
    trainer segment, and most use only one of the two roles. Unreadable ones are shown."""
    if not any(_recorded(v.snapshot) for v in frame.processes):
        return list(frame.processes), []
    show = [v for v in frame.processes if v.snapshot is None or _recorded(v.snapshot)]
    hide = [v for v in frame.processes if v not in show]
    return show, hide


# Phases whose count is the rate of a loop that marks no steps (gyreprof run times
# env.step and a vector env's step_wait, and marks no step of its own)
_RATE_PHASES = (("env_step", "env steps"), ("step_wait", "vector steps"))


def rate_basis(s: Summary) -> tuple[str, str | None]:
    """(what is counted, the phase counted or None for marked steps): the marked steps
    when there are any, else env steps, vector-env steps, else the busiest phase."""
    if s.steps:
        return "steps", None
    for phase, label in _RATE_PHASES:
        if phase in s.phases and s.phases[phase].count:
            return label, phase
    counted = [(st.count, name) for name, st in s.phases.items() if st.count]
    if not counted:
        return "steps", None
    name = max(counted)[1]
    return f"{name} calls", name


def _count(s: Summary, phase: str | None) -> int:
    return int(s.steps if phase is None else s.phases[phase].count)


def rates(v: ProcessView) -> tuple[str, int, float | None, float | None]:
    """(label, count since start, per second over the last window, per second since start)."""
    if v.snapshot is None:
        return "steps", 0, None, None
    s = v.snapshot.summary()
    label, phase = rate_basis(s)
    total = _count(s, phase)
    since = (total / s.elapsed_s) if s.elapsed_s > 0 else None
    if phase is None:
        since = s.steps_per_s
    last = None
    if v.window is not None and v.window_s > 0:
        last = _count(v.window.summary(), phase) / v.window_s
    return label, total, last, since


def _headline(v: ProcessView) -> str:
    e = v.entry
    parts = [f"pid {e.pid}", safe_name(e.name), _status(v)]
    if v.snapshot is not None:
        s = v.snapshot.summary()
        label, total, last, since = rates(v)
        parts.append(f"{label} {total}")
        if last is not None:
            parts.append(f"{fmt_rate(last)} last {v.window_s:.1f} s")
        parts.append(f"{fmt_rate(since)} since start")
        if v.open_phase is not None and v.open_for_ns is not None:
            parts.append(f"in {safe_name(v.open_phase)} for {fmt_ns(v.open_for_ns)}")
        if s.steps and not s.warmup.done:
            parts.append("warming up")
    if v.error:
        parts.append(safe_name(v.error))
    return " | ".join(parts)


def _walls(v: ProcessView, frame: Frame) -> tuple[float, float | None] | None:
    """The wall time (ns, since start and over the last window) a segment's share column
    divides by when it marks no steps, as the run's verdict takes the sampler's: the
    trainer's wait time of the same process when its training thread sampled itself (a
    synchronous loop: the sampler runs while the trainer waits), else the segment's own
    elapsed time. None for a segment that marks steps (shares of step time) or when the
    phases add up to more than that wall time."""
    if v.snapshot is None:
        return None
    s = v.snapshot.summary()
    timed = sum(float(st.sum_ns) for st in s.phases.values() if st.count)
    if s.steps > 0 or timed <= 0 or not math.isfinite(timed):
        return None
    since = s.elapsed_s * 1e9
    last = frame.window_s * 1e9 if v.window is not None and frame.window_s > 0 else None
    for p in frame.processes:
        if p is v or p.entry.pid != v.entry.pid or p.snapshot is None:
            continue
        ps = p.snapshot.summary()
        own, fed = int(ps.counters.get("loop.own", 0)), int(ps.counters.get("loop.fed", 0))
        wait = ps.phases.get("wait")
        if own > fed and wait is not None and wait.sum_ns > 0:
            since = float(wait.sum_ns)
            pw = p.window.summary().phases.get("wait") if p.window is not None else None
            last = float(pw.sum_ns) if pw is not None and pw.sum_ns > 0 else None
            break
    if since <= 0 or timed > 1.05 * since:
        return None
    return since, last


def _wall_share(sum_ns: float, wall: float | None) -> str:
    return fmt_pct(sum_ns / wall) if wall and math.isfinite(sum_ns) else "-"


def _rows(
    snap: Snapshot, window: Snapshot | None, walls: tuple[float, float | None] | None = None
) -> list[list[str]]:
    """Per phase used so far (count > 0; unused phases are hidden), then the step row
    when steps are marked. ``walls`` (:func:`_walls`): the shares are of that wall time,
    with the untimed part as a row of its own."""
    if walls is not None:
        return _wall_rows(snap, window, walls)
    s = snap.summary()
    w = window.summary() if window is not None else None
    rows = []
    names = [n for n, st in s.phases.items() if st.count]
    for name in [*names, *([STEP] if s.steps else [])]:
        st = s.phases[name] if name in s.phases else s.step
        row = [safe_name(name)]
        if w is not None:
            ws = w.phases[name] if name in w.phases else w.step
            row += [
                fmt_ns(ws.p50),
                fmt_ns(ws.p99),
                fmt_ns(ws.max),
                fmt_pct(ws.share) if name != STEP else "",
            ]
        row += [
            fmt_ns(st.p50),
            fmt_ns(st.p99),
            fmt_ns(st.max),
            fmt_pct(st.share) if name != STEP else "",
            str(st.count),
        ]
        rows.append(row)
    return rows


def _wall_rows(
    snap: Snapshot, window: Snapshot | None, walls: tuple[float, float | None]
) -> list[list[str]]:
    since, last = walls
    s = snap.summary()
    w = window.summary() if window is not None else None
    rows = []
    timed = 0.0
    timed_last = sum(float(x.sum_ns) for x in w.phases.values() if x.count) if w else 0.0
    if last is not None and timed_last > 1.05 * last:
        # the window's waits and phases do not line up (a wait still open at its end):
        # no share of it can be told this refresh
        last = None
    for name, st in s.phases.items():
        if not st.count:
            continue
        row = [safe_name(name)]
        if w is not None:
            ws = w.phases[name]
            row += [fmt_ns(ws.p50), fmt_ns(ws.p99), fmt_ns(ws.max), _wall_share(ws.sum_ns, last)]
        timed += float(st.sum_ns)
        row += [fmt_ns(st.p50), fmt_ns(st.p99), fmt_ns(st.max), _wall_share(st.sum_ns, since)]
        rows.append([*row, str(st.count)])
    row = [UNTIMED]
    if w is not None:
        rest = fmt_pct(max(0.0, 1.0 - timed_last / last)) if last else "-"
        row += ["", "", "", rest]
    rows.append([*row, "", "", "", fmt_pct(max(0.0, 1.0 - timed / since)), ""])
    return rows


def _headers(with_window: bool) -> list[str]:
    """Per phase: [last window: p50 p99 max share] then since start: p50 p99 max share count."""
    since = ["p50", "p99", "max", "share", "count"]
    if with_window:
        return ["phase", "last p50", "last p99", "last max", "last %", *since]
    return ["phase", *since]


def _footer(snap: Snapshot) -> str:
    s = snap.summary()
    bits = [f"overwritten {s.overwritten}", f"out-of-range {s.out_of_range}"]
    if s.negative:
        bits.append(f"negative {s.negative}")
    if s.counters:
        bits.append("counters " + ", ".join(f"{safe_name(k)} {v}" for k, v in s.counters.items()))
    return "  " + " | ".join(bits)


def _merged_head(frame: Frame) -> str:
    assert frame.merged is not None
    s = frame.merged.summary()
    label, phase = rate_basis(s)
    total = _count(s, phase)
    since = s.steps_per_s if phase is None else (total / s.elapsed_s if s.elapsed_s > 0 else None)
    n = frame.merged_segments or len(shown(frame)[0])
    head = f"merged: {n} segments | {label} {total}"
    if frame.merged_window is not None and frame.window_s > 0:
        last = _count(frame.merged_window.summary(), phase) / frame.window_s
        head += f" | {fmt_rate(last)} last {frame.window_s:.1f} s"
    return head + f" | {fmt_rate(since)} since start"


def slowest(frame: Frame) -> tuple[ProcessView, float, float] | None:
    """(the slowest of several env-stepping segments, its rate, the median rate) by
    env steps per second over the last window (since start on the first refresh)."""
    paced = []
    for v in frame.processes:
        label, _, last, since = rates(v)
        rate = last if last is not None else since
        if label == "env steps" and rate is not None:
            paced.append((rate, v))
    if len(paced) < 2:
        return None
    paced.sort(key=lambda rv: rv[0])
    median = paced[len(paced) // 2][0]
    return paced[0][1], paced[0][0], median


def _full_text(frame: Frame) -> list[str]:
    out = []
    show, hide = shown(frame)
    for v in show:
        out.append(_headline(v))
        if v.snapshot is not None:
            rows = _rows(v.snapshot, v.window, _walls(v, frame))
            out.append(text_table(_headers(v.window is not None), rows))
            out.append(_footer(v.snapshot))
        out.append("")
    if frame.merged is not None and len(show) > 1:
        out.append(_merged_head(frame))
        out.append(
            text_table(
                _headers(frame.merged_window is not None), _rows(frame.merged, frame.merged_window)
            )
        )
        out.append("")
    out.extend(_summary_lines(frame, hide))
    return "\n".join(out).splitlines()


def _summary_lines(frame: Frame, hide: list[ProcessView]) -> list[str]:
    out = []
    slow = slowest(frame)
    if slow is not None:
        v, rate, median = slow
        out.append(
            f"slowest worker: pid {v.entry.pid} at {fmt_rate(rate)} env steps "
            f"(median {fmt_rate(median)})"
        )
    if hide:
        kinds = Counter(_role_of(v) for v in hide)
        listed = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        out.append(f"not shown, nothing recorded: {listed} segment(s)")
    out.extend(_notes(frame))
    if not frame.processes and not frame.stale and not frame.errors:
        out.append(f"no gyreprof live segments in {lay.segment_dir()}")
    return out


def _role_of(v: ProcessView) -> str:
    """``sampler`` of ``gyreprof-run-...:sampler``; the whole name otherwise."""
    return safe_name(v.entry.name).rsplit(":", 1)[-1]


def _compact_text(frame: Frame, width: int, height: int) -> list[str]:
    """The merged view first, then one line per process, slowest first; fits the screen."""
    show, hide = shown(frame)
    out: list[str] = []
    if frame.merged is not None and len(show) > 1:
        out.append(_merged_head(frame))
        snap, win = frame.merged, frame.merged_window
        walls = None
    elif show and show[0].snapshot is not None:
        out.append(_headline(show[0]))
        snap, win = show[0].snapshot, show[0].window
        walls = _walls(show[0], frame)
    else:
        snap, win, walls = None, None, None
    if snap is not None:
        rows = [
            [r[0], *r[1:3], r[4], *r[5:7], r[8], r[9]] if win else r
            for r in _rows(snap, win, walls)
        ]
        heads = (
            ["phase", "last p50", "last p99", "last %", "p50", "p99", "share", "count"]
            if win
            else _headers(False)
        )
        out += text_table(heads, rows).splitlines()
    tail = _summary_lines(frame, hide)
    room = max(0, height - len(out) - len(tail) - 1)
    lines = []
    for v in sorted(show, key=lambda v: rates(v)[2] or rates(v)[3] or 0.0):
        label, total, last, since = rates(v)
        rate = last if last is not None else since
        lines.append(
            f"  pid {v.entry.pid} {_role_of(v)}: "
            f"{label} {total}, {fmt_rate(rate)}"
            + (f", in {safe_name(v.open_phase)}" if v.open_phase else "")
        )
    if len(lines) > room:
        keep = max(0, room - 1)
        lines = lines[:keep] + [f"  ... {len(lines) - keep} more processes"]
    out += ["processes (slowest first):", *lines] if lines and room > 1 else []
    out += tail
    return [ln[:width] for ln in out[:height]]


def render_text(frame: Frame, width: int | None = None, height: int | None = None) -> str:
    """Plain-text rendering (no terminal library needed). With ``width`` and ``height``
    (a terminal's size), a frame too big for it is shown compact: the merged view, one
    line per process and the slowest worker named, cut to fit."""
    lines = _full_text(frame)
    if width is not None and height is not None:
        if len(lines) > height or any(len(ln) > width for ln in lines):
            lines = _compact_text(frame, width, height)
    return "\n".join(lines).rstrip() + "\n"


def _notes(frame: Frame) -> list[str]:
    out = []
    if frame.stale:
        pids = ", ".join(str(e.pid) for e in frame.stale)
        out.append(
            f"{len(frame.stale)} stale segment(s) of processes that are gone (pid {pids}); "
            "remove them with gyreprof.live.clean()"
        )
    for e in frame.errors:
        out.append(f"unreadable: {safe_name(e.path)}: {safe_name(e.error)}")
    return out


def render_rich(frame: Frame) -> Any:
    """A rich renderable of the frame (rich must be installed)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []

    def table(
        title: str,
        snap: Snapshot,
        window: Snapshot | None,
        caption: str,
        walls: tuple[float, float | None] | None = None,
    ) -> Table:
        t = Table(
            title=Text(title),
            title_justify="left",
            caption=Text(caption),
            caption_justify="left",
            expand=False,
            pad_edge=False,
            box=box.SIMPLE_HEAD,
            collapse_padding=True,
        )
        t.add_column("phase", justify="left", no_wrap=True, max_width=16)
        groups = (("last", "cyan"), ("all", None)) if window is not None else (("all", None),)
        for group, style in groups:
            for h in ("p50", "p99", "max", "share"):
                t.add_column(
                    f"{group}\n{h}", justify="right", style=style, no_wrap=True, min_width=7
                )
        for row in _rows(snap, window, walls):
            # Text cells: rich must not read '[...]' in a name as markup
            t.add_row(*(Text(c) for c in row[:-1]), style="dim" if row[0] == STEP else None)
        return t

    show, hide = shown(frame)
    for v in show:
        if v.snapshot is None:
            parts.append(Text(_headline(v), style="red"))
            continue
        caption = _footer(v.snapshot).strip()
        parts.append(table(_headline(v), v.snapshot, v.window, caption, _walls(v, frame)))
    if frame.merged is not None and len(show) > 1:
        title = _merged_head(frame)
        parts.append(table(title, frame.merged, frame.merged_window, _footer(frame.merged).strip()))
    for line in _summary_lines(frame, hide):
        parts.append(Text(line, style="yellow"))
    return Group(*parts)
