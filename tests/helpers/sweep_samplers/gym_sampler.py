"""A real gymnasium vector-env sampler: a linear policy over CartPole, ``batch_size``
transitions per call from ``num_envs`` synchronous copies."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class VectorEnvSampler:
    def __init__(
        self, num_envs: int, batch_size: int, env_id: str = "CartPole-v1", prof: Any = None
    ) -> None:
        self.num_envs = int(num_envs)
        self.batch_size = int(batch_size)
        self.envs = gym.make_vec(env_id, num_envs=self.num_envs, vectorization_mode="sync")
        self.obs, _ = self.envs.reset(seed=0)
        obs_dim = int(np.prod(self.envs.single_observation_space.shape))
        n_actions = int(self.envs.single_action_space.n)
        self.w = np.random.default_rng(0).standard_normal((obs_dim, n_actions))
        self.steps_per_call = -(-self.batch_size // self.num_envs)
        self.prof = prof

    def sample(self) -> int:
        phase = self.prof.phase
        for _ in range(self.steps_per_call):
            with phase("policy"):
                actions = np.argmax(self.obs @ self.w, axis=1)
            with phase("env"):
                self.obs, _r, _term, _trunc, _info = self.envs.step(actions)
        return self.steps_per_call * self.num_envs

    def close(self) -> None:
        self.envs.close()


def make_vec_sampler(
    num_envs: int, batch_size: int, env_id: str = "CartPole-v1", prof: Any = None
) -> VectorEnvSampler:
    return VectorEnvSampler(num_envs, batch_size, env_id=env_id, prof=prof)


make_vec_sampler.phases = ("policy", "env")  # type: ignore[attr-defined]
