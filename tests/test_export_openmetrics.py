"""OpenMetrics text, the prometheus_client collector (scraped over a real socket), and the
flat metric dict (Summary.to_metrics) with its CLI form."""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import gyreprof as gp
from gyreprof.export import GyreprofCollector, bucket_counts, default_buckets_s, openmetrics

from conftest import run_cli

RNG = np.random.default_rng(7)
ENV_NS = RNG.lognormal(mean=math.log(200_000), sigma=0.6, size=3000).astype(np.int64)
FWD_NS = RNG.lognormal(mean=math.log(3_000), sigma=0.3, size=3000).astype(np.int64)


def _recorded() -> gp.Profiler:
    """Known durations through prof.record, plus a few marked steps and counters."""
    p = gp.Profiler(["env", "fwd"])
    for e, f in zip(ENV_NS.tolist(), FWD_NS.tolist(), strict=True):
        p.record("env", e)
        p.record("fwd", f)
    for _ in range(20):
        p.begin()
        p.lap(0)
        p.lap(1)
    p.end()
    p.count("retry", 3)
    p.record("fwd", 5 * 3_600_000_000_000)  # above the 1 h range: counted as out of range
    return p


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _buckets(fam, **labels: str) -> dict[float, float]:  # type: ignore[no-untyped-def]
    out = {}
    for s in fam.samples:
        if s.name.endswith("_bucket") and all(s.labels.get(k) == v for k, v in labels.items()):
            out[float(s.labels["le"])] = s.value
    return out


def _sample(fam, suffix: str, **labels: str) -> float:  # type: ignore[no-untyped-def]
    for s in fam.samples:
        if s.name.endswith(suffix) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no {suffix} sample with {labels} in {fam.name}")


def test_text_parses_and_bucket_counts_match() -> None:
    p = _recorded()
    s = p.summary()
    text = openmetrics(p)
    assert text.endswith("# EOF\n")
    fams = _families(text)
    ph = fams["gyreprof_phase_seconds"]
    assert ph.type == "histogram" and ph.unit == "seconds"
    bounds = default_buckets_s(s)
    # 1-2-5 series that spans the data
    assert bounds[0] <= s.phases["fwd"].min / 1e9 and bounds[-1] >= s.phases["fwd"].max / 1e9
    for name in ("env", "fwd"):
        st = s.phases[name]
        got = _buckets(ph, phase=name)
        assert got[math.inf] == st.count
        ours = bucket_counts(st, bounds)
        assert [got[b] for b in bounds] == ours
        assert ours == sorted(ours) and ours[-1] <= st.count
        assert _sample(ph, "_count", phase=name) == st.count
        assert _sample(ph, "_sum", phase=name) == pytest.approx(st.sum_ns / 1e9, rel=1e-9)
        assert _sample(ph, "_created", phase=name) > 1e9  # Unix seconds: taken in this process
    # against the raw values: off by at most the values within one bucket of the bound
    ev = p.events()
    raw = ev["duration_ns"][ev["phase"] == 0]
    assert len(raw) == s.phases["env"].count == 3020  # recorded + 20 laps
    env_got = _buckets(ph, phase="env")
    for b in bounds:
        exact = int((raw <= b * 1e9).sum())
        near = int((np.abs(raw - b * 1e9) <= b * 1e9 * 2e-3).sum())
        assert abs(env_got[b] - exact) <= near
    step = fams["gyreprof_step_seconds"]
    assert _buckets(step)[math.inf] == 20
    assert _sample(fams["gyreprof_steps"], "_total") == 20
    assert _sample(fams["gyreprof_out_of_range_events"], "_total") == 1
    assert _sample(fams["gyreprof_overwritten_events"], "_total") == 0
    assert _sample(fams["gyreprof_counter"], "_total", name="retry") == 3
    assert fams["gyreprof_build"].type == "info"


def test_custom_buckets_labels_and_namespace() -> None:
    p = _recorded()
    text = openmetrics(
        p, buckets_s=[1e-5, 1e-4, 1e-3], namespace="sampler", labels={"worker": 'w"3'}
    )
    fams = _families(text)
    ph = fams["sampler_phase_seconds"]
    got = _buckets(ph, phase="fwd", worker='w"3')
    assert sorted(got) == [1e-5, 1e-4, 1e-3, math.inf]
    assert [got[b] for b in (1e-5, 1e-4, 1e-3)] == bucket_counts(
        p.summary().phases["fwd"], [1e-5, 1e-4, 1e-3]
    )
    assert all(s.labels["worker"] == 'w"3' for f in fams.values() for s in f.samples)


def test_ring_overwrites_are_counted() -> None:
    p = gp.Profiler(["a"], capacity=64)
    for _ in range(100):
        p.begin()
        p.lap(0)
    p.end()
    fams = _families(openmetrics(p))
    assert _sample(fams["gyreprof_overwritten_events"], "_total") == 200 - 64


def test_snapshot_and_summary_inputs(tmp_path: Path) -> None:
    p = _recorded()
    snap_path = p.snapshot().save(tmp_path / "run.snap")
    json_path = tmp_path / "run.json"
    p.summary().to_json(json_path)
    for src in (snap_path, json_path, p.snapshot(), p.summary()):
        fams = _families(openmetrics(src))
        assert _buckets(fams["gyreprof_phase_seconds"], phase="env")[math.inf] == 3020
    # a Summary carries no clock to relate to wall time: no _created samples
    assert "_created" not in openmetrics(p.summary())
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(p.summary().to_dict(histograms=False)))
    with pytest.raises(ValueError, match="histograms"):
        openmetrics(bare)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="nothing to export"):
        openmetrics(gp.Profiler(["env"]))
    p = _recorded()
    with pytest.raises(ValueError, match="strictly increasing"):
        openmetrics(p, buckets_s=[0.1, 0.01])
    with pytest.raises(ValueError, match="positive"):
        openmetrics(p, buckets_s=[-1.0])
    with pytest.raises(ValueError, match="at least one"):
        openmetrics(p, buckets_s=[])
    with pytest.raises(ValueError, match="namespace"):
        openmetrics(p, namespace="9bad-name")
    with pytest.raises(ValueError, match="label"):
        openmetrics(p, labels={"le": "x"})
    with pytest.raises(TypeError, match="Profiler, Snapshot or Summary"):
        openmetrics(42)


def test_collector_in_a_registry_and_over_http() -> None:
    from prometheus_client import start_http_server

    p = _recorded()
    reg = CollectorRegistry()
    empty = gp.Profiler(["idle"])
    reg.register(GyreprofCollector(p, labels={"worker": "0"}))
    reg.register(GyreprofCollector(empty, namespace="idle"))  # scrapes fine before any data
    threaded = gp.Profiler(["t"], per_thread=True)  # no thread has a recorder yet
    reg.register(GyreprofCollector(threaded, namespace="threaded"))
    text = om_latest(reg).decode()
    fams = _families(text)
    got = _buckets(fams["gyreprof_phase_seconds"], phase="env", worker="0")
    bounds = default_buckets_s(p.summary())
    assert [got[b] for b in bounds] == bucket_counts(p.summary().phases["env"], bounds)
    assert _sample(fams["idle_steps"], "_total") == 0

    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    try:
        port = server.server_address[1]
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert "openmetrics" in resp.headers["Content-Type"]
            body = resp.read().decode()
    finally:
        server.shutdown()
        thread.join(timeout=10)
    fams = _families(body)
    assert _buckets(fams["gyreprof_phase_seconds"], phase="fwd", worker="0")[math.inf] == 3021


def test_collector_takes_a_fresh_snapshot_per_scrape() -> None:
    p = gp.Profiler(["a"])
    reg = CollectorRegistry()
    reg.register(GyreprofCollector(p))
    p.record("a", 1000)
    first = _families(om_latest(reg).decode())
    p.record("a", 2000)
    second = _families(om_latest(reg).decode())
    assert _sample(first["gyreprof_phase_seconds"], "_count", phase="a") == 1
    assert _sample(second["gyreprof_phase_seconds"], "_count", phase="a") == 2
    # any callable returning a snapshot works as a source
    reg2 = CollectorRegistry()
    reg2.register(GyreprofCollector(p.snapshot, namespace="cb"))
    assert (
        _sample(_families(om_latest(reg2).decode())["cb_phase_seconds"], "_count", phase="a") == 2
    )


def test_cli_openmetrics_to_stdout(tmp_path: Path) -> None:
    p = _recorded()
    snap = p.snapshot().save(tmp_path / "run.snap")
    r = run_cli(
        "export",
        str(snap),
        "--format",
        "openmetrics",
        "--buckets",
        "0.00001,0.0001,0.001",
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    fams = _families(r.stdout)
    assert sorted(_buckets(fams["gyreprof_phase_seconds"], phase="env")) == [
        1e-5,
        1e-4,
        1e-3,
        math.inf,
    ]
    r = run_cli("export", str(snap), "-f", "openmetrics", "--buckets", "a,b", timeout=60)
    assert r.returncode == 2 and "--buckets" in r.stderr


# ----------------------------------------------------------------- metric dict


def test_to_metrics_keys_and_values() -> None:
    p = gp.Profiler(["env", "fwd"], warmup_steps=2)
    for _ in range(12):
        p.begin()
        p.lap(0)
        p.lap(1)
    p.end()
    p.count("retry", 2)
    s = p.summary()
    m = s.to_metrics(prefix="gyreprof/")
    assert all(isinstance(v, float) for v in m.values())
    assert all(k.startswith("gyreprof/") for k in m)
    expected = {
        "steps", "steps_per_s", "elapsed_s", "events", "warmup_steps", "overhead_share",
        "overwritten", "out_of_range", "negative", "nonfinite",
    }  # fmt: skip
    stats = ("count", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")
    for base in ("phase/env", "phase/fwd", "step"):
        expected |= {f"{base}/{k}" for k in stats}
    expected |= {"phase/env/share", "phase/fwd/share", "counter/retry"}
    assert set(m) == {"gyreprof/" + k for k in expected}
    assert m["gyreprof/steps"] == s.steps == 10
    assert m["gyreprof/warmup_steps"] == 2
    assert m["gyreprof/phase/env/p99_ns"] == s.phases["env"].p99
    assert m["gyreprof/step/count"] == s.step.count
    assert m["gyreprof/phase/fwd/share"] == pytest.approx(s.phases["fwd"].share)
    assert m["gyreprof/counter/retry"] == 2.0
    # keys are stable: same run, same keys; another prefix just swaps the prefix
    assert set(p.summary().to_metrics("x.")) == {"x." + k[len("gyreprof/") :] for k in m}
    assert gp.export.metrics(p) == pytest.approx(m, nan_ok=True)
    with pytest.raises(TypeError, match="prefix"):
        s.to_metrics(prefix=3)  # type: ignore[arg-type]


def test_cli_metrics_json_has_no_nan(tmp_path: Path) -> None:
    p = gp.Profiler(["env", "never"])
    for _ in range(5):
        p.begin()
        p.lap(0)
    p.end()
    snap = p.snapshot().save(tmp_path / "run.snap")
    out = tmp_path / "m.json"
    r = run_cli(
        "export", str(snap), "-f", "metrics", "--prefix", "run/", "-o", str(out), timeout=60
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())  # strict JSON: NaN became null
    assert data["run/phase/never/p50_ns"] is None
    assert data["run/phase/env/count"] == 5


def test_control_characters_in_phase_names_are_escaped() -> None:
    # a terminal escape, a bell, a carriage return, a tab, DEL, a C1 control, U+2028, a
    # lone surrogate: none reaches the text raw (they did); the parser reads printable
    # text, and \\, " and a line feed keep the spec's escapes
    names = ["\x1b[31mred", "bell\x07", "cr\r\ttab", "del\x7f\x9b", "ls\u2028", 'q"b\\n\nl']
    p = gp.Profiler(names)
    for _ in range(3):
        p.begin()
        for i in range(len(names)):
            p.lap(i)
    p.end()
    text = openmetrics(p)
    body = text.replace("\n", "")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in body), repr(text)
    assert "\u2028" not in text
    fams = _families(text)
    got = {s.labels["phase"] for s in fams["gyreprof_phase_seconds"].samples}
    assert {
        "\\x1b[31mred",
        "bell\\x07",
        "cr\\x0d\\x09tab",
        "del\\x7f\\x9b",
        "ls\\u2028",
        'q"b\\n\nl',
    } <= got
    text.encode("utf-8")  # no lone surrogate either
