"""Bottleneck verdict: each branch, the caveats, missing sides, and the example's two settings."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof._support.errors import CorruptDataError
from gyreprof.analysis.verdict import BOUNDS, DEFAULT_ENV_PHASES, Verdict, diagnose
from gyreprof.model.summary import Summary

MS = 1_000_000
US = 1_000
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "producer_consumer.py"


def trainer(wait_ns: int, compute_ns: int, steps: int = 200, **kw: object) -> gp.Profiler:
    tp = gp.Profiler(["wait", "compute"], **kw)  # type: ignore[arg-type]
    for _ in range(steps):
        tp.begin()
        tp.record("wait", wait_ns)
        tp.record("compute", compute_ns)
    tp.end()
    return tp


def sampler(phases: dict[str, int], steps: int = 200, **kw: object) -> gp.Profiler:
    sp = gp.Profiler(list(phases), **kw)  # type: ignore[arg-type]
    for _ in range(steps):
        sp.begin()
        for name, d in phases.items():
            sp.record(name, d)
    sp.end()
    return sp


def test_public_names() -> None:
    assert gp.Verdict is Verdict
    assert set(BOUNDS) == {"trainer", "sampler", "balanced", "unknown"}


def test_gp_diagnose_is_the_verdict() -> None:
    # the public API: gp.diagnose(sampler=prof, trainer=tp) -> Verdict, even though a
    # subpackage of process diagnostics (the doctor) is imported as well
    import gyreprof.diagnostics.doctor  # noqa: F401 - binds the subpackage on gyreprof

    v = gp.diagnose(sampler=sampler({"env": 5 * MS}), trainer=trainer(3 * MS, MS))
    assert isinstance(v, Verdict) and v.bound == "sampler"


def test_low_wait_ratio_is_trainer_bound() -> None:
    sp = sampler({"env": 5 * MS, "fwd": MS})
    v = diagnose(sampler=sp, trainer=trainer(20 * US, 10 * MS))
    assert v.bound == "trainer"
    assert v.dominant_phase == "compute"
    assert v.dominant_kind == "trainer"
    assert v.wait_ratio == pytest.approx(0.002, rel=0.01)
    assert "trainer-bound" in v.reasons[1]
    assert "0.2%" in v.reasons[1]  # the number behind the step
    assert "does not matter until the trainer waits" in v.reasons[2]
    assert any("sampler tuning will not speed training up" in a for a in v.advice)
    assert str(v).startswith("verdict: trainer-bound")


def test_trainer_bound_names_its_largest_phase() -> None:
    tp = gp.Profiler(["wait", "fwd", "bwd", "optim"])
    for _ in range(50):
        tp.begin()
        tp.record("wait", 10 * US)
        tp.record("fwd", 2 * MS)
        tp.record("bwd", 5 * MS)
        tp.record("optim", MS)
    tp.end()
    v = diagnose(trainer=tp, compute="fwd")
    assert v.bound == "trainer"
    assert v.dominant_phase == "bwd"
    assert any("how the sampler spends its time" in u for u in v.unknowns)


def test_waiting_on_env_stepping() -> None:
    sp = sampler({"env": 5 * MS, "fwd": 500 * US, "xfer": 100 * US})
    v = diagnose(sampler=sp, trainer=trainer(3 * MS, MS))
    assert v.bound == "sampler"
    assert v.dominant_phase == "env"
    assert v.dominant_kind == "env"
    assert v.wait_ratio == pytest.approx(0.75)
    assert "75.0%" in v.reasons[1]
    assert "4x as fast" in v.reasons[1]
    assert "'env' takes" in v.reasons[2] and "env stepping" in v.reasons[2]
    advice = " ".join(v.advice)
    assert "parallelism took effect" in advice
    assert "bigger batch will help little" in advice
    assert v.sampler_shares["env"] > v.sampler_shares["fwd"]
    assert str(v).startswith("verdict: sampler-bound")
    assert "(look first at 'env')" in str(v)


def test_waiting_on_forward_or_transfer() -> None:
    sp = sampler({"env": 200 * US, "fwd": 4 * MS, "xfer": MS})
    v = diagnose(sampler=sp, trainer=trainer(3 * MS, MS))
    assert v.bound == "sampler"
    assert v.dominant_phase == "fwd"
    assert v.dominant_kind == "forward/transfer"
    assert any("sweep batch size and parallelism" in a for a in v.advice)
    assert not any("bigger batch will help little" in a for a in v.advice)


def test_step_wait_is_the_slowest_worker() -> None:
    sp = sampler({"fwd": 200 * US, "step_async": 50 * US, "step_wait": 4 * MS})
    v = diagnose(sampler=sp, trainer=trainer(3 * MS, MS))
    assert v.dominant_phase == "step_wait"
    assert v.dominant_kind == "env"
    assert "slowest vector-env worker" in v.reasons[2]


def test_the_two_halves_of_a_vector_step_rank_as_one_env_step() -> None:
    """CleanRL with an AsyncVectorEnv: fwd 34%, step_wait 32%, step_async 25%. The naive
    rule ranks phases one by one, so the forward leads and the report said "it is not env
    stepping"; one vector step is 57% of the sampler."""
    sp = sampler({"fwd": 340 * US, "step_wait": 320 * US, "step_async": 250 * US})
    v = diagnose(sampler=sp, trainer=trainer(3 * MS, MS))
    assert v.dominant_kind == "env" and v.dominant_phase == "step_wait", v.reasons
    line = next(r for r in v.reasons if r.startswith("sampler:"))
    assert "one vector env step (step_async + step_wait) takes 62.6%" in line, line
    assert "'step_wait' 35.2%" in line and "'step_async' 27.5%" in line, line
    assert "then 'fwd' 37.4%" in line and "it is env stepping" in line, line
    # a forward larger than both halves together still leads
    sp = sampler({"fwd": 700 * US, "step_wait": 320 * US, "step_async": 250 * US})
    v = diagnose(sampler=sp, trainer=trainer(3 * MS, MS))
    assert v.dominant_phase == "fwd" and v.dominant_kind == "forward/transfer", v.reasons


def test_the_next_step_sweeps_the_runs_own_command_or_names_the_setting() -> None:
    """Under gyreprof run the advice works on the script as it is: the sweep of its own
    flag, or (no flag visible) the setting to change by hand with what the run predicts;
    the factory sweep is the Python API's advice only."""
    sp, tp = sampler({"fwd": 4 * MS, "env": MS}), trainer(3 * MS, MS)
    cmd = ["python", "dqn.py", "--seed", "4", "--num-envs=4", "--total-timesteps", "4"]
    v = diagnose(sampler=sp, trainer=tp, command=cmd)
    assert v.dominant_kind == "forward/transfer"
    (sweep,) = [a for a in v.advice if "gyreprof sweep" in a]
    assert sweep.endswith(
        "gyreprof sweep -- python dqn.py --seed 4 '--num-envs={2,4,8,16}' --total-timesteps 4"
    ), sweep
    assert "--num-envs=4 around its 4" not in sweep and "--num-envs around its 4" in sweep
    v = diagnose(sampler=sp, trainer=tp, command=["python", "train.py", "--seed", "4"])
    (by_hand,) = [a for a in v.advice if "by hand" in a]
    assert "a 2x faster sampler makes training at most" in by_hand, by_hand
    assert "make_sampler" not in " ".join(v.advice)
    v = diagnose(sampler=sp, trainer=tp)
    assert any("make_sampler" in a for a in v.advice), v.advice
    # env stepping dominates: the number of envs is the setting to sweep
    v = diagnose(sampler=sampler({"env": 4 * MS, "fwd": MS}), trainer=tp, command=cmd)
    assert v.dominant_kind == "env" and any("'--num-envs={2,4,8,16}'" in a for a in v.advice)


def test_a_vector_step_that_costs_more_than_its_workers_stepping_is_its_round_trip() -> None:
    """SB3 SubprocVecEnv x4 on CartPole: the vector step is most of the sampler, the
    workers step a few percent of it. The naive reading ("step_wait leads: a slow env
    worker") advises more workers; it is the round trip, and fewer (or none) help."""
    sp = sampler({"fwd": MS, "step_async": 2 * MS, "step_wait": 2 * MS})
    tp = trainer(3 * MS, MS)
    v = diagnose(sampler=sp, trainer=tp, vector_workers={"workers": 4, "env_s": 0.2})
    line = next(r for r in v.reasons if r.startswith("sampler:"))
    assert "round trip to the vector env's 4 worker processes costs more" in line, line
    assert "each worker spent 50 ms stepping its envs (6% of it)" in line, line
    assert v.advice[0].startswith("step the envs in this process"), v.advice
    assert not any("bigger batch" in a for a in v.advice), v.advice
    # workers that step most of the vector step's time: a slow env, not the round trip
    v = diagnose(sampler=sp, trainer=tp, vector_workers={"workers": 4, "env_s": 2.8})
    assert not any("round trip" in r for r in v.reasons), v.reasons
    assert "slowest vector-env worker" in " ".join(v.reasons)
    # a forward that leads does not hide a round trip that costs a large part
    sp = sampler({"fwd": 3 * MS, "step_async": MS, "step_wait": MS})
    v = diagnose(sampler=sp, trainer=tp, vector_workers={"workers": 4, "env_s": 0.1})
    assert v.dominant_phase == "fwd" and "round trip" in " ".join(v.reasons), v.reasons
    assert any(a.startswith("step the envs in this process") for a in v.advice), v.advice


def test_env_phase_names_are_configurable() -> None:
    sp = sampler({"physics_tick": 5 * MS, "fwd": MS})
    tp = trainer(3 * MS, MS)
    assert "physics_tick" not in DEFAULT_ENV_PHASES
    assert diagnose(sampler=sp, trainer=tp).dominant_kind == "forward/transfer"
    v = diagnose(sampler=sp, trainer=tp, env_phases=("physics_tick",))
    assert v.dominant_kind == "env"
    # names starting with "env" always count
    assert (
        diagnose(sampler=sampler({"envpool": 5 * MS, "fwd": MS}), trainer=tp).dominant_kind == "env"
    )


def test_threshold_is_a_parameter() -> None:
    tp = trainer(MS, 9 * MS)  # waits 10%: at the default threshold, inside its band
    assert diagnose(trainer=tp).bound == "balanced"
    # with the band off, exactly at the threshold is the sampler's side (r >= threshold)
    assert diagnose(trainer=tp, band=0).bound == "sampler"
    assert diagnose(trainer=tp, trainer_bound_below=0.05).bound == "sampler"
    v = diagnose(trainer=tp, trainer_bound_below=0.2)
    assert v.bound == "trainer"
    assert v.thresholds["trainer_bound_below"] == 0.2
    assert "20.0% threshold" in v.reasons[1]


def test_sampler_only_says_what_cannot_be_concluded() -> None:
    v = diagnose(sampler=sampler({"env": 5 * MS, "fwd": MS}))
    assert v.bound == "unknown"
    assert v.dominant_phase == "env"
    assert v.wait_ratio is None and v.wait_report is None
    assert any("whether the trainer waits" in u for u in v.unknowns)
    assert all(a.startswith("if the trainer turns out to wait") for a in v.advice)
    assert str(v).startswith("verdict: unknown")
    assert "cannot tell:" in str(v)
    # a sampler that mostly hands batches over hints at a trainer-bound run
    v2 = diagnose(sampler=sampler({"env": MS, "put": 8 * MS}))
    assert any("handing batches over" in r for r in v2.reasons)


def test_trainer_only_says_what_cannot_be_concluded() -> None:
    v = diagnose(trainer=trainer(3 * MS, MS))
    assert v.bound == "sampler"
    assert v.dominant_phase is None
    assert any("which sampler phase to tune" in u for u in v.unknowns)


def test_neither_side_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one profile"):
        diagnose()


def test_empty_or_misnamed_profiles_are_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"no phase 'wait'.*known phases: \['fetch', 'train'\]"):
        diagnose(trainer=gp.Profiler(["fetch", "train"]))
    with pytest.raises(ValueError, match="sampler profile has no steady-state samples"):
        diagnose(sampler=gp.Profiler(["env", "fwd"]))
    with pytest.raises(ValueError, match="'wait' has no steady-state samples"):
        diagnose(trainer=gp.Profiler(["wait", "compute"]))
    with pytest.raises(TypeError, match="Profiler, Snapshot or Summary"):
        diagnose(sampler="prof")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trainer_bound_below must be in 0..1"):
        diagnose(trainer=trainer(MS, MS), trainer_bound_below=5)
    with pytest.raises(TypeError, match="env_phases must be a list"):
        diagnose(sampler=sampler({"env": MS}), env_phases="env")  # type: ignore[arg-type]


def test_warmup_caveat() -> None:
    v = diagnose(sampler=sampler({"env": MS}), trainer=trainer(MS, MS), overhead_limit=1.0)
    assert sum("warm-up was not excluded" in c for c in v.caveats) == 2
    v2 = diagnose(
        sampler=sampler({"env": MS}, warmup_steps=5),
        trainer=trainer(MS, MS, warmup_steps=5),
        overhead_limit=1.0,
    )
    assert not any("warm-up" in c for c in v2.caveats)


def test_first_call_outlier_is_named_in_the_warmup_caveat() -> None:
    tp = gp.Profiler(["wait", "compute"])
    for i in range(200):
        tp.begin()
        tp.record("wait", 80 * MS if i == 0 else MS)
        tp.record("compute", MS)
    tp.end()
    v = diagnose(trainer=tp, overhead_limit=1.0)
    assert any("the first 'wait' took 80 ms" in c for c in v.caveats)


def test_sample_count_caveats() -> None:
    few = diagnose(trainer=trainer(MS, MS, steps=50), overhead_limit=1.0)
    assert any("only 50 steady samples" in c and "p99" in c for c in few.caveats)
    some = diagnose(trainer=trainer(MS, MS, steps=300), overhead_limit=1.0)
    assert any("p99.9 needs at least 1000" in c for c in some.caveats)
    many = diagnose(trainer=trainer(MS, MS, steps=1200), overhead_limit=1.0)
    assert not any("steady samples" in c for c in many.caveats)
    custom = diagnose(trainer=trainer(MS, MS, steps=300), overhead_limit=1.0, min_samples_p99=500)
    assert any("only 300 steady samples" in c for c in custom.caveats)


def test_overhead_caveat() -> None:
    tp = gp.Profiler(["wait", "compute"], warmup_steps=1)
    for _ in range(200):  # a real loop: the profiler's share of it is tiny
        tp.begin()
        with tp.phase("wait"):
            pass
        with tp.phase("compute"):
            time.sleep(0.0002)
    tp.end()
    s = tp.summary()
    assert 0 < s.overhead_share < 0.05
    assert not any("the profiler itself took" in c for c in diagnose(trainer=tp).caveats)
    v = diagnose(trainer=tp, overhead_limit=s.overhead_share / 2)
    assert any("the profiler itself took" in c for c in v.caveats)


def test_gpu_caveat_when_cuda_is_in_use() -> None:
    tp = gp.Profiler(["wait", "compute"])
    for _ in range(10):
        tp.begin()
        tp.record("wait", MS)
        tp.record("compute", MS)
    tp.end()
    v = diagnose(trainer=tp, gpu=True)
    assert any("['compute'] were timed without synchronising" in c for c in v.caveats)
    assert not any("synchronis" in c for c in diagnose(trainer=tp, gpu=False).caveats)
    v2 = diagnose(trainer=tp.summary(), gpu=True)
    assert any("is unknown" in c and "Summary" in c for c in v2.caveats)
    # names that do not look like GPU work are left alone
    sp = sampler({"env": MS, "put": MS})
    assert not any("synchronis" in c for c in diagnose(sampler=sp, gpu=True).caveats)


def test_snapshot_and_summary_inputs() -> None:
    sp = sampler({"env": 5 * MS, "fwd": MS}, steps=100)
    tp = trainer(3 * MS, MS, steps=100)
    for s, t in (
        (sp.snapshot(), tp.snapshot()),
        (sp.summary(), Summary.from_json(tp.summary().to_json())),
    ):
        v = diagnose(sampler=s, trainer=t)
        assert v.bound == "sampler"
        assert v.dominant_phase == "env"


def test_dict_json_and_text(tmp_path) -> None:
    v = diagnose(sampler=sampler({"env": 5 * MS, "fwd": MS}), trainer=trainer(3 * MS, MS))
    d = v.to_dict()
    assert d["format"] == "gyreprof.verdict/2"
    assert d["bound"] == "sampler" and d["dominant_phase"] == "env"
    assert d["wait_report"]["ratio"] == pytest.approx(0.75)
    path = tmp_path / "verdict.json"
    assert json.loads(v.to_json(path)) == json.loads(path.read_text())
    text = str(v)
    assert "  2. the trainer spends 75.0%" in text
    assert "next:" in text and "caveats:" in text


def test_wait_report_options_pass_through() -> None:
    tp = gp.Profiler(["wait", "compute", "ckpt"])
    for i in range(100):
        tp.begin()
        tp.record("wait", 30 * MS if 50 <= i < 60 else 3 * MS)
        tp.record("compute", MS)
        tp.record("ckpt", 5 * MS if 50 <= i < 60 else 0)
    tp.end()
    v = diagnose(trainer=tp, window_steps=10, other="ckpt")
    assert v.wait_report is not None and len(v.wait_report.spikes) == 1
    assert any("together with ['ckpt']" in r for r in v.reasons)


def run_example(setting: str) -> dict:
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--slow", setting, "--seconds", "1.5", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.slow
def test_example_settings_give_opposite_verdicts() -> None:
    slow_trainer = run_example("trainer")
    slow_env = run_example("env")
    vt, ve = slow_trainer["verdict"], slow_env["verdict"]
    assert vt["bound"] == "trainer", vt["reasons"]
    assert ve["bound"] == "sampler", ve["reasons"]
    assert ve["dominant_kind"] == "env"
    assert ve["dominant_phase"] in ("step_wait", "step_async")
    assert vt["wait_ratio"] < 0.1 < ve["wait_ratio"]
    # a sampler thread feeding a queue: the shape is found from the timestamps
    for v in (vt, ve):
        assert v["loop"] == "overlapped" and v["loop_source"] == "detected", v["loop_evidence"]
    for out in (slow_trainer, slow_env):
        assert out["trainer"]["steps"] > 5
        assert out["sampler"]["steps"] > 20
        assert {"fwd", "step_async", "step_wait", "put"} <= set(out["sampler"]["phases"])


def test_example_prints_text() -> None:
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--slow", "trainer", "--seconds", "0.5", "--sync"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for header in ("-- sampler --", "-- trainer --", "-- wait report --", "-- verdict --"):
        assert header in r.stdout
    assert "verdict: " in r.stdout
    assert "env_step" in r.stdout  # SyncVectorEnv: one step phase


# ------------------------------------------------------------ the loop's shape


def sb3_run(sp: gp.Profiler, train_factor: float, rollouts: int = 10) -> gp.Profiler:
    """A real SB3 PPO on CartPole (DummyVecEnv, env stepping timed by ProfiledEnv).

    collect_rollouts is timed as the trainer's 'wait' and train as its 'compute';
    train also sleeps ``train_factor`` x the last rollout's duration, so the trainer
    waits about 1 / (1 + train_factor) of the time whatever the machine's speed.
    """
    pytest.importorskip("stable_baselines3")
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from gyreprof.integrations.gym import ProfiledEnv

    tp = gp.Profiler(["wait", "compute"])
    last = {"collect_s": 0.0}

    class TimedPPO(PPO):
        def collect_rollouts(self, *args: object, **kwargs: object) -> bool:
            tp.begin()
            t0 = time.perf_counter()
            with tp.phase("wait"):
                ok = super().collect_rollouts(*args, **kwargs)  # type: ignore[arg-type]
            last["collect_s"] = time.perf_counter() - t0
            return bool(ok)

        def train(self) -> None:
            with tp.phase("compute"):
                time.sleep(train_factor * last["collect_s"])
                super().train()

    venv = DummyVecEnv([lambda: ProfiledEnv(gymnasium.make("CartPole-v1"), sp)])
    model = TimedPPO(
        "MlpPolicy", venv, n_steps=128, batch_size=128, n_epochs=1, seed=0, device="cpu"
    )
    model.learn(total_timesteps=128 * rollouts)
    tp.end()
    return tp


@pytest.mark.slow
def test_sb3_ppo_with_a_slow_train_is_trainer_bound_although_it_waits() -> None:
    sp = gp.Profiler(["env_step", "env_reset"])
    tp = sb3_run(sp, train_factor=2.5)
    v = diagnose(sampler=sp, trainer=tp)
    # the trainer still waits about a quarter of the time: the old rule (wait > 10% ->
    # sampler-bound) called this sampler-bound
    assert v.wait_ratio is not None and 0.12 < v.wait_ratio < 0.45, v.wait_ratio
    assert v.loop == "sync" and v.loop_source == "detected", v.loop_evidence
    assert v.bound == "trainer", str(v)
    assert v.dominant_phase == "compute"
    text = str(v)
    assert "infinitely fast sampler saves at most" in text and "compute is" in text
    assert "synchronous loop" in text
    # the same numbers read as an overlapped pipeline are sampler-bound
    assert diagnose(sampler=sp, trainer=tp, loop="overlapped").bound == "sampler"
    d = v.to_dict()
    assert d["loop"] == "sync" and d["loop_source"] == "detected"


@pytest.mark.slow
def test_sb3_rollout_with_only_env_step_timed_leads_with_the_untimed_share() -> None:
    sp = gp.Profiler(["env_step", "env_reset"])
    tp = sb3_run(sp, train_factor=0.0)
    v = diagnose(sampler=sp, trainer=tp, loop="sync")
    assert v.loop_source == "declared"
    # the sampler marks no steps: its wall time is the trainer's wait (collect_rollouts),
    # of which stepping CartPole is a small part (the policy forward and buffer writes
    # are not timed)
    assert v.coverage is not None and 0.01 < v.coverage < 0.5, v.coverage
    assert v.sampler_shares["(untimed)"] == pytest.approx(1.0 - v.coverage)
    assert v.sampler_shares["env_step"] < v.coverage + 1e-9
    assert "collect" not in (v.sampler_wall or "") and "'wait' time" in (v.sampler_wall or "")
    sampler_reason = next(r for r in v.reasons if r.startswith("sampler:"))
    assert "untimed" in sampler_reason.split("'env_step'")[0]  # the untimed share comes first
    assert "dominant" not in sampler_reason.replace("can be called dominant", "")
    assert "policy forward" in sampler_reason
    # read as sampler-bound (how PPO's cheap epoch compares with collecting depends on the
    # machine's load, so the line is set to make it so): look first at the untimed part
    vs = diagnose(sampler=sp, trainer=tp, loop="sync", sync_sampler_above=0.0)
    assert vs.bound == "sampler"
    assert vs.dominant_phase == "(untimed)" and vs.dominant_kind == "untimed"
    assert any("time the rest of the sampler step" in a for a in vs.advice)
    assert "look first at the sampler's untimed" in str(vs)


def pipeline(produce_s: float, train_s: float, steps: int = 60) -> tuple[gp.Profiler, gp.Profiler]:
    """A real sampler thread feeding a queue while the main thread trains (sleeps)."""
    sp = gp.Profiler(["env", "put"])
    tp = gp.Profiler(["wait", "compute"], warmup_steps=3)
    q: queue.Queue[int] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            sp.begin()
            with sp.phase("env"):
                time.sleep(produce_s)
            with sp.phase("put"):
                while not stop.is_set():
                    try:
                        q.put(1, timeout=0.05)
                        break
                    except queue.Full:
                        continue
        sp.end()

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        for _ in range(steps):
            tp.begin()
            with tp.phase("wait"):
                q.get(timeout=10)
            with tp.phase("compute"):
                time.sleep(train_s)
        tp.end()
    finally:
        stop.set()
        th.join(10)
    return sp, tp


def test_queue_fed_pipeline_waiting_30_percent_is_sampler_bound() -> None:
    sp, tp = pipeline(produce_s=0.010, train_s=0.007)
    v = diagnose(sampler=sp, trainer=tp)
    assert v.loop == "overlapped" and v.loop_source == "detected", v.loop_evidence
    assert v.wait_ratio is not None and 0.12 < v.wait_ratio < 0.6, v.wait_ratio
    assert v.bound == "sampler", str(v)
    assert v.dominant_phase == "env"
    assert "a faster trainer saves nothing until the sampler keeps up" in str(v)
    # the same wait read as a synchronous loop would be trainer-bound (below half)
    assert v.wait_ratio < 0.5  # the case where the two rules disagree
    assert diagnose(sampler=sp, trainer=tp, loop="sync").bound == "trainer"
    # its steps are marked: shares are of the sampler's wall time and nearly all timed
    assert v.coverage is not None and v.coverage > 0.9
    assert set(v.sampler_shares) == {"env", "put", "(untimed)"}


def test_queue_fed_pipeline_with_a_slow_trainer_is_trainer_bound() -> None:
    sp, tp = pipeline(produce_s=0.001, train_s=0.010, steps=40)
    v = diagnose(sampler=sp, trainer=tp)
    assert v.loop == "overlapped" and v.loop_source == "detected", v.loop_evidence
    assert v.bound == "trainer", str(v)
    assert v.wait_ratio is not None and v.wait_ratio < 0.1


def test_sync_rule_counts_the_trainers_other_phases() -> None:
    """wait 3 ms, fwd 1 ms, bwd 5 ms, optim 1 ms a step, compute="fwd": the wait ratio
    wait / (wait + fwd) is 75%, above the synchronous line, but the trainer waits only
    30% of its time: an infinitely fast sampler would save 30%, so it is trainer-bound."""
    tp = gp.Profiler(["wait", "fwd", "bwd", "optim"])
    for _ in range(200):
        tp.begin()
        for name, d in (("wait", 3 * MS), ("fwd", MS), ("bwd", 5 * MS), ("optim", MS)):
            tp.record(name, d)
    tp.end()
    v = diagnose(trainer=tp, compute="fwd", loop="sync")
    assert v.wait_ratio == pytest.approx(0.75, abs=0.01)  # the naive rule's input
    assert v.bound == "trainer", str(v)
    assert "saves at most 30.0% of wall time" in str(v)
    assert "compute is 70.0%" in str(v) and "other phases count as compute" in str(v)
    # time outside any phase counts as the trainer's too: wait 3 ms, compute 2 ms, log 10 ms
    tl = gp.Profiler(["wait", "compute", "log"])
    for _ in range(200):
        tl.begin()
        for name, d in (("wait", 3 * MS), ("compute", 2 * MS), ("log", 10 * MS)):
            tl.record(name, d)
    tl.end()
    assert diagnose(trainer=tl, loop="sync").bound == "trainer"
    # only wait and compute timed: the share is the wait ratio, as before
    assert diagnose(trainer=trainer(3 * MS, MS), loop="sync").bound == "sampler"


def test_a_sampler_that_times_its_waiting_is_still_read_as_synchronous() -> None:
    """A synchronous loop whose sampler times "env" (inside the trainer's wait) and "recv"
    (waiting for the next request while the trainer computes): counted as work, recv
    covers the trainer's compute and the loop reads as overlapped; named as idle, the
    loop is synchronous again."""
    sp, tp = gp.Profiler(["env", "recv"]), gp.Profiler(["wait", "compute"])
    s_env, s_recv = sp.phase("env"), sp.phase("recv")
    t_wait, t_comp = tp.phase("wait"), tp.phase("compute")
    for _ in range(40):
        tp.begin()
        sp.begin()
        with t_wait, s_env:
            time.sleep(0.002)
        with s_recv, t_comp:
            time.sleep(0.004)
    tp.end()
    sp.end()
    naive = diagnose(sampler=sp, trainer=tp)
    assert naive.loop == "overlapped", naive.loop_evidence  # what the plain rule reads
    v = diagnose(sampler=sp, trainer=tp, sampler_idle=["recv"])
    assert v.loop == "sync" and v.loop_source == "detected", v.loop_evidence
    assert "but 'recv'" in v.loop_evidence
    with pytest.raises(TypeError, match="sampler_idle"):
        diagnose(sampler=sp, trainer=tp, sampler_idle="recv")


def test_the_lines_fall_where_the_rules_say() -> None:
    """At the lines themselves, with the band turned off (band=0): a synchronous wait of
    exactly half is not above half (trainer-bound); an overlapped wait of exactly
    trainer_bound_below is not below it (sampler-bound)."""
    half = trainer(MS, MS)
    assert diagnose(trainer=half, loop="sync", band=0).bound == "trainer"
    assert diagnose(trainer=trainer(MS + 1000, MS), loop="sync", band=0).bound == "sampler"
    tenth = trainer(MS, 9 * MS)
    v = diagnose(trainer=tenth, loop="overlapped", band=0)
    assert v.wait_ratio == pytest.approx(0.1) and v.bound == "sampler", str(v)
    low = trainer(MS - 1000, 9 * MS)
    assert diagnose(trainer=low, loop="overlapped", band=0).bound == "trainer"


def test_undetectable_shape_says_what_the_other_rule_would_say() -> None:
    tp = trainer(MS, 3 * MS)  # waits 25%; record()ed durations place no work in time
    v = diagnose(sampler=sampler({"env": MS}), trainer=tp)
    assert v.loop == "overlapped" and v.loop_source == "default"
    assert v.bound == "sampler"
    assert any("pass loop='sync'" in u and "trainer-bound" in u for u in v.unknowns)
    vs = diagnose(trainer=tp, loop="sync")
    assert vs.bound == "trainer" and vs.loop_source == "declared"
    assert "an infinitely fast sampler saves at most 25.0% of wall time; compute is 75.0%" in str(
        vs
    )
    # the synchronous rule's line is a parameter
    assert diagnose(trainer=tp, loop="sync", sync_sampler_above=0.2).bound == "sampler"
    with pytest.raises(ValueError, match="loop must be 'sync'"):
        diagnose(trainer=tp, loop="async")
    with pytest.raises(ValueError, match="min_coverage must be in 0..1"):
        diagnose(trainer=tp, min_coverage=2)


def test_snapshots_cannot_show_the_shape() -> None:
    sp, tp = pipeline(produce_s=0.002, train_s=0.002, steps=20)
    v = diagnose(sampler=sp.snapshot(), trainer=tp.snapshot())
    assert v.loop_source == "default"
    assert "Snapshot or Summary" in (v.loop_evidence or "")


def remote_sampler(tmp_path: Path, mode: str, *args: str) -> tuple[subprocess.Popen[str], Path]:
    path = tmp_path / f"sampler-{mode}.npz"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "helpers" / "procs" / "remote_sampler.py"),
            mode,
            str(path),
        ]
        + list(args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    return proc, path


def test_shape_is_detected_across_processes_by_wall_clock_offsets(tmp_path: Path) -> None:
    # overlapped: a sampler process writes items into a pipe while the trainer computes
    proc, path = remote_sampler(tmp_path, "overlapped", "45")
    assert proc.stdout is not None and proc.stdin is not None
    tp = gp.Profiler(["wait", "compute"], warmup_steps=3)
    for _ in range(40):
        tp.begin()
        with tp.phase("wait"):
            assert proc.stdout.readline().startswith("item")
        with tp.phase("compute"):
            time.sleep(0.007)
    tp.end()
    proc.stdin.close()
    assert proc.wait(60) == 0
    v = diagnose(sampler=gp.export.load_events(path), trainer=tp)
    assert v.loop == "overlapped" and v.loop_source == "detected", v.loop_evidence
    assert "wall-clock offsets" in (v.loop_evidence or "")
    assert v.bound == "sampler", str(v)

    # synchronous: the trainer asks a sampler process for a batch and waits for it
    proc, path = remote_sampler(tmp_path, "sync")
    assert proc.stdout is not None and proc.stdin is not None
    tp = gp.Profiler(["wait", "compute"], warmup_steps=3)
    for _ in range(25):
        tp.begin()
        with tp.phase("wait"):
            proc.stdin.write("next\n")
            proc.stdin.flush()
            assert proc.stdout.readline().startswith("item")
        with tp.phase("compute"):
            time.sleep(0.030)  # computes 60% of the time, waits 40%
    tp.end()
    proc.stdin.close()
    assert proc.wait(60) == 0
    v = diagnose(sampler=gp.export.load_events(path), trainer=tp)
    assert v.loop == "sync" and v.loop_source == "detected", v.loop_evidence
    assert v.bound == "trainer", str(v)
    assert v.coverage is not None and v.coverage > 0.9  # its steps are marked and timed


def test_round_trip_through_strict_json_with_the_wait_report_nested() -> None:
    v = diagnose(sampler=sampler({"env": 5 * MS, "fwd": MS}), trainer=trainer(3 * MS, MS))
    text = v.to_json()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert "format" not in data["wait_report"]  # only the top level carries the tag
    back = Verdict.from_dict(data)
    assert back == v and str(back) == str(v)
    assert back.wait_report is not None and back.wait_report.ratio == pytest.approx(0.75)
    alone = diagnose(sampler=sampler({"env": MS}))
    assert Verdict.from_dict(alone.to_dict()) == alone
    with pytest.raises(CorruptDataError, match=r"wait_report\.ratio"):
        Verdict.from_dict({**data, "wait_report": {**data["wait_report"], "ratio": "high"}})


def test_clamped_and_negative_values_are_caveats_but_ring_overwrites_are_not() -> None:
    # a small ring overwrites most events, but the histograms the verdict reads keep them
    tp = trainer(3 * MS, MS, steps=300, capacity=64)
    assert tp.summary().overwritten > 0
    tp.record("compute", -5)
    tp.record("wait", 2 * 3600 * 10**9)  # above the 1 h range: clamped
    v = diagnose(trainer=tp)
    assert "trainer: 1 negative durations ignored" in v.caveats
    assert "trainer: 1 values above the range (clamped)" in v.caveats
    assert not any("overwritten" in c for c in v.caveats)


def test_idle_sampler_time_is_idle_not_untimed() -> None:
    """A sampler that counts ``idle_ns`` (blocked handing its data over: ``gyreprof run``
    counts a put into a full queue so) has that time as ``"(idle)"``: the rule on timed
    coverage is read on the time it worked, so the idle time never reads as untimed work
    ("time the rest next") when the timed phases cover what it did."""
    tp = trainer(wait_ns=2 * MS, compute_ns=1 * MS)  # the sampler's wall: 200 x 2 ms of wait
    sp = gp.Profiler(["env_step"])
    for _ in range(200):
        sp.record("env_step", 900 * US)
    naive = diagnose(sampler=sp, trainer=tp, loop="sync")
    assert naive.dominant_phase == "(untimed)"  # 55% untimed leads without the idle count
    sp.count("idle_ns", 200 * MS)
    v = diagnose(sampler=sp, trainer=tp, loop="sync")
    assert v.sampler_shares == pytest.approx({"env_step": 0.45, "(idle)": 0.5, "(untimed)": 0.05})
    assert v.coverage == pytest.approx(0.9)  # of the time it worked
    assert v.dominant_phase == "env_step" and v.dominant_kind == "env"
    reason = next(r for r in v.reasons if r.startswith("sampler:"))
    assert "idle 50.0% of its wall time" in reason and "time the rest" not in reason
    sp.count("idle_ns", 300 * MS)  # more idle than the wall leaves: capped at the rest
    capped = diagnose(sampler=sp, trainer=tp, loop="sync")
    assert capped.sampler_shares["(idle)"] == pytest.approx(0.55)
    assert capped.sampler_shares["(untimed)"] == 0.0 and capped.coverage == pytest.approx(1.0)


def test_sampler_shares_sum_to_100_when_its_phases_run_a_little_past_the_wall() -> None:
    """A block still open when the trainer's waits were last closed (a run stopped mid
    collect): the sampler's phases add up to 2% more than the wall. Its shares summed to
    102%; they fill the wall instead."""
    from gyreprof.render import text as render_text

    tp = trainer(wait_ns=2 * MS, compute_ns=1 * MS)  # the sampler's wall: 200 x 2 ms of wait
    sp = gp.Profiler(["env_step", "fwd"])
    for _ in range(200):
        sp.record("env_step", 1530 * US)
        sp.record("fwd", 510 * US)
    v = diagnose(sampler=sp, trainer=tp, loop="sync")
    assert sum(v.sampler_shares.values()) == pytest.approx(1.0)
    assert v.sampler_shares["env_step"] == pytest.approx(0.75)
    shares, _ = render_text.wall_shares(sp.summary(), v)
    assert sum(shares.values()) == pytest.approx(1.0)
    alone, _ = render_text.wall_shares(sp.summary())
    assert sum(alone.values()) == pytest.approx(1.0)
