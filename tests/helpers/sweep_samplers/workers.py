"""A sampler that keeps its memory in worker processes, as vector-env samplers do.

``make_workers(num_workers, mib_per_worker)`` starts ``num_workers`` processes
(spawned: fresh interpreters), each of which writes ``mib_per_worker`` MiB and
holds it until the sampler closes. The measuring process itself allocates
nothing: only the process tree's memory grows with ``num_workers``.
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.connection import Connection
from typing import Any


def _hold(mib: int, conn: Connection) -> None:
    block = bytearray(mib * 2**20)
    for i in range(0, len(block), 4096):  # written, so resident
        block[i] = 1
    conn.send("ready")
    while conn.recv() != "stop":  # one message per sampler call, until the sampler closes
        pass
    del block


class WorkerSampler:
    def __init__(self, num_workers: int, mib_per_worker: int) -> None:
        self.num_workers = int(num_workers)
        ctx = mp.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for _ in range(self.num_workers):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_hold, args=(mib_per_worker, theirs), daemon=True)
            p.start()
            self.conns.append(mine)
            self.procs.append(p)
        for c in self.conns:
            if not c.poll(120):
                raise RuntimeError("a worker did not start within 120 s")
            c.recv()

    def sample(self) -> int:
        for c in self.conns:  # a round trip to every worker per call
            c.send("step")
        return self.num_workers

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send("stop")
            except OSError:
                pass
        for p in self.procs:
            p.join(10)


def make_workers(num_workers: int, mib_per_worker: int = 48) -> WorkerSampler:
    return WorkerSampler(num_workers, mib_per_worker)
