"""``gyreprof run`` on real training runs: SB3 PPO (DummyVecEnv, SubprocVecEnv) and a TorchRL
collector on CartPole, each once with a slow env step and once with a slow update.

Every scenario runs once (a module-scoped fixture) and several tests read its JSON:
the env-step counts against the steps the script says it took, the trainer's
waits against the rollouts, the verdict and the ``gyreprof.run/1`` format.

The slow-update runs sleep 2x the preceding collection in each update, so the
trainer waits about a third of the time on any machine: trainer-bound,
although the old rule ("any wait above 10% is sampler-bound") says otherwise.
``gyreprof run`` declares such loops synchronous (``gp.diagnose(loop="sync")``),
and the verdict then weighs the two sides' shares of wall time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("torchrl")

from helpers.run_scripts.runhelp import (  # noqa: E402
    check_format,
    count,
    gyreprof_run,
    printed,
    script,
    worker_counts,
)

pytestmark = pytest.mark.slow

Run = tuple[Any, dict[str, Any], Path]

SB3_STEPS = 1024  # 4 envs x 64 steps per rollout: 4 rollouts
ROLLOUT = 4 * 64
TORCHRL_FRAMES = 2000  # 4 batches of 500


def _run(tmp: Path, *command: str) -> Run:
    save = tmp / "raw"
    proc, data = gyreprof_run(tmp, *command, options=("--save", str(save)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    check_format(data)
    return proc, data, save


@pytest.fixture(scope="module")
def sb3_dummy_env(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("sb3_dummy_env")
    return _run(tmp, script("sb3_ppo.py"), "dummy", "env", str(SB3_STEPS), "0.002", "64")


@pytest.fixture(scope="module")
def sb3_dummy_train(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("sb3_dummy_train")
    return _run(tmp, script("sb3_ppo.py"), "dummy", "train", str(SB3_STEPS), "2", "64")


@pytest.fixture(scope="module")
def sb3_subproc_env(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("sb3_subproc_env")
    return _run(tmp, script("sb3_ppo.py"), "subproc", "env", str(SB3_STEPS), "0.004", "64")


@pytest.fixture(scope="module")
def sb3_subproc_train(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("sb3_subproc_train")
    return _run(tmp, script("sb3_ppo.py"), "subproc", "train", str(SB3_STEPS), "2", "64")


@pytest.fixture(scope="module")
def sb3_subproc_fast(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("sb3_subproc_fast")
    return _run(tmp, script("sb3_ppo.py"), "subproc", "none", str(4 * SB3_STEPS), "0", "256")


@pytest.fixture(scope="module")
def torchrl_env(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("torchrl_env")
    return _run(
        tmp, script("torchrl_collector.py"), "single", "env", str(TORCHRL_FRAMES), "0.002", "500"
    )


@pytest.fixture(scope="module")
def torchrl_train(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("torchrl_train")
    return _run(
        tmp, script("torchrl_collector.py"), "single", "train", str(TORCHRL_FRAMES), "2", "500"
    )


def _main(data: dict[str, Any]) -> dict[str, Any]:
    mains = [p for p in data["processes"] if p["role"] == "main"]
    assert len(mains) == 1, data["processes"]
    return mains[0]


# ------------------------------------------------------------------ SB3, DummyVecEnv


def test_sb3_dummy_counts_every_env_step_once(sb3_dummy_env: Run) -> None:
    proc, data, _ = sb3_dummy_env
    steps = printed(proc.stdout, "TIMESTEPS_TAKEN")
    assert steps == SB3_STEPS
    # four envs stepped in-process, each through Monitor/TimeLimit/checker wrappers and the
    # script's own SlowStep wrapper: one env_step per env per vector step, never one per layer
    assert count(data, "sampler", "env_step") == steps
    assert count(data, "sampler", "step_wait") == 0  # no subprocess vector env
    assert count(data, "sampler", "fwd") == steps // 4  # one policy forward per vector step
    assert count(data, "trainer", "wait") == steps // ROLLOUT  # one per rollout
    assert count(data, "trainer", "compute") == steps // ROLLOUT
    assert [p["contributed"] for p in data["processes"]] == [True]
    assert _main(data)["contributed"]


def test_sb3_dummy_slow_train_waits_a_third(sb3_dummy_train: Run) -> None:
    proc, data, _ = sb3_dummy_train
    assert count(data, "sampler", "env_step") == printed(proc.stdout, "TIMESTEPS_TAKEN")
    # the update takes ~2x the collection: the naive 10% rule would call this sampler-bound
    assert 0.1 < data["wait"]["ratio"] < 0.5


# ------------------------------------------------------------------ SB3, SubprocVecEnv


def test_sb3_subproc_workers_contribute_their_env_steps(sb3_subproc_env: Run) -> None:
    proc, data, save = sb3_subproc_env
    steps = printed(proc.stdout, "TIMESTEPS_TAKEN")
    workers = [p for p in data["processes"] if p["role"] == "env_worker"]
    assert len(workers) == 4, data["processes"]
    assert all(p["contributed"] for p in data["processes"])
    per_worker = worker_counts(save)
    assert sorted(per_worker) == sorted(p["pid"] for p in workers)
    # each worker stepped its env once per vector step; together: every step taken
    assert sorted(per_worker.values()) == [steps // 4] * 4
    assert count(data, "sampler", "env_step") == steps
    # the main process sends and waits once per vector step
    assert count(data, "sampler", "step_async") == steps // 4
    assert count(data, "sampler", "step_wait") == steps // 4
    assert "processes: 5 of 5 processes contributed" in proc.stderr


def test_sb3_subproc_on_cartpole_is_its_round_trip(
    sb3_subproc_fast: Run, sb3_subproc_env: Run
) -> None:
    """SubprocVecEnv x4 on CartPole (~50 us an env step): the vector step costs far more
    than the workers' stepping, and the advice is the in-process vector env. The same
    vector env whose envs take 4 ms a step is env stepping, not its round trip."""
    _, data, _ = sb3_subproc_fast
    v = data["verdict"]
    said = " ".join(v["reasons"])
    assert "round trip to the vector env's 4 worker processes costs more" in said, said
    assert any(a.startswith("step the envs in this process") for a in v["advice"]), v
    _, data, _ = sb3_subproc_env
    assert not any("round trip" in r for r in data["verdict"]["reasons"]), data["verdict"]


def test_sb3_subproc_slow_train_counts(sb3_subproc_train: Run) -> None:
    proc, data, save = sb3_subproc_train
    steps = printed(proc.stdout, "TIMESTEPS_TAKEN")
    assert sum(worker_counts(save).values()) == steps
    assert 0.1 < data["wait"]["ratio"] < 0.5


# ------------------------------------------------------------------ TorchRL


def test_torchrl_collector_waits_and_env_steps(torchrl_env: Run) -> None:
    proc, data, _ = torchrl_env
    frames = printed(proc.stdout, "FRAMES_TAKEN")
    assert frames == TORCHRL_FRAMES
    assert count(data, "sampler", "env_step") == frames
    assert count(data, "trainer", "wait") == frames // 500
    assert count(data, "trainer", "compute") == frames // 500
    assert data["wait"]["ratio"] > 0.5
    assert data["verdict"]["bound"] == "sampler"


def test_torchrl_slow_loop_body_waits_a_third(torchrl_train: Run) -> None:
    proc, data, _ = torchrl_train
    assert count(data, "sampler", "env_step") == printed(proc.stdout, "FRAMES_TAKEN")
    assert 0.1 < data["wait"]["ratio"] < 0.5


# ------------------------------------------------------------------ verdicts, every stack


@pytest.mark.parametrize("run", ["sb3_dummy_env", "sb3_subproc_env"])
def test_a_slow_env_is_sampler_bound(run: str, request: pytest.FixtureRequest) -> None:
    _, data, _ = request.getfixturevalue(run)
    assert data["wait"]["ratio"] > 0.5
    assert data["verdict"]["bound"] == "sampler"


@pytest.mark.parametrize("run", ["sb3_dummy_train", "sb3_subproc_train", "torchrl_train"])
def test_a_slow_train_is_trainer_bound(run: str, request: pytest.FixtureRequest) -> None:
    """The update (or loop body) takes ~2x the collection: the trainer waits a third of
    the time, which the naive 10% wait rule would call sampler-bound."""
    _, data, _ = request.getfixturevalue(run)
    assert data["verdict"]["bound"] == "trainer"


def test_torchrl_parallel_env_workers_contribute(tmp_path: Path) -> None:
    proc, data, save = _run(
        tmp_path, script("torchrl_collector.py"), "parallel", "none", "400", "0", "200"
    )
    frames = printed(proc.stdout, "FRAMES_TAKEN")
    per_worker = worker_counts(save)
    assert len(per_worker) == 2, data["processes"]
    assert sum(per_worker.values()) == frames == 400
    assert count(data, "trainer", "wait") == 2
