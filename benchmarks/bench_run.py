"""``gyreprof run`` against the bare script: SB3 PPO on CartPole (4 envs, DummyVecEnv), a
CleanRL-style PPO loop (SyncVectorEnv of 4 CartPoles, torch MLP, Adam) or a bare
CartPole ``env.step`` loop.

Runnable comparison (interleaved: bare, instrumented, instrumented, bare, ...)::

    python benchmarks/bench_run.py --rounds 7 --timesteps 4096
    python benchmarks/bench_run.py --case cleanrl --rounds 7 --timesteps 40
    python benchmarks/bench_run.py --case cartpole --rounds 7 --timesteps 200000

(``--timesteps``: SB3 timesteps, CleanRL iterations of 4 x 32 steps, or CartPole steps.)

Per run it records the wall time and the CPU time (user + system, the command
and all its processes) of the whole command -- interpreter start, imports,
training and, for ``gyreprof run``, the report at the end -- and the wall and
CPU time inside ``model.learn``, which is what the patched methods cost while
training. Each round runs the pair back to back (alternating which goes first)
and the report gives the median of the per-round ratios. Torch runs with one
thread (``OMP_NUM_THREADS=1``) in both, so the two do not fight over cores.
On a machine shared with other work the CPU-time ratios are the ones to trust;
wall time moves with everyone else's load.

``--instructions`` counts instead (callgrind, one run per mode and hash seed, ``--seeds``):
the instructions inside the script's loop (each script runs it under one
``itertools.starmap`` call, the marker callgrind names), bare and under ``gyreprof run``
(the launcher outside valgrind, the script's process inside it); the loop's added
instructions are the overhead no load on the machine can move::

    python benchmarks/bench_run.py --instructions --case cleanrl --timesteps 10
    python benchmarks/bench_run.py --instructions --case trl --timesteps 4   # TRL GRPO steps

The tests run ``test_run_overhead_quick`` once, small, so this keeps working;
the timing claim lives in BENCHMARKS.md, not in an assert.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "helpers" / "run_scripts"
SCRIPT = SCRIPTS / "sb3_ppo.py"
sys.path.insert(0, str(ROOT / "benchmarks"))  # _callgrind, run as a script or by pytest
KEYS = ("wall", "cpu", "learn_wall", "learn_cpu")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    import gyreprof

    # the gyreprof this process imported (src/ in a checkout, site-packages when installed)
    src = str(Path(gyreprof.__file__).resolve().parent.parent)
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    return env


def _printed(stdout: str, key: str) -> float:
    for line in stdout.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[1])
    raise RuntimeError(f"the script printed no {key}:\n{stdout}")


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _args(case: str, vec: str, timesteps: int) -> list[str]:
    if case == "cleanrl":
        return [str(SCRIPTS / "signals_cleanrl.py"), "sync", "env", str(timesteps), "0"]
    if case == "cartpole":
        return [str(SCRIPTS / "bare_cartpole.py"), str(timesteps)]
    if case == "trl":  # --instructions only (the script prints no LEARN_S)
        return [str(ROOT / "tests" / "stacks" / "trl_grpo.py"), "gen", str(timesteps)]
    return [str(SCRIPT), vec, "none", str(timesteps), "0", "128"]


def run_once(instrumented: bool, vec: str, timesteps: int, case: str = "sb3") -> dict[str, float]:
    """Wall and CPU seconds of the whole command and of its loop (``model.learn``)."""
    args = _args(case, vec, timesteps)
    if instrumented:
        cmd = [sys.executable, "-m", "gyreprof", "run", "--", *args]
    else:
        cmd = [sys.executable, *args]
    c0, t0 = _children_cpu_s(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=1800)
    wall, cpu = time.perf_counter() - t0, _children_cpu_s() - c0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {
        "wall": wall,
        "cpu": cpu,
        "learn_wall": _printed(proc.stdout, "LEARN_S"),
        "learn_cpu": _printed(proc.stdout, "LEARN_CPU_S"),
    }


def compare(
    rounds: int, vec: str, timesteps: int, case: str = "sb3"
) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {"bare": [], "run": []}
    for i in range(rounds):
        # alternate which goes first, so drift in the machine's load hits both alike
        order = (False, True) if i % 2 == 0 else (True, False)
        for instrumented in order:
            out["run" if instrumented else "bare"].append(
                run_once(instrumented, vec, timesteps, case)
            )
        b, r = out["bare"][-1], out["run"][-1]
        print(
            f"round {i + 1}/{rounds}: "
            + ", ".join(f"{k} {b[k]:.2f} -> {r[k]:.2f} s" for k in KEYS),
            flush=True,
        )
    return out


def count_once(instrumented: bool, vec: str, timesteps: int, case: str, seed: int) -> float:
    """Instructions inside the script's loop (callgrind's inclusive count of its
    ``starmap_next`` marker)."""
    import tempfile

    from _callgrind import VALGRIND, inclusive

    with tempfile.TemporaryDirectory() as d:
        cg = f"{d}/cg.out"
        cmd = [*VALGRIND, f"--callgrind-out-file={cg}", sys.executable]
        cmd += _args(case, vec, timesteps)
        if instrumented:
            cmd = [sys.executable, "-m", "gyreprof", "run", "--startup-timeout", "0", "--", *cmd]
        env = {**_env(), "PYTHONHASHSEED": str(seed)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return float(inclusive(cg, ["starmap_next"], " ".join(cmd))["starmap_next"])


def count(seeds: int, vec: str, timesteps: int, case: str) -> str:
    added = []
    bare = []
    for seed in range(seeds):
        b = count_once(False, vec, timesteps, case, seed)
        r = count_once(True, vec, timesteps, case, seed)
        print(f"seed {seed}: bare {b:.4g}, gyreprof run {r:.4g} ({r / b - 1:+.2%})", flush=True)
        bare.append(b)
        added.append(r / b - 1)
    return (
        f"{case}, {timesteps} timesteps: loop instructions bare {statistics.median(bare):.4g},"
        f" under gyreprof run {statistics.median(added):+.2%} (median of {seeds} seed(s);"
        f" {min(added):+.2%} .. {max(added):+.2%})"
    )


def report(res: dict[str, list[dict[str, float]]]) -> str:
    lines = []
    for k in KEYS:
        bare = [x[k] for x in res["bare"]]
        run = [x[k] for x in res["run"]]
        ratio = statistics.median(r / b for r, b in zip(run, bare, strict=True))
        best = min(run) / min(bare)  # the least disturbed run of each
        lines.append(
            f"{k:10s}: bare median {statistics.median(bare):.2f} s (min {min(bare):.2f}), "
            f"gyreprof run median {statistics.median(run):.2f} s (min {min(run):.2f}); "
            f"median per-round ratio {ratio:.3f} ({ratio - 1:+.1%}), min/min {best - 1:+.1%}"
        )
    return "\n".join(lines)


@pytest.mark.slow
def test_run_overhead_quick() -> None:
    """Both forms run to the end (quick mode: no timing claim)."""
    pytest.importorskip("stable_baselines3")
    res = compare(1, "dummy", 512)
    assert all(v > 0 for side in res.values() for x in side for v in x.values())


@pytest.mark.slow
@pytest.mark.parametrize("case", ["cleanrl", "cartpole"])
def test_run_overhead_quick_other_loops(case: str) -> None:
    """The CleanRL-style and bare CartPole cases run to the end (no timing claim)."""
    pytest.importorskip("torch")
    res = compare(1, "dummy", 2 if case == "cleanrl" else 2000, case)
    assert all(v > 0 for side in res.values() for x in side for v in x.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--timesteps", type=int, default=4096)
    ap.add_argument("--vec", choices=("dummy", "subproc"), default="dummy")
    ap.add_argument("--case", choices=("sb3", "cleanrl", "cartpole", "trl"), default="sb3")
    ap.add_argument("--instructions", action="store_true", help="callgrind counts of the loop")
    ap.add_argument("--seeds", type=int, default=1, help="with --instructions: hash seeds")
    args = ap.parse_args()
    if args.case == "trl" and not args.instructions:
        ap.error("--case trl is counted only (--instructions): its script times no loop")
    if args.instructions:
        print(count(args.seeds, args.vec, args.timesteps, args.case))
        return
    res = compare(args.rounds, args.vec, args.timesteps, args.case)
    print(report(res))


if __name__ == "__main__":
    main()
