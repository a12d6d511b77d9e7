"""gymnasium wrappers on real envs: CartPole-v1 and a real 2-worker AsyncVectorEnv."""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

import gyreprof as gp  # noqa: E402
from gyreprof._support.errors import UnknownPhaseError  # noqa: E402
from gyreprof.integrations.gym import (  # noqa: E402
    ProfiledEnv,
    ProfiledVectorEnv,
    phase_names,
    profile_env,
)

MS = 1_000_000


class Delayed(gym.Wrapper):  # type: ignore[misc]
    """CartPole whose steps also sleep ``delay_s`` (module level: picklable for workers)."""

    def __init__(self, env: Any, delay_s: float) -> None:
        super().__init__(env)
        self.delay_s = delay_s

    def step(self, action: Any) -> Any:
        time.sleep(self.delay_s)
        return self.env.step(action)


def make_delayed(delay_s: float) -> Any:
    return Delayed(gym.make("CartPole-v1"), delay_s)


def make_cartpole() -> Any:
    return gym.make("CartPole-v1")


def test_profiled_cartpole_times_step_and_reset_apart() -> None:
    prof = gp.Profiler(["env_step", "env_reset"])
    env = ProfiledEnv(gym.make("CartPole-v1"), prof)
    plain = gym.make("CartPole-v1")
    try:
        obs, _ = env.reset(seed=3)
        pobs, _ = plain.reset(seed=3)
        np.testing.assert_array_equal(obs, pobs)
        resets, steps = 1, 0
        for i in range(300):
            action = i % 2 if i % 7 else 0
            obs, rew, term, trunc, _ = env.step(action)
            pobs, prew, pterm, ptrunc, _ = plain.step(action)
            steps += 1
            np.testing.assert_array_equal(obs, pobs)  # the wrapper changes nothing
            assert (rew, term, trunc) == (prew, pterm, ptrunc)
            if term or trunc:
                env.reset()
                plain.reset()
                resets += 1
        s = prof.summary()
        assert resets > 1  # the fixed policy drops the pole now and then
        assert s.phases["env_step"].count == steps
        assert s.phases["env_reset"].count == resets
        assert 0 < s.phases["env_step"].p50 < 50 * MS
    finally:
        env.close()
        plain.close()


def test_profiled_env_options_and_errors() -> None:
    prof = gp.Profiler(["step", "fwd"])
    env = ProfiledEnv(gym.make("CartPole-v1"), prof, step_phase="step", reset_phase=None)
    try:
        env.reset(seed=0)
        env.step(0)
        s = prof.summary()
        assert s.phases["step"].count == 1
        assert s.phases["fwd"].count == 0
    finally:
        env.close()
    with pytest.raises(
        UnknownPhaseError, match=r"reset_phase='env_reset' is not a phase.*\['step', 'fwd'\]"
    ) as info:
        ProfiledEnv(gym.make("CartPole-v1"), prof, step_phase="step")
    assert isinstance(info.value, ValueError) and isinstance(info.value, KeyError)
    with pytest.raises(TypeError, match="prof must be a gyreprof Profiler"):
        ProfiledEnv(gym.make("CartPole-v1"), object())  # type: ignore[arg-type]
    venv = gym.vector.SyncVectorEnv([make_cartpole])
    try:
        with pytest.raises(TypeError, match="use ProfiledVectorEnv"):
            ProfiledEnv(venv, prof)
    finally:
        venv.close()
    with pytest.raises(TypeError, match="wraps a gymnasium VectorEnv"):
        ProfiledVectorEnv(gym.make("CartPole-v1"), prof)


def test_async_vector_env_splits_send_and_wait() -> None:
    # worker 0 is fast, worker 1 sleeps 5 ms: the wait for the slowest shows in step_wait
    fns = [functools.partial(make_delayed, 0.0), functools.partial(make_delayed, 0.005)]
    raw = gym.vector.AsyncVectorEnv(fns)
    try:
        assert phase_names(raw) == ("step_async", "step_wait", "env_reset")
        prof = gp.Profiler(["fwd", *phase_names(raw)])
        venv = ProfiledVectorEnv(raw, prof)
        assert venv.split
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 4)
        for _ in range(30):
            prof.begin()
            with prof.phase("fwd"):
                actions = np.zeros(2, dtype=np.int64)
            obs, rew, term, trunc, _ = venv.step(actions)
            assert obs.shape == (2, 4) and rew.shape == (2,)
        prof.end()
        # the split API is timed as well
        venv.step_async(np.ones(2, dtype=np.int64))
        venv.step_wait()
        s = prof.summary()
        assert s.phases["step_async"].count == 31
        assert s.phases["step_wait"].count == 31
        assert s.phases["env_reset"].count == 1
        assert s.phases["step_wait"].p50 >= 4 * MS  # at least the slow worker's sleep
        assert s.phases["step_async"].p50 < s.phases["step_wait"].p50
        assert s.phases["step_wait"].share > 0.5
    finally:
        raw.close()


def test_sync_vector_env_is_timed_as_one_step() -> None:
    raw = gym.vector.SyncVectorEnv([make_cartpole, make_cartpole])
    try:
        assert phase_names(raw) == ("env_step", "env_reset")
        prof = gp.Profiler(list(phase_names(raw)))
        venv = profile_env(raw, prof)
        assert isinstance(venv, ProfiledVectorEnv) and not venv.split
        venv.reset(seed=1)
        for _ in range(20):
            venv.step(np.zeros(2, dtype=np.int64))
        s = prof.summary()
        assert s.phases["env_step"].count == 20
        assert s.phases["env_reset"].count == 1
        with pytest.raises(AttributeError, match="no send/wait split"):
            venv.step_async(np.zeros(2, dtype=np.int64))
        with pytest.raises(TypeError, match="split=True needs an AsyncVectorEnv"):
            ProfiledVectorEnv(raw, prof, split=True)
    finally:
        raw.close()


def test_profile_env_picks_the_single_env_wrapper() -> None:
    prof = gp.Profiler(["env_step", "env_reset"])
    env = profile_env(gym.make("CartPole-v1"), prof)
    try:
        assert isinstance(env, ProfiledEnv)
        env.reset(seed=0)
        assert prof.summary().phases["env_reset"].count == 1
    finally:
        env.close()


def test_per_thread_profiler_in_worker_threads() -> None:
    import threading

    prof = gp.Profiler(["env_step", "env_reset"], per_thread=True)

    def work(seed: int) -> None:
        env = ProfiledEnv(gym.make("CartPole-v1"), prof)
        try:
            env.reset(seed=seed)
            for _ in range(10):
                _, _, term, trunc, _ = env.step(0)
                if term or trunc:
                    env.reset()
        finally:
            env.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    s = prof.summary()
    assert s.phases["env_step"].count == 20
    assert s.phases["env_reset"].count >= 2
