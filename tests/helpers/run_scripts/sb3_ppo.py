"""SB3 PPO on CartPole: ``sb3_ppo.py {dummy,subproc} {env,train,none} TIMESTEPS SLEEP_S N_STEPS``.

``env``: every env step sleeps SLEEP_S (a slow simulator); ``train``: every
``PPO.train`` call sleeps SLEEP_S times the rollout collection just before it (a
slow update: with 3, the trainer waits about a quarter of the time on any
machine). Prints the steps taken as
``TIMESTEPS_TAKEN <n>`` for the tests to compare with the profile.
"""

import itertools
import sys
import time

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv


class SlowStep(gym.Wrapper):
    def __init__(self, env, sleep_s):
        super().__init__(env)
        self.sleep_s = sleep_s

    def step(self, action):
        time.sleep(self.sleep_s)
        return self.env.step(action)


class SlowTrainPPO(PPO):
    factor = 0.0
    last_collect_s = 0.0

    def collect_rollouts(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return super().collect_rollouts(*args, **kwargs)
        finally:
            self.last_collect_s = time.perf_counter() - t0

    def train(self):
        time.sleep(self.factor * self.last_collect_s)
        super().train()


def main():
    vec, slow, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sleep_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    n_steps = int(sys.argv[5]) if len(sys.argv) > 5 else 64
    wrapper = (lambda e: SlowStep(e, sleep_s)) if slow == "env" else None
    venv = make_vec_env(
        "CartPole-v1",
        n_envs=4,
        seed=0,
        vec_env_cls=SubprocVecEnv if vec == "subproc" else DummyVecEnv,
        wrapper_class=wrapper,
    )
    algo = SlowTrainPPO if slow == "train" else PPO
    SlowTrainPPO.factor = sleep_s
    model = algo(
        "MlpPolicy", venv, n_steps=n_steps, batch_size=64, n_epochs=1, seed=0, device="cpu"
    )
    t0, c0 = time.perf_counter(), time.process_time()
    # under one C-level call callgrind can name (benchmarks/bench_run.py --instructions)
    list(itertools.starmap(lambda: model.learn(total_timesteps=total), [()]))
    learn_s, learn_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    venv.close()
    print("TIMESTEPS_TAKEN", model.num_timesteps, flush=True)
    print("LEARN_S", f"{learn_s:.6f}", flush=True)
    print("LEARN_CPU_S", f"{learn_cpu_s:.6f}", flush=True)


if __name__ == "__main__":
    main()
