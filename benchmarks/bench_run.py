"""``gyreprof run`` against the bare script: SB3 PPO on CartPole (4 envs, DummyVecEnv).

Runnable comparison (interleaved: bare, instrumented, bare, ...; medians and ratios)::

    python benchmarks/bench_run.py --rounds 7 --timesteps 20000

Two figures per round: the wall time of the whole command (interpreter start,
imports, training, and for ``gyreprof run`` the report at the end) and the time
inside ``model.learn`` (what the patched methods cost while training). The
tests run ``test_run_overhead_quick`` once, small, so this keeps working; the
timing claim lives in BENCHMARKS.md, not in an assert.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "run_scripts" / "sb3_ppo.py"


def _script_args(vec: str, timesteps: int) -> list[str]:
    return [str(SCRIPT), vec, "none", str(timesteps), "0", "128"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _learn_s(stdout: str) -> float:
    for line in stdout.splitlines():
        if line.startswith("LEARN_S "):
            return float(line.split()[1])
    raise RuntimeError(f"the script printed no LEARN_S:\n{stdout}")


def run_once(instrumented: bool, vec: str, timesteps: int) -> tuple[float, float]:
    """(wall seconds of the whole command, seconds inside model.learn)."""
    args = _script_args(vec, timesteps)
    if instrumented:
        cmd = [sys.executable, "-m", "gyreprof", "run", "--", *args]
    else:
        cmd = [sys.executable, *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=1800)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, _learn_s(proc.stdout)


def compare(rounds: int, vec: str, timesteps: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {
        "bare_wall": [],
        "run_wall": [],
        "bare_learn": [],
        "run_learn": [],
    }
    for i in range(rounds):
        # alternate which goes first, so drift in the machine's load hits both alike
        order = (False, True) if i % 2 == 0 else (True, False)
        for instrumented in order:
            wall, learn = run_once(instrumented, vec, timesteps)
            key = "run" if instrumented else "bare"
            out[f"{key}_wall"].append(wall)
            out[f"{key}_learn"].append(learn)
        print(
            f"round {i + 1}/{rounds}: bare {out['bare_wall'][-1]:.2f} s "
            f"(learn {out['bare_learn'][-1]:.2f}), gyreprof run {out['run_wall'][-1]:.2f} s "
            f"(learn {out['run_learn'][-1]:.2f})",
            flush=True,
        )
    return out


def report(res: dict[str, list[float]]) -> str:
    med = {k: statistics.median(v) for k, v in res.items()}
    # per-round ratios (each pair ran back to back), then their median
    wall_r = statistics.median(
        r / b for r, b in zip(res["run_wall"], res["bare_wall"], strict=True)
    )
    learn_r = statistics.median(
        r / b for r, b in zip(res["run_learn"], res["bare_learn"], strict=True)
    )
    return (
        f"whole command: bare median {med['bare_wall']:.2f} s, gyreprof run median "
        f"{med['run_wall']:.2f} s; median per-round ratio {wall_r:.3f} ({(wall_r - 1):+.1%})\n"
        f"inside learn(): bare median {med['bare_learn']:.2f} s, gyreprof run median "
        f"{med['run_learn']:.2f} s; median per-round ratio {learn_r:.3f} ({(learn_r - 1):+.1%})"
    )


@pytest.mark.slow
def test_run_overhead_quick() -> None:
    """Both forms run and take the same steps (quick mode: no timing claim)."""
    pytest.importorskip("stable_baselines3")
    res = compare(1, "dummy", 512)
    assert all(v > 0 for vals in res.values() for v in vals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--timesteps", type=int, default=20000)
    ap.add_argument("--vec", choices=("dummy", "subproc"), default="dummy")
    args = ap.parse_args()
    res = compare(args.rounds, args.vec, args.timesteps)
    print(report(res))


if __name__ == "__main__":
    main()
