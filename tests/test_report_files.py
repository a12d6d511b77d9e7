"""``gyreprof report`` on saved trainer and sampler snapshots of real Profilers: the wait
ratio and the verdict whenever the phases allow (issue 22, item 7), and the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof._support.format import fmt_pct

from conftest import run_cli


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, gp.Verdict]:
    """A synchronous loop marked by hand: the sampler steps while the trainer waits
    (about 75% of the time), then the trainer computes. The boundaries are placed at set
    times (``begin_at`` / ``lap_at``, the core's own path): spun loops read 58% under a
    second test run, and the verdict turned balanced."""
    tmp = tmp_path_factory.mktemp("report_files")
    sp = gp.Profiler(["env", "fwd"])
    tp = gp.Profiler(["wait", "compute"])
    srec, trec = sp.recorder, tp.recorder
    env, fwd = sp.ids("env", "fwd")
    wait, compute = tp.ids("wait", "compute")
    t = trec.now_ns()
    for i in range(120):
        jitter = (i % 7) * 3_000  # a little spread, as a real loop has
        trec.begin_at(t)
        srec.begin_at(t)
        t += 200_000 + jitter
        srec.lap_at(env, t)
        t += 100_000 - jitter // 2
        srec.lap_at(fwd, t)
        srec.end_at(t)
        trec.lap_at(wait, t)
        t += 100_000 + jitter // 3
        trec.lap_at(compute, t)
    trec.end_at(t)
    sp.snapshot().save(tmp / "sampler.snap")
    tp.snapshot().save(tmp / "trainer.snap")
    return tmp / "sampler.snap", tmp / "trainer.snap", gp.diagnose(sp, tp, loop="sync")


def test_a_trainer_snapshot_gives_its_wait_ratio_and_verdict(saved) -> None:
    _, trainer, live = saved
    got = run_cli("report", str(trainer))
    assert got.returncode == 0, got.stderr
    assert f"wait ratio: {fmt_pct(live.wait_ratio)} of the trainer's time" in got.stdout
    assert "\nverdict: sampler-bound" in got.stdout  # an overlapped reading of 75%: sampler
    data = json.loads(run_cli("report", str(trainer), "--json", "--loop", "sync").stdout)
    assert data["format"] == "gyreprof.report/1"
    assert data["verdict"]["bound"] == "sampler" and data["verdict"]["loop"] == "sync"
    assert data["wait"]["ratio"] == pytest.approx(live.wait_ratio)


def test_a_sampler_and_a_trainer_snapshot_give_the_full_verdict(saved) -> None:
    sampler, trainer, live = saved
    for order in ((sampler, trainer), (trainer, sampler)):
        got = run_cli("report", *map(str, order), "--loop", "sync", "--json")
        assert got.returncode == 0, got.stderr
        v = json.loads(got.stdout)["verdict"]
        assert v["bound"] == live.bound == "sampler"
        assert v["dominant_phase"] == live.dominant_phase == "env"
        assert v["sampler_shares"] == pytest.approx(live.sampler_shares)
    text = run_cli("report", str(sampler), str(trainer), "--loop", "sync").stdout
    assert f"sampler ({sampler}):" in text and f"trainer ({trainer}):" in text
    assert "sampler: 'env' takes" in text


def test_what_report_refuses(saved, tmp_path: Path) -> None:
    sampler, _, _ = saved
    got = run_cli("report", str(sampler), str(sampler))
    assert got.returncode == 2 and "neither" in got.stderr and "trainer profile" in got.stderr
    got = run_cli("report", str(tmp_path))
    assert got.returncode == 2 and "not a gyreprof run --save folder" in got.stderr
    got = run_cli("report", str(sampler), str(sampler), str(sampler))
    assert got.returncode == 2
    # a sampler alone prints its table as before, no verdict
    got = run_cli("report", str(sampler))
    assert got.returncode == 0 and "verdict" not in got.stdout
