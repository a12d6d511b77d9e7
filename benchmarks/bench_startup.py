"""What starting under ``gyreprof run`` costs, side by side with the bare command and py-spy.

Runnable comparison (each round runs every case once, in turn; medians over rounds)::

    python benchmarks/bench_startup.py --rounds 7
    python benchmarks/bench_startup.py --rounds 7 --steps 20000 --no-py-spy

Cases, each the CPU time (user + system) of the whole process tree, read from
``os.wait4`` on the command's process (the launcher or py-spy, with every child it
waited for):

- ``pass``: ``python -c pass``;
- ``run pass``: ``gyreprof run -- python -c pass`` (the launcher's start, the child's
  bootstrap, the report at the end);
- ``cartpole``: a 20,000-step CartPole script (gymnasium, random actions), bare;
- ``run cartpole``: the same under ``gyreprof run``;
- ``py-spy cartpole``: the same under ``py-spy record --rate 100`` (skipped, with a note,
  where py-spy is missing or cannot attach).

It also counts the modules a child has imported when the user's code starts
(``sys.modules`` at the script's first line), bare and under ``gyreprof run``, and the
modules the launcher has imported when it starts the command. Ratios are against the
bare case of the same run. gyreprof's modules are byte-compiled first, as installed.
``test_startup_quick`` runs every case once, small, so the
script keeps working under ``--benchmark-disable``; the timing claim lives in
BENCHMARKS.md, not in an assert.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CARTPOLE = """\
import sys
import gymnasium as gym

env = gym.make("CartPole-v1")
env.reset(seed=0)
env.action_space.seed(0)
for _ in range(int(sys.argv[1])):
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    if terminated or truncated:
        env.reset()
"""

MODULES = """\
import sys
found = sorted(sys.modules)
import json, os
with open(os.environ["BENCH_MODULES_OUT"], "w") as f:
    json.dump(found, f)
"""

# the launcher's modules when it starts the command (subprocess.Popen's first call)
LAUNCHER_MODULES = """\
import json, os, subprocess, sys
_init = subprocess.Popen.__init__
def _at_start(self, *a, **k):
    subprocess.Popen.__init__ = _init
    with open(os.environ["BENCH_MODULES_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)
    return _init(self, *a, **k)
subprocess.Popen.__init__ = _at_start
from gyreprof.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    import gyreprof

    # the gyreprof this process imported (src/ in a checkout, site-packages when installed)
    src = str(Path(gyreprof.__file__).resolve().parent.parent)
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def cpu_of(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of ``argv`` and every process it waited for."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{argv} exited {p.returncode}:\n{err.decode(errors='replace')}")
    return ru.ru_utime + ru.ru_stime


def py_spy() -> str | None:
    """py-spy's path when it can record a child here, else None."""
    exe = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "x.txt")
        argv = [exe, "record", "--rate", "100", "-f", "raw", "-o", out, "--"]
        argv += [sys.executable, "-c", "import time; time.sleep(0.1)"]
        try:
            r = subprocess.run(argv, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return exe if r.returncode == 0 else None


def cases(steps: int, script: Path, spy: str | None) -> dict[str, list[str]]:
    py = sys.executable
    run = [py, "-m", "gyreprof", "run", "--"]
    out = {
        "pass": [py, "-c", "pass"],
        "run pass": [*run, py, "-c", "pass"],
    }
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        return out
    cart = [py, str(script), str(steps)]
    out["cartpole"] = cart
    out["run cartpole"] = [*run, *cart]
    if spy is not None:
        out["py-spy cartpole"] = [spy, "record", "--rate", "100", "-f", "raw", "-o"]
        out["py-spy cartpole"] += [str(script.with_suffix(".spy")), "--", *cart]
    return out


def modules(folder: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """The modules imported when the user's code starts (bare, under ``gyreprof run``),
    and those of the launcher when it starts the command."""
    probe = folder / "modules.py"
    probe.write_text(MODULES)
    launcher = folder / "launcher.py"
    launcher.write_text(LAUNCHER_MODULES)
    py = sys.executable
    found = {}
    for name, argv in (
        ("bare child", [py, str(probe)]),
        ("run child", [py, "-m", "gyreprof", "run", "--", py, str(probe)]),
        ("launcher", [py, str(launcher), "run", "--", py, "-c", "pass"]),
    ):
        out = folder / f"{name.replace(' ', '-')}.json"
        subprocess.run(
            argv, env={**env, "BENCH_MODULES_OUT": str(out)}, check=True, capture_output=True
        )
        found[name] = json.loads(out.read_text())
    found["bare launcher"] = found["bare child"]
    return found


def _compiled() -> None:
    """Byte-compile gyreprof's modules, as an installed package has them (a checkout run
    with ``PYTHONDONTWRITEBYTECODE`` would compile them again in every process)."""
    import compileall

    import gyreprof

    compileall.compile_dir(str(Path(gyreprof.__file__).resolve().parent), quiet=1)


def measure(rounds: int, steps: int, use_py_spy: bool = True) -> dict[str, object]:
    env = _env()
    _compiled()
    spy = py_spy() if use_py_spy else None
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        script = folder / "cartpole.py"
        script.write_text(CARTPOLE)
        todo = cases(steps, script, spy)
        cpu: dict[str, list[float]] = {name: [] for name in todo}
        for _ in range(rounds):
            for name, argv in todo.items():
                cpu[name].append(cpu_of(argv, env))
        mods = modules(folder, env)
    notes = []
    if use_py_spy and spy is None and "cartpole" in cpu:
        notes.append("py-spy is missing or cannot record a child here: its row is left out")
    if "cartpole" not in cpu:
        notes.append("gymnasium is not installed: the CartPole rows are left out")
    return {"cpu": cpu, "modules": mods, "notes": notes, "rounds": rounds, "steps": steps}


def report(res: dict[str, object]) -> str:
    cpu: dict[str, list[float]] = res["cpu"]  # type: ignore[assignment]
    mods: dict[str, list[str]] = res["modules"]  # type: ignore[assignment]
    med = {name: statistics.median(v) for name, v in cpu.items()}
    lines = [
        f"CPU time (user + sys of the process tree), median of {res['rounds']} rounds; "
        f"CartPole: {res['steps']} random steps",
        f"{'case':<18} {'CPU s':>8} {'vs bare':>8} {'extra s':>8}",
    ]
    for name, value in med.items():
        bare = med["pass"] if name.endswith("pass") else med["cartpole"]
        lines.append(f"{name:<18} {value:8.3f} {value / bare:7.2f}x {value - bare:+8.3f}")
    bare_child = set(mods["bare child"])
    added = sorted(set(mods["run child"]) - bare_child)
    launcher = sorted(set(mods["launcher"]) - bare_child)
    lines.append(
        f"modules at the user's first line: bare {len(bare_child)}, under gyreprof run "
        f"{len(mods['run child'])} (+{len(added)}): {' '.join(added)}"
    )
    lines.append(
        f"modules of the launcher when it starts the command: {len(mods['launcher'])} "
        f"(+{len(launcher)} over a bare interpreter)"
    )
    lines += [f"note: {n}" for n in res["notes"]]  # type: ignore[attr-defined]
    return "\n".join(lines)


def test_startup_quick() -> None:
    """Every case runs to the end (quick mode: no timing claim)."""
    res = measure(1, 200, use_py_spy=True)
    cpu: dict[str, list[float]] = res["cpu"]  # type: ignore[assignment]
    assert all(v > 0 for values in cpu.values() for v in values)
    mods: dict[str, list[str]] = res["modules"]  # type: ignore[assignment]
    assert "gyreprof.integrations._auto.bootstrap" in mods["run child"]
    assert "gyreprof" not in mods["bare child"]
    assert "subprocess" in mods["launcher"]
    assert report(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20_000, help="CartPole steps")
    ap.add_argument("--no-py-spy", action="store_true", help="leave the py-spy row out")
    args = ap.parse_args()
    print(report(measure(args.rounds, args.steps, not args.no_py_spy)))


if __name__ == "__main__":
    main()
