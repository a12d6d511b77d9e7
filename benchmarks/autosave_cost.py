"""Cost of one autosave at the largest configuration: 255 phases, 4096 rolling windows.

    PYTHONPATH=src python benchmarks/autosave_cost.py [--suffix .snap|.json] [--repeat 5]

Prints the best and median wall time of ``save_autosave()`` and, in a second
pass under tracemalloc, the peak Python-traced allocation, plus the growth of
the process's peak RSS. The stats block of this configuration is ~121 MB;
the save reads it in place (see gyreprof.recording._autosave), so the extra memory is a
few MB, not a copy of the block. Before the in-place encoder (a full
snapshot copy and its rolling windows as JSON) the same save took ~17-28 s
and ~230 MB.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import gyreprof as gp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suffix", default=".snap", choices=[".snap", ".json"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / f"run{args.suffix}"
        prof = gp.Profiler(
            [f"p{i}" for i in range(255)], max_windows=4096, window_steps=1, autosave=str(out)
        )
        lap = prof.lap
        for _ in range(5000):  # every window closed, 15 phases of 255 touched
            prof.begin()
            for i in range(0, 255, 17):
                lap(i)
        prof.end()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            prof.save_autosave()
            times.append(time.perf_counter() - t0)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        prof.save_autosave()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        block_mb = 8 * prof.recorder.config()["offsets"]["words"] / 1e6
        print(
            f"autosave {args.suffix}: stats block {block_mb:.0f} MB; save best "
            f"{min(times) * 1e3:.1f} ms, median {statistics.median(times) * 1e3:.1f} ms; "
            f"traced peak {peak / 1e6:.1f} MB; peak RSS growth {(rss1 - rss0) / 1024:.1f} MB; "
            f"file {out.stat().st_size / 1e3:.1f} KB"
        )


if __name__ == "__main__":
    main()
