"""Profile a fleet of Ray actors: Ray carries compact snapshot bytes, gyreprof merges them.

On the actor side, inherit :class:`ProfiledActor` and give the actor a Profiler
with :func:`attach_profiler`; the mixin adds the remote method
``gyreprof_snapshot(windows=False) -> bytes`` (the snapshot's own compact
encoding, never pickled arrays)::

    from gyreprof.integrations import ray as gpray

    @gpray.profiled_remote          # ray.remote plus a "gyreprof" concurrency group
    class Rollout(gpray.ProfiledActor):
        def __init__(self):
            self.prof = gpray.attach_profiler(self, ["env", "policy"], warmup_steps=50)

On the driver, :func:`collect` asks every actor at once and returns a
:class:`FleetSummary`: the merged Summary, per-actor stats (actor id, node,
pid), the slowest actors, the spread across actors and, when a learner records
``wait``/``compute`` phases, its wait report. Actors that died, do not answer
within ``timeout_s``, have no profiler or send bytes this gyreprof cannot
merge are listed in ``missing`` with the reason; the rest still merge.
:class:`FleetMonitor` does the same every ``interval_s`` in a background thread
and keeps a time series of per-interval fleet percentiles.

Plain ``@ray.remote`` actors work too, but a plain actor runs one method at a
time: its snapshot is taken between two method calls. :func:`profiled_remote`
declares a one-thread ``"gyreprof"`` concurrency group and answers
``gyreprof_snapshot`` there, so an actor busy in a long loop answers at once
(the Profiler's readers are lock-free; the loop is not stopped).
"""

from __future__ import annotations

import json
import math
import os
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

try:
    import ray
    from ray import exceptions as _rex
    from ray.actor import ActorHandle
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "gyreprof.integrations.ray needs Ray, which is not installed "
        f"({_exc}). Install it with `pip install gyreprof[ray]` (or `pip install 'ray>=2.9'`)."
    ) from _exc

import numpy as np

from gyreprof._format import fmt_ns, fmt_rate, text_table

if TYPE_CHECKING:
    from gyreprof.profiler import Profiler
    from gyreprof.summary import Snapshot, Summary

__all__ = [
    "CONCURRENCY_GROUP",
    "ActorStats",
    "FleetMonitor",
    "FleetPoint",
    "FleetSummary",
    "IntervalStats",
    "MissingActor",
    "NoProfilerError",
    "REASONS",
    "ProfiledActor",
    "Spread",
    "attach_profiler",
    "collect",
    "profiled_remote",
    "snapshot_bytes",
]

CONCURRENCY_GROUP = "gyreprof"
"""Name of the concurrency group :func:`profiled_remote` declares (one thread)."""

STEP_PHASE = "(step)"
"""Phase name that selects whole steps in the fleet views."""

_C = TypeVar("_C", bound=type)

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


class NoProfilerError(RuntimeError):
    """Raised inside an actor whose ``gyreprof_snapshot`` has no Profiler to read."""


# ------------------------------------------------------------------ actor side


def attach_profiler(
    actor_self: object, phases: Sequence[str] | Profiler, **profiler_kwargs: Any
) -> Profiler:
    """Give ``actor_self`` a Profiler (stored as ``actor_self.gyreprof_profiler``) and return it.

    ``phases`` is a list of phase names (``profiler_kwargs`` go to
    :class:`gyreprof.Profiler`), or an existing Profiler to attach as is. Call it
    in the actor's ``__init__`` (or later, e.g. once the env is built); the
    ``gyreprof_snapshot`` method of :class:`ProfiledActor` reads it.
    """
    from gyreprof.profiler import Profiler

    if isinstance(phases, Profiler):
        if profiler_kwargs:
            raise TypeError(
                "attach_profiler got an existing Profiler and Profiler options "
                f"{sorted(profiler_kwargs)}; pass one or the other"
            )
        prof = phases
    else:
        prof = Profiler(phases, **profiler_kwargs)
    try:
        actor_self.gyreprof_profiler = prof  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(
            f"cannot attach a profiler to {type(actor_self).__name__} (no instance "
            "attributes, e.g. __slots__); add 'gyreprof_profiler' to its slots"
        ) from None
    return prof


_IDENTITY: dict[int, dict[str, Any]] = {}


def _ray_identity() -> dict[str, Any]:
    """Where this process runs, as Ray knows it (cached per process)."""
    pid = os.getpid()
    ident = _IDENTITY.get(pid)
    if ident is None:
        ident = {"pid": pid, "host": socket.gethostname()}
        if ray.is_initialized():
            ctx = ray.get_runtime_context()
            actor_id = ctx.get_actor_id()
            if actor_id:
                ident["ray_actor_id"] = str(actor_id)
            ident["ray_node_id"] = str(ctx.get_node_id())
            try:
                ident["node_ip"] = str(ray.util.get_node_ip_address())
            except Exception:  # noqa: BLE001 - the address is informative only
                pass
        _IDENTITY[pid] = ident
    return dict(ident)


def snapshot_bytes(source: Profiler | Snapshot, *, windows: bool = False) -> bytes:
    """Compact snapshot bytes of ``source`` with this process's Ray identity in its meta.

    The identity (``ray_actor_id``, ``ray_node_id``, ``node_ip``, ``pid``,
    ``host``) lets the driver tell actors and nodes apart. ``windows=False``
    (default) leaves the rolling windows out, which keeps the bytes small; a
    learner sends them (``windows=True``) so its wait report can show windows.
    Use this from a custom ``gyreprof_snapshot`` method.
    """
    from gyreprof.profiler import Profiler
    from gyreprof.summary import Snapshot

    if isinstance(source, Profiler):
        snap = source.snapshot()
    elif isinstance(source, Snapshot):
        snap = source
    else:
        raise TypeError(f"snapshot_bytes needs a Profiler or Snapshot, got {type(source).__name__}")
    ident = _ray_identity()
    meta = {**snap.meta, **ident}
    sources = [{**src, **ident} for src in snap.sources]
    tagged = Snapshot(
        phases=snap.phases,
        config=snap.config,
        counts=snap.counts,
        stat=snap.stat,
        warm=snap.warm,
        first=snap.first,
        totals=snap.totals,
        counters=snap.counters,
        times=snap.times,
        rolling=snap.rolling,
        lap_cost_ns=snap.lap_cost_ns,
        sources=sources,
        meta=meta,
    )
    return tagged.to_bytes(windows=windows)


class ProfiledActor:
    """Mixin for Ray actor classes: adds the ``gyreprof_snapshot`` remote method.

    Give the actor its Profiler with :func:`attach_profiler` (or assign
    ``self.gyreprof_profiler``). Works with plain ``@ray.remote``; use
    :func:`profiled_remote` to answer while the actor is busy.
    """

    gyreprof_profiler: Profiler | None = None

    def gyreprof_snapshot(self, windows: bool = False) -> bytes:
        """Compact snapshot bytes of this actor's Profiler (see :func:`snapshot_bytes`)."""
        prof = getattr(self, "gyreprof_profiler", None)
        if prof is None:
            raise NoProfilerError(
                f"{type(self).__name__} has no gyreprof profiler; call "
                "gyreprof.integrations.ray.attach_profiler(self, phases) in __init__"
            )
        return snapshot_bytes(prof, windows=windows)


def profiled_remote(cls: _C | None = None, /, **ray_options: Any) -> Any:
    """``ray.remote`` for an actor class, answering ``gyreprof_snapshot`` on its own thread.

    Declares a one-thread concurrency group named ``"gyreprof"`` (added to any
    ``concurrency_groups`` you pass) and runs ``gyreprof_snapshot`` in it, so a
    snapshot is taken while a long method (a rollout loop) is running. The
    actor's other methods keep their default group, i.e. one thread, so the
    Profiler keeps its single writer. Use bare (``@profiled_remote``) or with
    ``ray.remote`` options (``@profiled_remote(num_cpus=1)``). The class must
    have a ``gyreprof_snapshot`` method (inherit :class:`ProfiledActor`).
    """

    def wrap(klass: _C) -> Any:
        if not isinstance(klass, type):
            raise TypeError(f"profiled_remote decorates a class, got {type(klass).__name__}")
        original = getattr(klass, "gyreprof_snapshot", None)
        if original is None or not callable(original):
            raise TypeError(
                f"{klass.__name__} has no gyreprof_snapshot method; inherit "
                "gyreprof.integrations.ray.ProfiledActor (and call attach_profiler in __init__)"
            )
        groups = dict(ray_options.get("concurrency_groups") or {})
        groups.setdefault(CONCURRENCY_GROUP, 1)

        # Not functools.wraps: Ray unwraps __wrapped__ and would lose the group.
        def gyreprof_snapshot(self: Any, *args: Any, **kwargs: Any) -> bytes:
            return original(self, *args, **kwargs)  # type: ignore[no-any-return]

        gyreprof_snapshot.__doc__ = original.__doc__
        gyreprof_snapshot.__qualname__ = f"{klass.__qualname__}.gyreprof_snapshot"
        klass.gyreprof_snapshot = ray.method(  # type: ignore[attr-defined]
            concurrency_group=CONCURRENCY_GROUP
        )(gyreprof_snapshot)
        return ray.remote(**{**ray_options, "concurrency_groups": groups})(klass)

    if cls is not None:
        if ray_options:
            raise TypeError("use @profiled_remote or @profiled_remote(**ray_options)")
        return wrap(cls)
    return wrap


# ---------------------------------------------------------------- result values


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
        """Duration (ns) at percentile ``q`` of ``phase`` ("(step)" for whole steps); NaN if absent."""
        st = _phase_of(self.summary, phase)
        return math.nan if st is None or st.count == 0 else st.percentile(q)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "actor_id": self.actor_id,
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "host": self.host,
            "pid": self.pid,
            "label": self.label,
            "size_bytes": self.size_bytes,
            "answer_s": self.answer_s,
            "summary": self.summary.to_dict(histograms=False),
        }


@dataclass(frozen=True)
class MissingActor:
    """An actor whose snapshot is not in the merge, and why (see ``REASONS``)."""

    name: str
    index: int
    actor_id: str
    reason: str  # died | unavailable | timeout | no_profiler | bad_snapshot | incompatible | error
    detail: str

    def __str__(self) -> str:
        return f"{self.name} ({_short(self.actor_id)}): {self.reason} - {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "actor_id": self.actor_id,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Spread:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "q": self.q,
            "actors": self.actors,
            "min_ns": self.min_ns,
            "median_ns": self.median_ns,
            "max_ns": self.max_ns,
            "max_over_median": self.max_over_median,
            "cv": self.cv,
            "straggler_factor": self.straggler_factor,
            "stragglers": list(self.stragglers),
            "rate_min": self.rate_min,
            "rate_median": self.rate_median,
            "rate_max": self.rate_max,
            "values_ns": dict(self.values_ns),
        }


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
    wait: Any = None  # gyreprof.analysis.wait.WaitReport when a learner recorded wait/compute
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
            raise ValueError(
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

    def to_dict(self) -> dict[str, Any]:
        spread = None
        slow: list[str] = []
        try:
            sp = self.spread()
            spread = sp.to_dict() if sp else None
            slow = [a.name for a in self.slowest()]
        except ValueError:
            pass
        wait = None
        if self.wait is not None:
            wait = self.wait.to_dict() if hasattr(self.wait, "to_dict") else str(self.wait)
        return {
            "answered": self.answered,
            "total": self.total,
            "phase": self.phase,
            "collected_at_s": self.collected_at_s,
            "collect_s": self.collect_s,
            "merged": self.merged.to_dict(histograms=False) if self.merged else None,
            "per_actor": {k: v.to_dict() for k, v in self.per_actor.items()},
            "missing": {k: v.to_dict() for k, v in self.missing.items()},
            "slowest": slow,
            "spread": spread,
            "learner": self.learner.to_dict(histograms=False) if self.learner else None,
            "wait": wait,
            "notes": list(self.notes),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=str)

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


# -------------------------------------------------------------------- gathering


def _actor_id(handle: Any) -> str:
    """Ray's id of an actor handle, as hex (empty when the handle does not say)."""
    aid = getattr(handle, "_actor_id", None) or getattr(handle, "_ray_actor_id", None)
    try:
        return str(aid.hex()) if aid is not None else ""
    except Exception:  # noqa: BLE001 - informative only
        return ""


def _named(actors: Sequence[Any] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    if isinstance(actors, Mapping):
        items = [(str(k), v) for k, v in actors.items()]
    elif isinstance(actors, (str, bytes)) or not isinstance(actors, Sequence):
        raise TypeError(
            "actors must be a list of Ray actor handles or a mapping name -> handle, got "
            f"{type(actors).__name__}"
        )
    else:
        items = [(f"actor-{i}", a) for i, a in enumerate(actors)]
    for name, handle in items:
        if not isinstance(handle, ActorHandle):
            raise TypeError(
                f"{name} is a {type(handle).__name__}, not a Ray actor handle "
                "(create actors with MyActor.remote(...))"
            )
    return items


def _explain(exc: BaseException) -> tuple[str, str]:
    """(reason, detail) for an exception raised by ray.get on a snapshot request."""
    if isinstance(exc, getattr(_rex, "ActorUnavailableError", ())):
        return "unavailable", _first_line(exc)
    if isinstance(exc, _rex.RayActorError):  # ActorDiedError is a subclass
        text = str(exc)
        why = next((ln.strip() for ln in text.splitlines() if "actor is dead" in ln), "")
        return "died", why or _first_line(exc)
    if isinstance(exc, _rex.RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, NoProfilerError) or isinstance(exc, NoProfilerError):
            return "no_profiler", str(cause or exc)
        if cause is not None:
            return "error", f"{type(cause).__name__}: {cause}"
        return "error", _first_line(exc)
    return "error", f"{type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass
class _Answer:
    name: str
    index: int
    actor_id: str
    payload: Any = None
    error: BaseException | None = None
    answer_s: float = math.nan


_LEARNER = "\0learner"  # key of the learner's request (no actor name can hold a NUL)


class _Gatherer:
    """Asks actors for snapshots; a request still unanswered is kept, never repeated.

    One-shot for :func:`collect`; kept by :class:`FleetMonitor` so an actor
    that hangs gets one outstanding request, not one per interval.
    """

    def __init__(self, actors: Sequence[Any] | Mapping[str, Any]) -> None:
        self.actors = _named(actors)
        self.pending: dict[str, tuple[Any, float]] = {}  # name -> (ObjectRef, sent at)

    def gather(
        self, timeout_s: float, learner: Any = None
    ) -> tuple[list[_Answer], list[MissingActor], _Answer | None]:
        if not ray.is_initialized():
            raise RuntimeError(
                "Ray is not initialised in this process; call ray.init() (or connect to "
                "the cluster) before collecting from actors"
            )
        t0 = time.monotonic()
        missing: list[MissingActor] = []
        index: dict[str, tuple[int, str]] = {}
        refs: dict[Any, str] = {}
        for i, (name, handle) in enumerate(self.actors):
            aid = _actor_id(handle)
            index[name] = (i, aid)
            if name in self.pending:
                ref, _sent = self.pending[name]
                refs[ref] = name
                continue
            try:
                method = handle.gyreprof_snapshot
            except AttributeError:
                missing.append(
                    MissingActor(
                        name,
                        i,
                        aid,
                        "no_profiler",
                        "the actor class has no gyreprof_snapshot method; inherit "
                        "gyreprof.integrations.ray.ProfiledActor",
                    )
                )
                continue
            try:
                ref = method.remote()
            except Exception as exc:  # noqa: BLE001 - reported per actor
                reason, detail = _explain(exc)
                missing.append(MissingActor(name, i, aid, reason, detail))
                continue
            self.pending[name] = (ref, t0)
            refs[ref] = name
        learner_ref: Any = None
        if isinstance(learner, ActorHandle):
            if _LEARNER in self.pending:
                learner_ref = self.pending[_LEARNER][0]
            else:
                try:
                    learner_ref = learner.gyreprof_snapshot.remote(windows=True)
                    self.pending[_LEARNER] = (learner_ref, t0)
                except Exception as exc:  # noqa: BLE001 - reported as a note by the caller
                    learner_ref = exc
            if not isinstance(learner_ref, BaseException):
                refs[learner_ref] = _LEARNER
        answers: list[_Answer] = []
        learner_answer: _Answer | None = None
        if isinstance(learner_ref, BaseException):
            learner_answer = _Answer("learner", -1, _actor_id(learner), error=learner_ref)
        deadline = t0 + max(0.0, float(timeout_s))
        waiting = list(refs)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=left)
            seen = time.monotonic()
            for ref in ready:
                name = refs[ref]
                self.pending.pop(name, None)
                if name == _LEARNER:
                    learner_answer = _Answer("learner", -1, _actor_id(learner))
                    ans = learner_answer
                else:
                    i, aid = index[name]
                    ans = _Answer(name, i, aid)
                    answers.append(ans)
                ans.answer_s = seen - t0
                try:
                    ans.payload = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - reported per actor
                    ans.error = exc
        for ref in waiting:
            name = refs[ref]
            if name == _LEARNER:
                learner_answer = _Answer(
                    "learner",
                    -1,
                    _actor_id(learner),
                    error=TimeoutError(f"no answer within {timeout_s:g} s"),
                )
                continue
            i, aid = index[name]
            sent = self.pending.get(name, (None, t0))[1]
            missing.append(
                MissingActor(
                    name,
                    i,
                    aid,
                    "timeout",
                    f"no answer within {timeout_s:g} s (asked {time.monotonic() - sent:.1f} s "
                    "ago); a plain actor answers between method calls - use "
                    "profiled_remote to answer while it is busy",
                )
            )
        return answers, missing, learner_answer


def _decode(ans: _Answer) -> tuple[Snapshot | None, MissingActor | None]:
    from gyreprof.summary import Snapshot

    if ans.error is not None:
        reason, detail = _explain(ans.error)
        return None, MissingActor(ans.name, ans.index, ans.actor_id, reason, detail)
    data = ans.payload
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return None, MissingActor(
            ans.name,
            ans.index,
            ans.actor_id,
            "bad_snapshot",
            f"gyreprof_snapshot() returned {type(data).__name__}, expected snapshot bytes "
            "(return gyreprof.integrations.ray.snapshot_bytes(profiler))",
        )
    try:
        return Snapshot.from_bytes(data), None
    except ValueError as exc:
        return None, MissingActor(ans.name, ans.index, ans.actor_id, "bad_snapshot", str(exc))


def _learner_summary(
    learner: Any, learner_answer: _Answer | None, notes: list[str]
) -> Snapshot | Summary | None:
    """The learner's snapshot (actor or local Profiler/Snapshot/Summary), or None."""
    from gyreprof.profiler import Profiler
    from gyreprof.summary import Snapshot, Summary

    if learner is None:
        return None
    if isinstance(learner, Profiler):
        return learner.snapshot()
    if isinstance(learner, (Snapshot, Summary)):
        return learner
    if isinstance(learner, ActorHandle):
        if learner_answer is None:
            notes.append("learner: no answer")
            return None
        snap, miss = _decode(learner_answer)
        if miss is not None:
            notes.append(f"learner: {miss.reason} - {miss.detail}")
        return snap
    raise TypeError(
        "learner must be a Ray actor handle, a Profiler, a Snapshot or a Summary, got "
        f"{type(learner).__name__}"
    )


def _wait_report(source: Snapshot | Summary, wait: str, compute: str, notes: list[str]) -> Any:
    try:
        from gyreprof.analysis.wait import wait_report
    except ImportError as exc:
        notes.append(
            f"learner wait report skipped: gyreprof.analysis.wait is not available ({exc})"
        )
        return None
    try:
        return wait_report(source, wait=wait, compute=compute)
    except (ValueError, KeyError, TypeError) as exc:
        notes.append(f"learner wait report skipped: {exc}")
        return None


def _build(
    answers: list[_Answer],
    missing: list[MissingActor],
    learner: Any,
    learner_answer: _Answer | None,
    *,
    phase: str,
    wait: str,
    compute: str,
    started: float,
) -> FleetSummary:
    from gyreprof.summary import merge

    decoded: list[tuple[_Answer, Snapshot]] = []
    for ans in answers:
        snap, miss = _decode(ans)
        if miss is not None:
            missing.append(miss)
        else:
            assert snap is not None
            decoded.append((ans, snap))
    notes: list[str] = []
    per_actor: dict[str, ActorStats] = {}
    merged_snap = None
    if decoded:
        # The fleet's layout is the most common one; a snapshot with another is reported.
        layouts = Counter(s.layout for _, s in decoded)
        layout = layouts.most_common(1)[0][0]
        keep = []
        for ans, snap in decoded:
            if snap.layout != layout:
                missing.append(
                    MissingActor(
                        ans.name,
                        ans.index,
                        ans.actor_id,
                        "incompatible",
                        f"histogram layout (lowest_ns, highest_ns, significant_figures) "
                        f"{snap.layout} differs from the fleet's {layout}; give every actor's "
                        "Profiler the same significant_figures/lowest_ns/highest_ns",
                    )
                )
            else:
                keep.append((ans, snap))
        for ans, snap in sorted(keep, key=lambda a: a[0].index):
            meta = snap.meta
            pid = meta.get("pid")
            per_actor[ans.name] = ActorStats(
                name=ans.name,
                index=ans.index,
                actor_id=str(meta.get("ray_actor_id") or ans.actor_id),
                node_id=meta.get("ray_node_id"),
                node_ip=meta.get("node_ip"),
                host=meta.get("host"),
                pid=int(pid) if isinstance(pid, (int, float)) else None,
                label=meta.get("label"),
                summary=snap.summary(),
                snapshot=snap,
                size_bytes=len(ans.payload),
                answer_s=ans.answer_s,
            )
        if keep:
            merged_snap = merge([s for _, s in sorted(keep, key=lambda a: a[0].index)])
    missing.sort(key=lambda m: m.index)
    learner_src = _learner_summary(learner, learner_answer, notes)
    learner_summary = None
    wait_rep = None
    if learner_src is not None:
        learner_summary = learner_src.summary() if hasattr(learner_src, "summary") else learner_src
        wait_rep = _wait_report(learner_src, wait, compute, notes)
    if merged_snap is None:
        notes.append("no actor answered with a snapshot; nothing to merge")
    return FleetSummary(
        merged=merged_snap.summary() if merged_snap is not None else None,
        merged_snapshot=merged_snap,
        per_actor=per_actor,
        missing={m.name: m for m in missing},
        phase=phase,
        learner=learner_summary,  # type: ignore[arg-type]
        wait=wait_rep,
        notes=notes,
        collected_at_s=time.time(),
        collect_s=time.monotonic() - started,
    )


def _check_timeout(timeout_s: float) -> float:
    try:
        t = float(timeout_s)
    except (TypeError, ValueError):
        raise TypeError(f"timeout_s must be a number of seconds, got {timeout_s!r}") from None
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"timeout_s must be a finite number >= 0, got {timeout_s!r}")
    return t


def collect(
    actors: Sequence[Any] | Mapping[str, Any],
    timeout_s: float = 10.0,
    *,
    phase: str = "env",
    learner: Any = None,
    wait: str = "wait",
    compute: str = "compute",
) -> FleetSummary:
    """Snapshot every actor at once, merge what arrives within ``timeout_s`` seconds.

    ``actors``: Ray actor handles (named ``actor-<index>``) or a mapping name ->
    handle. Every actor is asked in parallel; the whole call takes at most about
    ``timeout_s`` (dead actors are reported as soon as Ray knows, not waited
    for). ``phase`` is the phase the fleet view ranks actors by. ``learner``:
    an actor handle, or a local Profiler/Snapshot/Summary, whose ``wait`` and
    ``compute`` phases give the wait report (not merged with the samplers).
    """
    t = _check_timeout(timeout_s)
    started = time.monotonic()
    answers, missing, learner_answer = _Gatherer(actors).gather(t, learner)
    return _build(
        answers,
        missing,
        learner,
        learner_answer,
        phase=phase,
        wait=wait,
        compute=compute,
        started=started,
    )


# --------------------------------------------------------------------- monitor


@dataclass(frozen=True)
class IntervalStats:
    """One phase over one monitor interval, all actors together (ns; ~0.1% buckets)."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float  # upper end of the highest non-empty bucket

    def to_dict(self) -> dict[str, float]:
        return {
            "count": self.count,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "max": self.max,
        }


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
    phases: dict[str, IntervalStats]  # per phase ("(step)" for whole steps), this interval
    spread: float  # max / median across actors of this interval's p99 of the monitor's phase
    slowest: str | None  # the actor with the highest p99 of the monitor's phase this interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "time_s": self.time_s,
            "answered": self.answered,
            "missing": list(self.missing),
            "steps": self.steps,
            "interval_steps": self.interval_steps,
            "steps_per_s": self.steps_per_s,
            "phases": {k: v.to_dict() for k, v in self.phases.items()},
            "spread": self.spread,
            "slowest": self.slowest,
        }

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


def _interval_counts(cur: Snapshot, prev: Snapshot | None) -> tuple[np.ndarray, int, float]:
    """(counts this interval, steps this interval, interval seconds) for one actor."""
    nphase = len(cur.phases)
    steps_now = int(cur.stat[nphase, 0])
    if prev is not None and prev.phases == cur.phases and prev.layout == cur.layout:
        delta = cur.counts - prev.counts
        dt = (int(cur.times.get("taken_ns", 0)) - int(prev.times.get("taken_ns", 0))) / 1e9
        if (delta >= 0).all() and dt > 0 and prev.meta.get("pid") == cur.meta.get("pid"):
            return delta, steps_now - int(prev.stat[nphase, 0]), dt
    # first look at this actor, or it restarted / reset: everything so far
    elapsed = sum(float(s.get("steady_ns", 0)) for s in cur.sources) / 1e9
    return cur.counts, steps_now, elapsed


def _point(fleet: FleetSummary, prev: dict[str, Snapshot], phase: str, t_s: float) -> FleetPoint:
    layout = fleet.merged_snapshot.layout if fleet.merged_snapshot is not None else None
    sums: dict[str, np.ndarray] = {}
    interval_steps = 0
    rate = 0.0
    actor_p99: dict[str, float] = {}
    for name, a in fleet.per_actor.items():
        snap = a.snapshot
        counts, steps, dt = _interval_counts(snap, prev.get(name))
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
        try:
            iv = float(interval_s)
        except (TypeError, ValueError):
            raise TypeError(f"interval_s must be a number of seconds, got {interval_s!r}") from None
        if not math.isfinite(iv) or iv <= 0:
            raise ValueError(f"interval_s must be a positive number of seconds, got {interval_s!r}")
        if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
            raise ValueError(f"max_points must be a positive int, got {max_points!r}")
        self.interval_s = iv
        self.timeout_s = _check_timeout(timeout_s if timeout_s is not None else min(iv, 10.0))
        self.phase = phase
        self.learner = learner
        self.wait = wait
        self.compute = compute
        self.max_points = max_points
        self.on_update = on_update
        self._gatherer = _Gatherer(actors)
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
            raise ValueError(
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
            fleet = _build(
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
