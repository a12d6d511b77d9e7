"""A queue-fed trainer whose compute has parts of known cost, timed by their own clock:
a producer thread steps gymnasium CartPole and puts small batches into a queue; the main
thread takes each batch (its wait) and runs ``update``: ``forward`` (~10 ms),
``optimizer_step`` (~30 ms) and ``handle_data`` (~3 ms), each a fixed amount of work
sized in time at the start. ``sites_compute.py SECONDS``
prints its own clock (``CLOCK {...}``): each part's share of the time spent in
``update`` (tests/test_run_sites.py)."""

import json
import queue
import sys
import threading
import time

import gymnasium as gym

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
clock = time.perf_counter
q = queue.Queue(maxsize=4)
stop = threading.Event()


def produce():
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    i = 0
    while not stop.is_set():
        batch = []
        for _ in range(8):
            obs, _, terminated, truncated, _ = env.step(i & 1)
            batch.append(obs)
            if terminated or truncated:
                env.reset()
            i += 1
        try:
            q.put(batch, timeout=0.1)
        except queue.Full:
            continue


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
spent = {"forward": 0.0, "optimizer_step": 0.0, "handle_data": 0.0}


def forward(batch):
    t0 = clock()
    x = 0
    for i in range(int(0.010 * rate)):  # a fixed amount of work, inline: this function is the site
        x += i
    spent["forward"] += clock() - t0


def optimizer_step():
    t0 = clock()
    x = 0
    for i in range(int(0.030 * rate)):
        x += i
    spent["optimizer_step"] += clock() - t0


def handle_data(batch):
    t0 = clock()
    x = 0
    for i in range(int(0.003 * rate)):
        x += i
    spent["handle_data"] += clock() - t0


def update(batch):
    handle_data(batch)
    forward(batch)
    optimizer_step()


threading.Thread(target=produce, daemon=True).start()
start = clock()
in_update = 0.0
while clock() - start < seconds:
    batch = q.get()
    t0 = clock()
    update(batch)
    in_update += clock() - t0
stop.set()
shares = {k: v / in_update for k, v in spent.items()}
print("CLOCK", json.dumps(shares | {"update_s": in_update}))
