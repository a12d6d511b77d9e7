"""Where snapshots come from: ``build_snapshot`` (the one builder from a copy of a
stats block) and ``as_snapshot`` (a Profiler, Snapshot or Summary input, as a Snapshot)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np

from gyreprof._support.block import StatsBlock
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof.model.snapshot.model import Snapshot
from gyreprof.model.snapshot.records import Meta, current_unix_offset_ns
from gyreprof.model.summary import Summary

__all__ = ["ProfilerIdentity", "as_snapshot", "build_snapshot"]


# ------------------------------------------------------------------------ inputs


@overload
def as_snapshot(
    source: Any, *, what: str = ..., summary_only: Literal[False] = ...
) -> Snapshot: ...


@overload
def as_snapshot(
    source: Any, *, what: str = ..., summary_only: Literal[True]
) -> Snapshot | None: ...


def as_snapshot(source: Any, *, what: str = "this", summary_only: bool = False) -> Snapshot | None:
    """A Profiler, Snapshot or Summary input as a Snapshot.

    A Profiler gives its snapshot now; a Summary the snapshot it was computed
    from. A Summary loaded from JSON has none: ValueError, or None with
    ``summary_only=True`` (for callers that can work from the Summary alone).
    ``what`` names the caller in the errors; TypeError for any other input.
    """
    if isinstance(source, Snapshot):
        return source
    take = getattr(source, "snapshot", None)
    if callable(take) and hasattr(source, "recorders"):  # a Profiler (no import: no cycle)
        snap = take()
        if not isinstance(snap, Snapshot):
            raise ArgumentTypeError(
                f"{what}: {type(source).__name__}.snapshot() gave {type(snap).__name__}"
            )
        return snap
    if isinstance(source, Summary):
        snap = source.snapshot
        if snap is None and not summary_only:
            raise InvalidValueError(
                f"{what} needs the snapshot behind this Summary, and a Summary loaded from "
                "JSON has none; pass the Profiler, or a Snapshot (Snapshot.load(path))"
            )
        return snap
    raise ArgumentTypeError(
        f"{what} takes a Profiler, Snapshot or Summary, got {type(source).__name__}"
    )


# ----------------------------------------------------------------------- building


@dataclass(frozen=True, slots=True)
class ProfilerIdentity:
    """What a snapshot of one Profiler's recorders says about who took it: the phases,
    the label and the calibrated cost of a boundary. The counter names grow as the
    program counts new ones, so they are passed with each stats block instead."""

    phases: tuple[str, ...]
    label: str | None
    lap_cost_ns: float


def build_snapshot(
    stats: np.ndarray,
    config: Mapping[str, Any],
    identity: ProfilerIdentity,
    counter_names: Sequence[str],
    *,
    taken_ns: int,
    pid: int | None = None,
    host: str | None = None,
    label: str | None = None,
    live_path: str | None = None,
    windows_closed: int | None = None,
    windows_dropped: int = 0,
    overwritten: int | None = None,
) -> Snapshot:
    """The one builder of a Snapshot from a copy of a stats block (profiler, thread
    retirement, autosave and the live reader all call it), so their meta agrees.

    ``pid`` / ``host`` default to this process's (a live reader passes the writer's);
    ``label`` to the identity's. The Unix offset is this boot's, valid for any process
    of this host (CLOCK_MONOTONIC is per boot); ``overwritten`` comes from the block's
    own ring head, and ``windows_closed`` from the block unless the caller hid them.
    """
    block = StatsBlock.from_config(np.asarray(stats, dtype=np.int64), config)
    here = socket.gethostname()
    host = here if host is None else host
    meta = Meta(
        pid=os.getpid() if pid is None else int(pid),
        host=host,
        label=identity.label if label is None else label,
        unix_offset_ns=current_unix_offset_ns() if host == here else None,
        windows_closed=block.windows_closed if windows_closed is None else windows_closed,
        autosave_windows_dropped=windows_dropped or None,
        live_path=live_path,
    )
    return Snapshot.from_stats(
        stats,
        config,
        identity.phases,
        counter_names,
        lap_cost_ns=identity.lap_cost_ns,
        taken_ns=taken_ns,
        overwritten=(
            max(0, block.ring_head - int(config["capacity"]))
            if overwritten is None
            else overwritten
        ),
        meta=meta,
    )
