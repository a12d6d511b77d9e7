"""Fleet collection cost: snapshot size per actor, decode + merge time for 64 actors.

Targets (issue "Scale out on Ray"): snapshot bytes < 20 KB for 8 phases at 3
significant figures; merging 64 actors' snapshots < 50 ms. The merge part is
simulated in-process (64 Profilers filled with lognormal durations); ``--ray N``
also times a real ``collect()`` from N actors on a local Ray cluster.

    python benchmarks/bench_ray.py                 # table
    python benchmarks/bench_ray.py --json
    python benchmarks/bench_ray.py --ray 4         # plus a real collect() round trip
    python -m pytest benchmarks/bench_ray.py --benchmark-enable --benchmark-only

The simulated part needs no Ray (the actor identity is added when Ray is installed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np

import gyreprof as gp
from gyreprof.model.snapshot import Snapshot

PHASES = ["env", "obs", "policy", "sample", "xfer", "queue", "reward", "reset"]

# (name, lognormal sigma, steps): how spread the per-phase durations are
SCENARIOS = {
    "steady": (0.25, 5_000),  # a steady sampler: durations within ~2x of the median
    "typical": (0.5, 5_000),
    "wide": (1.0, 20_000),  # heavy tails, many distinct buckets: a worst case for size
}


def filled_profiler(seed: int, sigma: float, steps: int) -> gp.Profiler:
    """A Profiler holding ``steps`` steps of 8 phases, medians 5 us .. 640 us."""
    rng = np.random.default_rng(seed)
    prof = gp.Profiler(PHASES, significant_figures=3)
    medians = 5_000.0 * 2.0 ** np.arange(len(PHASES))
    values = (rng.lognormal(0.0, sigma, size=(steps, len(PHASES))) * medians).astype(np.int64)
    record, begin = prof.record, prof.begin
    rows = values.tolist()
    for row in rows:
        begin()
        for pid, v in enumerate(row):
            record(pid, v)
    prof.end()
    return prof


def _to_bytes(prof: gp.Profiler, windows: bool = False) -> bytes:
    """The bytes an actor sends: with its Ray identity when Ray is installed."""
    try:
        from gyreprof.integrations.ray import snapshot_bytes
    except ImportError:
        return prof.snapshot().to_bytes(windows=windows)
    return snapshot_bytes(prof, windows=windows)


def _timed(fn: Any, repeats: int) -> tuple[float, float]:
    """(median, min) seconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def measure(actors: int = 64, scenario: str = "typical", repeats: int = 7) -> dict[str, Any]:
    """Sizes and merge times for ``actors`` simulated actors of one scenario."""
    sigma, steps = SCENARIOS[scenario]
    # Fill 8 distinct profilers and reuse their bytes: decode/merge cost depends on the
    # bytes, not on which process made them, and filling 64 would dominate the run.
    profs = [filled_profiler(seed, sigma, steps) for seed in range(min(actors, 8))]
    blobs = [_to_bytes(p) for p in profs]
    blobs_w = [_to_bytes(p, windows=True) for p in profs]
    data = [blobs[i % len(blobs)] for i in range(actors)]
    snaps = [Snapshot.from_bytes(b) for b in data]

    def decode_merge() -> Any:
        return gp.merge([Snapshot.from_bytes(b) for b in data]).summary()

    merge_med, merge_min = _timed(lambda: gp.merge(snaps), repeats)
    merge_sum_med, merge_sum_min = _timed(lambda: gp.merge(snaps).summary(), repeats)
    full_med, full_min = _timed(decode_merge, repeats)
    merged = gp.merge(snaps).summary()
    assert merged.phases["env"].count == actors * steps
    return {
        "scenario": scenario,
        "sigma": sigma,
        "steps_per_actor": steps,
        "actors": actors,
        "phases": len(PHASES),
        "significant_figures": 3,
        "snapshot_bytes": {
            "min": min(len(b) for b in blobs),
            "median": int(statistics.median(len(b) for b in blobs)),
            "max": max(len(b) for b in blobs),
        },
        "snapshot_bytes_with_windows_median": int(statistics.median(len(b) for b in blobs_w)),
        "merge_ms": {"median": merge_med * 1e3, "min": merge_min * 1e3},
        "merge_summary_ms": {"median": merge_sum_med * 1e3, "min": merge_sum_min * 1e3},
        "decode_merge_summary_ms": {"median": full_med * 1e3, "min": full_min * 1e3},
    }


def measure_ray(actors: int, rounds: int = 10) -> dict[str, Any]:
    """Round-trip time of ``collect()`` from ``actors`` real actors on a local cluster."""
    import ray

    from gyreprof.integrations import ray as gpray

    @gpray.profiled_remote(num_cpus=0)
    class Bench(gpray.ProfiledActor):
        def __init__(self, seed: int) -> None:
            self.gyreprof_profiler = filled_profiler(seed, *SCENARIOS["typical"])

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        handles = [Bench.remote(i) for i in range(actors)]  # type: ignore[attr-defined]
        first = gpray.collect(handles, timeout_s=120)  # also waits for start-up
        if first.answered != actors:
            raise RuntimeError(f"only {first.answered} of {actors} actors answered: {first}")
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            gpray.collect(handles, timeout_s=30)
            times.append(time.perf_counter() - t0)
        return {
            "ray": ray.__version__,
            "actors": actors,
            "collect_ms": {"median": statistics.median(times) * 1e3, "min": min(times) * 1e3},
        }
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--actors", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--ray", type=int, default=0, metavar="N", help="also collect from N actors")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    results = [measure(args.actors, name, args.repeats) for name in SCENARIOS]
    ray_result = measure_ray(args.ray) if args.ray > 0 else None
    if args.json:
        print(json.dumps({"simulated": results, "ray": ray_result}, indent=2))
        return 0
    print(f"{args.actors} simulated actors, {len(PHASES)} phases, 3 significant figures")
    print(
        f"{'scenario':<9} {'steps':>6} {'snapshot B (med/max)':>21} {'+windows':>9} "
        f"{'merge ms':>9} {'+summary':>9} {'decode+merge+summary':>21}"
    )
    for r in results:
        sb = r["snapshot_bytes"]
        print(
            f"{r['scenario']:<9} {r['steps_per_actor']:>6} {sb['median']:>10} / {sb['max']:<8} "
            f"{r['snapshot_bytes_with_windows_median']:>9} {r['merge_ms']['median']:>9.2f} "
            f"{r['merge_summary_ms']['median']:>9.2f} {r['decode_merge_summary_ms']['median']:>21.2f}"
        )
    print("targets: snapshot < 20000 B, merge of 64 < 50 ms (medians shown)")
    if ray_result:
        c = ray_result["collect_ms"]
        print(
            f"ray {ray_result['ray']}: collect() from {ray_result['actors']} actors: "
            f"median {c['median']:.1f} ms, min {c['min']:.1f} ms"
        )
    return 0


# ------------------------------------------------------------- pytest-benchmark

_CACHE: dict[str, Any] = {}


def _fleet(actors: int = 64) -> tuple[list[bytes], list[Snapshot]]:
    if "fleet" not in _CACHE:
        sigma, steps = SCENARIOS["typical"]
        blobs = [_to_bytes(filled_profiler(s, sigma, steps)) for s in range(8)]
        data = [blobs[i % 8] for i in range(actors)]
        _CACHE["fleet"] = (data, [Snapshot.from_bytes(b) for b in data])
    return _CACHE["fleet"]  # type: ignore[no-any-return]


def test_merge_64(benchmark: Any) -> None:
    _, snaps = _fleet()
    benchmark(lambda: gp.merge(snaps).summary())


def test_decode_merge_64(benchmark: Any) -> None:
    data, _ = _fleet()
    benchmark(lambda: gp.merge([Snapshot.from_bytes(b) for b in data]).summary())


def test_snapshot_bytes_8_phases(benchmark: Any) -> None:
    prof = filled_profiler(0, *SCENARIOS["typical"])
    blob = benchmark(lambda: _to_bytes(prof))
    benchmark.extra_info["snapshot_bytes"] = len(blob)


if __name__ == "__main__":
    sys.exit(main())
