"""Parts of a well-formed live segment for a given pid, to plant or to alter in tests."""

from __future__ import annotations

import os
from typing import Any

import gyreprof as gp
from gyreprof.live import _layout as lay


def segment_parts(
    pid: int, name: str = "planted"
) -> tuple[dict[str, Any], bytes, lay.ProcessIdentity]:
    """The metadata (named ``name``), stats bytes and process identity of a segment for
    ``pid`` (its real start time) after 5 steps of one phase, env."""
    prof = gp.Profiler(["env"])
    for _ in range(5):
        prof.begin()
        prof.lap(0)
    prof.end()
    cfg = prof.recorder.config()
    stats = prof.recorder.stats_array().tobytes()
    meta: dict[str, Any] = {
        "name": name,
        "label": None,
        "phases": ["env"],
        "clock": str(cfg["clock"]),
        "config": cfg,
        "lap_cost_ns": 50.0,
        "uid": os.geteuid(),
        "boot_id": lay.boot_id(),
    }
    ident = lay.process_identity(pid)
    assert ident is not None
    return meta, stats, ident


def segment_bytes(
    pid: int, meta: dict[str, Any], stats: bytes, ident: lay.ProcessIdentity
) -> bytes:
    """A segment's bytes for ``pid``: the header of ``meta`` (its config's ``max_counters``)
    and ``ident``, then ``stats``."""
    head, _, _ = lay.build_header(
        pid=pid,
        identity=ident,
        stats_bytes=len(stats),
        max_counters=int(meta["config"]["max_counters"]),
        meta=meta,
    )
    return head + stats
