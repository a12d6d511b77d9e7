"""Why a trainer fed by a rollout service waits (``analysis.rollout_cause``): the cause
named from the client's requests and the server's own figures, and the verdict of a
real ``gyreprof run`` that says it instead of env-loop advice.

The rules are checked where their naive forms go wrong: a queue seen only while the
server starts is no queueing; a replica slow because it queues is named as the
replica; a server with room but a client at its cap is under-concurrency, not
generation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gyreprof.analysis import rollout_cause as rc
from gyreprof.analysis.rollouts import EndpointReport, Percentiles, RolloutReport
from gyreprof.analysis.server_metrics import ServerReport

from helpers.metrics_server import MetricsServer
from helpers.run_scripts.runhelp import gyreprof_run, script

URL = "http://127.0.0.1:8000/v1/chat/completions"


def _server(**figs: Any) -> ServerReport:
    base: dict[str, Any] = {
        "url": "http://127.0.0.1:8000/metrics",
        "source": "vllm",
        "reads": 6,
        "after_first_reads": 5,
        "waiting_max": 0.0,
        "waiting_mean": 0.0,
        "waiting_after_first_max": 0.0,
        "waiting_after_first_mean": 0.0,
        "running_max": 2.0,
        "kv_max": 0.03,
        "queue_share": 0.0,
        "decode_share": 0.9,
        "prefill_share": 0.05,
        "itl_mean_ms": 12.0,
        # [t_s, running, waiting, kv]: the first read before any answer, then at work
        "series": [[0.0, 0.0, 0.0, 0.0]] + [[t, 2.0, 0.0, 0.03] for t in range(1, 6)],
    }
    base.update(figs)
    return ServerReport(**base)


def _ep(endpoint: str = URL, **over: Any) -> EndpointReport:
    base: dict[str, Any] = {
        "endpoint": endpoint,
        "clients": ["openai"],
        "requests": 64,
        "attempts": 64,
        "retries": 0,
        "retried": {},
        "outcomes": {"ok": 64},
        "latency": Percentiles(250.0, 300.0, 320.0, 330.0, 64),
        "bytes_in": 1000,
        "bytes_out": 1000,
        "prompt_tokens": 64,
        "completion_tokens": 512,
        "with_usage": 64,
        "tokens_per_s": 30.0,
        "streams": 0,
        "chunks": 0,
        "ttft": Percentiles(),
        "inter_chunk": Percentiles(),
        "in_flight_mean": 1.9,
        "in_flight_max": 2,
        "at_max_share": 0.9,
        "not_json": 0,
        "oversized": 0,
        "empty_fields": {},
        "batches": 8,
        "processes": 1,
        "role": "generation",
        "total_ms": 64 * 250.0,
        "server": _server(),
    }
    base.update(over)
    return EndpointReport(**base)


def _report(*eps: EndpointReport, tail: float | None = 0.05) -> RolloutReport:
    return RolloutReport(
        endpoints=list(eps),
        batches=[],
        batch_count=8,
        batch_wall=Percentiles(),
        tail_share_p50=tail,
        tail_share_p90=tail,
        tail_share_max=tail,
        typical_tail=None if tail is None else f"the batch waited {tail:.0%} of its time",
        tail_dominates=tail is not None and tail >= 0.3,
    )


def test_a_saturated_server_queues() -> None:
    s = _server(
        waiting_after_first_max=14.0,
        waiting_after_first_mean=6.0,
        queue_share=0.78,
        running_max=2.0,
        kv_max=0.4,
        series=[[0.0, 0.0, 0.0, 0.0]] + [[t, 2.0, 12.0 - 2 * t, 0.4] for t in range(1, 6)],
    )
    c = rc.find(_report(_ep(server=s, in_flight_max=16)))
    assert c is not None and c.kind == "server queueing"
    assert "6.0 requests waiting" in c.words and "78%" in c.words
    assert "--max-num-seqs" in c.next and "replica" in c.next
    full = rc.find(_report(_ep(server=dataclasses.replace(s, kv_max=1.0))))
    assert full is not None and full.kind == "server queueing"
    assert "KV-cache memory" in full.next  # more sequences cannot fit a full cache


def test_reads_that_missed_the_work_leave_the_queue_to_the_histograms() -> None:
    """A short run read at its start and end: the gauges saw an idle server (the naive
    rule: no queue, room for more), its queue-time histogram grew by 67% of the
    requests' time (as a real vLLM with 2 slots and 16 requests at once reads)."""
    idle = _server(
        running_max=1.0,
        kv_max=0.0,
        queue_share=0.67,
        queue_s=6.87,
        request_s=10.28,
        reads=2,
        after_first_reads=1,
        series=[[0.0, 1.0, 0.0, 0.0], [0.9, 0.0, 0.0, 0.0]],
    )
    c = rc.find(_report(_ep(server=idle, in_flight_max=16)))
    assert c is not None and c.kind == "server queueing", c
    assert "67% of a request's time" in c.words and "histogram" in c.words
    # no queue in the histograms either, and a client at its cap: room, by them alone
    quiet = dataclasses.replace(idle, queue_share=0.01)
    c = rc.find(_report(_ep(server=quiet)))
    assert c is not None and c.kind == "under-concurrency", c
    assert "queueing was 1.0% of its requests' time" in c.words
    # a server that gives no KV-cache figure: its room cannot be told from idle reads
    blind = rc.find(_report(_ep(server=dataclasses.replace(quiet, kv_max=None))))
    assert blind is not None and blind.kind == "generation"


def test_a_queue_only_at_start_up_is_not_queueing() -> None:
    """The naive rules (any waiting request at any read, or the queue-time histogram
    alone) call this a queueing server."""
    # while it starts, the server runs one request and queues four (the reads before
    # the first answer); once started, two run and none wait
    start_up = [[0.0, 1.0, 4.0, 0.0], [0.5, 1.0, 4.0, 0.0]]
    steady = [[t, 2.0, 0.0, 0.03] for t in range(1, 5)]
    s = _server(
        waiting_max=4.0,
        waiting_mean=1.5,
        queue_share=0.35,
        series=start_up + steady,
        after_first_reads=len(steady),
    )
    c = rc.find(_report(_ep(server=s)))
    assert c is not None and c.kind == "under-concurrency", c
    assert "from 2 to about 16" in c.next


def test_a_server_with_room_and_a_capped_client_is_underfed() -> None:
    c = rc.find(_report(_ep()))
    assert c is not None and c.kind == "under-concurrency"
    assert "at most 2 requests in flight (90% of the time at that cap)" in c.words
    assert "KV cache peaked at 3%" in c.words
    # a cache already half full: more sequences would not fit, so it is generation
    tight = rc.find(_report(_ep(server=_server(kv_max=0.6))))
    assert tight is not None and tight.kind == "generation"
    assert "decode is 90%" in tight.words and "max_tokens" in tight.next


def test_without_a_metrics_page_room_cannot_be_told() -> None:
    none = _server(source=None, reads=0, after_first_reads=0, none="HTTP 404")
    c = rc.find(_report(_ep(server=none)))
    assert c is not None and c.kind == "generation"
    assert "p50 250 ms a request, 30 completion tokens/s" in c.words


def test_the_long_tail_comes_before_concurrency() -> None:
    c = rc.find(_report(_ep(), tail=0.55))
    assert c is not None and c.kind == "long tail"
    assert "55%" in c.words and "max_tokens" in c.next


def test_the_slow_replica_is_named_with_its_tokens_and_time() -> None:
    fast = _ep("http://127.0.0.1:8001/v1/chat/completions", total_ms=32 * 145.0, requests=32)
    slow_server = _server(
        waiting_after_first_max=3.0,
        waiting_after_first_mean=0.8,
        queue_share=0.6,
        series=[[t, 1.0, float(t % 2) * 3, 0.1] for t in range(6)],
    )
    slow = _ep(
        "http://127.0.0.1:8002/v1/chat/completions",
        total_ms=32 * 343.0,
        requests=32,
        completion_tokens=8412,
        server=slow_server,
    )
    c = rc.find(_report(fast, slow))
    assert c is not None and c.kind == "slow replica"
    assert c.endpoint == slow.endpoint and "2.4x" in c.short and "8412 completion" in c.words
    assert "queues" in c.words and "127.0.0.1:8002" in c.next
    # replicas within 1.5x of each other are not one slow replica
    even = dataclasses.replace(slow, total_ms=32 * 180.0)
    assert rc.find(_report(fast, even)).kind != "slow replica"  # type: ignore[union-attr]


def test_a_replica_that_queues_short_of_slow_is_named_with_its_own_setting() -> None:
    """A replica with 1 slot beside one with 8 (a real vLLM pair on the CPU: 109 against
    86 ms a request, 1.26x): no slow replica by the 1.5x rule, and the generic words
    ("raise the server's --max-num-seqs, or add a replica") would name neither. The one
    that queues is named, with its peer's time and slots; when both queue, more replicas
    or slots for all."""
    calm = _server(running_max=3.0)
    fast = _ep(
        "http://127.0.0.1:8001/v1/chat/completions", total_ms=28 * 86.0, requests=28, server=calm
    )
    queued = _server(
        waiting_after_first_max=3.0,
        waiting_after_first_mean=1.5,
        queue_share=0.51,
        running_max=1.0,
        series=[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 3.0, 0.0], [2.0, 1.0, 0.0, 0.0]],
    )
    slow = _ep(
        "http://127.0.0.1:8002/v1/chat/completions", total_ms=28 * 109.0, requests=28, server=queued
    )
    c = rc.find(_report(fast, slow))
    assert c is not None and c.kind == "server queueing" and c.endpoint == slow.endpoint, c
    assert "127.0.0.1:8002" in c.short and "109 ms a request" in c.words
    assert "86 ms on 127.0.0.1:8001 (its server queued nothing, ran up to 3 at once)" in c.words
    assert c.next.startswith("raise 127.0.0.1:8002's concurrent sequences (vLLM --max-num-seqs")
    assert "up to 3 ran at once on its peers" in c.next and "8001 queued nothing" in c.next
    # both queue: no peer to match
    both = dataclasses.replace(fast, server=queued)
    c2 = rc.find(_report(both, slow))
    assert c2 is not None and c2.next.startswith("every replica queues"), c2


def test_weight_sync_routes_are_no_replica() -> None:
    sync = _ep("http://127.0.0.1:8000/update_weights", role="weight sync", total_ms=64 * 900.0)
    c = rc.find(_report(_ep(), sync))
    assert c is not None and c.kind == "under-concurrency" and c.endpoint == URL


# ----------------------------------------------------------------- real runs


def _run(
    tmp_path: Path, urls: list[str], n: int, mode: str = "run", *extra: str
) -> tuple[dict[str, Any], str]:
    proc, data = gyreprof_run(
        tmp_path,
        script("async_trainer.py"),
        ",".join(urls),
        mode,
        "5",
        str(n),
        "0",
        "20",
        *extra,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None and data["verdict"] is not None, proc.stderr[-4000:]
    return data["verdict"], proc.stdout + proc.stderr


def _said(v: dict[str, Any], text: str) -> dict[str, Any]:
    """The cause, said in the headline and the advice, with no env-loop advice."""
    cause = v["rollout_cause"]
    assert cause is not None, v
    assert v["bound"] == "sampler", v["reasons"]
    assert f"waits on its rollout service; {cause['short']}" in text
    assert v["advice"][0] == cause["next"]
    assert not any("sampler phase" in u or "sampler loop" in u for u in v["unknowns"])
    assert "gp.Profiler(['env'" not in text
    return dict(cause)


def _needs_stacks() -> None:
    for name in ("openai", "torch", "prometheus_client"):
        pytest.importorskip(name)


@pytest.mark.stacks
def test_a_saturated_server_is_said_to_queue(tmp_path: Path) -> None:
    """16 requests at once into 2 slots."""
    _needs_stacks()
    with MetricsServer(max_num_seqs=2, prefill_ms=10, token_ms=20) as srv:
        v, text = _run(tmp_path, [srv.url], 16)
    cause = _said(v, text)
    assert cause["kind"] == "server queueing" and "replica" in cause["next"], cause


@pytest.mark.stacks
def test_a_thread_pool_of_sync_clients_into_a_saturated_server(tmp_path: Path) -> None:
    """No asyncio, no SDK: 8 synchronous httpx posts from a thread pool (``pool.map``),
    the trainer waiting in the pool's futures, into 2 slots."""
    _needs_stacks()
    with MetricsServer(max_num_seqs=2, prefill_ms=10, token_ms=20) as srv:
        v, text = _run(tmp_path, [srv.url], 8, "map", "0", "0")
    cause = _said(v, text)
    assert cause["kind"] == "server queueing", cause


@pytest.mark.stacks
def test_an_underfed_server_asks_for_more_concurrency(tmp_path: Path) -> None:
    """2 requests at once into 64 slots; the server queues only while it starts (1 s
    admitting nothing), which must not read as queueing."""
    _needs_stacks()
    with MetricsServer(max_num_seqs=64, prefill_ms=10, token_ms=60, warmup_s=1.0) as srv:
        v, text = _run(tmp_path, [srv.url], 2)
        assert srv.max_waiting == 2  # the start-up queue was real
    cause = _said(v, text)
    assert cause["kind"] == "under-concurrency", cause
    assert "raise the rollout concurrency from 2 to" in cause["next"]


@pytest.mark.stacks
def test_the_slow_replica_is_named(tmp_path: Path) -> None:
    """Two replicas, 4 requests each a batch: one runs 1 sequence at a time."""
    _needs_stacks()
    with (
        MetricsServer(max_num_seqs=1, prefill_ms=10, token_ms=30) as slow,
        MetricsServer(max_num_seqs=8, prefill_ms=10, token_ms=30) as fast,
    ):
        v, text = _run(tmp_path, [fast.url, slow.url], 8)
    cause = _said(v, text)
    assert cause["kind"] == "slow replica", cause
    assert cause["endpoint"] == f"{slow.url}/v1/chat/completions"
    assert f"127.0.0.1:{slow.port}" in cause["next"]
