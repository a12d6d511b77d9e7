"""The rollout servers' own figures (issue 34): their Prometheus metrics read during a
run and reported per endpoint (``rollouts.endpoints[].server``).

The server is real: ``tests/helpers/metrics_server`` admits at most ``max_num_seqs``
requests at a time and keeps vLLM's counters from what it really does (its queue,
prefill and decode times), writing them on ``/metrics`` in vLLM's exposition format;
``gyreprof run`` reads that page off the training thread while an unmodified client
sends its batches. Also: a server with no ``/metrics``, a server that queues only
while it starts, SGLang's names, and the option that names the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gyreprof.analysis import server_metrics as sm
from gyreprof.integrations.http import server_metrics as smi

from helpers.metrics_server import MetricsServer

# ------------------------------------------------------------------ the page


def test_a_vllm_page_is_read_summed_over_its_engines() -> None:
    with MetricsServer(max_num_seqs=4, engines=2) as srv:
        text = srv.exposition()
    source, figs = smi.parse(text)
    assert source == "vllm"
    assert figs["running"] == 0.0 and figs["waiting"] == 0.0 and figs["preemptions"] == 0.0
    assert set(figs) == set(sm.READ_FIELDS[1:])  # every figure vLLM has
    page = (
        'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_running{engine="1"} 2\n'
        'vllm:kv_cache_usage_perc{engine="0"} 0.25\nvllm:kv_cache_usage_perc{engine="1"} 0.5\n'
        "vllm:gpu_cache_usage_perc 0.9\n"  # an older name: the newer one wins
        "vllm:time_per_output_token_seconds_sum 7\nvllm:inter_token_latency_seconds_sum 3\n"
        'vllm:request_queue_time_seconds_bucket{le="1.0"} 4\n'
        "vllm:num_preemptions_total 5\n"
    )
    source, figs = smi.parse(page)
    assert figs == {"running": 5.0, "kv": 0.5, "itl_s": 3.0, "preemptions": 5.0}


def test_sglang_names_are_read() -> None:
    page = "\n".join(
        [
            "# TYPE sglang:num_running_reqs gauge",
            'sglang:num_running_reqs{model_name="m",tp_rank="0"} 6',
            'sglang:num_queue_reqs{model_name="m",tp_rank="0"} 2',
            'sglang:token_usage{model_name="m",tp_rank="0"} 0.41',
            "# TYPE sglang:queue_time_seconds histogram",
            'sglang:queue_time_seconds_sum{model_name="m"} 1.5',
            'sglang:queue_time_seconds_count{model_name="m"} 10',
            'sglang:e2e_request_latency_seconds_sum{model_name="m"} 6.0',
            'sglang:e2e_request_latency_seconds_count{model_name="m"} 10',
            'sglang:num_retracted_requests_total{model_name="m"} 1',
        ]
    )
    source, figs = smi.parse(page)
    assert source == "sglang"
    assert figs == {"running": 6.0, "waiting": 2.0, "kv": 0.41, "queue_s": 1.5, "queue_n": 10.0,
                    "request_s": 6.0, "request_n": 10.0, "preemptions": 1.0}  # fmt: skip


def test_a_page_of_other_figures_is_unknown() -> None:
    assert smi.parse("<html>not metrics</html>") == ("unknown", {})
    assert smi.parse('process_cpu_seconds_total 3.0\nhttp_requests_total{code="200"} 9\n') == (
        "unknown",
        {},
    )


def _row(t: float, **figs: float) -> list[float | None]:
    return [t, *(figs.get(f) for f in sm.READ_FIELDS[1:])]


def test_figures_are_growths_between_the_first_and_last_read() -> None:
    s = sm.ServerSeries("http://h:1/metrics", ["http://h:1"], "vllm")
    s.reads = [
        _row(0, running=0, waiting=0, queue_s=10, request_s=20, request_n=5, preemptions=2),
        _row(1e9, running=4, waiting=6, kv=0.5, queue_s=13, request_s=24, request_n=7),
        _row(2e9, running=4, waiting=2, kv=0.75, queue_s=16, request_s=30, request_n=9),
        # the server restarted: its counters start again from 0
        _row(3e9, running=2, waiting=0, kv=0.25, queue_s=1, request_s=2, request_n=1,
             preemptions=1),
    ]  # fmt: skip
    r = sm.report(s, first_end_ns=int(1.5e9))
    assert r.source == "vllm" and r.reads == 4 and r.none is None
    assert r.queue_s == pytest.approx(7.0) and r.request_s == pytest.approx(12.0)
    assert r.queue_share == pytest.approx(7 / 12) and r.requests == 5
    assert (r.running_max, r.waiting_max) == (4, 6)
    assert r.waiting_mean == pytest.approx(2.0) and r.running_mean == pytest.approx(2.5)
    assert (r.waiting_after_first_max, r.after_first_reads) == (2, 2)
    assert r.waiting_after_first_mean == pytest.approx(1.0)
    assert r.kv_max == 0.75 and r.preemptions == 1
    assert [p[0] for p in r.series] == [0.0, 1.0, 2.0, 3.0]
    assert [p[2] for p in r.series] == [0, 6, 2, 0]  # the raw waiting series
    none = sm.report(sm.ServerSeries("http://h:1/metrics", error="HTTPError: 404"))
    assert none.source is None and none.reads == 0 and none.none == "HTTPError: 404"


def test_reads_of_several_processes_merge_in_time_order() -> None:
    a = sm.ServerSeries("u", ["http://h:1"], "vllm", reads=[_row(2e9, queue_s=5)])
    b = sm.ServerSeries("u", ["http://h:1"], None, "timeout", reads=[_row(1e9, queue_s=1)])
    m = sm.merged([a, b])
    assert [r[0] for r in m.reads] == [1e9, 2e9] and m.source == "vllm"
    assert sm.report(m).queue_s == pytest.approx(4.0)


def test_pages_by_endpoint() -> None:
    assert smi.page_of("http://h:8000", None) == "http://h:8000/metrics"
    assert smi.page_of("http://h:8000", []) is None
    assert smi.page_of("http://h:8000", ["http://m:9/x"]) == "http://m:9/x"
    two = ["http://a:1/metrics", "http://h:8000/m"]
    assert smi.page_of("http://h:8000", two) == "http://h:8000/m"
    assert smi.page_of("http://z:8000", two) is None
    with pytest.raises(ValueError, match="server_metrics"):
        smi.check_url("ftp://h/metrics")
    with pytest.raises(ValueError, match="server_metrics"):
        smi.check_url("http://h:notaport/metrics")


def test_pages_are_read_while_requests_are_in_flight() -> None:
    """A read at a fixed period lands between a short run's batches and finds the server
    idle: with requests in flight a page is read at most once a ``POLL_S``, without them
    only once an ``IDLE_POLL_S``."""
    page = smi._Page("http://127.0.0.1:1/metrics")
    assert smi._due(page, 100.0, busy=False)  # never read: at once
    page.last = 100.0
    assert not smi._due(page, 100.0 + smi.POLL_S / 2, busy=True)
    assert smi._due(page, 100.0 + smi.POLL_S, busy=True)
    assert not smi._due(page, 100.0 + smi.POLL_S, busy=False)
    assert not smi._due(page, 100.0 + smi.IDLE_POLL_S - 0.01, busy=False)
    assert smi._due(page, 100.0 + smi.IDLE_POLL_S, busy=False)
    page.gone = True  # given up: never again
    assert not smi._due(page, 1e9, busy=True)


def test_per_request_metrics_of_the_answers_are_summed() -> None:
    """Answers carrying their own ``metrics`` object: their times summed per endpoint,
    with no metrics page (``/metrics`` answers 404 here)."""
    httpx = pytest.importorskip("httpx")
    from gyreprof.integrations import http
    from gyreprof.integrations._auto import rollout_log as rl
    from gyreprof.integrations._auto import rollout_record

    with MetricsServer(metrics=False, answer_metrics=True, token_ms=1) as srv:
        with http.profile() as prof, httpx.Client(base_url=srv.url) as c:
            for _ in range(3):
                assert c.post("/v1/completions", json={"max_tokens": 4}).status_code == 200
        log = srv.log
    record = rollout_record.from_logs(rl.logs_since(prof._mark))
    assert record is not None
    report = rollout_record.report([record])
    assert report is not None
    [e] = [e for e in report.endpoints if e.endpoint.endswith("/v1/completions")]
    s = e.server
    assert s is not None and s.source is None and s.answers == 3
    assert s.answer_queue_s == pytest.approx(sum(d.queue_s for d in log))
    assert s.answer_decode_s == pytest.approx(sum(d.decode_s for d in log))
    assert s.answer_request_s == pytest.approx(sum(d.e2e_s for d in log))
    assert "per-request metrics of 3 answers" in str(report)
    assert "per-request metrics of 3 answers" in report.to_markdown()
    # the report reads back from its JSON with the server's figures
    from gyreprof.model._serial import dumps, loads

    again = loads(type(report), dumps(report))
    assert again.endpoints[0].server == s


# ------------------------------------------------------------ under gyreprof run

pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")

from helpers.run_scripts.runhelp import gyreprof_run, printed, script  # noqa: E402


def _server(data: dict[str, Any] | None, port: int) -> dict[str, Any]:
    assert data is not None and data["rollouts"] is not None
    eps = {e["endpoint"]: e for e in data["rollouts"]["endpoints"]}
    e = eps[f"http://127.0.0.1:{port}/v1/completions"]
    assert e["server"] is not None, e
    return e["server"]  # type: ignore[no-any-return]


@pytest.mark.stacks
def test_a_saturated_server_shows_its_queue(tmp_path: Path) -> None:
    """2 slots, 8 requests at once: the server's queue and its times, as it kept them."""
    with MetricsServer(max_num_seqs=2, prefill_ms=20, token_ms=10) as srv:
        proc, data = gyreprof_run(
            tmp_path, script("server_rollouts.py"), srv.url, "3", "8", "20", timeout=240
        )
        log = srv.log
        scrapes = srv.scrapes
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert printed(proc.stdout, "requests") == 24 == len(log)
    s = _server(data, srv.port)
    assert s["source"] == "vllm" and s["url"] == f"{srv.url}/metrics"
    # read at the start, at most once a second between, and at the end
    assert 3 <= s["reads"] <= scrapes
    wall = (max(d.e2e_s for d in log) + 1) * 3  # a loose bound on the run's length
    assert s["reads"] <= wall + 3
    # every request finished between the first read and the last: its times, exactly
    assert s["requests"] == 24
    assert s["queue_s"] == pytest.approx(sum(d.queue_s for d in log), rel=1e-6)
    assert s["decode_s"] == pytest.approx(sum(d.decode_s for d in log), rel=1e-6)
    assert s["request_s"] == pytest.approx(sum(d.e2e_s for d in log), rel=1e-6)
    assert s["queue_share"] > 0.4  # 8 at once in 2 slots: most of a request's time queued
    assert s["waiting_max"] >= 2 and s["running_max"] == 2 and s["kv_max"] == 1.0
    assert s["preemptions"] == 0
    assert len(s["series"]) == s["reads"]
    text = proc.stdout + proc.stderr
    assert "server (vllm, " in text and "queue " in text


@pytest.mark.stacks
def test_a_server_without_metrics_has_none_and_nothing_fails(tmp_path: Path) -> None:
    with MetricsServer(metrics=False, token_ms=1) as srv:
        proc, data = gyreprof_run(
            tmp_path, script("server_rollouts.py"), srv.url, "2", "4", "4", timeout=240
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    s = _server(data, srv.port)
    assert s["source"] is None and s["reads"] == 0 and "404" in s["none"]
    assert data is not None and data["rollouts"]["endpoints"][0]["requests"] == 8
    assert "server: no metrics" in proc.stdout + proc.stderr


@pytest.mark.stacks
def test_a_queue_only_at_start_up_is_told_apart(tmp_path: Path) -> None:
    """64 slots, but nothing admitted for the first 1.5 s: the queue is real and shown as
    it was, and the reads after the first request ended show none."""
    with MetricsServer(max_num_seqs=64, warmup_s=1.5, prefill_ms=5, token_ms=10) as srv:
        proc, data = gyreprof_run(
            tmp_path, script("server_rollouts.py"), srv.url, "8", "4", "20", timeout=240
        )
        assert srv.max_waiting == 4
    assert proc.returncode == 0, proc.stderr[-4000:]
    s = _server(data, srv.port)
    assert s["waiting_max"] >= 1  # the start-up queue, as the server said it
    assert s["after_first_reads"] >= 1
    assert s["waiting_after_first_max"] == 0  # no queue once it had started
    waits = [p[2] for p in s["series"]]
    assert max(waits) >= 1 and waits[-1] == 0


@pytest.mark.stacks
def test_the_option_names_the_page_or_turns_it_off(tmp_path: Path) -> None:
    with MetricsServer(token_ms=1) as srv, MetricsServer(token_ms=1) as other:
        page = f"{other.url}/metrics"
        proc, data = gyreprof_run(
            tmp_path, script("server_rollouts.py"), srv.url, "1", "2", "2",
            options=("--server-metrics", page), timeout=240,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert _server(data, srv.port)["url"] == page and other.scrapes >= 2
        assert srv.scrapes == 0
        (tmp_path / "off").mkdir()
        proc, data = gyreprof_run(
            tmp_path / "off", script("server_rollouts.py"), srv.url, "1", "2", "2",
            options=("--server-metrics", "off"), timeout=240,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert data is not None and data["rollouts"]["endpoints"][0]["server"] is None
        assert srv.scrapes == 0
    bad, _ = gyreprof_run(
        tmp_path, "true", options=("--server-metrics", "ftp://x/metrics"), timeout=60
    )
    assert bad.returncode == 2 and "server_metrics" in bad.stderr
