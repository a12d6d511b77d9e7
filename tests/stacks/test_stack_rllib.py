"""RLlib PPO (new API stack, 2 env runners, CartPole) under ``gyreprof run``, against
the script's own clocks (``rllib_ppo.py``): once with the env slowed (a sleep in a
gymnasium wrapper: sampling dominates an iteration) and once with the update slowed
(a wider model, 10-30 SGD epochs: the learner dominates), each with the learner in the
driver (``num_learners=0``) and in a learner actor of its own (``num_learners=1``,
the ``*_remote`` runs: the driver waits on the actor's update, which is compute done
remotely, never a wait for data).

The first tests check the exit code, the env steps (each counted once, in the
env-runner actors, equal to RLlib's own count), the processes (the Ray driver listed;
the env runners named as such, not as generic env workers) and the env runners'
stepping time against their own clock. The wait-ratio tests check the trainer read
from the driver's timeline (its ``synchronous_parallel_sample`` the wait, its
``learner_group.update`` the update, local or remote): the wait ratio within 0.05 of
the driver's own clock (sampling over the whole ``algo.train()``), the verdict's
direction both ways, one trainer step per training iteration, and the learner actor
listed as RLlib's learner, never merged into the trainer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stackhelp import StackRun, need

import gyreprof as gp
from gyreprof.integrations._auto import collect
from gyreprof.integrations._auto import records as rec

pytestmark = pytest.mark.slow

ENV_ITERS = 5  # x 200 env steps (2 runners x 100)
TRAIN_ITERS = 3
STEPS_PER_ITER = 200


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    need("torch", "gymnasium", "ray.rllib")


@pytest.fixture(scope="module")
def env_slow(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    tmp = tmp_path_factory.mktemp("rllib_env_slow")
    return StackRun(tmp, "rllib_ppo.py", "env", str(ENV_ITERS), "0.005")


@pytest.fixture(scope="module")
def train_slow(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    tmp = tmp_path_factory.mktemp("rllib_train_slow")
    # 10 epochs: the driver's own torch threads share the 2 cores with the runners
    return StackRun(tmp, "rllib_ppo.py", "train", str(TRAIN_ITERS), "0", "10")


@pytest.fixture(scope="module")
def env_slow_remote(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    """The env slowed, the learner in an actor of its own (``num_learners=1``)."""
    tmp = tmp_path_factory.mktemp("rllib_env_slow_remote")
    return StackRun(tmp, "rllib_ppo.py", "env", str(ENV_ITERS), "0.005", "1", "1")


@pytest.fixture(scope="module")
def train_slow_remote(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    """The update slowed, the learner in an actor of its own (``num_learners=1``)."""
    tmp = tmp_path_factory.mktemp("rllib_train_slow_remote")
    return StackRun(tmp, "rllib_ppo.py", "train", str(TRAIN_ITERS), "0", "30", "1")


RUNS = ("env_slow", "train_slow", "env_slow_remote", "train_slow_remote")
ITERS = {"env": ENV_ITERS, "train": TRAIN_ITERS}


@pytest.fixture(params=RUNS)
def any_run(request: pytest.FixtureRequest) -> StackRun:
    run: StackRun = request.getfixturevalue(request.param)
    return run


def _check_counts(run: StackRun, iters: int) -> None:
    own = run.own
    assert run.data["exit_code"] == 0
    assert own["env_steps"] == iters * STEPS_PER_ITER  # RLlib's own lifetime count
    assert own["runner_steps"] == own["env_steps"]  # the runners' wrapper count
    # every env step once, in the actors that stepped it (none in the driver)
    assert run.sampler_count("env_step") == own["env_steps"]
    assert run.sampler_count("generate") == 0


def test_counts_every_env_step_once(any_run: StackRun) -> None:
    _check_counts(any_run, ITERS[any_run.own["mode"]])


def _check_processes(run: StackRun) -> None:
    roles = run.roles()
    driver = run.own["driver_pid"]
    # the Ray driver is listed (it steps no env: before, it was missing from the run)
    assert roles.get(driver) == "main", run.data["processes"]
    runners = {r["pid"] for r in run.own["runners"]}
    assert len(runners) == 2
    # named as RLlib's env runners, though their vector env registers them as env_worker
    assert {roles.get(pid) for pid in runners} == {"rllib_env_runner"}, run.data["processes"]
    got = {int(p["pid"]) for p in run.data["processes"] if p["contributed"]}
    assert runners | {driver} <= got
    notes = "\n".join(run.data["notes"])
    assert f"the Ray driver is main {driver}" in notes
    assert "the learner updates in the driver" in notes  # num_learners=0
    line = next(n for n in run.data["notes"] if n.startswith("RLlib: the 2 env runners"))
    for pid in runners:
        assert str(pid) in line


def test_env_slow_names_the_ray_processes(env_slow: StackRun) -> None:
    _check_processes(env_slow)


def test_train_slow_names_the_ray_processes(train_slow: StackRun) -> None:
    _check_processes(train_slow)


@pytest.mark.parametrize("name", ["env_slow_remote", "train_slow_remote"])
def test_remote_learner_is_named_not_the_trainer(name: str, request: pytest.FixtureRequest) -> None:
    run: StackRun = request.getfixturevalue(name)
    roles = run.roles()
    (learner,) = run.own["learner_pids"]
    driver = run.own["driver_pid"]
    assert learner != driver
    # a learner actor steps no env: listed all the same, under its RLlib role
    assert roles.get(learner) == "rllib_learner", run.data["processes"]
    assert roles.get(driver) == "main"
    assert {roles.get(r["pid"]) for r in run.own["runners"]} == {"rllib_env_runner"}
    notes = "\n".join(run.data["notes"])
    assert "the learner updates in the driver" not in notes
    assert f"the Ray driver is main {driver}" in notes
    line = next(n for n in run.data["notes"] if n.startswith("RLlib: the learner updates in"))
    assert f"rllib_learner {learner}" in line and "not the trainer" in line, line
    # the learner actor's optimizer steps are its own: it saved them, they are in the
    # note, and the run's trainer (the driver's training thread) has none of them
    (snap,) = run.save.glob(f"rllib_learner-{learner}.trainer.snap")
    steps = int(gp.Snapshot.from_bytes(snap.read_bytes()).counters["optim_steps"])
    # at least one minibatch per epoch of each update
    assert steps >= run.own["epochs"] * run.own["updates"]
    assert f"it ran {steps} optimizer steps in the update" in line
    assert run.data["trainer"]["counters"].get("optim_steps", 0) == 0


def _runner_env_s(run: StackRun) -> dict[int, float]:
    """Each env runner's env stepping as gyreprof timed it (its ``--save`` snapshot)."""
    out = {}
    for path in run.save.glob("rllib_env_runner-*.sampler.snap"):
        pid = int(path.name.split("-")[1].split(".")[0])
        s = gp.Snapshot.from_bytes(path.read_bytes()).summary()
        out[pid] = s.phases["env_step"].sum_ns / 1e9
    return out


def test_env_slow_runner_env_time_matches_their_clock(env_slow: StackRun) -> None:
    timed = _runner_env_s(env_slow)
    own = {r["pid"]: r["step_s"] for r in env_slow.own["runners"]}
    assert set(timed) == set(own)
    for pid, step_s in own.items():
        # the wrapper's own clock sits just inside gyreprof's outermost env.step
        assert step_s > 2.5  # 500 steps of a 5 ms sleep
        assert 0.9 * step_s <= timed[pid] <= 1.1 * step_s + 0.05, (pid, timed[pid], step_s)
    # the report's idle line states the same seconds of env stepping
    line = next(n for n in env_slow.data["notes"] if n.startswith("RLlib: the 2 env runners"))
    said = float(line.split("(")[2].split(" s of")[0])
    assert said == pytest.approx(sum(timed.values()), rel=0.01)


def test_script_clocks_point_the_way_they_claim(any_run: StackRun) -> None:
    """Each run is what it claims to be, by the script's own clock and RLlib's."""
    if any_run.own["mode"] == "env":
        assert any_run.own["wait_ratio"] > 0.6
    else:
        assert any_run.own["wait_ratio"] < 0.4
    assert any_run.own["samples"] == any_run.own["updates"] == any_run.own["iters"]
    rllib_sample = any_run.own["rllib_sample_s"]
    assert len(rllib_sample) == any_run.own["iters"] and all(x > 0 for x in rllib_sample)


# ------------------------------------------------------------------ the driver's timeline


def test_wait_ratio_matches_the_driver_clock(any_run: StackRun) -> None:
    """The driver's own perf_counter around PPO's sampling, over the whole
    ``algo.train()``: the weight sync, the metrics and a remote learner's update are
    the driver's compute, not waits."""
    assert any_run.data["wait"] is not None
    got, own = any_run.data["wait"]["ratio"], any_run.own["wait_ratio"]
    assert abs(got - own) <= 0.05, (got, own)


def test_verdict_points_the_right_way(any_run: StackRun) -> None:
    want = "sampler" if any_run.own["mode"] == "env" else "trainer"
    assert any_run.data["verdict"]["bound"] == want
    assert any_run.data["verdict"]["loop"] == "sync"  # the runners sample on request


def test_one_trainer_step_per_iteration(any_run: StackRun) -> None:
    """The trainer is the driver's training thread: one collect-and-update step per
    ``algo.train()`` (no start-up waits, no weight sync as steps of their own)."""
    trainer = any_run.data["trainer"]
    assert trainer is not None
    assert trainer["steps"] == any_run.own["iters"] == any_run.own["updates"]
    assert trainer["counters"]["loop.own"] == any_run.own["iters"]
    assert trainer["counters"].get("loop.fed", 0) == 0


# ------------------------------------------------------------------ the rule, by itself


def _trainer_snap(steps: int, wait_ns: int, compute_ns: int) -> gp.Snapshot:
    """A trainer profile of ``steps`` steps of one wait and one compute each."""
    prof = gp.Profiler(rec.TRAINER_PHASES, window_steps=1)
    r, t = prof.recorder, 1_000_000_000
    for _ in range(steps):
        r.begin_at(t)
        r.lap_at(0, t + wait_ns)
        r.lap_at(1, t + wait_ns + compute_ns)
        t += wait_ns + compute_ns
    r.end_at(t)
    prof.count("optim_steps", 0 if steps < 10 else steps)
    return prof.snapshot()


def _saved(run_dir: Path, pid: int, role: str, trainer: gp.Snapshot) -> None:
    record = rec.ProcessRecord(pid=pid, role=role, ppid=1, how="exit")
    rec.done_path(run_dir, pid).write_text(record.to_json())
    rec.snap_path(run_dir, pid, "trainer").write_bytes(trainer.to_bytes())


def test_a_learner_actor_with_steps_is_not_the_trainer(tmp_path: Path) -> None:
    """The case the plain rule (every process whose trainer holds steps) gets wrong: a
    learner actor whose training thread closed steps of its own (its waits, 75%) is
    a worker; the trainer is the driver's thread alone (its 25% wait)."""
    _saved(tmp_path, 101, "main", _trainer_snap(3, 1_000_000, 3_000_000))
    _saved(tmp_path, 202, "rllib_learner", _trainer_snap(30, 3_000_000, 1_000_000))
    report = collect.collect_run(tmp_path, "t", ["x"], 0, main_pid=101)
    assert {p.pid: p.role for p in report.processes} == {101: "main", 202: "rllib_learner"}
    assert report.trainer.summary().steps == 3
    assert report.wait.ratio == pytest.approx(0.25, abs=0.01)
    (line,) = [n for n in report.notes if n.startswith("RLlib: the learner updates in")]
    assert "rllib_learner 202" in line and "it ran 30 optimizer steps" in line
    assert "the driver (main 101)" in line
