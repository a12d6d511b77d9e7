"""RLlib PPO (new API stack, 2 env runners, CartPole) under ``gyreprof run``, against
the script's own clocks (``rllib_ppo.py``): once with the env slowed (a sleep in a
gymnasium wrapper: sampling dominates an iteration) and once with the update slowed
(a wider model, 30 SGD epochs: the learner dominates).

The first tests check the exit code, the env steps (each counted once, in the
env-runner actors, equal to RLlib's own count), the processes (the Ray driver listed;
the env runners named as such, not as generic env workers) and the env runners'
stepping time against their own clock. The ``*_universal`` tests check the trainer
the universal signals find with no RLlib-specific trainer patch (the learner's
optimizer steps in the driver; its ``synchronous_parallel_sample`` the wait): the
wait ratio within 0.1 of the script's own clock, the verdict's direction both ways,
one trainer step per training iteration.
"""

from __future__ import annotations

import pytest
from stackhelp import StackRun, need

import gyreprof as gp

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
    return StackRun(tmp, "rllib_ppo.py", "train", str(TRAIN_ITERS), "0", "30")


@pytest.fixture(scope="module")
def remote_learner(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    """The learner in an actor of its own (``num_learners=1``), 2 short iterations."""
    tmp = tmp_path_factory.mktemp("rllib_remote_learner")
    return StackRun(tmp, "rllib_ppo.py", "train", "2", "0", "2", "1")


def _check_counts(run: StackRun, iters: int) -> None:
    own = run.own
    assert run.data["exit_code"] == 0
    assert own["env_steps"] == iters * STEPS_PER_ITER  # RLlib's own lifetime count
    assert own["runner_steps"] == own["env_steps"]  # the runners' wrapper count
    # every env step once, in the actors that stepped it (none in the driver)
    assert run.sampler_count("env_step") == own["env_steps"]
    assert run.sampler_count("generate") == 0


def test_env_slow_counts_every_env_step_once(env_slow: StackRun) -> None:
    _check_counts(env_slow, ENV_ITERS)


def test_train_slow_counts_every_env_step_once(train_slow: StackRun) -> None:
    _check_counts(train_slow, TRAIN_ITERS)


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


def test_remote_learner_is_named(remote_learner: StackRun) -> None:
    roles = remote_learner.roles()
    (learner,) = remote_learner.own["learner_pids"]
    assert learner != remote_learner.own["driver_pid"]
    # a learner actor steps no env: listed all the same, under its RLlib role
    assert roles.get(learner) == "rllib_learner", remote_learner.data["processes"]
    assert roles.get(remote_learner.own["driver_pid"]) == "main"
    assert {roles.get(r["pid"]) for r in remote_learner.own["runners"]} == {"rllib_env_runner"}
    notes = "\n".join(remote_learner.data["notes"])
    assert "the learner updates in the driver" not in notes
    _check_counts(remote_learner, 2)


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


def test_script_clocks_point_both_ways(env_slow: StackRun, train_slow: StackRun) -> None:
    """The two runs are what they claim to be, by the script's own clock and RLlib's."""
    assert env_slow.own["wait_ratio"] > 0.6
    assert train_slow.own["wait_ratio"] < 0.4
    for run in (env_slow, train_slow):
        assert run.own["samples"] == run.own["updates"] == run.own["iters"]
        rllib_sample = run.own["rllib_sample_s"]
        assert len(rllib_sample) == run.own["iters"] and all(x > 0 for x in rllib_sample)


# ------------------------------------------------------------------ the universal signals


def test_env_slow_wait_ratio_matches_its_clock_universal(env_slow: StackRun) -> None:
    assert env_slow.data["wait"] is not None
    assert abs(env_slow.data["wait"]["ratio"] - env_slow.own["wait_ratio"]) <= 0.1


def test_env_slow_is_sampler_bound_universal(env_slow: StackRun) -> None:
    assert env_slow.data["verdict"]["bound"] == "sampler"


def test_train_slow_wait_ratio_matches_its_clock_universal(train_slow: StackRun) -> None:
    assert train_slow.data["wait"] is not None
    assert abs(train_slow.data["wait"]["ratio"] - train_slow.own["wait_ratio"]) <= 0.1


def test_train_slow_is_trainer_bound_universal(train_slow: StackRun) -> None:
    assert train_slow.data["verdict"]["bound"] == "trainer"


def test_train_slow_trainer_steps_are_the_updates_universal(train_slow: StackRun) -> None:
    """The trainer is the driver's training thread: one compute per learner update."""
    trainer = train_slow.data["trainer"]
    assert trainer is not None
    assert trainer["phases"]["compute"]["count"] >= train_slow.own["updates"]
