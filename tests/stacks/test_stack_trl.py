"""TRL ``GRPOTrainer`` on a tiny randomly initialised local model under ``gyreprof run``,
against the script's own clocks (``trl_grpo.py``; nothing is downloaded): once with
long completions on a narrow model (generation dominates a step) and once with short
completions on a wider model, each generation reused for 4 optimizer steps (the
update dominates).

The first tests check the exit code, the ``generate`` phase (transformers' patch)
counted once per ``model.generate`` call the script counted, its time against the
script's clock around the same calls, and the main process listed. The
``*_universal`` tests check the trainer the universal signals find with no TRL patch
(the optimizer steps, the generation between them): the trainer's wait within 0.1 of
the script's share of generation in a step, the verdict both ways, one trainer step
per generation round with every optimizer step counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from stackhelp import HERE, OFFLINE, StackRun, need

from helpers.run_scripts.runhelp import gyreprof_run, printed

pytestmark = pytest.mark.slow

STEPS = 16


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    need("torch", "transformers", "trl", "datasets", "tokenizers")


@pytest.fixture(scope="module")
def gen_slow(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    return StackRun(tmp_path_factory.mktemp("trl_gen_slow"), "trl_grpo.py", "gen", str(STEPS))


@pytest.fixture(scope="module")
def update_slow(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    tmp = tmp_path_factory.mktemp("trl_update_slow")
    return StackRun(tmp, "trl_grpo.py", "update", str(STEPS))


def _check_generate(run: StackRun, calls: int) -> None:
    own = run.own
    assert run.data["exit_code"] == 0
    assert own["optimizer_steps"] == STEPS
    assert own["generate_calls"] == calls
    # TRL's own timer around its generate call agrees with the script's
    assert own["trl_timers"]["GRPOTrainer.transformers.generate"]["count"] == calls
    assert run.sampler_count("generate") == calls
    assert run.sampler_count("env_step") == 0
    timed = run.sampler_total_s("generate")
    # the script's clock wraps the same calls from just outside
    assert 0.8 * own["generate_s"] - 0.02 <= timed <= own["generate_s"] * 1.02, (timed, own)
    roles = run.roles()
    assert roles.get(own["pid"]) == "main", run.data["processes"]


def test_gen_slow_counts_each_generate_once(gen_slow: StackRun) -> None:
    _check_generate(gen_slow, STEPS)  # one generation batch per step


def test_update_slow_counts_each_generate_once(update_slow: StackRun) -> None:
    _check_generate(update_slow, STEPS // 4)  # num_iterations=4: one per 4 steps


def test_script_clocks_point_both_ways(gen_slow: StackRun, update_slow: StackRun) -> None:
    assert gen_slow.own["wait_ratio"] > 0.6
    assert update_slow.own["wait_ratio"] < 0.3
    for run in (gen_slow, update_slow):
        assert run.own["trl_step_times"] == STEPS  # TRL's own step_time metric, per step


def test_nested_generate_is_timed_once(tmp_path: Path) -> None:
    """A subclass's ``generate`` calling ``super().generate`` and an assistant model's
    ``generate``: only the outermost call is a ``generate``."""
    proc, data = gyreprof_run(
        tmp_path,
        sys.executable,
        str(HERE / "nested_generate.py"),
        env=OFFLINE,
        timeout=200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert data["sampler"]["phases"]["generate"]["count"] == printed(proc.stdout, "GENERATE_CALLS")


# ------------------------------------------------------------------ the universal signals


def test_gen_slow_wait_ratio_matches_its_clock_universal(gen_slow: StackRun) -> None:
    assert gen_slow.data["wait"] is not None
    assert abs(gen_slow.data["wait"]["ratio"] - gen_slow.own["wait_ratio"]) <= 0.1


def test_gen_slow_is_sampler_bound_universal(gen_slow: StackRun) -> None:
    assert gen_slow.data["verdict"]["bound"] == "sampler"


def test_update_slow_wait_ratio_matches_its_clock_universal(update_slow: StackRun) -> None:
    assert update_slow.data["wait"] is not None
    assert abs(update_slow.data["wait"]["ratio"] - update_slow.own["wait_ratio"]) <= 0.1


def test_update_slow_is_trainer_bound_universal(update_slow: StackRun) -> None:
    assert update_slow.data["verdict"]["bound"] == "trainer"


def test_trainer_steps_are_the_generation_rounds_universal(
    gen_slow: StackRun, update_slow: StackRun
) -> None:
    # a trainer step is one collect block (a generation round) and the update after it;
    # with several optimizer steps per round (update_slow: 4 per generation) the
    # optimizer steps are counted apart
    for run in (gen_slow, update_slow):
        trainer = run.data["trainer"]
        assert trainer is not None
        assert trainer["phases"]["compute"]["count"] == run.own["generate_calls"]
        assert trainer["counters"]["optim_steps"] == run.own["optimizer_steps"]
