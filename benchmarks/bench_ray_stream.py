"""A Ray job's records streaming in (issue 36): what the job's inbox costs the driver's
node while N workers send their periodic records, for N = 64, 256 and 1,024.

A real local Ray (``ray.init(num_cpus=2)``) and the job's real inbox actor, started as
the driver starts it (``integrations.ray.job._start_inbox``). K sender actors (async,
no CPU) each imitate N/K workers: each imitated worker long-polls the inbox
(``wait_flush(period, actor_id)``), and each time the poll returns sends its record
(``put(payload)``, the ref dropped, as the worker's sender thread does), so the inbox
gets what N workers at one send per period give it: one record and one long poll per
worker and period, the period being the workers' (``--period``, 2 s) or the longer one
the inbox holds a large fleet's polls to (``Inbox.wait_s``). Every imitated worker
sends every period (a busy fleet: the sender skips a send that would repeat the last).
The payloads are ``bench_ray_job.payloads`` (a process record and a sampler snapshot of
2,000 env steps) made periodic, with a stack sampler's sites record: ~4.4 kB pickled.

Measured with psutil, each fleet against a fresh inbox: the inbox's process alone over
one window (Ray's own cost of an idle actor), then, once the polls have spread over a
period, over a second window: the CPU time (user + system) of the inbox's process, the
driver's, the raylet and GCS, and the senders (the workers' side, with their own idle
cost). Receiving: the inbox's CPU less its idle CPU, per record and as a share of one
core. The machine may be shared: CPU time, not wall time.

    python benchmarks/bench_ray_stream.py                      # 64, 256, 1024 workers
    python benchmarks/bench_ray_stream.py --workers 8 1024 2048 --window 30 --json
    python -m pytest -m ray benchmarks/bench_ray_stream.py      # quick mode (the test)
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ray_job import payloads  # noqa: E402

PERIOD_S = 2.0  # the worker's default (job.DEFAULT_PERIOD_S)
SENDERS = 4  # actors imitating the fleet


def periodic_payloads(workers: int) -> list[dict[str, Any]]:
    """``workers`` periodic inbox payloads as ``job._payload`` makes them (a busy worker:
    its sampler snapshot, its process record, its sites so far)."""
    from gyreprof.analysis.sites import ProcessSites, SiteCount

    out = []
    for i, p in enumerate(payloads(workers)):
        sites = ProcessSites(
            pid=p["pid"],
            hz=100.0,
            sampler_samples=400,
            sampler=[
                SiteCount(f"module.Class.function_{k}", f"/srv/job/pkg/file_{k}.py", 10 * k, 20)
                for k in range(8)
            ],
        )
        p.update(
            final=False,
            node_ip=f"10.0.{i % 16}.1",
            host=f"node-{i % 16}",
            actor_id=f"{i:032x}",
            sites=sites.to_json().encode(),
        )
        out.append(p)
    return out


_SENDER_SOURCE = '''
import asyncio
import os
import random

import ray


class Sender:
    """Imitates a few workers' sender threads (job._send_loop): per worker, a long poll
    on the inbox, then the worker's record, again and again."""

    def __init__(self, inbox_name, namespace, payloads, period_s):
        self.inbox = ray.get_actor(inbox_name, namespace=namespace)
        self.payloads = payloads
        self.period_s = period_s
        self.puts = 0
        self.tasks = []

    async def _worker(self, payload):
        await asyncio.sleep(random.uniform(0, self.period_s))  # workers start apart
        aid = payload["actor_id"]
        while True:
            answer = await self.inbox.wait_flush.remote(self.period_s, aid)
            if answer == "final":  # the driver's flush: the final record, then no more
                await self.inbox.put.remote(dict(payload, final=True))
                return
            self.inbox.put.remote(payload)  # the ref dropped, as the sender thread does
            self.puts += 1

    async def start(self):
        self.tasks = [asyncio.ensure_future(self._worker(p)) for p in self.payloads]
        return os.getpid()

    async def puts_so_far(self):
        return self.puts
'''


def _sender_class(ray: Any) -> Any:
    """The sender actor, defined by value (a worker cannot import this script)."""
    space: dict[str, Any] = {"__name__": "gyreprof_bench_ray_sender"}
    exec(compile(_SENDER_SOURCE, "<bench sender>", "exec"), space)  # noqa: S102
    return ray.remote(num_cpus=0)(space["Sender"])


def _cpu_s(proc: Any) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _ray_procs() -> dict[str, Any]:
    """This driver's raylet and GCS server (the local cluster it started)."""
    import psutil

    out: dict[str, Any] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            name = child.name()
        except psutil.Error:
            continue
        for key in ("raylet", "gcs_server"):
            if key in name:
                out[key] = child
    return out


def _actor_pid(ray: Any, handle: Any) -> int:
    from ray._private import state

    info = state.actors(actor_id=handle._actor_id.hex())
    return int(info["Pid"])


def _finals(ray: Any, inbox: Any, workers: int, timeout_s: float = 60.0) -> tuple[int, int]:
    """(records, final records) in the inbox once every worker's final one came (the
    flush answers each open poll at once), or after timeout_s."""
    end = time.monotonic() + timeout_s
    while True:
        known, final = ray.get(inbox.status.remote(), timeout=timeout_s)
        if final >= workers or time.monotonic() > end:
            return int(known), int(final)
        time.sleep(0.05)


def measure(
    ray: Any, workers: int, window_s: float, period_s: float = PERIOD_S, senders: int = SENDERS
) -> dict[str, Any]:
    """One fleet of ``workers`` against a fresh inbox: the inbox alone for ``window_s``
    seconds (Ray's own cost of an idle actor), then the CPU of each process over
    ``window_s`` seconds with the fleet sending, and the records the inbox received."""
    import psutil

    from gyreprof.integrations.ray import job

    name = f"gyreprof-bench-inbox-{os.getpid()}-{workers}-{time.monotonic_ns()}"
    job._start_inbox(ray, name)
    inbox, job._inbox = job._inbox, None  # the bench ends it, not finish() at exit
    try:
        ray.get(inbox.status.remote(), timeout=60)
        inbox_proc = psutil.Process(_actor_pid(ray, inbox))
        c0, t0 = _cpu_s(inbox_proc), time.monotonic()
        time.sleep(window_s)
        idle_share = (_cpu_s(inbox_proc) - c0) / (time.monotonic() - t0)
        got = periodic_payloads(workers)
        cls = _sender_class(ray)
        k = min(senders, workers)
        actors = [cls.remote(name, job.NAMESPACE, got[i::k], period_s) for i in range(k)]
        sender_procs = [psutil.Process(p) for p in ray.get([a.start.remote() for a in actors])]
        time.sleep(period_s * 2)  # every imitated worker polling, spread over a period
        procs = {"inbox": inbox_proc, "driver": psutil.Process(), **_ray_procs()}
        procs.update({f"sender{i}": p for i, p in enumerate(sender_procs)})
        puts0 = sum(ray.get([a.puts_so_far.remote() for a in actors]))
        cpu0 = {key: _cpu_s(p) for key, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(window_s)
        cpu1 = {key: _cpu_s(p) for key, p in procs.items()}
        elapsed = time.monotonic() - t0
        puts1 = sum(ray.get([a.puts_so_far.remote() for a in actors]))
        held_s = ray.get(inbox.wait_s.remote(period_s), timeout=60)  # a poll opened now
        ray.get(inbox.flush.remote(), timeout=60)  # every poll answers "final": senders end
        known, final = _finals(ray, inbox, workers)
        for a in actors:
            ray.kill(a)
    finally:
        ray.kill(inbox)
    cpu = {key: cpu1[key] - cpu0[key] for key in cpu0}
    records = puts1 - puts0
    receiving_s = cpu["inbox"] - idle_share * elapsed
    return {
        "workers": workers,
        "period_s": period_s,
        "window_s": elapsed,
        "records": records,
        "records_per_s": records / elapsed,
        "poll_held_s": held_s,
        "at_the_period_per_s": workers / held_s,
        "workers_sent": known,  # workers whose record the inbox holds
        "workers_final": final,  # ... their final one, sent when the flush answered a poll
        "bytes_per_record": len(pickle.dumps(got[0])),
        "inbox_idle_share": idle_share,
        "inbox_share": cpu["inbox"] / elapsed,
        "receiving_share": receiving_s / elapsed,
        "inbox_cpu_per_record_ms": 1e3 * receiving_s / max(1, records),
        "driver_share": cpu["driver"] / elapsed,
        "raylet_gcs_share": (cpu.get("raylet", 0.0) + cpu.get("gcs_server", 0.0)) / elapsed,
        "senders_cpu_per_record_ms": 1e3
        * sum(v for key, v in cpu.items() if key.startswith("sender"))
        / max(1, records),
    }


def start_ray() -> Any:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="*", default=[64, 256, 1024])
    ap.add_argument("--window", type=float, default=20.0, help="seconds measured per fleet")
    ap.add_argument("--period", type=float, default=PERIOD_S, help="each worker's period")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ray = start_ray()
    try:
        rows = [measure(ray, n, args.window, args.period) for n in args.workers]
    finally:
        ray.shutdown()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{args.window:.0f} s windows, period {args.period:g} s; shares of one core "
        "(receiving: the inbox's CPU less its own idle CPU)"
    )
    print(
        "workers  poll held  records/s (at that period)  inbox idle  inbox  receiving"
        "  per record  driver  raylet+GCS  senders per record"
    )
    for r in rows:
        print(
            f"{r['workers']:>7}  {r['poll_held_s']:>7.1f} s"
            f"  {r['records_per_s']:>7.1f} ({r['at_the_period_per_s']:>6.1f})"
            f"            {r['inbox_idle_share']:>6.2%}     {r['inbox_share']:>6.2%}"
            f" {r['receiving_share']:>6.2%}     {r['inbox_cpu_per_record_ms']:.2f} ms"
            f"  {r['driver_share']:.2%}   {r['raylet_gcs_share']:.2%}"
            f"       {r['senders_cpu_per_record_ms']:.2f} ms"
        )
    return 0


@pytest.mark.ray
def test_inbox_receives_a_small_fleet() -> None:
    """Quick mode: 8 imitated workers reach the real inbox, and each answers the driver's
    flush with its final record (the figures are the script's)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install gyreprof[ray])")
    import ray

    started = not ray.is_initialized()
    start_ray()
    try:
        r = measure(ray, 8, window_s=1.0, period_s=0.5, senders=2)
    finally:
        if started:
            ray.shutdown()
    assert r["workers_sent"] == r["workers_final"] == 8


if __name__ == "__main__":
    sys.exit(main())
