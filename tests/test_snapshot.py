"""Snapshots and summaries: round trips, merge, corrupted input, output forms."""

from __future__ import annotations

import csv
import io
import json
import random
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gyreprof as gp


def _prof(durations: dict[str, list[int]], steps: int = 0, **kw) -> gp.Profiler:
    prof = gp.Profiler(list(durations), **kw)
    for _ in range(steps):
        prof.begin()
    prof.end()
    for name, ds in durations.items():
        for d in ds:
            prof.record(name, d)
    return prof


def test_snapshot_round_trip_is_exact() -> None:
    rng = np.random.default_rng(1)
    prof = gp.Profiler(["env", "fwd"], warmup_steps=5, window_steps=10)
    for _i in range(100):
        prof.begin()
        prof.record("env", int(rng.lognormal(10, 1)))
        prof.record("fwd", int(rng.lognormal(8, 2)))
    prof.end()
    prof.count("retry", 4)
    snap = prof.snapshot()
    back = gp.Snapshot.from_bytes(snap.to_bytes())
    assert np.array_equal(back.counts, snap.counts)
    assert np.array_equal(back.stat, snap.stat)
    assert back.counters == {"retry": 4}
    a, b = snap.summary(), back.summary()
    assert a.phases["env"] == b.phases["env"]
    assert a.steps == b.steps and a.steps_per_s == b.steps_per_s
    assert len(b.windows) == len(a.windows) > 0
    assert a.windows[-1].phases["env"].p99 == b.windows[-1].phases["env"].p99
    small = gp.Snapshot.from_bytes(snap.to_bytes(windows=False))
    assert small.windows() == []


def test_snapshot_is_immutable() -> None:
    snap = _prof({"a": [1, 2, 3]}).snapshot()
    with pytest.raises(AttributeError):
        snap.phases = ("b",)  # type: ignore[misc]
    with pytest.raises(ValueError):
        snap.counts[0, 0] = 5


def test_summary_json_round_trip_keeps_percentiles() -> None:
    rng = np.random.default_rng(2)
    prof = _prof({"env": [int(x) for x in rng.lognormal(12, 1, 5000)]}, steps=0)
    s = prof.summary()
    back = gp.Summary.from_json(s.to_json())
    assert back.phases["env"] == s.phases["env"]
    for q in (1, 50, 99.5, 99.99):
        assert back.phases["env"].percentile(q) == s.phases["env"].percentile(q)


def test_summary_json_file(tmp_path) -> None:
    s = _prof({"env": [5, 6, 7]}).summary()
    p = tmp_path / "s.json"
    s.to_json(p)
    assert gp.Summary.from_json(p).phases["env"].count == 3
    assert gp.summary.load(p).phases["env"].count == 3


def test_csv_and_markdown_and_metrics() -> None:
    prof = gp.Profiler(["env", "fwd"])
    for _ in range(10):
        prof.begin()
        prof.lap(0)
        prof.lap(1)
    prof.end()
    prof.count("retry")
    s = prof.summary()
    rows = list(csv.DictReader(io.StringIO(s.to_csv())))
    assert [r["phase"] for r in rows] == ["env", "fwd", "(step)"]
    assert int(rows[0]["count"]) == 10
    md = s.to_markdown()
    assert "| env |" in md and "| phase |" in md
    m = s.to_metrics(prefix="gyreprof/")
    assert m["gyreprof/phase/env/count"] == 10.0
    assert m["gyreprof/counter/retry"] == 1.0
    assert "gyreprof/steps_per_s" in m and "gyreprof/step/p99_ns" in m
    assert all(isinstance(v, float) for v in m.values())
    # a phase named like a whole-step or run-level key cannot collide with it
    q = gp.Profiler(["step", "steps"])
    q.begin()
    q.lap(0)
    q.lap(1)
    q.end()
    mq = q.summary().to_metrics("")
    assert mq["phase/step/count"] == 1.0 and mq["step/count"] == 1.0 and mq["steps"] == 1.0


def test_merge_counts_exact_and_associative() -> None:
    rng = np.random.default_rng(3)
    snaps = [
        _prof(
            {
                "env": [int(x) for x in rng.lognormal(10, 1, 200)],
                "fwd": [int(x) for x in rng.lognormal(9, 1, 100)],
            },
            steps=7,
        ).snapshot()
        for _ in range(3)
    ]
    a, b, c = snaps
    left = gp.merge([gp.merge([a, b]), c])
    right = gp.merge([a, gp.merge([b, c])])
    swapped = gp.merge([c, a, b])
    for m in (left, right, swapped):
        assert np.array_equal(m.counts, left.counts)
        assert np.array_equal(m.stat, left.stat)
    s = left.summary()
    assert s.phases["env"].count == 600
    assert s.phases["fwd"].count == 300
    assert s.steps == 21
    assert s.sources == 3
    assert s.phases["env"].min == min(x.summary().phases["env"].min for x in snaps)


def test_merge_unions_phase_names() -> None:
    a = _prof({"env": [10, 20]}).snapshot()
    b = _prof({"fwd": [30], "env": [40]}).snapshot()
    m = gp.merge([a, b]).summary()
    assert list(m.phases) == ["env", "fwd"]
    assert m.phases["env"].count == 3 and m.phases["fwd"].count == 1


def test_merge_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        gp.merge([])
    with pytest.raises(TypeError, match="Snapshot"):
        gp.merge([b"x"])  # type: ignore[list-item]
    a = _prof({"env": [1]}).snapshot()
    b = _prof({"env": [1]}, significant_figures=2).snapshot()
    with pytest.raises(ValueError, match="different histogram layouts"):
        gp.merge([a, b])


@pytest.mark.parametrize(
    ("data", "msg"),
    [
        (b"", "too short"),
        (b"GYR", "too short"),
        (b"NOPE" + b"\x01\x00" + b"xxxxx", "magic"),
        (b"GYRS\x09\x00" + zlib.compress(b"{}"), "version 9"),
        (b"GYRS\x01\x00garbage", "corrupted or truncated"),
        (b"GYRS\x01\x00" + zlib.compress(b"\x05\x00\x00\x00{}"), "corrupted snapshot"),
        (b"GYRS\x01\x00" + zlib.compress(b"\x02\x00\x00\x00[]"), "corrupted snapshot"),
    ],
)
def test_from_bytes_rejects_bad_input(data: bytes, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        gp.Snapshot.from_bytes(data)


def test_from_bytes_type_error() -> None:
    with pytest.raises(TypeError):
        gp.Snapshot.from_bytes("GYRS")  # type: ignore[arg-type]


def test_truncated_snapshot_every_length() -> None:
    data = _prof({"env": list(range(1, 3000, 7))}, steps=3).snapshot().to_bytes()
    for cut in range(0, len(data), max(1, len(data) // 60)):
        with pytest.raises(ValueError):
            gp.Snapshot.from_bytes(data[:cut])


def _recompress(data: bytes, mutate) -> bytes:
    body = bytearray(zlib.decompress(data[6:]))
    mutate(body)
    return data[:6] + zlib.compress(bytes(body))


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=255))
def test_corrupted_payload_never_crashes(pos: int, byte: int) -> None:
    data = _prof({"env": [100, 2000, 3000], "fwd": [7]}, steps=2).snapshot().to_bytes()

    def flip(body: bytearray) -> None:
        body[pos % len(body)] = byte

    bad = _recompress(data, flip)
    try:
        snap = gp.Snapshot.from_bytes(bad)
    except ValueError:
        return
    snap.summary()  # whatever parses must also summarise


def test_count_mismatch_detected() -> None:
    data = _prof({"env": [100, 200]}).snapshot().to_bytes()

    def bump(body: bytearray) -> None:
        hlen = int.from_bytes(body[:4], "little")
        header = json.loads(body[4 : 4 + hlen])
        header["stat"][0][0] += 1
        new = json.dumps(header).encode()
        body[:] = len(new).to_bytes(4, "little") + new + body[4 + hlen :]

    with pytest.raises(ValueError, match="do not add up"):
        gp.Snapshot.from_bytes(_recompress(data, bump))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        "{}",
        '{"format": "gyreprof.summary/1"}',
        '{"format": "gyreprof.summary/1", "phases": 5}',
    ],
)
def test_summary_from_json_rejects_bad_input(text: str, tmp_path) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text or " ")
    with pytest.raises(ValueError):
        gp.Summary.from_json(p)


def test_summary_json_random_corruption() -> None:
    good = _prof({"env": [5, 50, 500]}).summary().to_json()
    rnd = random.Random(4)
    for _ in range(200):
        chars = list(good)
        for _ in range(3):
            chars[rnd.randrange(len(chars))] = rnd.choice('{}[]",:0a-')
        try:
            gp.Summary.from_json("".join(chars))
        except ValueError:
            pass


def test_percentile_argument_checked() -> None:
    s = _prof({"env": [5, 6]}).summary()
    with pytest.raises(ValueError, match="0..100"):
        s.phases["env"].percentile(101)
    with pytest.raises(TypeError):
        s.phases["env"].percentile("p99")  # type: ignore[arg-type]


def test_snapshot_size_is_compact() -> None:
    # 8 phases at 3 significant figures, 20k samples each from a typical step-time spread
    rng = np.random.default_rng(5)
    names = [f"p{i}" for i in range(8)]
    prof = _prof({n: [int(x) for x in rng.lognormal(11, 0.3, 20_000)] for n in names}, steps=100)
    snap = prof.snapshot()
    size = len(snap.to_bytes(windows=False))
    assert size < 20_000, size
    small = snap.to_bytes(windows=False, compression="lzma")
    assert len(small) < size
    assert np.array_equal(gp.Snapshot.from_bytes(small).counts, snap.counts)
    with pytest.raises(ValueError, match="compression"):
        snap.to_bytes(compression="gzip")


def test_crafted_zero_run_in_a_snapshot_is_a_value_error() -> None:
    data = _prof({"env": [100, 2000]}).snapshot().to_bytes()
    body = bytearray(zlib.decompress(data[6:]))
    hlen = int.from_bytes(body[:4], "little")
    pos = 4 + hlen
    n = int.from_bytes(body[pos : pos + 4], "little")
    evil = b"\xff" * 9 + b"\x7e" * 64
    body[pos : pos + 4 + n] = len(evil).to_bytes(4, "little") + evil
    with pytest.raises(ValueError, match="corrupted"):
        gp.Snapshot.from_bytes(data[:6] + zlib.compress(bytes(body)))
