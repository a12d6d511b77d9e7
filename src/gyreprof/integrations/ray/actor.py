"""The actor side: a Profiler on the actor and the ``gyreprof_snapshot`` remote method."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import ray

from gyreprof._support.errors import ArgumentTypeError, GyreprofError

if TYPE_CHECKING:
    from gyreprof.model.snapshot import Snapshot
    from gyreprof.recording.profiler import Profiler

__all__ = [
    "CONCURRENCY_GROUP",
    "NoProfilerError",
    "ProfiledActor",
    "attach_profiler",
    "profiled_remote",
    "snapshot_bytes",
]

CONCURRENCY_GROUP = "gyreprof"
"""Name of the concurrency group :func:`profiled_remote` declares (one thread)."""

_C = TypeVar("_C", bound=type)


class NoProfilerError(GyreprofError, RuntimeError):
    """Raised inside an actor whose ``gyreprof_snapshot`` has no Profiler to read."""


def attach_profiler(
    actor_self: object, phases: Sequence[str] | Profiler, **profiler_kwargs: Any
) -> Profiler:
    """Give ``actor_self`` a Profiler (stored as ``actor_self.gyreprof_profiler``) and return it.

    ``phases`` is a list of phase names (``profiler_kwargs`` go to
    :class:`gyreprof.Profiler`), or an existing Profiler to attach as is. Call it
    in the actor's ``__init__`` (or later, e.g. once the env is built); the
    ``gyreprof_snapshot`` method of :class:`ProfiledActor` reads it.
    """
    from gyreprof.recording.profiler import Profiler

    if isinstance(phases, Profiler):
        if profiler_kwargs:
            raise ArgumentTypeError(
                "attach_profiler got an existing Profiler and Profiler options "
                f"{sorted(profiler_kwargs)}; pass one or the other"
            )
        prof = phases
    else:
        prof = Profiler(phases, **profiler_kwargs)
    try:
        actor_self.gyreprof_profiler = prof  # type: ignore[attr-defined]
    except AttributeError:
        raise ArgumentTypeError(
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
                ident["node_ip"] = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
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
    from gyreprof.model.snapshot import as_snapshot

    try:
        snap = as_snapshot(source, what="snapshot_bytes")
    except TypeError:
        raise ArgumentTypeError(
            f"snapshot_bytes needs a Profiler or Snapshot, got {type(source).__name__}"
        ) from None
    ident = _ray_identity()
    meta = snap.meta.replace(**ident)
    sources = tuple(src.replace(**ident) for src in snap.sources)
    tagged = snap.replace(sources=sources, meta=meta)
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
            raise ArgumentTypeError(
                f"profiled_remote decorates a class, got {type(klass).__name__}"
            )
        original = getattr(klass, "gyreprof_snapshot", None)
        if original is None or not callable(original):
            raise ArgumentTypeError(
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
            raise ArgumentTypeError("use @profiled_remote or @profiled_remote(**ray_options)")
        return wrap(cls)
    return wrap
