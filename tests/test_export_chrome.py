"""Chrome Trace Event export: fields, nesting, metadata, streaming, events files, bad input."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import numpy as np
import pytest

import gyreprof as gp
from gyreprof.export import chrome_trace, load_events, save_events
from gyreprof.export.chrome import validate_trace

from conftest import run_cli


def _run_loop(prof: gp.Profiler, steps: int) -> None:
    ids = prof.ids()
    for i in range(steps):
        prof.begin()
        sum(range(50 + (i % 7) * 10))  # a little work so durations vary
        for p in ids:
            prof.lap(p)
    prof.end()


def _x_events(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


@pytest.fixture()
def prof() -> gp.Profiler:
    p = gp.Profiler(["env", "fwd", "xfer"], warmup_steps=3, label="sampler-0")
    _run_loop(p, 40)
    return p


def test_events_fields_metadata_and_nesting(prof: gp.Profiler, tmp_path: Path) -> None:
    out = chrome_trace(prof, tmp_path / "trace.json")
    assert out == tmp_path / "trace.json"
    doc = json.loads(out.read_text())
    assert doc["displayTimeUnit"] == "ns"
    assert doc["otherData"]["phases"] == ["env", "fwd", "xfer"]
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    names = {e["name"]: e for e in meta}
    assert names["process_name"]["args"]["name"] == "sampler-0"
    assert "thread_name" in names and names["thread_name"]["tid"] == 1
    xs = _x_events(doc)
    steps = [e for e in xs if e["cat"] == "step"]
    phases = [e for e in xs if e["cat"] == "phase"]
    assert len(steps) == 40  # warm-up steps are in the ring too
    assert len(phases) == 120
    for e in xs:
        assert set(e) >= {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"}
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert isinstance(e["args"]["step"], int)
    assert {e["name"] for e in phases} == {"env", "fwd", "xfer"}
    assert {e["name"] for e in steps} == {"step"}
    # every phase lies inside the step of the same number; consecutive laps tile it
    assert validate_trace(doc, ["env", "fwd", "xfer"]) == []
    by_step: dict[int, list[dict]] = {}
    for e in phases:
        by_step.setdefault(e["args"]["step"], []).append(e)
    for s in steps:
        kids = sorted(by_step[s["args"]["step"]], key=lambda e: e["ts"])
        assert [k["name"] for k in kids] == ["env", "fwd", "xfer"]
        assert kids[0]["ts"] == s["ts"]
        for a, b in zip(kids, kids[1:], strict=False):
            assert a["ts"] + a["dur"] == pytest.approx(b["ts"], abs=1e-3)
        # the time after the last lap until the next begin() is in the step, in no phase
        assert sum(k["dur"] for k in kids) <= s["dur"] + 1e-3
    # the warm-up end is marked
    assert any(e["ph"] == "i" and e["name"] == "warm-up end" for e in doc["traceEvents"])


def test_durations_are_exact_nanoseconds(prof: gp.Profiler) -> None:
    text = chrome_trace(prof)
    assert isinstance(text, str)
    doc = json.loads(text)
    ev = prof.events()
    xs = _x_events(doc)
    got = sorted(round(e["dur"] * 1000) for e in xs)
    assert got == sorted(int(d) for d in ev["duration_ns"])
    t0 = int(ev["start_ns"].min())
    starts = sorted(round(e["ts"] * 1000) for e in xs)
    assert starts == sorted(int(s) - t0 for s in ev["start_ns"])


def test_nested_phase_context_managers() -> None:
    p = gp.Profiler(["outer", "inner"])
    for _ in range(5):
        p.begin()
        with p.phase("outer"):
            with p.phase("inner"):
                sum(range(100))
    p.end()
    doc = json.loads(chrome_trace(p))  # type: ignore[arg-type]
    xs = _x_events(doc)
    assert validate_trace(doc) == []
    outer = [e for e in xs if e["name"] == "outer"]
    inner = [e for e in xs if e["name"] == "inner"]
    assert len(outer) == len(inner) == 5
    for o, i in zip(outer, inner, strict=True):
        assert o["ts"] <= i["ts"] and i["ts"] + i["dur"] <= o["ts"] + o["dur"]


class _CountingStream(io.StringIO):
    """A real text stream that remembers how many writes it received and the largest one."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.largest = 0

    def write(self, s: str) -> int:
        self.writes += 1
        self.largest = max(self.largest, len(s))
        return super().write(s)


def test_large_ring_streams_in_chunks() -> None:
    p = gp.Profiler(["a", "b"], capacity=1 << 14)
    a, b = p.ids()
    lap, begin = p.lap, p.begin
    for _ in range(12_000):  # 36k events into a 16k ring: it wraps
        begin()
        lap(a)
        lap(b)
    p.end()
    stream = _CountingStream()
    assert chrome_trace(p, stream, chunk_events=1000) is None
    doc = json.loads(stream.getvalue())
    assert len(_x_events(doc)) == 1 << 14
    assert doc["otherData"]["overwritten_events"] > 0
    assert "ring had wrapped" in doc["otherData"]["note"]
    assert stream.writes > 10  # written chunk by chunk ...
    assert stream.largest < len(stream.getvalue()) / 5  # ... never as one giant string
    assert validate_trace(doc) == []


def test_per_thread_profiler_gets_one_track_per_thread() -> None:
    p = gp.Profiler(["work"], per_thread=True)

    def worker() -> None:
        _run_loop(p, 10)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc = json.loads(chrome_trace(p))  # type: ignore[arg-type]
    tids = {e["tid"] for e in _x_events(doc)}
    assert tids == {1, 2}
    names = [e for e in doc["traceEvents"] if e["name"] == "thread_name"]
    assert {e["tid"] for e in names} == {1, 2}
    assert validate_trace(doc) == []


def test_events_file_roundtrip_and_cli(prof: gp.Profiler, tmp_path: Path) -> None:
    path = save_events(prof, tmp_path / "run.npz")
    ef = load_events(path)
    assert ef.phases == ("env", "fwd", "xfer")
    assert len(ef.events) == len(prof.events())
    np.testing.assert_array_equal(
        np.sort(ef.events["duration_ns"]), np.sort(prof.events()["duration_ns"])
    )
    assert ef.snapshot.summary().steps == prof.summary().steps
    from_file = json.loads(chrome_trace(path))  # type: ignore[arg-type]
    live = json.loads(chrome_trace(prof))  # type: ignore[arg-type]
    assert len(_x_events(from_file)) == len(_x_events(live))

    out = tmp_path / "cli.json"
    r = run_cli("export", str(path), "--format", "chrome", "-o", str(out), "--json", timeout=60)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == "chrome" and info["bytes"] == out.stat().st_size
    assert validate_trace(json.loads(out.read_text())) == []


def test_snapshot_file_is_refused_with_a_hint(prof: gp.Profiler, tmp_path: Path) -> None:
    snap = prof.snapshot().save(tmp_path / "run.snap")
    with pytest.raises(ValueError, match="save_events"):
        chrome_trace(snap)
    with pytest.raises(ValueError, match="raw events"):
        chrome_trace(prof.summary())  # type: ignore[arg-type]
    r = run_cli("export", str(snap), "-f", "chrome", timeout=60)
    assert r.returncode == 2
    assert "save_events" in r.stderr and "Traceback" not in r.stderr


def test_bad_input(tmp_path: Path) -> None:
    empty = gp.Profiler(["env"])
    with pytest.raises(ValueError, match="ring is empty"):
        chrome_trace(empty)
    threaded = gp.Profiler(["env"], per_thread=True)  # no thread has written yet
    with pytest.raises(ValueError, match="ring is empty"):
        chrome_trace(threaded)
    with pytest.raises(ValueError, match="nothing to export"):
        gp.export.openmetrics(threaded)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="not a gyreprof events file"):
        load_events(junk)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(ValueError, match="not a gyreprof events file"):
        chrome_trace(other)
    with pytest.raises(FileNotFoundError):
        chrome_trace(tmp_path / "missing.npz")
    p = gp.Profiler(["env"])
    _run_loop(p, 2)
    with pytest.raises(ValueError, match="chunk_events"):
        chrome_trace(p, chunk_events=0)
    with pytest.raises(TypeError, match="Profiler"):
        save_events(p.summary(), tmp_path / "x.npz")  # type: ignore[arg-type]
    r = run_cli("export", str(tmp_path / "nope"), "-f", "chrome", timeout=60)
    assert r.returncode == 2 and "no such file" in r.stderr
    r = run_cli("export", str(junk), "-f", "perfetto", timeout=60)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_write_dispatcher_rejects_unknown_format(prof: gp.Profiler) -> None:
    with pytest.raises(ValueError, match="unknown export format 'svg'"):
        gp.export.write(prof, None, "svg")
