"""``gyreprof sweep -- COMMAND``: the sweep of an unmodified script, with real processes.

The brace list's parsing and the flag finder (``gyreprof.analysis.sweep.script``) are
checked directly; the sweep itself runs ``helpers/run_scripts/sweep_cartpole.py`` (a
CartPole ``SyncVectorEnv`` loop that never ends by itself) under the launcher, so every
run is stopped by the bound and its records are read after it.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import psutil
import pytest

from gyreprof.analysis.sweep import SweepResult
from gyreprof.analysis.sweep.script import (
    BraceSweepError,
    find_sweepable_flag,
    parse_brace_sweep,
    sweep_command,
    sweep_values_around,
)

TESTS = Path(__file__).resolve().parent
CARTPOLE = str(TESTS / "helpers" / "run_scripts" / "sweep_cartpole.py")
CLEANRL = str(TESTS / "helpers" / "run_scripts" / "signals_cleanrl.py")


# ----------------------------------------------------------------- the brace list


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["python", "t.py", "--num-envs", "4"], [], "no brace list to sweep"),
        (["python", "t.py", "--a", "{1,2}", "--b", "{3,4}"], [], "2 brace lists"),
        (["python", "t.py", "--a={1,2}"], ["N={1,2}"], "2 brace lists"),
        (["python", "t.py", "--a", "x{1,2}y{3,4}"], [], "2 brace lists"),
        (["python", "t.py", "--num-envs", "{}"], [], "is empty"),
        (["python", "t.py"], ["N={}"], "is empty"),
        (["python", "t.py", "--n", "{1,two}"], [], "'two' in the brace list"),
        (["python", "t.py", "--n", "{4,2}"], [], "must be ascending"),
        (["python", "t.py", "--n", "{2,2}"], [], "appears twice"),
        ([], [], "give the command to sweep after --"),
        (["python", "t.py", "--n", "{1,2}"], ["1BAD={3}"], "--env takes NAME=VALUE"),
    ],
)
def test_bad_brace_lists_are_refused_by_name(argv, env, words) -> None:
    with pytest.raises(BraceSweepError) as info:
        parse_brace_sweep(argv, env)
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


def test_a_shell_expanded_brace_list_gets_the_quoting_hint() -> None:
    """bash turns --num-envs {1,2,4} into --num-envs 1 2 4 (and --n={1,2} into --n=1
    --n=2) before gyreprof sees it: the error says to quote it."""
    for argv in (
        ["python", "t.py", "--num-envs", "1", "2", "4"],
        ["python", "t.py", "--num-envs=1", "--num-envs=2"],
    ):
        with pytest.raises(BraceSweepError, match="quote it"):
            parse_brace_sweep(argv)


def test_the_brace_list_is_replaced_in_place_and_names_its_setting() -> None:
    spec = parse_brace_sweep(["python", "t.py", "--lr", "1e-3", "--num-envs", "{1,2,4}"])
    assert spec.param == "--num-envs" and spec.values == (1, 2, 4)
    assert spec.command(2) == ["python", "t.py", "--lr", "1e-3", "--num-envs", "2"]
    joined = parse_brace_sweep(["python", "t.py", "--batch-size={32,64}", "--seed", "64"])
    assert joined.param == "--batch-size"
    assert joined.command(64) == ["python", "t.py", "--batch-size=64", "--seed", "64"]
    hydra = parse_brace_sweep(["python", "t.py", "env.n={1,2}"])
    assert hydra.param == "env.n" and hydra.command(1)[-1] == "env.n=1"
    # the values keep their spelling; a Python literal in -c code is not a brace list
    floats = parse_brace_sweep(["python", "-c", "d={'a': 1}", "--lr", "{1e-4,0.001}"])
    assert floats.values == (1e-4, 0.001) and floats.command(0.001)[-1] == "0.001"


def test_an_environment_variable_carries_the_sweep() -> None:
    spec = parse_brace_sweep(["python", "t.py"], ["OMP_NUM_THREADS={1,2}", "SEED=3"])
    assert spec.where == "env" and spec.param == "OMP_NUM_THREADS"
    assert spec.environment(2) == {"OMP_NUM_THREADS": "2", "SEED": "3"}
    assert spec.command(2) == ["python", "t.py"]


def test_cli_refuses_bad_brace_lists_and_mixed_options(cli) -> None:
    none = cli("sweep", "--", sys.executable, CARTPOLE, "--num-envs", "4")
    assert none.returncode == 2 and "no brace list to sweep" in none.stderr
    assert "Traceback" not in none.stderr
    two = cli("sweep", "--", sys.executable, CARTPOLE, "--num-envs", "{1,2}", "--x", "{3,4}")
    assert two.returncode == 2 and "exactly one setting" in two.stderr
    mixed = cli("sweep", "--param", "n", "--", sys.executable, CARTPOLE, "--num-envs", "{1,2}")
    assert mixed.returncode == 2 and "--param is for sweeping a factory" in mixed.stderr


# ----------------------------------------------------------------- real sweeps


def _sweep(cli, tmp_path: Path, *args: str, timeout: float = 120) -> SweepResult:
    out = tmp_path / "sweep.json"
    proc = cli("sweep", "--json", str(out), "--no-progress", *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    data = json.loads(out.read_text())
    assert data["format"] == "gyreprof.sweep/2" and data["settings"]["kind"] == "script"
    return SweepResult.from_dict(data)


@pytest.mark.slow
def test_a_real_script_sweep_runs_each_value_once_per_repeat(cli, tmp_path: Path) -> None:
    """Two values, two repeats: four runs under the launcher, each stopped at --max-s
    (the script never ends) with its records kept."""
    result = _sweep(
        cli, tmp_path, "--max-s", "2.5", "--repeats", "2", "--",
        sys.executable, CARTPOLE, "--num-envs", "{1,4}",
    )  # fmt: skip
    assert result.param == "--num-envs" and [p.value for p in result.points] == [1, 4]
    pids = set()
    for p in result.points:
        assert p.ok, p.error
        assert [r.repeat for r in p.runs] == [0, 1]
        for r in p.runs:
            pids.add(r.pid)
            assert r.samples_per_s > 0 and r.samples > 0
            assert (r.peak_rss_bytes or 0) > 0 and (r.tree_peak_bytes or 0) > 0
            assert r.verdict_bound is not None  # no trainer here: "unknown"
            assert r.stage.startswith("stopped at max_s (SIGINT")
            assert "env_step" in r.phases
        assert p.samples_per_s > 0 and (p.peak_tree_rss_bytes or 0) > 0
    assert len(pids) == 4
    # the per-vector-step cost is shared by the envs: 4 envs step clearly faster
    assert result.point(4).samples_per_s > 1.5 * result.point(1).samples_per_s
    assert result.recommended == 4
    report = result.report()
    assert "Recommended --num-envs=4" in report and "Verdict per value" in report
    assert "verdict" in result.table()


@pytest.mark.slow
def test_a_script_that_ignores_sigint_is_stopped_by_sigterm_and_its_data_kept(
    cli, tmp_path: Path
) -> None:
    result = _sweep(
        cli, tmp_path, "--max-s", "1.5", "--repeats", "1", "--",
        sys.executable, CARTPOLE, "--ignore-sigint", "--num-envs", "{2}",
    )  # fmt: skip
    (run,) = result.point(2).runs
    assert run.ok, run.error
    assert run.stage == "stopped at max_s (SIGINT, SIGTERM)"
    assert run.samples > 0 and run.samples_per_s > 0
    assert run.wall_s < 1.5 + 5.0 + 5.0 + 5.0
    assert any("did not stop within" in n for n in run.notes)
    assert run.pid is not None and not psutil.pid_exists(run.pid)  # nothing left behind


def test_vector_env_workers_count_in_samples_and_tree_memory(cli, tmp_path: Path) -> None:
    """An AsyncVectorEnv: the env steps happen in worker processes, the sampling time is
    the main process's send and wait, and the tree's peak RSS holds the workers."""
    result = _sweep(
        cli, tmp_path, "--max-s", "3", "--repeats", "1", "--",
        sys.executable, CARTPOLE, "--async", "--num-envs", "{2}",
    )  # fmt: skip
    (run,) = result.point(2).runs
    assert run.ok, run.error
    assert run.samples > 0 and {"step_async", "step_wait"} <= set(run.phases)
    assert "env_step" not in run.phases  # the workers' own steps overlap: not sampling time
    assert run.threads["child_processes"] >= 2
    assert (run.children_rss_bytes or 0) > 0
    assert (run.tree_peak_bytes or 0) > (run.peak_rss_bytes or 0)


def test_a_command_that_is_not_found_exits_2(cli) -> None:
    proc = cli("sweep", "--", "no-such-command-xyz", "--n", "{1,2}")
    assert proc.returncode == 2 and "nothing was run" in proc.stderr


@pytest.mark.slow
def test_a_torch_ppo_sweep_judges_each_value_and_stops_at_max_steps(cli, tmp_path: Path) -> None:
    """A CleanRL-style PPO loop with a torch trainer, bounded by trainer steps: each value's
    verdict has its side and the trainer's wait ratio."""
    result = _sweep(
        cli, tmp_path, "--max-steps", "3", "--max-s", "60", "--repeats", "1", "--",
        sys.executable, CLEANRL, "sync", "env", "100000", "{0.0005,0.002}",
        timeout=300,
    )  # fmt: skip
    for p in result.points:
        (run,) = p.runs
        assert run.ok, run.error
        assert run.stage.startswith("stopped at max_steps")
        assert run.verdict_bound in ("sampler", "trainer", "balanced")
        assert run.wait_ratio is not None and 0.0 <= run.wait_ratio <= 1.0
    # a slower env step: fewer samples per second of sampling
    assert result.point(0.002).samples_per_s < result.point(0.0005).samples_per_s


# ----------------------------------------------------------------- the flag finder


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["python", "ppo.py", "--num-envs", "4"],
            "gyreprof sweep -- python ppo.py --num-envs '{2,4,8,16}'",
        ),
        (
            ["python", "ppo.py", "--num-envs=4"],
            "gyreprof sweep -- python ppo.py '--num-envs={2,4,8,16}'",
        ),
        (
            ["python", "ppo.py", "--num_envs", "4"],
            "gyreprof sweep -- python ppo.py --num_envs '{2,4,8,16}'",
        ),
        (
            ["python", "ppo.py", "--n-envs", "1"],
            "gyreprof sweep -- python ppo.py --n-envs '{1,2,4,8}'",
        ),
        (
            ["python", "ppo.py", "--Batch-Size", "64"],
            "gyreprof sweep -- python ppo.py --Batch-Size '{32,64,128,256}'",
        ),
        # the value 4 appears before the flag too: only the flag's own value changes
        (
            ["python", "ppo.py", "--seed", "4", "--num-envs", "4", "--total", "4"],
            "gyreprof sweep -- python ppo.py --seed 4 --num-envs '{2,4,8,16}' --total 4",
        ),
        # a flag that only starts like one is not it; the real one comes later
        (
            ["python", "ppo.py", "--num-envs-extra", "3", "--num-envs", "8"],
            "gyreprof sweep -- python ppo.py --num-envs-extra 3 --num-envs '{4,8,16,32}'",
        ),
        # a value that is not a number is skipped; the next sweepable flag is used
        (
            ["python", "ppo.py", "--num-envs", "auto", "--batch-size", "32"],
            "gyreprof sweep -- python ppo.py --num-envs auto --batch-size '{16,32,64,128}'",
        ),
        # the launcher's own command line: the user's command is swept
        (
            ["gyreprof", "run", "--json", "r.json", "--", "python", "t.py", "--num-steps", "128"],
            "gyreprof sweep -- python t.py --num-steps '{64,128,256,512}'",
        ),
    ],
)
def test_sweep_command_sweeps_the_flag_around_its_value(argv, expected) -> None:
    assert sweep_command(argv) == expected
    # the command it gives parses back into the same sweep, with the original value in it
    words = shlex.split(expected)
    spec = parse_brace_sweep(words[words.index("--") + 1 :])
    found = find_sweepable_flag(argv)
    assert found is not None and found.value in spec.values


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "ppo.py", "--lr", "3e-4"],  # nothing sweepable
        ["python", "ppo.py", "--num-envs", "auto"],  # not a number
        ["python", "ppo.py", "--num-envs", "2.5"],  # not a whole number
        ["python", "ppo.py", "--num-envs", "0"],  # not positive
        ["python", "ppo.py", "--num-envs-extra", "4"],  # only starts like one
        ["python", "ppo.py", "--num-envs"],  # no value at all
        ["python", "ppo.py", "--", "--num-envs", "4"],  # after --: positional words
        [],
    ],
)
def test_no_sweepable_flag_gives_none(argv) -> None:
    assert find_sweepable_flag(argv) is None
    assert sweep_command(argv) is None


def test_sweep_command_keeps_environment_settings_and_values_around() -> None:
    got = sweep_command(["python", "t.py", "--num-envs", "3"], env={"OMP_NUM_THREADS": "1"})
    assert got == "gyreprof sweep --env OMP_NUM_THREADS=1 -- python t.py --num-envs '{1,3,6,12}'"
    assert sweep_values_around(4) == (2, 4, 8, 16)
    assert sweep_values_around(1) == (1, 2, 4, 8)
    with pytest.raises(ValueError):
        sweep_values_around(0)


def test_the_helper_imports_only_the_standard_library() -> None:
    """The verdict's advice calls it: its own imports are the standard library's, and
    the project's error classes (a module that imports nothing but ``__future__``)."""
    import ast

    import gyreprof._support.errors as errors
    import gyreprof.analysis.sweep.script as script

    def imported(path: str) -> set[str]:
        names = set()
        for node in ast.walk(ast.parse(Path(path).read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add(node.module or "")
        return names

    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    names = imported(script.__file__) - {"gyreprof._support.errors"}
    assert {n.split(".")[0] for n in names} <= stdlib, names
    assert imported(errors.__file__) <= stdlib
