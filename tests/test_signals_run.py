"""``gyreprof run`` on loops no framework patch knows: the trainer's wait/compute and the
loop's shape come from the training thread's timeline (optimizer steps, backward passes,
no-grad forwards, queue gets), checked against each script's own clock.

Each script times its rollouts (or data waits) and its updates with ``perf_counter`` and
prints them; the run's wait ratio must agree within 0.1. Each loop runs both ways: the
env (or producer) slowed, and the update slowed. The naive rules get these wrong: a
CleanRL loop had no trainer at all (no framework patch), a queue-fed trainer neither,
and one env step then one update in one thread reads as overlapped by a timestamp rule
that sees the sampler busy during a "compute" it cannot tell apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from helpers.run_scripts.runhelp import check_format, gyreprof_run, printed, script  # noqa: E402


def _clock(stdout: str) -> dict[str, Any]:
    for line in stdout.splitlines():
        if line.startswith("CLOCK "):
            out: dict[str, Any] = json.loads(line[len("CLOCK ") :])
            return out
    raise AssertionError(f"no CLOCK line; stdout was:\n{stdout}")


def _run(tmp: Path, name: str, *args: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    proc, data = gyreprof_run(tmp, script(name), *args)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    check_format(data)
    return data, _clock(proc.stdout), proc.stdout


def _verdict(data: dict[str, Any]) -> dict[str, Any]:
    v = data["verdict"]
    assert v is not None, data["notes"]
    assert v["wait_ratio"] is not None, v
    return dict(v)


def _trainer_counter(data: dict[str, Any], name: str) -> int:
    return int(data["trainer"]["counters"].get(name, 0))


# ------------------------------------------------------------ CleanRL-style PPO


CLEANRL_ITERS = 5
CLEANRL_STEPS = 4 * 32  # envs x steps per rollout


@pytest.mark.parametrize(
    ("vec", "slow", "sleep", "bound"),
    [
        ("sync", "env", "0.004", "sampler"),
        ("sync", "train", "0.06", "trainer"),
        pytest.param("async", "env", "0.004", "sampler", marks=pytest.mark.slow),
        pytest.param("async", "train", "0.06", "trainer", marks=pytest.mark.slow),
    ],
)
def test_a_cleanrl_loop_gets_its_trainer_from_the_optimizer(
    tmp_path: Path, vec: str, slow: str, sleep: str, bound: str
) -> None:
    data, clock, _ = _run(tmp_path, "signals_cleanrl.py", vec, slow, str(CLEANRL_ITERS), sleep)
    v = _verdict(data)
    expected = clock["rollout_s"] / (clock["rollout_s"] + clock["update_s"])
    assert abs(v["wait_ratio"] - expected) < 0.1, (v["wait_ratio"], clock)
    assert v["loop"] == "sync" and v["loop_source"] == "timeline", v["loop_evidence"]
    assert "did the sampling itself in 5 of 5 collect blocks" in v["loop_evidence"]
    assert v["bound"] == bound, v["reasons"]
    t = data["trainer"]
    assert t["steps"] == CLEANRL_ITERS  # one step per rollout, not per minibatch
    assert _trainer_counter(data, "optim_steps") == CLEANRL_ITERS * 8
    s = data["sampler"]["phases"]
    # one policy forward per vector step; clip_grad_norm_'s no-grad block is not one
    assert s["fwd"]["count"] == CLEANRL_ITERS * 32
    if vec == "sync":
        assert s["env_step"]["count"] + s["env_reset"]["count"] >= CLEANRL_ITERS * CLEANRL_STEPS


# ------------------------------------------------------------ queue-fed trainers


@pytest.mark.parametrize(
    ("mode", "slow", "n", "sleep", "bound"),
    [
        ("queue", "env", "40", "0.003", "sampler"),
        ("queue", "train", "40", "0.03", "trainer"),
        ("torchfree", "env", "60", "0.01", "sampler"),
        ("torchfree", "train", "60", "0.01", "trainer"),
    ],
)
def test_a_queue_fed_trainer_is_judged_an_overlapped_pipeline(
    tmp_path: Path, mode: str, slow: str, n: str, sleep: str, bound: str
) -> None:
    data, clock, _ = _run(tmp_path, "signals_loops.py", mode, slow, n, sleep)
    v = _verdict(data)
    expected = clock["wait_s"] / (clock["wait_s"] + clock["update_s"])
    assert abs(v["wait_ratio"] - expected) < 0.1, (v["wait_ratio"], clock)
    assert v["loop"] == "overlapped" and v["loop_source"] == "timeline", v["loop_evidence"]
    assert v["bound"] == bound, v["reasons"]
    # one step per batch got (the last get, of the end marker, is one too)
    assert int(n) <= data["trainer"]["steps"] <= int(n) + 1
    assert _trainer_counter(data, "loop.own") == 0
    if mode == "torchfree":
        assert _trainer_counter(data, "optim_steps") == 0  # the main thread by default


@pytest.mark.parametrize(
    ("slow", "sleep", "bound"), [("env", "0.003", "sampler"), ("train", "0.003", "trainer")]
)
def test_same_thread_alternation_is_a_synchronous_loop(
    tmp_path: Path, slow: str, sleep: str, bound: str
) -> None:
    data, clock, _ = _run(tmp_path, "signals_loops.py", "alternate", slow, "200", sleep)
    v = _verdict(data)
    expected = clock["wait_s"] / (clock["wait_s"] + clock["update_s"])
    assert abs(v["wait_ratio"] - expected) < 0.1, (v["wait_ratio"], clock)
    assert v["loop"] == "sync" and v["loop_source"] == "timeline", v["loop_evidence"]
    assert v["bound"] == bound, v["reasons"]
    assert data["trainer"]["steps"] == 200


def test_idle_pool_threads_in_queue_get_never_become_trainers(tmp_path: Path) -> None:
    """Four threads blocked in ``queue.get`` and an idle ``ThreadPoolExecutor`` (whose
    ``Future.result`` the main thread waited on before training): only the thread that
    steps the optimizer trains, and its start-up wait is dropped once it does."""
    data, clock, out = _run(tmp_path, "signals_loops.py", "pool", "train", "150", "0.003")
    assert printed(out, "TRAINER_THREADS") == 1
    v = _verdict(data)
    expected = clock["wait_s"] / (clock["wait_s"] + clock["update_s"])
    assert abs(v["wait_ratio"] - expected) < 0.1, (v["wait_ratio"], clock)
    assert data["trainer"]["steps"] == 150
    assert _trainer_counter(data, "loop.fed") == 0
    assert v["loop"] == "sync" and v["bound"] == "trainer", v["reasons"]
