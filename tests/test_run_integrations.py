"""``gyreprof.integrations.sb3`` / ``.torchrl``: the same instrumentation from code, in-process.

Real SB3 PPO and a real TorchRL collector on CartPole; profiling twice must not
count twice (the patches are idempotent, each session has fresh profilers).
"""

from __future__ import annotations

import json

import pytest

sb3_lib = pytest.importorskip("stable_baselines3")
pytest.importorskip("torchrl")

from gyreprof.integrations import sb3, torchrl  # noqa: E402

pytestmark = pytest.mark.slow  # real SB3 and TorchRL training runs: .ci/run's second step


def _ppo(n_envs: int = 2):  # type: ignore[no-untyped-def]
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    return sb3_lib.PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, device="cpu")


def test_sb3_profile_counts_one_learn_and_judges_it() -> None:
    model = _ppo()
    with sb3.profile(model) as run:
        model.learn(512)
    s, t = run.sampler.summary(), run.trainer.summary()
    assert s.phases["env_step"].count == model.num_timesteps == 512
    assert s.phases["fwd"].count == 256  # one forward per vector step of 2 envs
    assert t.phases["wait"].count == t.phases["compute"].count == 4
    # every rollout + update is one closed trainer step, the last one included, so the
    # two shares add up to at most the steps' time (the open last step made it ~110%)
    assert t.steps == 4
    assert t.phases["wait"].share + t.phases["compute"].share <= 1.0 + 1e-9
    report = run.report()
    assert report.verdict is not None and report.wait is not None
    assert report.processes[0].contributed
    d = report.to_dict()
    assert d["format"] == "gyreprof.run/1" and d["exit_code"] is None


def test_run_report_json_is_strict_json() -> None:
    # DummyVecEnv never calls step_async/step_wait: their mean is NaN in the summary, which
    # must come out as null, not as a NaN literal that jq and JavaScript refuse
    model = _ppo()
    with sb3.profile(model) as run:
        model.learn(256)
    report = run.report()
    assert report.sampler is not None
    assert report.sampler.summary().phases["step_async"].count == 0

    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    d = json.loads(report.to_json(), parse_constant=refuse)
    assert d["sampler"]["phases"]["step_async"]["mean"] is None
    assert d["sampler"]["phases"]["env_step"]["count"] == 256


def test_sb3_profile_twice_never_counts_twice() -> None:
    model = _ppo()
    with sb3.profile(model) as first:
        model.learn(256)
    with sb3.profile(model) as second:
        model.learn(256, reset_num_timesteps=False)
    model.learn(128, reset_num_timesteps=False)  # after both sessions: in neither
    assert first.sampler.summary().phases["env_step"].count == 256
    assert second.sampler.summary().phases["env_step"].count == 256
    assert first.snapshot()[0].summary().phases["env_step"].count == 256


def test_sb3_profile_wants_a_model() -> None:
    with pytest.raises(TypeError, match=r"stable-baselines3 algorithm .* got str"):
        sb3.profile("PPO")


def test_torchrl_profile_times_waits_and_the_loop_body() -> None:
    import gymnasium as gym
    from torchrl.collectors import Collector
    from torchrl.envs import GymWrapper

    collector = Collector(
        GymWrapper(gym.make("CartPole-v1")), policy=None, frames_per_batch=100, total_frames=500
    )
    with torchrl.profile(collector) as run:
        frames = sum(batch.numel() for batch in collector)
    collector.shutdown()
    assert frames == 500
    assert run.sampler.summary().phases["env_step"].count == 500
    t = run.trainer.summary()
    assert t.phases["wait"].count == t.phases["compute"].count == 5
    assert t.steps == 5  # the last batch's wait + body is a closed step too
    assert t.phases["wait"].share + t.phases["compute"].share <= 1.0 + 1e-9
    assert run.report().wait is not None


def test_torchrl_profile_wants_a_collector() -> None:
    with pytest.raises(TypeError, match=r"TorchRL collector .* got list"):
        torchrl.profile([])


def test_sb3_off_policy_collection_against_gradient_steps() -> None:
    from stable_baselines3 import DQN

    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=100, train_freq=4, seed=0, device="cpu")
    with sb3.profile(model) as run:
        model.learn(400)
    s, t = run.sampler.summary(), run.trainer.summary()
    assert s.phases["env_step"].count == 400
    assert s.phases["fwd"].count == 400  # one action sampled per env step
    assert t.phases["wait"].count == 100  # a collection every 4 steps
    # gradient steps only once learning has started (after step 100)
    assert 70 <= t.phases["compute"].count <= 76
