"""The stack sampler's cost (issue 38): ``gyreprof run`` with its stack sampler (the
default rate, or ``--stacks-hz N``) against ``gyreprof run --no-stacks``, and py-spy at
100 Hz on the same command, on a bare CartPole loop (``tests/helpers/run_scripts/
bare_cartpole.py``), a CleanRL-style PPO loop (``signals_cleanrl.py``: a SyncVectorEnv of
4 CartPoles, torch MLP, Adam) or SB3 PPO (``sb3_ppo.py``: 4 envs in a DummyVecEnv).

Runnable comparison (interleaved: each round runs every mode once, in a rotating order)::

    python benchmarks/bench_stacks.py --rounds 7 --steps 200000
    python benchmarks/bench_stacks.py --rounds 7 --steps 200000 --hz 100 --no-py-spy
    python benchmarks/bench_stacks.py --case cleanrl --rounds 5 --steps 40
    python benchmarks/bench_stacks.py --case sb3 --rounds 5 --steps 4096

(``--steps``: CartPole steps, CleanRL iterations of 4 x 32 steps, or SB3 timesteps.)

Per run it records the CPU time (user + system) of the whole process tree -- the
launcher, the script and, for py-spy, py-spy itself -- and the CPU time inside the
script's loop (``LEARN_CPU_S``, which the sampler thread's time counts in: it runs in
the script's process). The report gives, per mode, the median over rounds of the ratio
to ``--no-stacks`` in the same round. On a machine shared with other work the CPU-time
ratios are the ones to trust; wall time moves with everyone else's load.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "helpers" / "run_scripts"
CASES = ("cartpole", "cleanrl", "sb3")
#: each case's name in the report
NAMES = {"cartpole": "bare CartPole", "cleanrl": "CleanRL-style PPO", "sb3": "SB3 PPO"}


def _script(case: str, steps: int) -> list[str]:
    if case == "cleanrl":
        return [str(SCRIPTS / "signals_cleanrl.py"), "sync", "env", str(steps), "0"]
    if case == "sb3":
        return [str(SCRIPTS / "sb3_ppo.py"), "dummy", "none", str(steps), "0", "128"]
    return [str(SCRIPTS / "bare_cartpole.py"), str(steps)]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env["OMP_NUM_THREADS"] = "1"  # torch's threads would fight over the cores
    return env


def _tree_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _command(
    mode: str, steps: int, hz: float | None, py_spy: str | None, case: str = "cartpole"
) -> list[str]:
    run = [sys.executable, "-m", "gyreprof", "run"]
    script = ["--", sys.executable, *_script(case, steps)]
    if mode == "no-stacks":
        return [*run, "--no-stacks", *script]
    if mode == "stacks":
        rate = ["--stacks-hz", f"{hz:g}"] if hz else []
        return [*run, *rate, *script]
    if mode == "py-spy" and py_spy is not None:
        spy = [py_spy, "record", "-r", "100", "--subprocesses", "-f", "raw", "-o", os.devnull]
        return [*spy, "--", *run, "--no-stacks", *script]
    raise ValueError(f"unknown mode {mode!r}")


def one(
    mode: str, steps: int, hz: float | None, py_spy: str | None, case: str = "cartpole"
) -> dict[str, float]:
    """One run: the tree's CPU seconds, the loop's CPU seconds and the wall seconds."""
    before, t0 = _tree_cpu(), time.perf_counter()
    proc = subprocess.run(
        _command(mode, steps, hz, py_spy, case),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
        check=False,
    )
    wall, cpu = time.perf_counter() - t0, _tree_cpu() - before
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    learn = next(
        float(line.split()[1])
        for line in proc.stdout.splitlines()
        if line.startswith("LEARN_CPU_S")
    )
    return {"cpu": cpu, "learn_cpu": learn, "wall": wall}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=CASES, default="cartpole")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=200_000)
    p.add_argument("--hz", type=float, default=None, help="--stacks-hz (default: the default)")
    p.add_argument("--no-py-spy", action="store_true", help="leave py-spy out")
    a = p.parse_args(argv)
    py_spy = None if a.no_py_spy else shutil.which("py-spy") or _beside_python("py-spy")
    modes = ["no-stacks", "stacks"] + (["py-spy"] if py_spy else [])
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for r in range(a.rounds):
        order = modes[r % len(modes) :] + modes[: r % len(modes)]
        for m in order:
            runs[m].append(one(m, a.steps, a.hz, py_spy, a.case))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    base = runs["no-stacks"]
    print(
        f"{NAMES[a.case]}, {a.steps} steps, {a.rounds} rounds, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'mode':<10} {'tree CPU s':>11} {'loop CPU s':>11} {'tree CPU':>9} {'loop CPU':>9}")
    for m in modes:
        cpu = statistics.median(x["cpu"] for x in runs[m])
        learn = statistics.median(x["learn_cpu"] for x in runs[m])
        rt = statistics.median(x["cpu"] / b["cpu"] - 1 for x, b in zip(runs[m], base, strict=True))
        rl = statistics.median(
            x["learn_cpu"] / b["learn_cpu"] - 1 for x, b in zip(runs[m], base, strict=True)
        )
        print(f"{m:<10} {cpu:>11.3f} {learn:>11.3f} {rt:>+9.2%} {rl:>+9.2%}")
    return 0


def _beside_python(name: str) -> str | None:
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else None


if __name__ == "__main__":
    raise SystemExit(main())
