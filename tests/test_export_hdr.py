"""HdrHistogram V2 export checked against the independent `hdrhistogram` package, both ways."""

from __future__ import annotations

import base64
import io
import math
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader, HistogramLogWriter
from hypothesis import given, settings
from hypothesis import strategies as st

import gyreprof as gp
from gyreprof._core import layout_info
from gyreprof.export import (
    decode_histogram,
    encode_histogram,
    hdr_log,
    parse_hdr_log,
    read_hdr_log,
)

from conftest import run_cli

HOUR_NS = 3_600_000_000_000
L = int(layout_info()["counts_len"])
RNG = np.random.default_rng(11)
ENV_NS = RNG.lognormal(math.log(150_000), 0.7, 10_000).astype(np.int64)
FWD_NS = RNG.lognormal(math.log(2_500), 0.4, 10_000).astype(np.int64)
QS = [50.0, 90.0, 99.0, 99.9]


def _recorded() -> gp.Profiler:
    p = gp.Profiler(["env", "fwd"])
    for e, f in zip(ENV_NS.tolist(), FWD_NS.tolist(), strict=True):
        p.record("env", e)
        p.record("fwd", f)
    return p


def _hdrh_counts(h: HdrHistogram) -> np.ndarray:
    out = np.zeros(h.counts_len, dtype=np.int64)
    theirs = np.ctypeslib.as_array(h.counts)[: h.counts_len]
    out[: len(theirs)] = theirs
    return out


def _close(ours: float, h: HdrHistogram, q: float) -> bool:
    """Our percentile equals HdrHistogram's within one bucket.

    The rank rules differ (HdrHistogram rounds q/100*N, we take the ceiling, and
    q/100*N may land a hair above an integer in floating point), so the value of
    the neighbouring rank counts as agreement too.
    """
    n = h.get_total_count()
    for qq in (q, min(100.0, q + 100.0 / n)):
        theirs = h.get_value_at_percentile(qq)
        width = h.get_highest_equivalent_value(theirs) - h.get_lowest_equivalent_value(theirs) + 1
        if abs(ours - theirs) <= width:
            return True
    return False


def test_hdrh_reads_our_log(tmp_path: Path) -> None:
    p = _recorded()
    s = p.summary()
    path = hdr_log(p, tmp_path / "run.hlog")
    assert path == tmp_path / "run.hlog"
    text = path.read_text()
    assert text.startswith("#[Histogram log format version")
    assert "#[StartTime: " in text and "#[BaseTime: " in text
    assert (
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"' in text
    )
    reader = HistogramLogReader(str(path), HdrHistogram(1, HOUR_NS, 3))
    seen = {}
    while (h := reader.get_next_interval_histogram()) is not None:
        seen[h.get_tag()] = h
    reader.close()
    assert set(seen) == {"env", "fwd"}  # no steps were marked: no step tag
    for name in ("env", "fwd"):
        h, stats = seen[name], s.phases[name]
        assert h.get_total_count() == stats.count == 10_000
        np.testing.assert_array_equal(_hdrh_counts(h), stats._counts)
        for q in QS:
            assert _close(stats.percentile(q), h, q), (name, q)
        assert h.get_max_value() >= stats.max >= h.get_lowest_equivalent_value(h.get_max_value())


def test_we_read_hdrh_encoded_histograms() -> None:
    h = HdrHistogram(1, HOUR_NS, 3)
    for v in ENV_NS.tolist():
        h.record_value(v)
    ours = decode_histogram(h.encode())
    assert ours.layout == (1, HOUR_NS, 3)
    assert ours.total_count == h.get_total_count() == 10_000
    np.testing.assert_array_equal(ours.counts, _hdrh_counts(h))
    for q in QS:
        assert _close(ours.percentile(q), h, q)
    # a layout unlike ours (lowest 1000, 2 significant figures) decodes too
    h2 = HdrHistogram(1000, 10**12, 2)
    for v in (1500, 2_000_000, 7 * 10**9):
        h2.record_value(v, 5)
    d2 = decode_histogram(h2.encode())
    assert d2.layout == (1000, 10**12, 2) and d2.total_count == 15
    np.testing.assert_array_equal(d2.counts, _hdrh_counts(h2))


def test_we_read_a_log_hdrh_wrote(tmp_path: Path) -> None:
    path = tmp_path / "theirs.hlog"
    with open(path, "w") as fh:
        w = HistogramLogWriter(fh)
        w.output_log_format_version()
        w.output_comment("[written by the hdrhistogram package]")
        w.output_base_time(1_700_000_000_000)
        w.output_legend()
        for i in range(3):
            h = HdrHistogram(1, HOUR_NS, 3)
            for v in FWD_NS[i * 1000 : (i + 1) * 1000].tolist():
                h.record_value(v)
            w.output_interval_histogram(
                h, start_time_stamp_sec=10.0 * i, end_time_stamp_sec=10.0 * i + 10.0
            )
    log = read_hdr_log(path)
    assert len(log) == 3 and log.tags == [None]
    assert log.base_time_s == pytest.approx(1_700_000_000.0)
    assert [iv.start_s for iv in log] == [0.0, 10.0, 20.0]
    assert all(iv.length_s == 10.0 for iv in log)
    merged = log.histogram()
    assert merged.total_count == 3000
    ref = HdrHistogram(1, HOUR_NS, 3)
    for v in FWD_NS[:3000].tolist():
        ref.record_value(v)
    np.testing.assert_array_equal(merged.counts, _hdrh_counts(ref))


def test_roundtrip_through_our_reader(tmp_path: Path) -> None:
    p = gp.Profiler(["env", "fwd"], warmup_steps=5)
    for _ in range(60):
        p.begin()
        sum(range(200))
        p.lap(0)
        p.lap(1)
    p.end()
    s = p.summary()
    text = hdr_log(p)
    assert isinstance(text, str)
    log = parse_hdr_log(text)
    assert log.tags == ["env", "fwd", "step"]
    assert log.start_time_s is not None and log.start_time_s > 1e9
    for name, st_ in [("env", s.phases["env"]), ("fwd", s.phases["fwd"]), ("step", s.step)]:
        got = log.histogram(name)
        np.testing.assert_array_equal(got.counts, st_._counts)
        assert got.percentile(99.0) == pytest.approx(st_.p99, rel=2e-3)
        iv = next(i for i in log if i.tag == name)
        assert iv.max_value == pytest.approx(st_.max / 1e6, abs=1e-6)  # ms
        assert iv.length_s == pytest.approx(s.elapsed_s, rel=1e-3, abs=1e-5)
    # steady state only: the warm-up steps are not in the step histogram
    assert log.histogram("step").total_count == 55
    # same from a snapshot file and a JSON summary
    snap = p.snapshot().save(tmp_path / "run.snap")
    js = tmp_path / "run.json"
    s.to_json(js)
    for src in (snap, js):
        again = parse_hdr_log(hdr_log(src))  # type: ignore[arg-type]
        np.testing.assert_array_equal(again.histogram("env").counts, s.phases["env"]._counts)


def test_intervals_cut_from_the_ring(tmp_path: Path) -> None:
    p = gp.Profiler(["a", "b"], warmup_steps=3)
    for _ in range(300):
        p.begin()
        until = time.perf_counter() + 20e-6  # >= 6 ms in all: several 1 ms intervals
        while time.perf_counter() < until:
            pass
        p.lap(0)
        p.lap(1)
    p.end()
    # Cut the run into intervals a quarter of its own span long, so the test holds on a
    # machine of any speed (a fixed 1 ms interval failed where 300 steps took < 1 ms).
    ev = p.events()
    span_s = int((ev["start_ns"] + ev["duration_ns"]).max() - ev["start_ns"].min()) / 1e9
    interval_s = span_s / 4
    log = parse_hdr_log(hdr_log(p, interval_s=interval_s))  # type: ignore[arg-type]
    assert len({iv.start_s for iv in log}) >= 2
    starts = [iv.start_s for iv in log]
    assert starts == sorted(starts)
    s = p.summary()
    assert log.histogram("a").total_count == s.phases["a"].count
    assert log.histogram("step").total_count == s.step.count
    with pytest.raises(ValueError, match="raw events"):
        hdr_log(p.snapshot(), interval_s=1.0)
    # an events file holds the ring: intervals work from it later
    ef = gp.export.save_events(p, tmp_path / "run.npz")
    again = parse_hdr_log(hdr_log(ef, interval_s=interval_s))  # type: ignore[arg-type]
    assert again.histogram("a").total_count == s.phases["a"].count
    assert again.start_time_s is not None  # the file kept the wall-clock mapping
    with pytest.raises(ValueError, match="interval_s"):
        hdr_log(p, interval_s=-1)


def test_cli_hdrlog(tmp_path: Path) -> None:
    snap = _recorded().snapshot().save(tmp_path / "run.snap")
    out = tmp_path / "out.hlog"
    r = run_cli("export", str(snap), "--format", "hdrlog", "-o", str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    assert read_hdr_log(out).histogram("env").total_count == 10_000
    p = gp.Profiler(["a"])
    for _ in range(50):
        p.begin()
        p.lap(0)
    p.end()
    ev = gp.export.save_events(p, tmp_path / "run.npz")
    r = run_cli(
        "export", str(ev), "-f", "hdrlog", "--interval-s", "0.5", "-o", str(out), timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert read_hdr_log(out).histogram("a").total_count == 50
    r = run_cli("export", str(snap), "-f", "openmetrics", "--interval-s", "1", timeout=60)
    assert r.returncode == 2 and "--interval-s applies to --format hdrlog" in r.stderr


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=HOUR_NS), min_size=0, max_size=200),
    st.integers(min_value=1, max_value=5),
)
def test_encode_matches_hdrh_for_any_values(values: list[int], sf: int) -> None:
    hist = gp._core.Histogram(1, HOUR_NS, sf)
    hist.record_many(np.array(values, dtype=np.int64))
    counts = hist.counts_array()
    text = encode_histogram(counts, 1, HOUR_NS, sf)
    theirs = HdrHistogram.decode(text)
    assert theirs.get_total_count() == len(values)
    np.testing.assert_array_equal(_hdrh_counts(theirs), counts)
    np.testing.assert_array_equal(decode_histogram(text).counts, counts)


# --------------------------------------------------------------------- bad input


def _outer(cookie: int, inner: bytes) -> str:
    comp = zlib.compress(inner)
    return base64.b64encode(struct.pack(">II", cookie, len(comp)) + comp).decode()


def test_bad_histograms_raise_value_error() -> None:
    good = encode_histogram(np.zeros(L, dtype=np.int64), 1, HOUR_NS, 3)
    with pytest.raises(ValueError, match="base64"):
        decode_histogram("HISTF!!!not-base64")
    with pytest.raises(ValueError, match="bad cookie"):
        decode_histogram(base64.b64encode(b"\x00\x11\x22\x33" + b"\x00" * 20).decode())
    with pytest.raises(ValueError, match="V1"):
        decode_histogram(_outer(0x1C849302, b"\x00" * 40))
    raw = base64.b64decode(good)
    with pytest.raises(ValueError, match="length field"):
        decode_histogram(base64.b64encode(raw[:-3]).decode())
    broken = raw[:8] + bytes(len(raw) - 8)
    with pytest.raises(ValueError, match="zlib"):
        decode_histogram(base64.b64encode(broken).decode())
    with pytest.raises(ValueError, match="too short"):
        decode_histogram(base64.b64encode(b"\x1c\x84").decode())
    header = struct.pack(">IIiiqqd", 0x1C849313, 0, 0, 3, 10, 5, 1.0)  # highest < lowest
    with pytest.raises(ValueError, match="impossible histogram settings"):
        decode_histogram(_outer(0x1C849314, header))
    header = struct.pack(">IIiiqqd", 0x1C849313, 99, 0, 3, 1, HOUR_NS, 1.0)
    with pytest.raises(ValueError, match="payload length"):
        decode_histogram(_outer(0x1C849314, header))
    with pytest.raises(ValueError, match="counts"):
        encode_histogram(np.zeros(5, dtype=np.int64), 1, HOUR_NS, 3)


def test_bad_logs_raise_value_error(tmp_path: Path) -> None:
    notlog = tmp_path / "notes.txt"
    notlog.write_text("hello\nworld\n")
    with pytest.raises(ValueError, match="line 1 is not an HdrHistogram log line"):
        read_hdr_log(notlog)
    empty = tmp_path / "empty.hlog"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_hdr_log(empty)
    binary = tmp_path / "bin.hlog"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(ValueError, match="not UTF-8"):
        read_hdr_log(binary)
    good = hdr_log(_recorded())
    assert isinstance(good, str)
    lines = good.splitlines()
    bad_b64 = "\n".join([*lines[:-1], lines[-1][:-10] + "!!!!@@@@##"])
    with pytest.raises(ValueError, match=r"line \d+: broken base64"):
        parse_hdr_log(bad_b64)
    bad_num = "\n".join([*lines[:-1], lines[-1].replace(",", ",x", 1)])
    with pytest.raises(ValueError, match="not a number"):
        parse_hdr_log(bad_num)
    with pytest.raises(ValueError, match="not an HdrHistogram log"):
        parse_hdr_log("# just a comment\n")
    with pytest.raises(FileNotFoundError):
        read_hdr_log(tmp_path / "missing.hlog")
    with pytest.raises(ValueError, match="no interval tagged"):
        parse_hdr_log(good).histogram("nope")
    with pytest.raises(ValueError, match="nothing to export"):
        hdr_log(gp.Profiler(["env"]))
    r = run_cli("export", str(notlog), "-f", "hdrlog", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_stream_output() -> None:
    buf = io.StringIO()
    assert hdr_log(_recorded(), buf) is None
    assert read_hdr_log(io.StringIO(buf.getvalue())).histogram("fwd").total_count == 10_000
