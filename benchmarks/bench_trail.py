"""What the start-up trail costs: an SB3 script's start-up with and without it.

The script imports stable_baselines3 and constructs ``PPO('MlpPolicy', 'CartPole-v1')``
(no step: the trail's tracing stays on for all of it, the worst case). Each variant runs
in a fresh interpreter, alternating, ``--repeat`` times; the medians and their ratio are
printed. "without" runs the same bootstrap as ``gyreprof run`` with the trail left out;
"with" runs it with the trail. Target: at most +5%.

    python benchmarks/bench_trail.py [--repeat 7]
    pytest benchmarks/bench_trail.py   # a quick sanity run (2 each, loose bound)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = """
import time
t0 = time.perf_counter()
import os, sys
if os.environ.get("BENCH_TRAIL") == "1":
    from pathlib import Path
    from gyreprof.integrations._auto import trail
    trail.start(Path(os.environ["BENCH_DIR"]))
import stable_baselines3
from stable_baselines3 import PPO
PPO("MlpPolicy", "CartPole-v1", device="cpu")
print(time.perf_counter() - t0)
"""


def one(with_trail: bool) -> float:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, BENCH_TRAIL="1" if with_trail else "0", BENCH_DIR=d)
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
        )
    return float(out.stdout.strip().splitlines()[-1])


def measure(repeat: int) -> tuple[list[float], list[float]]:
    without: list[float] = []
    with_: list[float] = []
    one(False)  # warm the file cache
    for _ in range(repeat):
        without.append(one(False))
        with_.append(one(True))
    return without, with_


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    t = time.monotonic()
    without, with_ = measure(args.repeat)
    a, b = statistics.median(without), statistics.median(with_)
    print(f"without trail: median {a:.3f} s  {sorted(round(x, 3) for x in without)}")
    print(f"with trail:    median {b:.3f} s  {sorted(round(x, 3) for x in with_)}")
    print(f"ratio with/without: {b / a:.3f} ({(b / a - 1) * 100:+.1f}%; target <= +5%)")
    print(f"({time.monotonic() - t:.0f} s in all)")


def test_trail_startup_sanity() -> None:
    import pytest

    pytest.importorskip("stable_baselines3")
    without, with_ = measure(2)
    ratio = min(with_) / min(without)
    assert ratio < 2.0, (without, with_)


if __name__ == "__main__":
    main()
