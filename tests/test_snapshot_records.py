"""The typed Snapshot: records declared once, rows read by name, files of format 1 still
read (``tests/data/snapshot_v1*.snap`` were written by the dict-based Snapshot)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

import gyreprof as gp
from gyreprof.model.histogram import STEP
from gyreprof.model.snapshot import Meta, SourceRecord, Times, Totals

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


def _windowed() -> gp.Snapshot:
    prof = gp.Profiler(["env", "fwd"], window_steps=2, label="w")
    for d in (1000, 2**40, 5000, 90_000, 7, 3):
        prof.begin()
        prof.record("env", d)
        prof.record("fwd", 3 * d)
    prof.end()
    snap = prof.snapshot()
    assert snap.rolling is not None and snap.rolling.shape[0] == 3
    return snap


def test_version_2_keeps_the_windows_exactly_in_the_body() -> None:
    from helpers.crafted import as_version_1, split_snapshot

    snap = _windowed()
    want = snap.rolling
    assert want is not None
    blob = snap.to_bytes()
    assert blob[4] == 2
    _, header, rows = split_snapshot(blob)
    assert "rolling" not in header and header["rolling_shape"] == list(want.shape)
    # the block after the histograms: 8 byte planes of the little-endian int64 values
    planes = np.frombuffer(rows[-1], dtype=np.uint8).reshape(8, -1)
    assert planes.T.copy().view("<i8").reshape(want.shape).tolist() == want.tolist()
    back = gp.Snapshot.from_bytes(blob)
    assert back.rolling is not None and back.rolling.dtype == np.int64
    assert np.array_equal(back.rolling, want) and not back.rolling.flags.writeable
    assert back.windows() == snap.windows()
    # the same snapshot as version 1 (windows in the JSON header) reads the same
    v1 = gp.Snapshot.from_bytes(as_version_1(blob))
    assert v1.rolling is not None and np.array_equal(v1.rolling, want) and v1.rows == back.rows
    # without windows: no shape, no block
    bare = snap.to_bytes(windows=False)
    assert "rolling_shape" not in split_snapshot(bare)[1]
    assert gp.Snapshot.from_bytes(bare).rolling is None


@pytest.mark.parametrize(
    "how",
    ["truncated", "short_length", "long_length", "oversized_shape", "bad_shape", "extra_byte"],
)
def test_a_bad_window_block_is_a_corrupt_data_error(how: str) -> None:
    import struct
    import zlib

    from gyreprof._support.errors import CorruptDataError
    from gyreprof._support.limits import BudgetError

    from helpers.crafted import join_snapshot, split_snapshot

    prefix, header, rows = split_snapshot(_windowed().to_bytes())
    block = rows[-1]
    if how == "truncated":  # the body ends inside the block
        body = zlib.decompress(join_snapshot(prefix, header, rows)[6:])
        blob = prefix[:5] + b"\x00" + zlib.compress(body[:-5])
    else:
        if how == "short_length":
            rows[-1] = block[:-8]
        elif how == "long_length":
            rows[-1] = block + struct.pack("<q", 1)
        elif how == "oversized_shape":  # claims far more than the budget
            header["rolling_shape"] = [2**40, header["rolling_shape"][1]]
        elif how == "bad_shape":
            header["rolling_shape"] = [3, -1]
        else:
            rows.append(b"")
        blob = join_snapshot(prefix, header, rows)
    # a shape past the memory budget is refused before anything is allocated
    err = BudgetError if how == "oversized_shape" else CorruptDataError
    with pytest.raises(err):
        gp.Snapshot.from_bytes(blob)
    # and windows in the header of a version-2 snapshot are refused too
    prefix, header, rows = split_snapshot(_windowed().to_bytes())
    header["rolling"] = [[0] * header["rolling_shape"][1]]
    with pytest.raises(CorruptDataError, match="version 2"):
        gp.Snapshot.from_bytes(join_snapshot(prefix, header, rows))
