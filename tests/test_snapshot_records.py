"""The typed Snapshot: records declared once, rows read by name, files of format 1 still
read (``tests/data/snapshot_v1*.snap`` were written by the dict-based Snapshot)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import MappingProxyType

import pytest

import gyreprof as gp
from gyreprof.histogram import STEP
from gyreprof.snapshot import Meta, SourceRecord, Times, Totals

DATA = Path(__file__).parent / "data"


def test_a_file_written_by_the_dict_based_snapshot_reads_field_for_field() -> None:
    want = json.loads((DATA / "snapshot_v1.json").read_text())
    snap = gp.Snapshot.load(DATA / "snapshot_v1.snap")
    assert list(snap.phases) == want["phases"]
    rows = [[r.count, r.sum, r.min, r.max] for r in snap.rows]
    assert rows == want["stat"]
    assert [[r.warm_count, r.warm_sum, r.warm_max] for r in snap.rows] == want["warm"]
    assert [r.first for r in snap.rows] == want["first"]
    assert dataclasses.asdict(snap.totals) == want["totals"]
    assert dict(snap.counters) == want["counters"]
    assert {k: v for k, v in dataclasses.asdict(snap.sources[0]).items() if v is not None} == (
        want["sources"][0]
    )
    assert snap.meta.to_dict() == want["meta"]
    assert snap.config.to_dict() == want["config"]
    assert dataclasses.asdict(snap.times) == want["times"]
    assert len(snap.windows()) == want["windows"]
    assert snap.summary()["env"].percentile(50) == want["p50_env"]
    merged = gp.Snapshot.load(DATA / "snapshot_v1_merged.snap")
    assert len(merged.sources) == want["merged_sources"] and merged.meta.merged == 2
    assert [[r.count, r.sum, r.min, r.max] for r in merged.rows] == want["merged_stat"]
    # and what this version writes of it reads back the same
    again = gp.Snapshot.from_bytes(snap.to_bytes())
    assert again.rows == snap.rows and again.sources == snap.sources and again.meta == snap.meta


def test_no_public_field_is_a_plain_dict() -> None:
    prof = gp.Profiler(["env"], label="x")
    prof.begin()
    prof.record("env", 1000)
    prof.count("retry", 2)
    prof.end()
    snap = prof.snapshot()
    for f in dataclasses.fields(snap):
        assert not isinstance(getattr(snap, f.name), (dict, list)), f.name
    assert isinstance(snap.counters, MappingProxyType)
    with pytest.raises(TypeError):
        snap.counters["retry"] = 5  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.meta.label = "y"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.totals = Totals()  # type: ignore[misc]
    assert isinstance(snap.times, Times) and isinstance(snap.meta, Meta)
    assert isinstance(snap.sources[0], SourceRecord) and snap.sources[0].label == "x"


def test_rows_are_read_by_name() -> None:
    prof = gp.Profiler(["env", "fwd"])
    for d in (100, 300, 200):
        prof.begin()
        prof.record("env", d)
        prof.record("fwd", 10 * d)
    prof.end()
    snap = prof.snapshot()
    env = snap.row("env")
    assert (env.count, env.sum, env.min, env.max) == (3, 600, 100, 300)
    assert env.mean == 200 and snap.row("fwd").max == 3000
    assert snap.row(STEP) is snap.rows[-1] and snap.rows[-1].count == snap.steady_steps
    with pytest.raises(KeyError, match="no phase 'nope'"):
        snap.row("nope")


def test_every_builder_writes_the_same_meta(tmp_path: Path) -> None:
    """Profiler, autosave and live reader snapshots of one run name it alike (issue 21)."""
    path = tmp_path / "a.snap"
    prof = gp.Profiler(["env"], label="same", autosave=path, live=True)
    try:
        prof.begin()
        prof.record("env", 1000)
        prof.end()
        own = prof.snapshot()
        prof.save_autosave()
        saved = gp.Snapshot.load(path)
        seg = str(prof.live.path)
        with gp.live.attach(seg) as reader:
            live = reader.snapshot()
    finally:
        prof.live.close()
    for snap in (own, saved, live):
        assert (snap.meta.pid, snap.meta.label, snap.meta.host) == (
            own.meta.pid,
            "same",
            own.meta.host,
        )
        assert snap.meta.unix_offset_ns is not None
        assert snap.totals.overwritten == 0
        assert snap.sources[0].label == "same"
    assert live.meta.live_path == seg
