"""Snapshots and summaries: round trips, merge, corrupted input, output forms."""

from __future__ import annotations

import csv
import io
import json
import random
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gyreprof as gp
import gyreprof.model.files


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
    assert back.rows == snap.rows
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
    assert gyreprof.model.files.load(p).phases["env"].count == 3
    assert isinstance(gyreprof.model.files.read(p), gp.Summary)


def test_saved_files_are_told_apart_by_their_content(tmp_path) -> None:
    snap = _prof({"env": [5, 6, 7]}).snapshot()
    p = snap.save(tmp_path / "run.json")  # a misleading suffix: the bytes decide
    read = gyreprof.model.files.read(p)
    assert isinstance(read, gp.Snapshot) and read.totals == snap.totals
    loaded = gyreprof.model.files.load(p)
    assert isinstance(loaded, gp.Summary) and loaded.phases["env"].count == 3
    assert loaded.snapshot is not None  # computed from the snapshot, not a JSON summary
    bad = tmp_path / "notes.txt"
    bad.write_text("steps: 3")
    with pytest.raises(ValueError, match="neither a gyreprof summary"):
        gyreprof.model.files.load(bad)


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
        assert m.rows == left.rows
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


# ------------------------------------------------------------- one percentile rule


def _ten_step_window() -> gp.Profiler:
    prof = gp.Profiler(["a"], window_steps=10)
    for v in range(100_000, 1_000_001, 100_000):  # ten distinct values, 100 us .. 1 ms
        prof.begin()
        prof.record("a", v)
    prof.end()
    return prof


def test_rolling_window_p99_is_the_top_rank() -> None:
    # rank ceil(0.99 * 10) = 10 is the largest value, exactly; the old integer-midpoint
    # rule read it from its ~3% bucket (999423 ns)
    (w,) = _ten_step_window().windows()
    a = w.phases["a"]
    assert a.count == 10 and a.p99 == 1_000_000 and a.max == 1_000_000
    assert a.p90 == pytest.approx(900_000, rel=0.04)  # rank 9: a bucket midpoint
    assert a.p50 == pytest.approx(500_000, rel=0.04)


def test_one_rule_in_histograms_summaries_merges_and_windows() -> None:
    values = list(range(100_000, 1_000_001, 100_000))
    prof = _ten_step_window()
    from gyreprof._core import Histogram

    h = Histogram()
    h.record_many(values)
    s = prof.summary()
    merged = gp.merge([prof.snapshot(), prof.snapshot()]).summary()
    view = s["a"].histogram
    assert view is not None and not view.counts.flags.writeable
    exact = prof.windows(steps=10)[0].phases["a"]  # exact values from the ring
    for q in (0.0, 10.0, 50.0, 90.0, 99.0, 100.0):
        expect = h.percentile(q)
        assert s["a"].percentile(q) == expect
        assert view.percentile(q) == expect
        assert merged["a"].percentile(q) == expect  # twice the values: the same ranks
    assert s["a"].p99 == exact.p99 == 1_000_000  # the top rank is the exact maximum
    assert h.percentile(10.0) == 100_000  # rank 1 is the exact minimum
    assert view.count == 10 and view.min == 100_000 and view.max == 1_000_000
    assert len(view.lows) == len(view.widths) == len(view.counts)
    assert (view.midpoints >= view.lows).all()


# -------------------------------------------------------- merged time is wall time


def _source(steps: int, start_s: float, end_s: float, *, mono_base_s: float, host: str, offset):
    """A real snapshot of ``steps`` steps, its steady span set to known times."""
    prof = gp.Profiler(["x"])
    for _ in range(steps):
        prof.begin()
    prof.end()
    snap = prof.snapshot()
    t0 = int((start_s - mono_base_s) * 1e9) + 10**12  # this source's own monotonic clock
    t1 = t0 + int((end_s - start_s) * 1e9)
    src = snap.sources[0].replace(
        steady_start_ns=t0,
        end_ns=t1,
        steady_ns=t1 - t0,
        rate=steps / (end_s - start_s),
        host=host,
        overhead_ns=0.0,
        unix_offset_ns=None if offset is None else int(offset(mono_base_s)),
    )
    return snap.replace(rolling=None, sources=(src,), meta=gp.model.snapshot.Meta(host=host))


@pytest.mark.parametrize("clocks", ["unix_offsets", "one_host"])
def test_merged_elapsed_is_the_wall_span(clocks: str) -> None:
    # three sources of one 5 s run: 5.0 + 4.7 + 4.5 = 14.2 source-seconds, 5 s of wall time.
    # With offsets each source has its own monotonic base (another host); on one host
    # without offsets they share the machine's monotonic clock.
    def offset(base_s: float) -> int:
        return int((1_700_000_000 + base_s) * 1e9) - 10**12

    spec = [(20_000, 0.0, 5.0, 11.0), (19_750, 0.2, 4.9, 222.0), (19_500, 0.5, 5.0, 3333.0)]
    if clocks == "unix_offsets":
        snaps = [
            _source(n, a, b, mono_base_s=base, host=f"h{i}", offset=offset)
            for i, (n, a, b, base) in enumerate(spec)
        ]
    else:
        snaps = [_source(n, a, b, mono_base_s=0.0, host="h", offset=None) for n, a, b, _ in spec]
    s = gp.merge(snaps).summary()
    assert s.steps == 59_250 and s.sources == 3
    assert s.elapsed_s == pytest.approx(5.0, abs=1e-6)  # not 14.2
    assert s.steps_per_s == pytest.approx(59_250 / 5.0)
    assert s.steps_per_s * s.elapsed_s == pytest.approx(s.steps)  # the line adds up
    text = str(s)
    assert "59250 steady steps in 5 s" in text
    rates = sorted(n / (b - a) for n, a, b, _ in spec)
    assert "per source:" in text and f"{rates[0] / 1000:.3g}k" in text.replace(" ", "")
    assert s.meta["source_rates"] == pytest.approx([rates[0], rates[1], rates[2]])


def test_merged_span_without_a_common_clock_is_the_longest_source() -> None:
    # other hosts and no offsets: the sources cannot be placed on one clock; the answer is
    # the longest source (a lower bound), never the sum
    snaps = [
        _source(n, a, b, mono_base_s=base, host=f"h{i}", offset=None)
        for i, (n, a, b, base) in enumerate([(1000, 0.0, 2.0, 5.0), (1000, 0.0, 1.0, 9.0)])
    ]
    s = gp.merge(snaps).summary()
    assert s.elapsed_s == pytest.approx(2.0) and s.steps_per_s == pytest.approx(1000.0)


def test_per_thread_summary_counts_wall_time() -> None:
    """Three threads run side by side: the summary's elapsed time is the span they cover
    together, not the sum of their times. Each runs at least 2*D of its own clock, D of
    it before and D after a barrier all three are inside at once, so the span is at
    least 2*D shorter than the sum however the threads are scheduled."""
    import threading
    import time

    d = 0.05
    prof = gp.Profiler(["x"], per_thread=True, warmup_steps=0)
    start, middle = threading.Barrier(4), threading.Barrier(3)  # three writers (+ this one)

    def laps_for(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            prof.lap(0)
            prof.begin()  # a step closes after the clock is read: the interval covers it

    def run() -> None:
        start.wait()
        prof.begin()
        prof.lap(0)
        prof.begin()  # the steady interval has started, before this thread's own clock
        laps_for(d)
        middle.wait()  # all three threads are inside their steady interval now
        laps_for(d)
        prof.lap(0)
        prof.begin()
        prof.end()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    start.wait()
    for t in threads:
        t.join(120)
        assert not t.is_alive()
    s = prof.summary()
    per_source = [src.steady_ns / 1e9 for src in prof.snapshot().sources]
    busy = sum(per_source)
    tol = 0.005  # perf_counter against the recorder's clock
    assert s.sources == 3 and min(per_source) > 2 * d - tol
    assert 2 * d - tol < s.elapsed_s <= busy - 2 * d + tol  # the sum would be `busy`
    assert s.steps_per_s * s.elapsed_s == pytest.approx(s.steps, rel=1e-9)


# --------------------------------------------------------------------- interval


def test_interval_before_after_and_restarts() -> None:
    from gyreprof.model.snapshot import as_snapshot, interval

    prof = gp.Profiler(["x"])
    for _ in range(10):
        prof.begin()
        prof.record("x", 1000)
    a = prof.snapshot()
    for _ in range(5):
        prof.begin()
        prof.record("x", 2000)
    prof.end()
    b = prof.snapshot()
    iv = interval(a, b)
    assert iv.steady_steps == 5 + 1 - 0  # the open step closed in between
    assert int(iv.counts[0].sum()) == 5 and iv.rows[0].min == 2000
    assert iv.steady_s == pytest.approx((b.times.taken_ns - a.times.taken_ns) / 1e9)
    assert interval(None, b) is b  # nothing before: everything so far
    other = gp.Snapshot.from_bytes(b.to_bytes())
    moved = other.replace(rolling=None, meta=other.meta.replace(pid=-5))
    assert interval(a, moved) is moved  # another process: a restart, everything so far
    with pytest.raises(ValueError, match="single-source"):
        interval(gp.merge([a, a]), b)
    assert interval(gp.merge([a, a]), b, strict=False) is b  # ray's use: a restart
    two = interval(gp.merge([a, a]), gp.merge([b, b]))  # a per-thread profiler's merges
    assert two.steady_steps == 2 * iv.steady_steps and len(two.sources) == 1
    with pytest.raises(TypeError, match="two Snapshots"):
        interval(a, prof)  # type: ignore[arg-type]
    assert as_snapshot(prof).steps == b.steps
    assert as_snapshot(b.summary()) is b and as_snapshot(b) is b
    with pytest.raises(ValueError, match="loaded from"):
        as_snapshot(gp.Summary.from_json(b.summary().to_json()))
    with pytest.raises(TypeError, match="Profiler, Snapshot or Summary"):
        as_snapshot(42)


def test_save_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """Snapshot.save goes through the atomic writer: a link planted at the target is
    replaced by the new file, and the file it pointed at is left as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "run.snap"
    target.symlink_to(victim)
    prof = gp.Profiler(["a"])
    prof.record("a", 1000)
    prof.snapshot().save(target)
    assert victim.read_text() == "keep me"
    assert not target.is_symlink() and gp.Snapshot.load(target).phases == ("a",)
