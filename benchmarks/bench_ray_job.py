"""A Ray job's records brought home (issue 36): the driver's cost of merging the records
of 64, 256 and 1,024 workers, and one worker's cost of a periodic send.

The merge goes through the same path as a real job: synthetic inbox payloads (each a
worker's process record and its sampler and trainer snapshots, the sampler filled
with ``STEPS`` env steps of lognormal durations), written into a run folder by
``integrations.ray.job.write_records`` (the workers of one node and role merged into
one group) and read back by ``collect_run`` (the report, the verdict and the per-node
table's data). Timed: the write, the collect and report, both (wall, and the process's
CPU time: the machine may be shared).

The send: ``job._payload`` (every thread's snapshots merged, encoded, the process
record) in a process whose one recording thread has stepped ``STEPS`` env steps; its
CPU time per send against the period (2 s) is the share of one core it costs.

    python benchmarks/bench_ray_job.py                  # 64, 256, 1024 workers
    python benchmarks/bench_ray_job.py --workers 64 --json
    python -m pytest benchmarks/bench_ray_job.py        # quick mode (the tests)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import gyreprof as gp
from gyreprof.integrations._auto import collect
from gyreprof.integrations._auto import records as rec

STEPS = 2_000  # env steps per worker
NODES = 16


def _snap(phases: tuple[str, ...], seed: int, steps: int) -> bytes:
    rng = np.random.default_rng(seed)
    prof = gp.Profiler(list(phases), capacity=1 << 12)
    durations = rng.lognormal(np.log(50_000), 0.5, size=(steps, 2)).astype(np.int64)
    for env_ns, fwd_ns in durations:
        prof.begin()
        prof.record(phases[0], int(env_ns))
        if len(phases) > 4:
            prof.record(phases[4], int(fwd_ns))
    prof.end()
    return bytes(prof.snapshot().to_bytes())


def payloads(workers: int, steps: int = STEPS) -> list[dict[str, Any]]:
    """``workers`` inbox payloads as the sender makes them (a few distinct snapshots
    reused: filling 1,024 Profilers would time the filling)."""
    samplers = [_snap(rec.SAMPLER_PHASES, seed, steps) for seed in range(8)]
    out = []
    for i in range(workers):
        node = f"{i % NODES:056x}"
        record = rec.ProcessRecord(
            pid=2_000_000 + i,
            role="Runner",
            ppid=1,
            how="ray",
            node_id=node,
            node_ip=f"10.0.{i % NODES}.1",
        )
        out.append(
            {
                "pid": record.pid,
                "final": True,
                "node_id": node,
                "record": record.to_json(),
                "sampler": samplers[i % len(samplers)],
                "trainer": None,  # a sampler worker: its empty trainer is not sent
            }
        )
    return out


def measure(workers: int, repeats: int = 3) -> dict[str, Any]:
    from gyreprof.integrations.ray import job

    got = payloads(workers)
    writes, collects, cpus = [], [], []
    for _ in range(repeats):
        folder = Path(tempfile.mkdtemp(prefix="gyreprof-bench-ray-job-"))
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            job.write_records(folder, got, [], {"pid": 1, "node_id": "", "node_ip": ""})
            t1 = time.perf_counter()
            report = collect.collect_run(folder, "bench", ["bench"], 0)
            str(report)  # the text report with its per-node table
            c2, t2 = time.process_time(), time.perf_counter()
            assert report.sampler.summary().phases["env_step"].count == workers * STEPS
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        writes.append(t1 - t0)
        collects.append(t2 - t1)
        cpus.append(c2 - c0)
    return {
        "workers": workers,
        "write_s": statistics.median(writes),
        "collect_s": statistics.median(collects),
        "merge_s": statistics.median(w + c for w, c in zip(writes, collects, strict=True)),
        "merge_cpu_s": statistics.median(cpus),
        "bytes_per_worker": len(got[0]["sampler"]),
    }


def measure_send(repeats: int = 20, period_s: float = 2.0) -> dict[str, Any]:
    """CPU time of one periodic send's work in this process (without the RPC itself:
    one ``actor.put.remote`` of the bytes, which Ray does off the thread)."""
    pytest_ray = sys.modules.get("ray")
    if pytest_ray is None:
        try:
            import ray  # noqa: F401 - job._payload asks Ray for the node
        except ImportError:
            return {}
    import ray

    from gyreprof.integrations._auto import state as st
    from gyreprof.integrations.ray import job

    if not ray.is_initialized():
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    t = st.new_thread()
    env = rec.SAMPLER_PHASES.index("env_step")
    for _ in range(STEPS):
        t.sampler.begin()
        t.sampler.record(env, 50_000)
    t.sampler.end()
    cpu = []
    for _ in range(repeats):
        c0 = time.process_time()
        payload, _ = job._payload(False)
        cpu.append(time.process_time() - c0)
        assert payload is not None
    per = statistics.median(cpu)
    return {"send_cpu_ms": per * 1e3, "share_of_core": per / period_s}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="*", default=[64, 256, 1024])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-send", action="store_true", help="skip the send (needs Ray)")
    args = ap.parse_args(argv)
    rows = [measure(n) for n in args.workers]
    send = {} if args.no_send else measure_send()
    if args.json:
        print(json.dumps({"merge": rows, "send": send}, indent=2))
        return 0
    print("workers  write     collect+report  total     CPU       bytes/worker")
    for r in rows:
        print(
            f"{r['workers']:>7}  {r['write_s']:.3f} s  {r['collect_s']:.3f} s         "
            f"{r['merge_s']:.3f} s  {r['merge_cpu_s']:.3f} s  {r['bytes_per_worker']}"
        )
    if send:
        print(
            f"one periodic send: {send['send_cpu_ms']:.2f} ms of CPU, "
            f"{send['share_of_core']:.3%} of a core at one send per 2 s"
        )
    return 0


def test_merge_16_workers() -> None:
    """Quick mode: the path works (the figures are the script's)."""
    r = measure(16, repeats=1)
    assert r["merge_s"] > 0


if __name__ == "__main__":
    sys.exit(main())
