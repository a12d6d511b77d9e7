"""A trainer fed by a rollout service, under ``gyreprof run``, unmodified: its wait on
generation (openai-SDK calls on the training thread, or httpx requests from a pool whose
futures it waits on) is the trainer's ``wait``, its Adam steps the ``compute``; checked
against the script's own clock in both directions (slow generation, slow update).

A pool whose futures the trainer submitted and then waits on works only while the
trainer waits: the loop is synchronous, not an overlapped pipeline (the naive reading of
a ``Future.result`` as "data made elsewhere" calls it overlapped, and judged the
trainer-bound run "balanced")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("openai")
pytest.importorskip("torch")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from helpers.llm_server import LLMServer  # noqa: E402
from helpers.run_scripts.runhelp import gyreprof_run, script  # noqa: E402

STEPS = 12
# each case's slow side is 10-15x its fast one: on a loaded machine a 10 ms update's last
# Adam step overruns it by tens of ms (60 ms of generation against it read a wait of 0.55)


def _run(tmp_path: Path, mode: str, delay_ms: int, update_ms: int) -> tuple[dict[str, Any], Any]:
    with LLMServer() as srv:
        proc, data = gyreprof_run(
            tmp_path,
            script("rollout_trainer.py"),
            srv.url,
            mode,
            str(STEPS),
            str(delay_ms),
            str(update_ms),
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    own = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return own, (data, proc.stderr)


def _check(own: dict[str, Any], got: Any, bound: str) -> None:
    data, err = got
    assert data["wait"] is not None, err[-4000:]
    assert data["wait"]["ratio"] == pytest.approx(own["wait_ratio"], abs=0.1), err[-3000:]
    v = data["verdict"]
    assert v["bound"] == bound, err[-3000:]
    assert v["loop"] == "sync" and v["loop_source"] == "timeline"
    line = next(n for n in data["notes"] if n.startswith("rollouts: the trainer waits"))
    assert "/v1/chat/completions" in line and "of a training step" in line
    assert line in err


def test_slow_generation_on_the_training_thread_is_sampler_bound(tmp_path: Path) -> None:
    own, got = _run(tmp_path, "seq", delay_ms=150, update_ms=10)
    assert own["wait_ratio"] > 0.6  # the script's own clock: generation dominates
    _check(own, got, "sampler")


def test_slow_update_with_generation_on_the_training_thread_is_trainer_bound(
    tmp_path: Path,
) -> None:
    own, got = _run(tmp_path, "seq", delay_ms=3, update_ms=150)
    assert own["wait_ratio"] < 0.35
    _check(own, got, "trainer")


@pytest.mark.slow
def test_slow_generation_from_a_pool_the_trainer_waits_on_is_sampler_bound(
    tmp_path: Path,
) -> None:
    own, got = _run(tmp_path, "pool", delay_ms=150, update_ms=10)
    assert own["wait_ratio"] > 0.6
    _check(own, got, "sampler")


@pytest.mark.slow
def test_slow_update_with_a_pool_the_trainer_waits_on_is_trainer_bound(tmp_path: Path) -> None:
    own, got = _run(tmp_path, "pool", delay_ms=3, update_ms=150)
    assert own["wait_ratio"] < 0.35
    _check(own, got, "trainer")
