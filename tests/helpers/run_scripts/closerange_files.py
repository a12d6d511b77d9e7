"""``closerange_files.py OUT N``: steps CartPole, then closes every fd from 3 up (as a
daemon does) and opens N files of its own in OUT, written through Python's buffers and
left to be flushed at exit. Each file must end up with its 100 lines."""

import os
import sys

import gymnasium as gym

out, n = sys.argv[1], int(sys.argv[2])
env = gym.make("CartPole-v1")
env.reset(seed=0)
for _ in range(200):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
os.closerange(3, 1 << 16)
files = [open(os.path.join(out, f"user{i}.txt"), "w") for i in range(n)]  # noqa: SIM115
for i, f in enumerate(files):
    f.write(f"line of file {i}\n" * 100)
env.step(env.action_space.sample())  # gyreprof records again with the files open
print("OPENED", [f.fileno() for f in files], flush=True)
