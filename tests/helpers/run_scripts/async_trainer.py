"""An asyncio trainer fed by a rollout service:
``async_trainer.py URL MODE STEPS N DELAY_MS UPDATE_MS [CPU_MS [SLOW_MS]]``.

Each training step gets a batch of ``N`` completions from the local server (each
answered after ``DELAY_MS``), then runs Adam steps on a small torch model for
``UPDATE_MS``. ``MODE``:

- ``run``: the training loop calls ``loop.run_until_complete(asyncio.gather(...))`` of
  ``N`` ``AsyncOpenAI`` calls, then updates (outside the loop);
- ``inside``: one ``asyncio.run(main())``; ``main`` awaits the gather of ``N`` httpx
  ``AsyncClient`` posts, then updates inside the coroutine;
- ``cpu``: as ``run``, but each of the ``N`` coroutines does ``CPU_MS`` of CPU work
  between its two requests (the loop computes, it does not wait);
- ``queue``: a sampler task in the same loop gathers the batches and hands them over an
  ``asyncio.Queue``; the trainer coroutine awaits ``queue.get()``, then updates;
- ``thread``: a sampler thread runs its own loop and hands batches to the training
  (main) thread over a ``queue.Queue``;
- ``feed``: a sampler thread makes ``N`` synchronous httpx requests per batch and hands
  each batch to the training thread's loop (``call_soon_threadsafe``) over an
  ``asyncio.Queue`` that the trainer coroutine awaits;
- ``tail``: as ``run``, with request 0 of each batch answered after ``SLOW_MS``;
- ``map`` / ``completed``: ``N`` synchronous httpx posts from a thread pool, through
  ``pool.map`` / ``submit`` and ``as_completed``, request 0 answered after ``SLOW_MS``;
- ``stream``: as ``run``, each ``AsyncOpenAI`` call with ``stream=True`` (its chunks
  ``CPU_MS`` apart) read to its end, at most 8 at once (an ``asyncio.Semaphore``);
- ``aiohttp``: as ``run``, ``N`` aiohttp posts with ``"stream": true`` whose SSE
  answers (chunks ``CPU_MS`` apart) are read line by line from ``response.content``;
- ``ascompleted``: as ``run``, the batch read through ``asyncio.as_completed``;
- ``ahead``: one ``asyncio.run(main())`` that asks for the next batch (a task of ``N``
  httpx posts), waits until they are sent (httpcore's trace events), then updates
  inside the coroutine: answers faster than the update have come when it is awaited.

``URL`` may name several servers, comma-separated (replicas): in the modes that use
``AsyncOpenAI`` calls, request ``i`` of a batch goes to server ``i`` modulo their
number.

``$GROUP`` says how a coroutine waits on its batch: ``gather`` (the default),
``wait`` (``asyncio.wait`` of tasks) or ``taskgroup``. With ``$UPDATE=numpy`` the update
is matrix products in NumPy, no optimizer step: nothing tells that the main thread
trains (it stays the default trainer).

Prints one JSON line with the script's own clock: ``wait_ratio`` (the share of the
loop's wall time spent getting batches) and ``idle_ratio`` (that time less the
training thread's CPU time in it and, where Linux's ``/proc/thread-self/schedstat``
says, less the time it was runnable but not running: the thread was idle),
``steps``, and ``tails``: each batch's tail share by the script's clock (the part of
its time, from its first request's start, after its ``n - max(1, n // 10)``-th
request came back).
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import httpx
import openai
import torch

url, mode, steps, n, delay_ms, update_ms = (
    sys.argv[1],
    sys.argv[2],
    int(sys.argv[3]),
    int(sys.argv[4]),
    float(sys.argv[5]),
    float(sys.argv[6]),
)
cpu_ms = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
slow_ms = float(sys.argv[8]) if len(sys.argv) > 8 else delay_ms
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(256, 64)
GROUP = os.environ.get("GROUP", "gather")
tails: list[float] = []
BODY = {"model": "m", "messages": [{"role": "user", "content": "a b"}], "max_tokens": 4}


NUMPY_UPDATE = os.environ.get("UPDATE") == "numpy"


def update() -> None:
    end = time.perf_counter() + update_ms / 1000.0
    if NUMPY_UPDATE:
        import numpy as np

        a = np.ones((64, 64))
        while time.perf_counter() < end:
            a = np.tanh(a @ a / 64.0)
        return
    while time.perf_counter() < end:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def burn(ms: float) -> None:
    end = time.thread_time() + ms / 1000.0
    v = 0
    while time.thread_time() < end:
        v += sum(range(200))


#: one client per server of ``URL`` (replicas), when it names several
replicas: list[openai.AsyncOpenAI] = []


async def sdk_one(sdk: openai.AsyncOpenAI, i: int) -> int:
    if replicas:
        sdk = replicas[i % len(replicas)]
    starts.append(time.monotonic_ns())
    d = slow_ms if (mode == "tail" and i == 0) else delay_ms
    out = await sdk.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "the cat"}],
        max_tokens=4,
        extra_body={"test_delay_ms": d},
    )
    if mode == "cpu":
        burn(cpu_ms)
        out = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "the cat"}],
            max_tokens=4,
            extra_body={"test_delay_ms": d},
        )
    ends.append(time.monotonic_ns())
    return out.usage.completion_tokens if out.usage else 0


ends: list[int] = []
starts: list[int] = []


def tail_of(start: int) -> None:
    """The batch's tail share by the script's clock (its requests' starts and ends in
    ``starts`` and ``ends``; ``start`` when none started)."""
    e = sorted(ends)
    ends.clear()
    start = min(starts, default=start)
    starts.clear()
    k = max(1, len(e) // 10)
    if len(e) > k:
        tails.append((e[-1] - e[len(e) - k - 1]) / max(1, e[-1] - start))


async def together(aws: list[Any]) -> list[Any]:
    """The batch awaited as ``$GROUP`` says (``as_completed`` in mode ``ascompleted``)."""
    if mode == "ascompleted":
        return [await f for f in asyncio.as_completed(aws)]
    if GROUP == "wait":
        tasks = [asyncio.ensure_future(a) for a in aws]
        await asyncio.wait(tasks)
        return [t.result() for t in tasks]
    if GROUP == "taskgroup":
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(a) for a in aws]
        return [t.result() for t in tasks]
    return list(await asyncio.gather(*aws))


room: asyncio.Semaphore | None = None  # made in the loop that uses it


async def stream_one(sdk: openai.AsyncOpenAI, i: int) -> int:
    """One streamed completion, read to its end, at most 8 at once."""
    global room
    if room is None:
        room = asyncio.Semaphore(8)
    async with room:
        starts.append(time.monotonic_ns())
        chunks = 0
        stream = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "the cat"}],
            max_tokens=6,
            stream=True,
            extra_body={"test_delay_ms": delay_ms, "test_chunk_delay_ms": cpu_ms},
        )
        async for _ in stream:
            chunks += 1
        ends.append(time.monotonic_ns())
        return chunks


async def aiohttp_one(session: Any, i: int) -> int:
    """One SSE answer through aiohttp, read line by line from ``response.content``."""
    starts.append(time.monotonic_ns())
    body = {**BODY, "max_tokens": 6, "stream": True, "test_delay_ms": delay_ms}
    body["test_chunk_delay_ms"] = cpu_ms
    lines = 0
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        async for line in resp.content:
            lines += line.startswith(b"data:")
    ends.append(time.monotonic_ns())
    return lines


class Sent:
    """Requests written whole to the server (httpcore's trace events), and an event set
    when ``target`` of them were: mode ``ahead`` waits on it, not on a fixed time."""

    def __init__(self) -> None:
        self.n = 0
        self.target = 0
        self.event: asyncio.Event | None = None

    def expect(self, k: int) -> asyncio.Event:
        self.n, self.target, self.event = 0, k, asyncio.Event()
        return self.event

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "http11.send_request_body.complete":
            self.n += 1
            if self.event is not None and self.n >= self.target:
                self.event.set()


sent = Sent()


async def httpx_one(client: httpx.AsyncClient, i: int) -> int:
    r = await client.post(
        "/v1/chat/completions",
        json={**BODY, "test_delay_ms": delay_ms},
        extensions={"trace": sent.trace},
    )
    return int(r.json()["usage"]["completion_tokens"])


async def sdk_batch(sdk: openai.AsyncOpenAI) -> int:
    start = time.monotonic_ns()
    one = stream_one if mode == "stream" else sdk_one
    out = sum(await together([one(sdk, i) for i in range(n)]))
    tail_of(start)
    return out


async def httpx_batch(client: httpx.AsyncClient) -> int:
    return sum(await together([httpx_one(client, i) for i in range(n)]))


def busy_s() -> float:
    """The calling thread's CPU time plus its time runnable on a run queue (seconds)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            cpu_ns, delay_ns = f.read().split()[:2]
        return (int(cpu_ns) + int(delay_ns)) / 1e9
    except (OSError, ValueError):
        return time.thread_time()


class Clock:
    """The script's own figures: wall and thread CPU time spent getting batches."""

    def __init__(self) -> None:
        self.gen_s = self.gen_cpu_s = self.total_s = 0.0

    def out(self) -> None:
        idle = (self.gen_s - self.gen_cpu_s) / self.total_s
        print(
            json.dumps(
                {
                    "wait_ratio": self.gen_s / self.total_s,
                    "idle_ratio": idle,
                    "steps": steps,
                    "tails": tails,
                }
            ),
            flush=True,
        )


def loop_modes(clock: Clock) -> None:
    loop = asyncio.new_event_loop()
    urls = url.split(",")
    sdk = openai.AsyncOpenAI(base_url=urls[0] + "/v1", api_key="test", max_retries=0)
    if len(urls) > 1:
        replicas.extend(
            openai.AsyncOpenAI(base_url=u + "/v1", api_key="test", max_retries=0) for u in urls
        )
    session: Any = None
    if mode == "aiohttp":
        import aiohttp

        async def open_session() -> Any:
            return aiohttp.ClientSession()

        session = loop.run_until_complete(open_session())

    def batch() -> Any:
        if session is not None:
            return together([aiohttp_one(session, i) for i in range(n)])
        return sdk_batch(sdk)

    loop.run_until_complete(batch())  # warm-up: connections
    update()
    for _ in range(steps):
        t0, c0 = time.perf_counter(), busy_s()
        loop.run_until_complete(batch())
        t1, c1 = time.perf_counter(), busy_s()
        update()
        clock.gen_s += t1 - t0
        clock.gen_cpu_s += c1 - c0
        clock.total_s += time.perf_counter() - t0
    loop.run_until_complete(sdk.close())
    for r in replicas:
        loop.run_until_complete(r.close())
    if session is not None:
        loop.run_until_complete(session.close())
    loop.close()


async def inside(clock: Clock) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        await httpx_batch(client)
        update()
        for _ in range(steps):
            t0, c0 = time.perf_counter(), busy_s()
            await httpx_batch(client)
            t1, c1 = time.perf_counter(), busy_s()
            update()
            clock.gen_s += t1 - t0
            clock.gen_cpu_s += c1 - c0
            clock.total_s += time.perf_counter() - t0


async def ahead(clock: Clock) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        nxt = asyncio.ensure_future(httpx_batch(client))
        await nxt
        update()
        nxt = asyncio.ensure_future(httpx_batch(client))
        for _ in range(steps):
            t0, c0 = time.perf_counter(), busy_s()
            await nxt  # asked for before the update
            out = sent.expect(n)
            nxt = asyncio.ensure_future(httpx_batch(client))
            await out.wait()  # the next batch's requests have gone out
            t1, c1 = time.perf_counter(), busy_s()
            update()
            clock.gen_s += t1 - t0
            clock.gen_cpu_s += c1 - c0
            clock.total_s += time.perf_counter() - t0
        await nxt


async def handoff(clock: Clock) -> None:
    q: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
    sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0)

    async def sampler() -> None:
        for _ in range(steps + 1):
            await q.put(await sdk_batch(sdk))

    task = asyncio.create_task(sampler())
    await q.get()
    update()
    for _ in range(steps):
        t0, c0 = time.perf_counter(), busy_s()
        await q.get()
        t1, c1 = time.perf_counter(), busy_s()
        update()
        clock.gen_s += t1 - t0
        clock.gen_cpu_s += c1 - c0
        clock.total_s += time.perf_counter() - t0
    await task
    await sdk.close()


def thread_mode(clock: Clock) -> None:
    q: queue.Queue[int] = queue.Queue(maxsize=1)

    def sampler() -> None:
        async def run() -> None:
            sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
            for _ in range(steps + 1):
                q.put(await sdk_batch(sdk))
            await sdk.close()

        asyncio.run(run())

    th = threading.Thread(target=sampler, name="sampler")
    th.start()
    q.get()
    update()
    for _ in range(steps):
        t0, c0 = time.perf_counter(), busy_s()
        q.get()
        t1, c1 = time.perf_counter(), busy_s()
        update()
        clock.gen_s += t1 - t0
        clock.gen_cpu_s += c1 - c0
        clock.total_s += time.perf_counter() - t0
    th.join()


async def fed(clock: Clock) -> None:
    q: asyncio.Queue[int] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    room = threading.Semaphore(1)  # one batch ahead at most

    def sampler() -> None:
        client = httpx.Client(base_url=url)
        for _ in range(steps + 1):
            room.acquire()
            got = 0
            for _ in range(n):
                r = client.post("/v1/chat/completions", json={**BODY, "test_delay_ms": delay_ms})
                got += int(r.json()["usage"]["completion_tokens"])
            loop.call_soon_threadsafe(q.put_nowait, got)

    th = threading.Thread(target=sampler, name="sampler", daemon=True)
    th.start()
    await q.get()
    room.release()
    update()
    for _ in range(steps):
        t0, c0 = time.perf_counter(), busy_s()
        await q.get()
        room.release()
        t1, c1 = time.perf_counter(), busy_s()
        update()
        clock.gen_s += t1 - t0
        clock.gen_cpu_s += c1 - c0
        clock.total_s += time.perf_counter() - t0
    th.join()


def pool_mode(clock: Clock) -> None:
    client = httpx.Client(base_url=url)

    def one(i: int) -> int:
        starts.append(time.monotonic_ns())
        d = slow_ms if i == 0 else delay_ms
        r = client.post("/v1/chat/completions", json={**BODY, "test_delay_ms": d})
        ends.append(time.monotonic_ns())
        return int(r.json()["usage"]["completion_tokens"])

    def batch(pool: ThreadPoolExecutor) -> int:
        start = time.monotonic_ns()
        if mode == "map":
            out = sum(pool.map(one, range(n)))
        else:
            out = sum(f.result() for f in as_completed([pool.submit(one, i) for i in range(n)]))
        tail_of(start)
        return out

    with ThreadPoolExecutor(n) as pool:
        batch(pool)
        update()
        for _ in range(steps):
            t0 = time.perf_counter()
            batch(pool)
            t1 = time.perf_counter()
            update()
            clock.gen_s += t1 - t0
            clock.total_s += time.perf_counter() - t0


clock = Clock()
if mode in ("run", "cpu", "tail", "stream", "aiohttp", "ascompleted"):
    loop_modes(clock)
elif mode == "inside":
    asyncio.run(inside(clock))
elif mode == "ahead":
    asyncio.run(ahead(clock))
elif mode == "queue":
    asyncio.run(handoff(clock))
elif mode == "thread":
    thread_mode(clock)
elif mode == "feed":
    asyncio.run(fed(clock))
elif mode in ("map", "completed"):
    pool_mode(clock)
else:
    raise SystemExit(f"unknown mode {mode!r}")
clock.out()
