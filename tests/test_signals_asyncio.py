"""An asyncio trainer fed by a rollout service, under ``gyreprof run``, unmodified.

The training thread awaits its rollout requests in an event loop (``run_until_complete``
of a gather of ``AsyncOpenAI`` calls, or a whole ``asyncio.run`` with the update inside
a coroutine), or a sampler task / thread hands it the batches over an
``asyncio.Queue`` / ``queue.Queue``. Its wait runs from its first request to the moment
its code has the batch back (the gather, the SDK call, the queue get returned), its
Adam steps are the compute; checked against the script's own clock around the same
awaits, within 5 points, in both directions.

The naive rule (the loop's idle time while requests are in flight) is wrong where the
coroutines compute on the way to the batch (the answers' parsing, scoring between two
requests): the training code waits for that work too. That rule's figure, the script's
``idle_ratio`` (``/proc/thread-self/schedstat``: the time in the batch that the thread
neither ran nor waited for a CPU), is what these runs must not read."""

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
    warmup: int = 1,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """``async_trainer.py`` under ``gyreprof run``: the script's own figures, the run's
    JSON and its stderr. The script's clock leaves out its first batch and update (the
    connections' set-up, torch's first backward): the run is told the same with
    ``--warmup-steps 1`` (``warmup``)."""
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
            options=("--warmup-steps", str(warmup)) if warmup else (),
            env={"GROUP": group, **(env or {})},
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    own = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return own, data, proc.stderr


def _check(own: dict[str, Any], data: dict[str, Any], err: str, bound: str) -> float:
    assert data["wait"] is not None, err[-4000:]
    ratio = float(data["wait"]["ratio"])
    assert ratio == pytest.approx(own["wait_ratio"], abs=0.05), (own, err[-3000:])
    v = data["verdict"]
    assert v["bound"] == bound, err[-3000:]
    line = next(n for n in data["notes"] if n.startswith("rollouts: the trainer waits"))
    assert "/v1/chat/completions" in line and "of a training step" in line
    assert f"waiting is {ratio:.0%} of a training step" in line
    return ratio


def test_asyncio_gather_with_slow_generation_is_sampler_bound(tmp_path: Path) -> None:
    own, data, err = run_async(tmp_path, "run", 8, 800, 20)
    assert own["idle_ratio"] > 0.6  # the script's own clock: generation dominates
    _check(own, data, err, "sampler")
    assert data["verdict"]["loop"] == "sync"  # the thread asked for its rollouts itself
    assert data["rollouts"]["batch_rules"] == {"asyncio.gather": STEPS + 1}


def test_a_trainer_that_steps_no_optimizer_gets_one_step_a_batch(tmp_path: Path) -> None:
    """The update is NumPy (no optimizer step, no backward): the main thread stays the
    default trainer, whose collect block a wait's end closes. Only the end of what the
    training code awaits (the gather) closes it: closed at each request's end or at each
    of the loop's idle spells, the 8 requests of a batch made 8 or more steps of it (83
    steps for 7 batches, 74% against the script's 86%); its first batch is a wait like
    the others (not its last sliver), and the event loop's copy of a finished name
    lookup (``run_in_executor``) is no wait."""
    own, data, err = run_async(tmp_path, "run", 8, 100, 20, warmup=0, env={"UPDATE": "numpy"})
    w = data["wait"]
    assert w["steps"] == STEPS + 1, (w["steps"], err[-3000:])
    wins = w["windows"]
    assert wins[0]["wait_ns"] >= 0.8 * min(x["wait_ns"] for x in wins[1:]), wins[0]
    rest = wins[1:]  # the script's clock leaves out its first batch and update
    waited = sum(x["wait_ns"] for x in rest)
    ratio = waited / (waited + sum(x["compute_ns"] for x in rest))
    assert ratio == pytest.approx(own["wait_ratio"], abs=0.05), (own, w["window_ratios"])
    assert data["verdict"]["bound"] == "sampler"


def test_asyncio_run_with_a_slow_update_inside_the_loop_is_trainer_bound(tmp_path: Path) -> None:
    own, data, err = run_async(tmp_path, "inside", 8, 30, 300)
    assert own["idle_ratio"] < 0.35
    _check(own, data, err, "trainer")


def test_a_batch_asked_for_before_the_update_is_no_wait_once_answered(tmp_path: Path) -> None:
    """The next batch goes out before the 300 ms update and is answered (100 ms) while
    the thread updates: awaited after the update, it is there. The naive rules (each
    request's span, or the wait from the request's start to its end) bill most of the
    update to the sampler; the wait is the send and the answers' reading."""
    own, data, err = run_async(tmp_path, "ahead", 8, 100, 300)
    assert own["wait_ratio"] < 0.15, own
    ratio = _check(own, data, err, "trainer")
    assert ratio < 0.15  # not the request spans: 100 ms of each 310 ms step


def test_cpu_work_on_the_way_to_the_batch_is_wait(tmp_path: Path) -> None:
    """Each coroutine computes 40 ms between its two requests: the loop idles far less
    than the batch takes (the naive rule's figure), but the training code waits for the
    whole batch, that work included."""
    own, data, err = run_async(tmp_path, "cpu", 8, 250, 20, 40)
    assert own["wait_ratio"] > 0.85 and own["wait_ratio"] - own["idle_ratio"] > 0.3, own
    ratio = _check(own, data, err, "sampler")
    assert ratio > own["idle_ratio"] + 0.2  # not the loop's idle time


@pytest.mark.parametrize(
    ("mode", "n", "delay_ms", "chunk_ms"),
    [
        ("stream", 16, 150, 25),  # AsyncOpenAI stream=True, Semaphore(8)
        ("aiohttp", 8, 150, 25),  # aiohttp SSE read from response.content
        ("ascompleted", 8, 300, 0),  # asyncio.as_completed over AsyncOpenAI calls
    ],
)
def test_streamed_and_as_completed_batches_wait_until_read(
    tmp_path: Path, mode: str, n: int, delay_ms: float, chunk_ms: float
) -> None:
    """A stream is waited on until it is read to its end; an ``as_completed`` loop until
    its last result: the naive end (the answer's headers, the last request's end) reads
    the wait low."""
    own, data, err = run_async(tmp_path, mode, n, delay_ms, 20, chunk_ms)
    assert own["wait_ratio"] > 0.6, own
    _check(own, data, err, "sampler")
    r = data["rollouts"]
    if mode != "ascompleted":
        streams = sum(e["streams"] for e in r["endpoints"])
        assert streams == (STEPS + 1) * n, r["endpoints"]
    else:
        assert r["batch_rules"] == {"asyncio.as_completed": STEPS + 1}, r["batch_rules"]


def test_a_sampler_task_handing_batches_over_an_asyncio_queue(tmp_path: Path) -> None:
    own, data, err = run_async(tmp_path, "queue", 8, 800, 20)
    assert own["idle_ratio"] > 0.6
    _check(own, data, err, "sampler")


def test_a_sampler_thread_feeding_the_trainers_asyncio_queue(tmp_path: Path) -> None:
    """No request is in flight on the training thread: its loop idles in its selector
    while its coroutine awaits ``asyncio.Queue.get``, fed from another thread."""
    own, data, err = run_async(tmp_path, "feed", 4, 200, 20)
    assert own["idle_ratio"] > 0.6
    _check(own, data, err, "sampler")


@pytest.mark.slow
def test_a_sampler_thread_handing_batches_over_a_queue(tmp_path: Path) -> None:
    """The training thread blocks in ``queue.Queue.get`` (a data wait already); the
    sampler thread's loop awaits the requests: the same judgement, from a queue."""
    own, data, err = run_async(tmp_path, "thread", 8, 800, 20)
    assert own["wait_ratio"] > 0.6
    _check(own, data, err, "sampler")
    # the batches are the sampler thread's gathers
    assert data["rollouts"]["batch_rules"] == {"asyncio.gather": STEPS + 1}


@pytest.mark.parametrize("mode", ["map", "completed"])
def test_a_thread_pool_of_synchronous_clients(tmp_path: Path, mode: str) -> None:
    """8 synchronous httpx posts from a thread pool (``pool.map``, or ``submit`` and
    ``as_completed``): the training thread waits in the pool's futures until the batch
    is its own."""
    own, data, err = run_async(tmp_path, mode, 8, 250, 20, 0, 250)
    assert own["wait_ratio"] > 0.6, own
    _check(own, data, err, "sampler")
