"""Steps CartPole until stopped; prints READY after the first 200 steps.

``forever.py autosave PATH``: first makes a ``Profiler(autosave=PATH)`` of its own, so
the program's autosave, not the run, is the first to handle SIGTERM."""

import sys

import gymnasium as gym

if sys.argv[1:2] == ["autosave"]:
    import gyreprof as gp

    own = gp.Profiler(["x"], autosave=sys.argv[2])
    own.record("x", 1000)

env = gym.make("CartPole-v1")
env.reset(seed=0)
n = 0
while True:
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
    n += 1
    if n == 200:
        print("READY", flush=True)
