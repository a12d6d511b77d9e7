"""A TorchRL multi-process collector's sampler, read from its workers' own time.

The policy forward and the env steps run in the collector's worker processes; the
training process only waits for batches (and, here, resets one env once at start-up, a
slow 0.5 s: an env read for its specs). Under ``gyreprof run`` each worker times its
batches and the policy call in them, and the verdict's sampler part is their split of
the workers' collection wall time. The naive rules get these wrong: the training
process's own sampler (its one start-up reset) makes env_reset 100% of the sampler, and
the workers' phases merged over both processes, running in parallel, add up to more
than any wall time they are compared to.

Each script times its batch waits and updates with ``perf_counter``; the run's wait
ratio must agree within 0.05.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from gyreprof._support.format import UNTIMED  # noqa: E402
from gyreprof.analysis.workers import CollectorWorkers, WorkerTime  # noqa: E402

from helpers.run_scripts.runhelp import check_format, clock, gyreprof_run, script  # noqa: E402

FRAMES = "800"  # 2 workers x 4 batches of 100 frames each


def _run(tmp: Path, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pytest.importorskip("torchrl")
    proc, data = gyreprof_run(tmp, script("torchrl_workers.py"), *args, FRAMES)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    check_format(data)
    return data, clock(proc.stdout)


def _checked(data: dict[str, Any], clk: dict[str, Any]) -> dict[str, Any]:
    """The verdict, with what every such run must show: the wait ratio within 5 points
    of the script's clock, shares of the workers' wall time that add up to at most 100%,
    the main process's start-up reset not leading, no advice to time by hand."""
    v = data["verdict"]
    assert v is not None and v["wait_ratio"] is not None, data["notes"]
    expected = clk["wait_s"] / (clk["wait_s"] + clk["update_s"])
    assert abs(v["wait_ratio"] - expected) < 0.05, (v["wait_ratio"], clk)
    shares = v["sampler_shares"]
    assert set(shares) == {"env_step", "env_reset", "fwd", UNTIMED}, shares
    assert sum(shares.values()) == pytest.approx(1.0), shares
    assert shares["env_reset"] < 0.05, shares  # the main's 0.5 s reset is not the workers'
    assert "collector workers" in (v["sampler_wall"] or ""), v["sampler_wall"]
    line = next(r for r in v["reasons"] if r.startswith("sampler:"))
    assert line.startswith("sampler: in the 2 collector workers, "), v["reasons"]
    assert "of the training loop's" in line, line  # wall time against wall time
    words = " ".join(v["reasons"] + v["advice"])
    assert "in your script" not in words and "time the rest" not in words, words
    return dict(v)


@pytest.mark.slow
def test_a_heavy_policy_in_the_workers_leads(tmp_path: Path) -> None:
    """Each policy forward repeats 200 times (~4 ms), the envs step at full speed: fwd,
    timed in the workers, leads; before, the workers' forward was not seen at all."""
    data, clk = _run(tmp_path, "sync", "0", "200")
    v = _checked(data, clk)
    assert v["bound"] == "sampler", v["reasons"]
    assert v["dominant_phase"] == "fwd", v["reasons"]
    assert v["sampler_shares"]["fwd"] > 0.5, v["sampler_shares"]
    assert "fwd (the policy) takes" in " ".join(v["reasons"])
    assert v["advice"][0].startswith("the policy forward in the collector's workers leads")
    assert data["sampler"]["phases"]["fwd"]["count"] == int(FRAMES)  # one forward a frame


@pytest.mark.slow
def test_slow_envs_in_the_workers_lead(tmp_path: Path) -> None:
    """Each env step sleeps 4 ms in the workers, the policy forward runs once: env_step
    leads the workers' time, and the start-up reset of the main process does not."""
    data, clk = _run(tmp_path, "sync", "0.004", "1")
    v = _checked(data, clk)
    assert v["bound"] == "sampler", v["reasons"]
    assert v["dominant_phase"] == "env_step" and v["dominant_kind"] == "env", v["reasons"]
    assert v["sampler_shares"]["env_step"] > 0.5, v["sampler_shares"]
    assert v["advice"][0].startswith("env stepping in the collector's workers leads")


@pytest.mark.slow
def test_an_async_collector_with_a_heavy_policy(tmp_path: Path) -> None:
    """MultiAsyncCollector: the workers collect while the trainer trains (an overlapped
    loop); their time is still split from their own batches."""
    data, clk = _run(tmp_path, "async", "0", "200")
    v = _checked(data, clk)
    assert v["loop"] == "overlapped", v["loop_evidence"]
    assert v["dominant_phase"] == "fwd", v["reasons"]


def test_parallel_workers_shares_are_of_their_added_wall_time() -> None:
    """Two workers collecting in parallel, each for as long as the training loop ran:
    their env and fwd time added is twice that wall time, yet each share is of their
    added collection time, the shares add up to 100%, and each worker is busy at most
    100% of the loop's wall time."""
    s = 1_000_000_000
    a = WorkerTime(1, 10, wall_ns=s, env_step_ns=300_000_000, fwd_ns=600_000_000)
    b = WorkerTime(2, 10, wall_ns=s, env_step_ns=500_000_000, fwd_ns=400_000_000)
    cw = CollectorWorkers((a, b), loop_wall_ns=float(s), loop_wait_ns=0.9 * s)
    shares = cw.shares
    assert shares["env_step"] == pytest.approx(0.4) and shares["fwd"] == pytest.approx(0.5)
    assert shares[UNTIMED] == pytest.approx(0.1)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert cw.leading == "fwd"
    assert "busy 100.0% of the training loop's 1 s wall time" in cw.wall_words()


def test_a_worker_counter_past_its_wall_time_is_held_to_it() -> None:
    """Counters whose parts add up to more than the batches' wall time (clock rounding,
    or a forged record) never make shares above 100%."""
    from gyreprof.model.summary import COLLECT_COUNTER_PREFIX as P

    w = WorkerTime.from_counters(
        7, {f"{P}batches": 3, f"{P}wall_ns": 100, f"{P}env_step_ns": 90, f"{P}fwd_ns": 30}
    )
    assert w is not None and w.env_step_ns + w.fwd_ns <= w.wall_ns
    assert WorkerTime.from_counters(8, {}) is None  # not a collector's worker


def test_phase_ns_reads_the_running_total_of_warm_up_and_steady_time() -> None:
    """What a worker reads at each batch's start and end: the ns recorded so far in a
    phase, warm-up included, so the delta is the batch's whatever the warm-up rule."""
    from gyreprof import Profiler
    from gyreprof._support.block import StatsBlock

    prof = Profiler(["env", "fwd"], warmup_steps=1)
    block = StatsBlock.of(prof.recorder)
    env, fwd = prof.ids("env", "fwd")
    assert block.phase_ns([env, fwd]) == 0
    prof.record("env", 1000)  # in the warm-up
    prof.recorder.flush()
    assert block.phase_ns([env]) == 1000
    prof.begin()
    prof.begin()  # the warm-up step ends
    prof.record("env", 500)
    prof.record("fwd", 200)
    prof.recorder.flush()  # a private block folds in batches (a worker's flushes too)
    assert block.phase_ns([env]) == 1500
    assert block.phase_ns([fwd]) == 200


def _main_with_one_reset() -> Any:
    """The training process's own sampler under a multi-process collector: one long
    start-up reset, which leads its phases (the naive rule's answer)."""
    from gyreprof import Profiler

    prof = Profiler(["env_reset", "env_step"], warmup_steps=0)
    prof.begin()
    prof.record("env_reset", 500_000_000)
    prof.end()
    return prof


def test_the_workers_are_the_sampler_the_verdict_judges() -> None:
    """Given the collector's workers, ``diagnose`` reads the sampler from them: their
    shares, their line, their leading part first in the advice, their sites; the
    training process's start-up reset and its own sites never lead."""
    import gyreprof as gp
    from gyreprof.analysis import sites as S

    s = 1_000_000_000
    cw = CollectorWorkers(
        (
            WorkerTime(11, 4, wall_ns=s, env_step_ns=200_000_000, fwd_ns=300_000_000),
            WorkerTime(12, 4, wall_ns=s, env_step_ns=200_000_000, fwd_ns=300_000_000),
        ),
        loop_wall_ns=float(s),
        loop_wait_ns=0.8 * s,
    )
    own = S.ProcessSites(
        pid=1, hz=100.0, sampler_samples=50, sampler=[S.SiteCount("main_only", "/x/m.py", 3, 50)]
    )
    theirs = S.ProcessSites(
        pid=11, hz=100.0, sampler_samples=80, sampler=[S.SiteCount("to_batch", "/x/w.py", 9, 40)]
    )
    main = _main_with_one_reset()
    naive = gp.diagnose(sampler=main, sites=own)
    assert naive.dominant_phase == "env_reset"  # what the workers' figures replace
    v = gp.diagnose(sampler=main, sites=own, collector_workers=cw, worker_sites=theirs)
    assert v.sampler_shares == pytest.approx(cw.shares)
    assert v.dominant_phase == UNTIMED and v.dominant_kind == "untimed"
    assert v.coverage == pytest.approx(0.5)
    assert v.sampler_wall == "the 2 collector workers' collection wall time"
    assert [r["function"] for r in v.sampler_sites] == ["to_batch"]
    assert v.sampler_sites[0]["share"] == pytest.approx(0.5)
    assert v.advice[0].startswith("look first at to_batch (w.py:9) in the collector's workers")
    sampler_lines = [r for r in v.reasons if r.startswith("sampler:")]
    assert len(sampler_lines) == 1 and sampler_lines[0].startswith("sampler: in the 2 collector")
    words = str(v)
    assert "main_only" not in words and "'env_reset'" not in words, words
    # a training process whose own sampler holds no steady sample is still judged
    from gyreprof import Profiler

    empty = Profiler(["env_step"], warmup_steps=0)
    with pytest.raises(ValueError, match="no steady-state samples"):
        gp.diagnose(sampler=empty)
    assert gp.diagnose(sampler=empty, collector_workers=cw).sampler_shares == pytest.approx(
        cw.shares
    )


def test_trainer_bound_workers_are_said_but_not_tuned() -> None:
    """A trainer-bound run with collector workers: their line is said, with why it does
    not matter yet, and no advice to tune them comes first."""
    import gyreprof as gp

    s = 1_000_000_000
    cw = CollectorWorkers(
        (WorkerTime(11, 4, wall_ns=s, env_step_ns=700_000_000, fwd_ns=100_000_000),),
        loop_wall_ns=float(s),
        loop_wait_ns=0.05 * s,
    )
    trainer = gp.Profiler(["wait", "compute"], warmup_steps=0)
    for _ in range(20):
        trainer.begin()
        trainer.record("wait", 50_000)
        trainer.record("compute", 950_000)
        trainer.end()
    v = gp.diagnose(trainer=trainer, collector_workers=cw, loop="sync")
    assert v.bound == "trainer"
    line = next(r for r in v.reasons if r.startswith("sampler: in the 1 collector worker,"))
    assert line.endswith("this does not matter until the trainer waits for the sampler")
    assert not any("collector's workers" in a for a in v.advice), v.advice
    assert v.sampler_advice == []
