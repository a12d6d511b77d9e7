"""Trainer loops with no framework: ``signals_loops.py MODE {env,train} N SLEEP_S``.

- ``queue``: a producer thread steps a CartPole and puts batches of 16 steps on a
  ``queue.Queue``; the main thread gets each batch and runs 4 Adam minibatches.
- ``torchfree``: the same producer (no env: it sleeps per item); the main thread
  ``item = q.get(); work(item)`` with no torch at all.
- ``alternate``: one thread, one env step then one update, repeatedly.
- ``pool``: ``alternate``, while 4 pool threads sit in ``queue.get`` (and a
  ``ThreadPoolExecutor`` is idle); they never become trainers.

``env``: each env step (or produced item) sleeps SLEEP_S; ``train``: each update
sleeps SLEEP_S. The script's own clock around the waits and the updates is
printed as ``CLOCK {"wait_s": ..., "update_s": ..., "updates": ..., "put_s": ...}``
(``put_s``: the producer's time in its puts into the bounded queue, blocked while it is
full; 0 for the one-thread modes); ``pool``
also prints ``TRAINER_THREADS n`` (threads of the run's state that trained).
"""

import concurrent.futures
import json
import queue
import sys
import threading
import time

BATCH = 16


def producer(q, n, slow_env, sleep_s, with_env, put_s):
    env = None
    if with_env:
        import gymnasium as gym

        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=0)
    for _ in range(n):
        rows = []
        for _ in range(BATCH if with_env else 1):
            if slow_env:
                time.sleep(sleep_s)
            if env is not None:
                obs, _, term, trunc, _ = env.step(env.action_space.sample())
                if term or trunc:
                    obs, _ = env.reset()
                rows.append(list(obs))
        t0 = time.perf_counter()
        q.put(rows)
        put_s[0] += time.perf_counter() - t0
    t0 = time.perf_counter()
    q.put(None)
    put_s[0] += time.perf_counter() - t0


def torch_update(model, opt, rows, slow_train, sleep_s):
    import torch

    x = torch.as_tensor(rows, dtype=torch.float32)
    for _ in range(4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if slow_train:
        time.sleep(sleep_s)


def fed(mode, slow, n, sleep_s):
    q = queue.Queue(maxsize=4)
    put_s = [0.0]
    model = opt = None
    if mode == "queue":  # before the producer starts: it would fill the queue and wait
        import torch

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    th = threading.Thread(
        target=producer, args=(q, n, slow == "env", sleep_s, mode == "queue", put_s), daemon=True
    )
    th.start()
    wait_s = update_s = 0.0
    updates = 0
    first = True
    while True:
        t0 = time.perf_counter()
        item = q.get()
        t1 = time.perf_counter()
        if first:  # the first get also builds the run's profilers: left out of this clock
            t0 = t1
            first = False
        wait_s += t1 - t0
        if item is None:
            break
        if mode == "queue":
            torch_update(model, opt, item, slow == "train", sleep_s)
        else:  # a torch-free update: spin, then sleep when slowed
            end = time.perf_counter() + 0.0005
            while time.perf_counter() < end:
                pass
            if slow == "train":
                time.sleep(sleep_s)
        updates += 1
        update_s += time.perf_counter() - t1
    th.join()
    return wait_s, update_s, updates, put_s[0]


def alternate(slow, n, sleep_s):
    import gymnasium as gym
    import torch

    class Slow(gym.Wrapper):
        def step(self, action):
            time.sleep(sleep_s)
            return self.env.step(action)

    env = gym.make("CartPole-v1")
    if slow == "env":
        env = Slow(env)
    obs, _ = env.reset(seed=0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    wait_s = update_s = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            obs, _ = env.reset()
        t1 = time.perf_counter()
        loss = model(torch.as_tensor(obs, dtype=torch.float32)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if slow == "train":
            time.sleep(sleep_s)
        wait_s += t1 - t0
        update_s += time.perf_counter() - t1
    return wait_s, update_s, n, 0.0


def idle_worker(q):
    while q.get() is not None:
        pass


def main():
    mode, slow, n, sleep_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    if mode in ("queue", "torchfree"):
        wait_s, update_s, updates, put_s = fed(mode, slow, n, sleep_s)
    elif mode == "alternate":
        wait_s, update_s, updates, put_s = alternate(slow, n, sleep_s)
    else:
        work = queue.Queue()
        idle = [threading.Thread(target=idle_worker, args=(work,)) for _ in range(4)]
        for th in idle:
            th.start()
        pool = concurrent.futures.ThreadPoolExecutor(2)
        pool.submit(time.sleep, 0).result()
        for _ in range(3):
            work.put(0)  # the idle workers take an item now and then
        wait_s, update_s, updates, put_s = alternate(slow, n, sleep_s)
        for _ in idle:
            work.put(None)
        for th in idle:
            th.join()
        pool.shutdown()
        from gyreprof.integrations._auto import state

        print("TRAINER_THREADS", sum(1 for t in state.threads() if t.trains), flush=True)
    clock = {"wait_s": wait_s, "update_s": update_s, "updates": updates, "put_s": put_s}
    print("CLOCK " + json.dumps(clock), flush=True)


if __name__ == "__main__":
    main()
