"""What a fleet collection returns: per-actor stats, missing actors, spread, the fleet summary."""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gyreprof._support.errors import UnknownPhaseError
from gyreprof._support.format import fmt_ns, fmt_rate, text_table
from gyreprof.model._serial import Record, encode, plain, serial_format
from gyreprof.model.histogram import STEP
from gyreprof.render import json as render_json

if TYPE_CHECKING:
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.model.snapshot import Snapshot
    from gyreprof.model.summary import Summary

__all__ = [
    "FLEET_FORMAT",
    "REASONS",
    "STEP_PHASE",
    "ActorRecord",
    "ActorStats",
    "FleetRecord",
    "FleetSummary",
    "MissingActor",
    "Spread",
]

FLEET_FORMAT = "gyreprof.fleet/1"

STEP_PHASE = STEP  # the whole-step row, named as everywhere (gyreprof.model.snapshot.STEP)
"""Phase name that selects whole steps in the fleet views."""

# Why an actor is in FleetSummary.missing
REASONS = {
    "died": "the actor is dead",
    "unavailable": "the actor is unreachable for now (restarting or its node is down)",
    "timeout": "no answer within timeout_s",
    "no_profiler": "the actor has no gyreprof profiler",
    "bad_snapshot": "the answer is not a snapshot this gyreprof can read",
    "incompatible": "the snapshot cannot be merged with the rest of the fleet",
    "error": "gyreprof_snapshot() raised",
}


@dataclass(frozen=True)
class ActorStats:
    """One actor that answered: who and where it is, and what its profiler counted."""

    name: str  # the key given to collect (mapping key) or "actor-<index>"
    index: int  # position in the actors given to collect
    actor_id: str  # Ray actor id (hex)
    node_id: str | None
    node_ip: str | None
    host: str | None
    pid: int | None
    label: str | None  # Profiler(label=...) when set
    summary: Summary
    snapshot: Snapshot
    size_bytes: int  # snapshot bytes as sent
    answer_s: float  # seconds from the request until the answer was seen

    @property
    def steps(self) -> int:
        return self.summary.steps

    @property
    def steps_per_s(self) -> float:
        return self.summary.steps_per_s

    def percentile(self, phase: str, q: float) -> float:
        """Duration (ns) at percentile ``q`` of ``phase`` (``STEP_PHASE`` for whole steps); NaN if absent."""
        st = _phase_of(self.summary, phase)
        return math.nan if st is None or st.count == 0 else st.percentile(q)

    def record(self) -> ActorRecord:
        """What is written of this actor: everything but the snapshot, the summary as
        ``Summary.to_dict(histograms=False)``."""
        return ActorRecord(
            name=self.name,
            index=self.index,
            actor_id=self.actor_id,
            node_id=self.node_id,
            node_ip=self.node_ip,
            host=self.host,
            pid=self.pid,
            label=self.label,
            size_bytes=self.size_bytes,
            answer_s=self.answer_s,
            summary=self.summary.to_dict(histograms=False),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of :meth:`record`."""
        out: dict[str, Any] = plain(self.record())
        return out


@dataclass(frozen=True)
class ActorRecord:
    """:class:`ActorStats` as written to JSON (no snapshot; the summary as a mapping)."""

    name: str
    index: int
    actor_id: str
    node_id: str | None
    node_ip: str | None
    host: str | None
    pid: int | None
    label: str | None
    size_bytes: int
    answer_s: float
    summary: dict[str, Any]  # Summary.to_dict(histograms=False)


@dataclass(frozen=True)
class MissingActor(Record):
    """An actor whose snapshot is not in the merge, and why (see ``REASONS``)."""

    name: str
    index: int
    actor_id: str
    reason: str  # died | unavailable | timeout | no_profiler | bad_snapshot | incompatible | error
    detail: str

    def __str__(self) -> str:
        return f"{self.name} ({_short(self.actor_id)}): {self.reason} - {self.detail}"


@dataclass(frozen=True)
class Spread(Record):
    """How much actors differ in one percentile of one phase, and in throughput.

    Stragglers (actors whose value exceeds ``straggler_factor`` x the median)
    hold back every lockstep round that waits for all actors.
    """

    phase: str
    q: float
    actors: int
    min_ns: float
    median_ns: float
    max_ns: float
    max_over_median: float
    cv: float  # coefficient of variation (stdev / mean) of the per-actor values
    straggler_factor: float
    stragglers: list[str]
    rate_min: float  # per-actor steady steps/s
    rate_median: float
    rate_max: float
    values_ns: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        label = _pname(self.phase, self.q)
        text = (
            f"spread of {label} across {self.actors} actors: min {fmt_ns(self.min_ns)}, "
            f"median {fmt_ns(self.median_ns)}, max {fmt_ns(self.max_ns)} "
            f"({self.max_over_median:.2f}x median, cv {self.cv:.2f})"
        )
        if self.stragglers:
            text += f"; stragglers (> {self.straggler_factor:g}x median): " + ", ".join(
                self.stragglers
            )
        else:
            text += f"; no straggler above {self.straggler_factor:g}x median"
        if not math.isnan(self.rate_median):
            text += (
                f"\nthroughput per actor: min {fmt_rate(self.rate_min)}, median "
                f"{fmt_rate(self.rate_median)}, max {fmt_rate(self.rate_max)}"
            )
        return text


@serial_format(FLEET_FORMAT)
@dataclass(frozen=True)
class FleetRecord(Record):
    """What ``FleetSummary.to_dict()`` writes, format ``gyreprof.fleet/1``; read it back with
    :meth:`from_dict`. Summaries and the wait report are nested as their own ``to_dict()``
    mappings (``merged``, ``learner``, ``wait``); snapshots are not written."""

    answered: int
    total: int
    phase: str
    collected_at_s: float
    collect_s: float
    merged: dict[str, Any] | None
    per_actor: dict[str, ActorRecord]
    missing: dict[str, MissingActor]
    slowest: list[str]
    spread: Spread | None
    learner: dict[str, Any] | None
    wait: dict[str, Any] | None
    notes: list[str]


@dataclass(frozen=True)
class FleetSummary:
    """What a fleet of profiled actors measured, merged, with the actors that did not answer.

    ``merged`` is None only when no actor answered. ``phase`` is the phase the
    fleet views (:meth:`slowest`, :meth:`spread`, ``str()``) use by default.
    """

    merged: Summary | None
    merged_snapshot: Snapshot | None
    per_actor: dict[str, ActorStats]
    missing: dict[str, MissingActor]
    phase: str = "env"
    learner: Summary | None = None
    wait: WaitReport | None = None  # when a learner recorded wait/compute
    notes: list[str] = field(default_factory=list)
    collected_at_s: float = 0.0  # time.time() when the collection finished
    collect_s: float = 0.0  # wall seconds the collection took

    @property
    def answered(self) -> int:
        return len(self.per_actor)

    @property
    def total(self) -> int:
        return len(self.per_actor) + len(self.missing)

    def _check_phase(self, phase: str | None) -> str:
        name = self.phase if phase is None else phase
        if name == STEP_PHASE:
            return name
        known = {p for a in self.per_actor.values() for p in a.summary.phases}
        if self.per_actor and name not in known:
            raise UnknownPhaseError(
                f"phase {name!r} was not recorded by any actor; recorded phases: "
                f"{sorted(known)} (or {STEP_PHASE!r} for whole steps)"
            )
        return name

    def slowest(self, n: int = 5, *, phase: str | None = None, q: float = 99.0) -> list[ActorStats]:
        """The ``n`` actors with the highest percentile ``q`` of ``phase``, slowest first."""
        name = self._check_phase(phase)
        scored = [(a.percentile(name, q), a) for a in self.per_actor.values()]
        scored = [(v, a) for v, a in scored if not math.isnan(v)]
        scored.sort(key=lambda va: va[0], reverse=True)
        return [a for _, a in scored[: max(0, int(n))]]

    def spread(
        self, *, phase: str | None = None, q: float = 99.0, straggler_factor: float = 1.5
    ) -> Spread | None:
        """Spread of percentile ``q`` of ``phase`` across actors; None with no actor data."""
        name = self._check_phase(phase)
        values = {a.name: a.percentile(name, q) for a in self.per_actor.values()}
        values = {k: v for k, v in values.items() if not math.isnan(v)}
        if not values:
            return None
        rates = [
            a.steps_per_s
            for a in self.per_actor.values()
            if a.steps > 0 and not math.isnan(a.steps_per_s)
        ]
        return _spread(name, q, values, rates, straggler_factor)

    def record(self) -> FleetRecord:
        """What :meth:`to_dict` writes: the fleet views for the default phase, summaries
        as ``to_dict(histograms=False)`` mappings, no snapshots."""
        spread = None
        slow: list[str] = []
        try:
            spread = self.spread()
            slow = [a.name for a in self.slowest()]
        except ValueError:  # the default phase was not recorded by any actor
            pass
        return FleetRecord(
            answered=self.answered,
            total=self.total,
            phase=self.phase,
            collected_at_s=self.collected_at_s,
            collect_s=self.collect_s,
            merged=self.merged.to_dict(histograms=False) if self.merged else None,
            per_actor={k: v.record() for k, v in self.per_actor.items()},
            missing=dict(self.missing),
            slowest=slow,
            spread=spread,
            learner=self.learner.to_dict(histograms=False) if self.learner else None,
            wait=self.wait.to_dict() if self.wait is not None else None,
            notes=list(self.notes),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, format ``gyreprof.fleet/1`` (see :class:`FleetRecord`)."""
        return encode(self.record())

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """Strict JSON text of :meth:`to_dict`; written to ``path`` as well when given."""
        return render_json.write(self.to_dict(), path, indent=indent)

    def __str__(self) -> str:
        lines = [
            f"gyreprof fleet: {self.answered} of {self.total} actors answered "
            f"(collected in {self.collect_s * 1e3:.0f} ms)"
        ]
        if self.merged is not None:
            lines.append(str(self.merged))
            lines.append("")
            lines.append(self._actor_table())
            try:
                sp = self.spread()
            except ValueError as exc:
                lines.append(f"fleet view: {exc}")
            else:
                if sp is not None:
                    lines.append(str(sp))
        if self.wait is not None:
            lines.append(str(self.wait))
        if self.missing:
            lines.append("missing actors:")
            lines.extend(f"  {m}" for m in self.missing.values())
        if self.notes:
            lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def _actor_table(self, limit: int = 10) -> str:
        try:
            name = self._check_phase(None)
        except ValueError:
            name = STEP_PHASE
        actors = self.slowest(len(self.per_actor), phase=name)
        others = [a for a in self.per_actor.values() if a not in actors]
        rows = []
        shown = (actors + others)[:limit]
        for a in shown:
            rows.append(
                [
                    a.name,
                    a.node_ip or a.host or "-",
                    str(a.pid) if a.pid is not None else "-",
                    str(a.steps),
                    fmt_rate(a.steps_per_s),
                    fmt_ns(a.percentile(name, 50.0)),
                    fmt_ns(a.percentile(name, 99.0)),
                    fmt_ns(a.percentile(name, 100.0)),
                ]
            )
        head = f"actors, slowest {name} p99 first"
        if len(self.per_actor) > limit:
            head += f" (top {limit} of {len(self.per_actor)})"
        table = text_table(
            [
                "actor",
                "node",
                "pid",
                "steps",
                "steps/s",
                f"{name} p50",
                f"{name} p99",
                f"{name} max",
            ],
            rows,
            align_left=2,
        )
        return head + ":\n" + table


def _pname(phase: str, q: float) -> str:
    return f"{phase} p{q:g}"


def _short(actor_id: str) -> str:
    return actor_id[:8] if actor_id else "?"


def _phase_of(summary: Summary, phase: str) -> Any:
    if phase == STEP_PHASE:
        return summary.step
    return summary.phases.get(phase)


def _spread(
    phase: str, q: float, values: Mapping[str, float], rates: Sequence[float], factor: float
) -> Spread:
    vals = list(values.values())
    med = float(statistics.median(vals))
    mean = float(statistics.fmean(vals))
    cv = float(statistics.pstdev(vals) / mean) if mean > 0 and len(vals) > 1 else 0.0
    stragglers = sorted(
        (k for k, v in values.items() if med > 0 and v > factor * med),
        key=lambda k: values[k],
        reverse=True,
    )
    return Spread(
        phase=phase,
        q=float(q),
        actors=len(vals),
        min_ns=float(min(vals)),
        median_ns=med,
        max_ns=float(max(vals)),
        max_over_median=(max(vals) / med) if med > 0 else math.nan,
        cv=cv,
        straggler_factor=float(factor),
        stragglers=stragglers,
        rate_min=float(min(rates)) if rates else math.nan,
        rate_median=float(statistics.median(rates)) if rates else math.nan,
        rate_max=float(max(rates)) if rates else math.nan,
        values_ns=dict(values),
    )
