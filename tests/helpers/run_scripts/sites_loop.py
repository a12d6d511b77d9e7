"""A gymnasium CartPole loop with two helpers of known cost, timed by their own clock:
``featurize`` runs rarely but long (every 20th step, ~20 ms), ``tick`` often but briefly
(every step, ~0.2 ms); each is a fixed amount of work, sized in time at the start. ``sites_loop.py SECONDS`` prints its own clock (``CLOCK {...}``):
each helper's share of the loop's wall time (tests/test_run_sites.py)."""

import json
import sys
import time

import gymnasium as gym

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
clock = time.perf_counter
spent = {"featurize": 0.0, "tick": 0.0}


def per_second():
    """The machine's rate of the helpers' work: the best of a few short tries (a try that
    another process interrupts reads slow)."""
    best = 0.0
    for _ in range(5):
        t0, n = clock(), 0
        while clock() - t0 < 0.02:
            x = 0
            for i in range(1000):  # the helpers' work, to size it in time
                x += i
            n += 1000
        best = max(best, n / (clock() - t0))
    return best


rate = per_second()
LONG, SHORT = int(0.02 * rate), int(0.0002 * rate)
env = gym.make("CartPole-v1")
env.reset(seed=0)


def featurize(obs):
    t0 = clock()
    x = 0
    for i in range(LONG):  # a fixed amount of work, inline: this function is the site
        x += i
    spent["featurize"] += clock() - t0


def tick(obs):
    t0 = clock()
    x = 0
    for i in range(SHORT):
        x += i
    spent["tick"] += clock() - t0


start = clock()
i = 0
while clock() - start < seconds:
    obs, _, terminated, truncated, _ = env.step(i & 1)
    tick(obs)
    if i % 20 == 0:
        featurize(obs)
    if terminated or truncated:
        env.reset()
    i += 1
wall = clock() - start
print("CLOCK", json.dumps({k: v / wall for k, v in spent.items()} | {"wall_s": wall, "steps": i}))
