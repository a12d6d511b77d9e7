"""A fleet monitor: collection every ``interval_s`` and per-interval fleet percentiles."""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.format import fmt_ns, fmt_rate
from gyreprof._support.validate import check_positive_int, check_positive_number
from gyreprof.integrations.ray.collect import Gatherer, build_fleet, check_timeout
from gyreprof.integrations.ray.fleet import STEP_PHASE, FleetSummary
from gyreprof.model._serial import decode, encode, serial_format
from gyreprof.model.snapshot import interval

if TYPE_CHECKING:
    from gyreprof.model.snapshot import Snapshot

__all__ = ["FLEET_POINT_FORMAT", "FleetMonitor", "FleetPoint", "IntervalStats"]

FLEET_POINT_FORMAT = "gyreprof.fleet_point/1"


@dataclass(frozen=True)
class IntervalStats:
    """One phase over one monitor interval, all actors together (ns; ~0.1% buckets)."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float  # upper end of the highest non-empty bucket


@serial_format(FLEET_POINT_FORMAT)
@dataclass(frozen=True)
class FleetPoint:
    """The fleet over one monitor interval (the first point covers everything so far)."""

    t_s: float  # seconds since the monitor started
    time_s: float  # time.time() of the collection
    answered: int
    missing: list[str]
    steps: int  # steady steps completed by the answering actors since they started
    interval_steps: int  # steps completed in this interval
    steps_per_s: float  # fleet throughput in this interval (sum over actors)
    phases: dict[str, IntervalStats]  # per phase (STEP_PHASE for whole steps), this interval
    spread: float  # max / median across actors of this interval's p99 of the monitor's phase
    slowest: str | None  # the actor with the highest p99 of the monitor's phase this interval

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, format ``gyreprof.fleet_point/1``."""
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FleetPoint:
        """The point again from :meth:`to_dict`; ``CorruptDataError`` naming what is wrong."""
        return decode(cls, data)

    def __str__(self) -> str:
        parts = [
            f"t={self.t_s:6.1f}s",
            f"actors {self.answered}/{self.answered + len(self.missing)}",
            f"{fmt_rate(self.steps_per_s)}",
        ]
        for name, st in self.phases.items():
            if name != STEP_PHASE and st.count:
                parts.append(f"{name} p50 {fmt_ns(st.p50)} p99 {fmt_ns(st.p99)}")
        if not math.isnan(self.spread):
            parts.append(f"spread {self.spread:.2f}x (slowest {self.slowest})")
        if self.missing:
            parts.append("missing " + ",".join(self.missing))
        return "  ".join(parts)


_QS = (50.0, 90.0, 99.0, 100.0)


def _point(fleet: FleetSummary, prev: dict[str, Snapshot], phase: str, t_s: float) -> FleetPoint:
    layout = fleet.merged_snapshot.layout if fleet.merged_snapshot is not None else None
    sums: dict[str, np.ndarray] = {}
    interval_steps = 0
    rate = 0.0
    actor_p99: dict[str, float] = {}
    for name, a in fleet.per_actor.items():
        snap = a.snapshot
        # this interval of this actor; its first look, or a restart: everything so far
        iv = interval(prev.get(name), snap, strict=False)
        counts, steps, dt = iv.counts, iv.steady_steps, iv.steady_s
        interval_steps += steps
        if dt > 0:
            rate += steps / dt
        rows = [*snap.phases, STEP_PHASE]
        for r, pname in enumerate(rows):
            acc = sums.get(pname)
            sums[pname] = counts[r].copy() if acc is None else acc + counts[r]
            if pname == phase and counts[r].sum() > 0:
                lo, hi, sf = snap.layout
                actor_p99[name] = float(_percentiles(counts[r], (99.0,), lo, hi, sf)[0])
    phases: dict[str, IntervalStats] = {}
    if layout is not None:
        lo, hi, sf = layout
        for pname, c in sums.items():
            n = int(c.sum())
            if n == 0:
                phases[pname] = IntervalStats(0, math.nan, math.nan, math.nan, math.nan)
                continue
            p50, p90, p99, mx = _percentiles(c, _QS, lo, hi, sf)
            phases[pname] = IntervalStats(n, float(p50), float(p90), float(p99), float(mx))
    spread = math.nan
    slowest = None
    if actor_p99:
        med = statistics.median(actor_p99.values())
        slowest = max(actor_p99, key=lambda k: actor_p99[k])
        spread = actor_p99[slowest] / med if med > 0 else math.nan
    steps_total = fleet.merged.steps if fleet.merged is not None else 0
    return FleetPoint(
        t_s=t_s,
        time_s=fleet.collected_at_s,
        answered=fleet.answered,
        missing=list(fleet.missing),
        steps=steps_total,
        interval_steps=interval_steps,
        steps_per_s=rate,
        phases=phases,
        spread=spread,
        slowest=slowest,
    )


def _percentiles(counts: np.ndarray, qs: Sequence[float], lo: int, hi: int, sf: int) -> np.ndarray:
    from gyreprof._core import percentiles_from_counts

    return np.asarray(
        percentiles_from_counts(
            np.ascontiguousarray(counts, dtype=np.int64), list(qs), lo, hi, sf, -1, -1
        )
    )


class FleetMonitor:
    """Collects from a fleet every ``interval_s`` seconds in a background thread.

    The actors keep running: each round only asks for snapshot bytes (an actor
    that has not answered its last request is not asked again). Every round
    appends a :class:`FleetPoint` with the fleet's percentiles *over that
    interval* (histogram differences, so a slow patch shows up instead of
    being averaged into the whole run) to ``points``; ``latest`` holds the last
    full :class:`FleetSummary`. ``on_update(point, fleet)`` is called after
    each round (exceptions it raises are kept in ``errors``). Use as a context
    manager or call :meth:`start` / :meth:`stop`; :meth:`poll` runs one round
    in the calling thread.
    """

    def __init__(
        self,
        actors: Sequence[Any] | Mapping[str, Any],
        interval_s: float = 1.0,
        *,
        timeout_s: float | None = None,
        phase: str = "env",
        learner: Any = None,
        wait: str = "wait",
        compute: str = "compute",
        max_points: int = 3600,
        on_update: Callable[[FleetPoint, FleetSummary], None] | None = None,
    ) -> None:
        iv = check_positive_number("interval_s", interval_s, unit="seconds")
        check_positive_int("max_points", max_points)
        self.interval_s = iv
        self.timeout_s = check_timeout(timeout_s if timeout_s is not None else min(iv, 10.0))
        self.phase = phase
        self.learner = learner
        self.wait = wait
        self.compute = compute
        self.max_points = max_points
        self.on_update = on_update
        self._gatherer = Gatherer(actors)
        self._prev: dict[str, Snapshot] = {}
        self._points: list[FleetPoint] = []
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self.latest: FleetSummary | None = None
        self.errors: list[str] = []

    @property
    def points(self) -> list[FleetPoint]:
        """The time series so far (a copy; oldest first, at most ``max_points``)."""
        with self._lock:
            return list(self._points)

    def series(
        self, field_name: str = "p99", phase: str | None = None
    ) -> list[tuple[float, float]]:
        """``[(t_s, value)]`` of one interval statistic of ``phase`` (or ``steps_per_s``/``spread``)."""
        pts = self.points
        if field_name in ("steps_per_s", "spread", "answered", "interval_steps"):
            return [(p.t_s, float(getattr(p, field_name))) for p in pts]
        if field_name not in ("p50", "p90", "p99", "max", "count"):
            raise InvalidValueError(
                f"unknown series {field_name!r}; use p50, p90, p99, max, count, steps_per_s, "
                "spread, answered or interval_steps"
            )
        name = self.phase if phase is None else phase
        out = []
        for p in pts:
            st = p.phases.get(name)
            out.append((p.t_s, float(getattr(st, field_name)) if st else math.nan))
        return out

    def poll(self) -> FleetPoint:
        """Run one collection round now and return its point."""
        with self._poll_lock:
            started = time.monotonic()
            answers, missing, learner_answer = self._gatherer.gather(self.timeout_s, self.learner)
            fleet = build_fleet(
                answers,
                missing,
                self.learner,
                learner_answer,
                phase=self.phase,
                wait=self.wait,
                compute=self.compute,
                started=started,
            )
            point = _point(fleet, self._prev, self.phase, time.monotonic() - self._t0)
            for name, a in fleet.per_actor.items():
                self._prev[name] = a.snapshot
            with self._lock:
                self._points.append(point)
                if len(self._points) > self.max_points:
                    del self._points[: len(self._points) - self.max_points]
                self.latest = fleet
        if self.on_update is not None:
            try:
                self.on_update(point, fleet)
            except Exception as exc:  # noqa: BLE001 - a callback must not stop the monitor
                self.errors.append(f"on_update raised {type(exc).__name__}: {exc}")
        return point

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - keep monitoring, report
                self.errors.append(f"{type(exc).__name__}: {exc}")
                if not ray.is_initialized():
                    self.errors.append("Ray was shut down; the monitor stopped")
                    return
            next_at += self.interval_s
            now = time.monotonic()
            if next_at < now:  # a round took longer than the interval: do not burst
                next_at = now
            self._stop.wait(max(0.0, next_at - now))

    def start(self) -> FleetMonitor:
        """Start the background thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name="gyreprof-fleet-monitor", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the thread; waits up to ``timeout_s`` (default: interval + collection timeout)."""
        self._stop.set()
        th = self._thread
        if th is not None:
            th.join(timeout_s if timeout_s is not None else self.interval_s + self.timeout_s + 5.0)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> FleetMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
