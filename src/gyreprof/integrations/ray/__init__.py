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

Layout: :mod:`.actor` (the actor side), :mod:`.fleet` (the result values),
:mod:`.collect` (asking the actors and merging), :mod:`.monitor` (the
periodic monitor).
"""

from __future__ import annotations

from gyreprof._support.errors import MissingExtraError

try:
    import ray as _ray  # noqa: F401 - fail here, with the install hint, not deep inside
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError(
        "gyreprof.integrations.ray", "Ray", extra="ray", note="(or pip install 'ray>=2.9')"
    ) from _exc

from gyreprof.integrations.ray.actor import (
    CONCURRENCY_GROUP,
    NoProfilerError,
    ProfiledActor,
    attach_profiler,
    profiled_remote,
    snapshot_bytes,
)
from gyreprof.integrations.ray.collect import collect
from gyreprof.integrations.ray.fleet import (
    FLEET_FORMAT,
    REASONS,
    STEP_PHASE,
    ActorRecord,
    ActorStats,
    FleetRecord,
    FleetSummary,
    MissingActor,
    Spread,
)
from gyreprof.integrations.ray.monitor import FleetMonitor, FleetPoint, IntervalStats

__all__ = [
    "CONCURRENCY_GROUP",
    "FLEET_FORMAT",
    "ActorRecord",
    "ActorStats",
    "FleetRecord",
    "FleetMonitor",
    "FleetPoint",
    "FleetSummary",
    "IntervalStats",
    "MissingActor",
    "NoProfilerError",
    "REASONS",
    "STEP_PHASE",
    "ProfiledActor",
    "Spread",
    "attach_profiler",
    "collect",
    "profiled_remote",
    "snapshot_bytes",
]
