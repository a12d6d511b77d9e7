"""Steps CartPole 200 times, then fills the file system of the run folder, so that the
save at exit finds no space."""

import os
from pathlib import Path

import gymnasium as gym

env = gym.make("CartPole-v1")
env.reset(seed=0)
for _ in range(200):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
filler = Path(os.environ["GYREPROF_RUN_DIR"]) / "filler"
fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
try:
    while os.write(fd, b"\0" * 4096):
        pass
except OSError:  # no space left
    pass
os.close(fd)
print("FULL", flush=True)
