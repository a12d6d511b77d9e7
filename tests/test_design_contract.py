"""The public API (as the README documents it), exercised name by name as user code would."""

from __future__ import annotations

import os
import queue
import time

import pytest

import gyreprof as gp


def test_design_md_profiler_block(tmp_path) -> None:
    prof = gp.Profiler(["env", "fwd", "xfer"], capacity=1 << 12, warmup_steps=10)
    ENV, FWD, XFER = prof.ids("env", "fwd", "xfer")
    assert all(isinstance(i, int) for i in (ENV, FWD, XFER))
    lap = prof.lap
    q: queue.Queue[int] = queue.Queue()
    for i in range(200):
        prof.begin()
        time.sleep(0)  # env.step
        lap(ENV)
        out = i * 2  # policy
        lap(FWD)
        q.put(out)
        lap(XFER)
    prof.end()

    with prof.phase("env"):
        pass

    @prof.timed("fwd")
    def forward(x: int) -> int:
        return x

    assert forward(3) == 3
    prof.record("xfer", 1234)
    prof.count("retry")

    s = prof.summary()
    env = s.phases["env"]
    for name in ("p50", "p90", "p99", "p999", "max", "mean", "count", "share", "min"):
        assert isinstance(getattr(env, name), (int, float))
    assert env.percentile(99.5) >= env.p99
    for name in (
        "steps",
        "steps_per_s",
        "warmup",
        "overhead_share",
        "overwritten",
        "out_of_range",
        "negative",
    ):
        assert hasattr(s, name)
    assert "env" in str(s)
    assert isinstance(s.to_dict(), dict)
    s.to_json(tmp_path / "s.json")
    s.to_csv(tmp_path / "s.csv")
    assert "| env |" in s.to_markdown()

    wins = prof.windows(steps=50)
    assert wins and isinstance(wins[0], gp.Window)
    assert prof.windows(seconds=1.0)
    snap = prof.snapshot()
    data = snap.to_bytes()
    back = gp.Snapshot.from_bytes(data)
    assert gp.merge([snap, back]).summary().phases["env"].count == 2 * env.count
    m = s.to_metrics(prefix="gyreprof/")
    assert m["gyreprof/phase/env/count"] == env.count


def test_design_md_trainer_block() -> None:
    tp = gp.Profiler(["wait", "compute"])
    sampler = gp.Profiler(["env", "fwd"])
    for _ in range(60):
        sampler.begin()
        sampler.record("env", 3_000_000)
        sampler.record("fwd", 500_000)
        tp.begin()
        with tp.phase("wait"):
            pass
        tp.record("wait", 2_000_000)
        with tp.phase("compute"):
            pass
        tp.record("compute", 1_000_000)
    tp.end()
    sampler.end()
    rep = gp.wait_report(tp, wait="wait", compute="compute")
    assert isinstance(rep, gp.WaitReport)
    assert 0 <= rep.ratio <= 1 and isinstance(rep.window_ratios, list)
    assert isinstance(rep.spikes, list) and isinstance(rep.to_dict(), dict)
    v = gp.diagnose(sampler=sampler, trainer=tp)
    assert isinstance(v, gp.Verdict)
    assert v.bound in ("trainer", "sampler", "unknown")
    assert v.dominant_phase == "env" and v.reasons and str(v)


def test_design_md_sweep_census_doctor() -> None:
    res = gp.sweep(
        "helpers.sweep_samplers.numpy_sampler:make_plain",
        "batch_size",
        [8, 16],
        fixed={},
        steps=20,
        warmup=2,
        repeats=1,
        isolate=False,
        progress=False,
    )
    assert isinstance(res, gp.SweepResult)
    for p in res.points:
        for name in ("value", "samples_per_s", "spread", "peak_rss_bytes", "phases", "error"):
            assert hasattr(p, name)
    assert res.stop_reason and hasattr(res, "recommended") and res.to_json()

    from gyreprof.analysis.parallelism import unregister_worker

    gp.register_worker("env_worker", num_threads=1, replace=True)
    try:
        c = gp.census(os.getpid(), interval_s=0)
        r = gp.check_parallelism(os.getpid(), expected={"env_worker": 1})
    finally:
        unregister_worker()
    assert c.process(os.getpid()).role == "env_worker"
    assert isinstance(r, gp.ParallelismReport)
    assert r.observed["env_worker"] == 1 and isinstance(r.findings, list)
    d = gp.doctor(os.getpid(), interval_s=0.2, stacks=False)
    assert isinstance(d, gp.ProcessDiagnosis)
    assert d.state in ("absent", "spinning", "blocked", "busy", "progressing")
    assert d.evidence and isinstance(d.exit_code, int)


def test_design_md_exports_and_live(tmp_path) -> None:
    prof = gp.Profiler(["env", "fwd"], live=True)
    try:
        for _ in range(50):
            prof.begin()
            prof.lap(0)
            prof.lap(1)
        prof.end()
        gp.export.chrome_trace(prof, tmp_path / "trace.json")
        text = gp.export.openmetrics(prof)
        assert text.rstrip().endswith("# EOF")
        gp.export.hdr_log(prof, tmp_path / "run.hlog")
        assert gp.export.read_hdr_log(tmp_path / "run.hlog")
        assert prof.live is not None
        assert any(e.pid == os.getpid() for e in gp.live.list())
        assert gp.live.attach(os.getpid()).summary().phases["env"].count == 50
    finally:
        prof.live.close()


def test_design_md_ray_names_exist() -> None:
    pytest.importorskip("ray")
    from gyreprof.integrations.ray import FleetSummary, collect

    assert callable(collect)
    for name in ("merged", "per_actor", "missing"):
        assert name in FleetSummary.__dataclass_fields__
