"""SB3 PPO on CartPole, timed by its own clock beside gyreprof.

    python validation/sb3_ppo.py --vec dummy|subproc [--sleep] [--timesteps N]

The script wraps ``collect_rollouts`` and ``train`` of a PPO subclass with
``time.perf_counter()`` and prints one JSON line (prefix ``INDEPENDENT``):
collect / train seconds, wait ratio collect/(collect+train), env steps taken
(``model.num_timesteps``), SB3's own ``time/fps`` (read back from its CSV
logger) and wall time. ``--sleep`` makes ``train`` sleep so that training lasts
about 3x the rollout that preceded it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

CLOCK = {"collect_s": 0.0, "train_s": 0.0, "collects": 0, "trains": 0, "last_collect": 0.0}


class TimedPPO(PPO):
    sleep_factor = 0.0

    def collect_rollouts(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return super().collect_rollouts(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            CLOCK["collect_s"] += dt
            CLOCK["collects"] += 1
            CLOCK["last_collect"] = dt

    def train(self) -> None:
        t0 = time.perf_counter()
        try:
            super().train()
            if self.sleep_factor:
                # training (update + sleep) lasts sleep_factor x the rollout before it
                left = self.sleep_factor * CLOCK["last_collect"] - (time.perf_counter() - t0)
                if left > 0:
                    time.sleep(left)
        finally:
            CLOCK["train_s"] += time.perf_counter() - t0
            CLOCK["trains"] += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vec", choices=("dummy", "subproc"), default="dummy")
    ap.add_argument("--sleep", action="store_true")
    ap.add_argument("--timesteps", type=int, default=20_000)
    ap.add_argument("--n-envs", type=int, default=4)
    args = ap.parse_args()

    torch.set_num_threads(1)  # 2 shared cores: torch's own threads only contend
    cls = DummyVecEnv if args.vec == "dummy" else SubprocVecEnv
    t_wall = time.perf_counter()
    cpu0 = os.times()
    env = make_vec_env("CartPole-v1", n_envs=args.n_envs, seed=0, vec_env_cls=cls)
    TimedPPO.sleep_factor = 3.0 if args.sleep else 0.0
    # n_steps=512: 2048 env steps per rollout, ~10 rollout/train rounds in 20k steps
    model = TimedPPO(
        "MlpPolicy", env, n_steps=512, batch_size=256, n_epochs=4, seed=0, device="cpu"
    )
    logdir = tempfile.mkdtemp(prefix="sb3log-")
    model.set_logger(configure(logdir, ["csv"]))
    t_learn = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    learn_s = time.perf_counter() - t_learn
    env.close()
    fps = []
    with open(os.path.join(logdir, "progress.csv")) as f:
        for row in csv.DictReader(f):
            if row.get("time/fps"):
                fps.append(float(row["time/fps"]))
    cpu1 = os.times()
    c, t = CLOCK["collect_s"], CLOCK["train_s"]
    out = {
        "vec": args.vec,
        "sleep": args.sleep,
        "n_envs": args.n_envs,
        "collect_s": round(c, 3),
        "train_s": round(t, 3),
        "collects": CLOCK["collects"],
        "trains": CLOCK["trains"],
        "wait_ratio": round(c / (c + t), 4),
        "num_timesteps": model.num_timesteps,
        "vec_steps": model.num_timesteps // args.n_envs,
        "sb3_fps_last": fps[-1] if fps else None,
        "collect_steps_per_s": round(model.num_timesteps / c, 1),
        "learn_s": round(learn_s, 3),
        "wall_s": round(time.perf_counter() - t_wall, 3),
        "cpu_s_self": round((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system), 3),
    }
    print("INDEPENDENT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
