"""An asyncio trainer fed by a rollout service, under ``gyreprof run``, unmodified.

The training thread awaits its rollout requests in an event loop (``run_until_complete``
of a gather of ``AsyncOpenAI`` calls, or a whole ``asyncio.run`` with the update inside
a coroutine), or a sampler task / thread hands it the batches over an
``asyncio.Queue`` / ``queue.Queue``. Its wait is the time its loop was idle while its
requests were in flight (or while it was blocked on the queue), its Adam steps the
compute; checked against the script's own clock (``/proc/thread-self/schedstat``:
the time in the batch that the thread neither ran nor waited for a CPU) in both
directions.

The naive rules (a request's span, or the time from the ``await`` to its resumption)
are wrong where the coroutines compute between their requests: there the wall time of
the batch is ~all of the step, and the wait is far less."""

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

STEPS = 6


def run_async(
    tmp_path: Path,
    mode: str,
    n: int,
    delay_ms: float,
    update_ms: float,
    *extra: float,
    group: str = "gather",
    steps: int = STEPS,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """``async_trainer.py`` under ``gyreprof run``: the script's own figures, the run's
    JSON and its stderr."""
    with LLMServer() as srv:
        proc, data = gyreprof_run(
            tmp_path,
            script("async_trainer.py"),
            srv.url,
            mode,
            str(steps),
            str(n),
            str(delay_ms),
            str(update_ms),
            *(str(e) for e in extra),
            env={"GROUP": group},
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    own = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return own, data, proc.stderr


def _check(own: dict[str, Any], data: dict[str, Any], err: str, ref: str, bound: str) -> float:
    assert data["wait"] is not None, err[-4000:]
    ratio = float(data["wait"]["ratio"])
    assert ratio == pytest.approx(own[ref], abs=0.1), (own, err[-3000:])
    v = data["verdict"]
    assert v["bound"] == bound, err[-3000:]
    line = next(n for n in data["notes"] if n.startswith("rollouts: the trainer waits"))
    assert "/v1/chat/completions" in line and "of a training step" in line
    assert f"waiting is {ratio:.0%} of a training step" in line
    return ratio


def test_asyncio_gather_with_slow_generation_is_sampler_bound(tmp_path: Path) -> None:
    own, data, err = run_async(tmp_path, "run", 8, 800, 20)
    assert own["idle_ratio"] > 0.6  # the script's own clock: generation dominates
    _check(own, data, err, "idle_ratio", "sampler")
    assert data["verdict"]["loop"] == "sync"  # the thread asked for its rollouts itself
    assert data["rollouts"]["batch_rules"] == {"asyncio.gather": STEPS + 1}


def test_asyncio_run_with_a_slow_update_inside_the_loop_is_trainer_bound(tmp_path: Path) -> None:
    own, data, err = run_async(tmp_path, "inside", 8, 30, 300)
    assert own["idle_ratio"] < 0.35
    _check(own, data, err, "idle_ratio", "trainer")


def test_cpu_work_between_requests_is_not_wait(tmp_path: Path) -> None:
    """Each coroutine computes 40 ms between its two requests: the batch's wall time is
    nearly the whole step (the naive rule's wait), the loop idled far less."""
    own, data, err = run_async(tmp_path, "cpu", 8, 250, 20, 40)
    assert own["wait_ratio"] > 0.85 and own["wait_ratio"] - own["idle_ratio"] > 0.3, own
    ratio = float(data["wait"]["ratio"])
    assert ratio == pytest.approx(own["idle_ratio"], abs=0.1), (own, err[-3000:])
    assert ratio < own["wait_ratio"] - 0.2  # not the wall time of the batch


def test_a_sampler_task_handing_batches_over_an_asyncio_queue(tmp_path: Path) -> None:
    own, data, err = run_async(tmp_path, "queue", 8, 800, 20)
    assert own["idle_ratio"] > 0.6
    _check(own, data, err, "idle_ratio", "sampler")


def test_a_sampler_thread_feeding_the_trainers_asyncio_queue(tmp_path: Path) -> None:
    """No request is in flight on the training thread: its loop idles in its selector
    while its coroutine awaits ``asyncio.Queue.get``, fed from another thread."""
    own, data, err = run_async(tmp_path, "feed", 4, 200, 20)
    assert own["idle_ratio"] > 0.6
    _check(own, data, err, "idle_ratio", "sampler")


@pytest.mark.slow
def test_a_sampler_thread_handing_batches_over_a_queue(tmp_path: Path) -> None:
    """The training thread blocks in ``queue.Queue.get`` (a data wait already); the
    sampler thread's loop awaits the requests: the same judgement, from a queue."""
    own, data, err = run_async(tmp_path, "thread", 8, 800, 20)
    assert own["wait_ratio"] > 0.6
    _check(own, data, err, "wait_ratio", "sampler")
    # the batches are the sampler thread's gathers
    assert data["rollouts"]["batch_rules"] == {"asyncio.gather": STEPS + 1}
