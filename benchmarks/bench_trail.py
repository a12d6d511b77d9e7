"""What the start-up trail costs: an SB3 script's start-up with and without it.

The script imports stable_baselines3 and constructs ``PPO('MlpPolicy', 'CartPole-v1')``
(no step: the trail's tracing stays on for all of it, the worst case). Each variant runs
in a fresh interpreter, alternating, ``--repeat`` times. "without" imports what
``gyreprof run``'s bootstrap imports before the trail (``integrations._auto.state``);
"with" also imports the trail and starts it, so the difference is all of the trail's
cost. Both the wall time and the CPU time of the start-up are printed (medians, and the
median of the paired with/without ratios; on a loaded machine the CPU time is the
steadier of the two). The trail traces with this Python's one tracer (the C trace
function on 3.10-3.11, ``sys.monitoring`` on 3.12+). ``--before SRC`` adds, in each round, a start-up with the
trail of another checkout (``--before /path/to/main/src``: the code before a change).
``--case predict`` adds 2000 ``model.predict(obs)`` calls after the construction, still
before any step: a start-up that runs much library code while traced (warm-up,
evaluation), where the trace function itself is what costs. Target: at most +5%.

    python benchmarks/bench_trail.py [--repeat 7] [--case ppo|predict] [--before SRC]
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

import pytest

SCRIPT = """
import time

import pytest
t0, c0 = time.perf_counter(), time.process_time()
import os, sys
from gyreprof.integrations._auto import state
if os.environ.get("BENCH_TRAIL") == "1":
    from pathlib import Path
    from gyreprof.integrations._auto import trail
    trail.start(Path(os.environ["BENCH_DIR"]))
import stable_baselines3
from stable_baselines3 import PPO
model = PPO("MlpPolicy", "CartPole-v1", device="cpu")
if os.environ.get("BENCH_CASE") == "predict":
    obs = model.get_env().reset()
    for _ in range(int(os.environ.get("BENCH_PREDICTS", "2000"))):
        model.predict(obs)
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def one(with_trail: bool, case: str = "ppo", src: str | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one start-up in a fresh interpreter (gyreprof from ``src``, a
    checkout's ``src`` folder, if given)."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(
            os.environ,
            BENCH_TRAIL="1" if with_trail else "0",
            BENCH_DIR=d,
            BENCH_CASE=case,
        )
        if src is not None:
            env["PYTHONPATH"] = src
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
        )
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


Run = tuple[float, float]  # (wall s, CPU s)


def measure(
    repeat: int, case: str = "ppo", before: str | None = None
) -> tuple[list[Run], dict[str, list[Run]]]:
    """``repeat`` rounds, each: one start-up without the trail, then one with it (and one
    with the trail of the checkout ``before`` names)."""
    without: list[Run] = []
    variants: list[tuple[str, str | None]] = [("the trail", None)]
    if before is not None:
        variants.append((f"the trail of {before}", before))
    with_: dict[str, list[Run]] = {name: [] for name, _ in variants}
    one(False, case=case)  # warm the file cache
    for _ in range(repeat):
        without.append(one(False, case=case))
        for name, src in variants:
            with_[name].append(one(True, case, src))
    return without, with_


def _line(name: str, a: list[float], b: list[float]) -> str:
    ma, mb = statistics.median(a), statistics.median(b)
    paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
    return (
        f"{name}: without median {ma:.3f} s, with {mb:.3f} s: {(mb / ma - 1) * 100:+.1f}%; "
        f"median of paired ratios {(paired - 1) * 100:+.1f}%"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--case", choices=("ppo", "predict"), default="ppo")
    ap.add_argument("--before", metavar="SRC", help="also run the trail of this src folder")
    args = ap.parse_args()
    t = time.monotonic()
    without, with_ = measure(args.repeat, args.case, args.before)
    for name, runs in with_.items():
        print(f"-- case {args.case}, {name}")
        for i, name in ((0, "wall"), (1, "CPU ")):
            a, b = [x[i] for x in without], [x[i] for x in runs]
            print(_line(name, a, b))
            print(f"      without {sorted(round(x, 3) for x in a)}")
            print(f"      with    {sorted(round(x, 3) for x in b)}")
    print(f"(target <= +5%; {time.monotonic() - t:.0f} s in all)")


@pytest.mark.slow
def test_trail_startup_sanity() -> None:
    pytest.importorskip("stable_baselines3")
    without, with_ = measure(2)
    ratio = min(x[1] for x in with_["the trail"]) / min(x[1] for x in without)
    assert ratio < 2.0, (without, with_)


if __name__ == "__main__":
    main()
