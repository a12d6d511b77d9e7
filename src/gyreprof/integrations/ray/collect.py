"""Asking every actor for its snapshot at once, and merging what arrives in time."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray
from ray import exceptions as _rex
from ray.actor import ActorHandle

from gyreprof._support.errors import ArgumentTypeError
from gyreprof._support.validate import check_number
from gyreprof.integrations.ray.actor import NoProfilerError
from gyreprof.integrations.ray.fleet import ActorStats, FleetSummary, MissingActor

if TYPE_CHECKING:
    from gyreprof.model.snapshot import Snapshot
    from gyreprof.model.summary import Summary

__all__ = ["collect"]


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
        raise ArgumentTypeError(
            "actors must be a list of Ray actor handles or a mapping name -> handle, got "
            f"{type(actors).__name__}"
        )
    else:
        items = [(f"actor-{i}", a) for i, a in enumerate(actors)]
    for name, handle in items:
        if not isinstance(handle, ActorHandle):
            raise ArgumentTypeError(
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


@dataclass
class _Round:
    """One collection round: the requests sent and what came back."""

    t0: float
    learner: Any
    index: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (index, actor id)
    refs: dict[Any, str] = field(default_factory=dict)  # ObjectRef -> actor name
    answers: list[_Answer] = field(default_factory=list)
    missing: list[MissingActor] = field(default_factory=list)
    learner_answer: _Answer | None = None


class Gatherer:
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
        """Ask every actor (and the learner actor), wait up to ``timeout_s``, sort the answers."""
        if not ray.is_initialized():
            raise RuntimeError(
                "Ray is not initialised in this process; call ray.init() (or connect to "
                "the cluster) before collecting from actors"
            )
        rnd = _Round(t0=time.monotonic(), learner=learner)
        self._ask_actors(rnd)
        self._ask_learner(rnd)
        waiting = self._await(rnd, max(0.0, float(timeout_s)))
        self._timed_out(rnd, waiting, timeout_s)
        return rnd.answers, rnd.missing, rnd.learner_answer

    def _ask_actors(self, rnd: _Round) -> None:
        """Send one snapshot request per actor, unless one is still outstanding."""
        for i, (name, handle) in enumerate(self.actors):
            aid = _actor_id(handle)
            rnd.index[name] = (i, aid)
            if name in self.pending:
                rnd.refs[self.pending[name][0]] = name
                continue
            try:
                method = handle.gyreprof_snapshot
            except AttributeError:
                rnd.missing.append(
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
                rnd.missing.append(MissingActor(name, i, aid, reason, detail))
                continue
            self.pending[name] = (ref, rnd.t0)
            rnd.refs[ref] = name

    def _ask_learner(self, rnd: _Round) -> None:
        """Ask a learner actor for its snapshot with windows (for the wait report)."""
        learner = rnd.learner
        if not isinstance(learner, ActorHandle):
            return
        if _LEARNER in self.pending:
            rnd.refs[self.pending[_LEARNER][0]] = _LEARNER
            return
        try:
            ref = learner.gyreprof_snapshot.remote(windows=True)
        except Exception as exc:  # noqa: BLE001 - reported as a note by the caller
            rnd.learner_answer = _Answer("learner", -1, _actor_id(learner), error=exc)
            return
        self.pending[_LEARNER] = (ref, rnd.t0)
        rnd.refs[ref] = _LEARNER

    def _await(self, rnd: _Round, timeout_s: float) -> list[Any]:
        """Take answers as they come until all arrived or the deadline; returns the rest."""
        deadline = rnd.t0 + timeout_s
        waiting = list(rnd.refs)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=left)
            seen = time.monotonic()
            for ref in ready:
                name = rnd.refs[ref]
                self.pending.pop(name, None)
                if name == _LEARNER:
                    ans = rnd.learner_answer = _Answer("learner", -1, _actor_id(rnd.learner))
                else:
                    i, aid = rnd.index[name]
                    ans = _Answer(name, i, aid)
                    rnd.answers.append(ans)
                ans.answer_s = seen - rnd.t0
                try:
                    ans.payload = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - reported per actor
                    ans.error = exc
        return waiting

    def _timed_out(self, rnd: _Round, waiting: list[Any], timeout_s: float) -> None:
        """Report the requests still unanswered (they stay pending for the next round)."""
        for ref in waiting:
            name = rnd.refs[ref]
            if name == _LEARNER:
                rnd.learner_answer = _Answer(
                    "learner",
                    -1,
                    _actor_id(rnd.learner),
                    error=TimeoutError(f"no answer within {timeout_s:g} s"),
                )
                continue
            i, aid = rnd.index[name]
            sent = self.pending.get(name, (None, rnd.t0))[1]
            rnd.missing.append(
                MissingActor(
                    name,
                    i,
                    aid,
                    "timeout",
                    f"no answer within {timeout_s:g} s (asked {time.monotonic() - sent:.1f} s "
                    "ago); a plain @ray.remote actor answers between method calls - use "
                    "profiled_remote to answer while it is busy; a profiled_remote actor "
                    "whose method makes a short system call every few ms keeps the "
                    "interpreter lock until the method returns - call time.sleep(0) in "
                    "that loop now and then (docs/api.md, Ray)",
                )
            )


def _decode(ans: _Answer) -> tuple[Snapshot | None, MissingActor | None]:
    from gyreprof.model.snapshot import Snapshot

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
    """The learner's snapshot (actor, or a local Profiler, Snapshot or Summary), or None; a
    Summary loaded from JSON (no snapshot behind it) as it is."""
    from gyreprof.model.snapshot import as_snapshot

    if learner is None:
        return None
    if isinstance(learner, ActorHandle):
        if learner_answer is None:
            notes.append("learner: no answer")
            return None
        snap, miss = _decode(learner_answer)
        if miss is not None:
            notes.append(f"learner: {miss.reason} - {miss.detail}")
        return snap
    try:
        local = as_snapshot(learner, what="learner", summary_only=True)
    except TypeError:
        raise ArgumentTypeError(
            "learner must be a Ray actor handle, a Profiler, a Snapshot or a Summary, got "
            f"{type(learner).__name__}"
        ) from None
    return learner if local is None else local


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


def build_fleet(
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
    """Decode the answers, keep the fleet's layout, merge; add the learner's wait report."""
    from gyreprof.model.snapshot import Snapshot, merge

    keep = _common_layout(_decoded(answers, missing), missing)
    per_actor = {ans.name: _actor_stats(ans, snap) for ans, snap in keep}
    merged_snap = merge([snap for _, snap in keep]) if keep else None
    missing.sort(key=lambda m: m.index)
    notes: list[str] = []
    learner_src = _learner_summary(learner, learner_answer, notes)
    learner_summary = None
    wait_rep = None
    if learner_src is not None:
        learner_summary = (
            learner_src.summary() if isinstance(learner_src, Snapshot) else learner_src
        )
        wait_rep = _wait_report(learner_src, wait, compute, notes)
    if merged_snap is None:
        notes.append("no actor answered with a snapshot; nothing to merge")
    return FleetSummary(
        merged=merged_snap.summary() if merged_snap is not None else None,
        merged_snapshot=merged_snap,
        per_actor=per_actor,
        missing={m.name: m for m in missing},
        phase=phase,
        learner=learner_summary,
        wait=wait_rep,
        notes=notes,
        collected_at_s=time.time(),
        collect_s=time.monotonic() - started,
    )


def _decoded(answers: list[_Answer], missing: list[MissingActor]) -> list[tuple[_Answer, Snapshot]]:
    """The answers that hold a readable snapshot; the others go to ``missing``."""
    decoded: list[tuple[_Answer, Snapshot]] = []
    for ans in answers:
        snap, miss = _decode(ans)
        if miss is not None:
            missing.append(miss)
        else:
            assert snap is not None
            decoded.append((ans, snap))
    return decoded


def _common_layout(
    decoded: list[tuple[_Answer, Snapshot]], missing: list[MissingActor]
) -> list[tuple[_Answer, Snapshot]]:
    """The snapshots with the fleet's (most common) histogram layout, in actor order.

    A snapshot with another layout cannot be merged; it goes to ``missing``.
    """
    if not decoded:
        return []
    layout = Counter(s.layout for _, s in decoded).most_common(1)[0][0]
    keep = []
    for ans, snap in decoded:
        if snap.layout == layout:
            keep.append((ans, snap))
            continue
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
    return sorted(keep, key=lambda a: a[0].index)


def _actor_stats(ans: _Answer, snap: Snapshot) -> ActorStats:
    """One answering actor: its identity from the snapshot's meta, and its summary."""
    meta = snap.meta
    pid = meta.pid
    return ActorStats(
        name=ans.name,
        index=ans.index,
        actor_id=str(meta.ray_actor_id or ans.actor_id),
        node_id=meta.ray_node_id,
        node_ip=meta.node_ip,
        host=meta.host,
        pid=pid,
        label=meta.label,
        summary=snap.summary(),
        snapshot=snap,
        size_bytes=len(ans.payload),
        answer_s=ans.answer_s,
    )


def check_timeout(timeout_s: float) -> float:
    return check_number("timeout_s", timeout_s, minimum=0.0, unit="seconds")


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
    t = check_timeout(timeout_s)
    started = time.monotonic()
    answers, missing, learner_answer = Gatherer(actors).gather(t, learner)
    return build_fleet(
        answers,
        missing,
        learner,
        learner_answer,
        phase=phase,
        wait=wait,
        compute=compute,
        started=started,
    )
