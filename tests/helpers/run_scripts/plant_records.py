"""Steps CartPole, then plants malformed per-process records in the run folder and exits 7.

Planted (pids that are not real processes of the run): a deeply nested start file, one
with an infinite pid, a done process whose trainer snapshot has other phase names and
whose sampler snapshot is truncated."""

import json
import os
import sys
from pathlib import Path

import gymnasium as gym

import gyreprof as gp

env = gym.make("CartPole-v1")
env.reset(seed=0)
for _ in range(50):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()

run = Path(os.environ["GYREPROF_RUN_DIR"])
(run / "1000001.start.json").write_text("[" * 100_000 + "]" * 100_000)
(run / "1000002.start.json").write_text(
    '{"format": "gyreprof.run-record/1", "version": 1, "pid": Infinity, "role": "child", "ppid": 1}'
)
good = {
    "format": "gyreprof.run-record/1",
    "version": 1,
    "pid": 1000003,
    "role": "child",
    "ppid": 1,
    "how": "exit",
}
(run / "1000003.start.json").write_text(json.dumps(good))
(run / "1000003.done.json").write_text(json.dumps(good))
other = gp.Profiler(["load", "store"])
other.record("load", 1000)
(run / "1000003.trainer.snap").write_bytes(other.snapshot().to_bytes())
sampler = gp.Profiler(["env_step", "env_reset", "step_async", "step_wait", "fwd"])
sampler.record("env_step", 1000)
(run / "1000003.sampler.snap").write_bytes(sampler.snapshot().to_bytes()[:40])
print("PLANTED", flush=True)
sys.exit(7)
