"""HTTP rollout clients against a real local OpenAI-compatible server (tests/helpers/llm_server).

Every figure is checked against the server's own log: requests, tokens and
failures by class. The clients are the real ones (httpx sync and async, requests,
urllib, aiohttp, the openai SDK); ``gyreprof.integrations.http.profile()`` patches
them in this process as ``gyreprof run`` does in every process of a run.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from gyreprof._support.errors import CorruptDataError  # noqa: E402
from gyreprof.analysis import rollouts as ar  # noqa: E402
from gyreprof.integrations import http  # noqa: E402
from gyreprof.integrations._auto import rollout_log as rl  # noqa: E402
from gyreprof.integrations._auto import rollout_record  # noqa: E402

from helpers.llm_server import LLMServer, closed_port  # noqa: E402

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


@pytest.fixture
def llm(server: LLMServer) -> LLMServer:
    server.clear()
    return server


def _ep(srv: LLMServer, path: str = CHAT) -> str:
    return f"http://127.0.0.1:{srv.port}{path}"


def _one(report: ar.RolloutReport | None, name: str) -> ar.EndpointReport:
    assert report is not None
    found = [e for e in report.endpoints if e.endpoint == name]
    assert found, [e.endpoint for e in report.endpoints]
    return found[0]


def _spans(prof: http.HttpProfile) -> list[ar.SpanRow]:
    """The spans recorded so far in this profile (its threads' kept spans)."""
    rows = [rl.as_row(s) for log in rl.logs_since(prof._mark) for s in log.spans]
    return [ar.SpanRow(*row) for row in rows]


# ------------------------------------------------------------------ outcomes


def test_outcome_classes_match_the_server_log(llm: LLMServer) -> None:
    body = {"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 3}
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        for _ in range(3):
            assert c.post(CHAT, json=body).status_code == 200
        assert c.post(CHAT, json={**body, "test_status": 503}).status_code == 503
        assert c.post(CHAT, json={**body, "test_status": 429}).status_code == 429
        assert c.post(CHAT, json={**body, "test_empty": 1}).json()["choices"] == []
        with pytest.raises(httpx.ReadError):
            c.post(CHAT, json={**body, "test_reset": 1})
        with pytest.raises(httpx.ReadTimeout):
            c.post(CHAT, json={**body, "test_delay_ms": 400}, timeout=0.05)
        with pytest.raises(httpx.ConnectError):
            httpx.post(f"http://127.0.0.1:{closed_port()}{CHAT}", json=body)
    log = llm.wait_logged(8)  # the timed-out one is logged once the server answers
    server_counts: dict[str, int] = {}
    for e in log:
        server_counts[e.outcome] = server_counts.get(e.outcome, 0) + 1
    e = _one(prof.report(), _ep(llm))
    assert e.requests == 8 == len(log)
    assert e.outcomes["ok"] == server_counts["ok"] == 3
    assert server_counts["gone"] == 1  # the timed-out one: the client left first
    assert e.outcomes["5xx"] == server_counts["5xx"] == 1
    assert e.outcomes["4xx"] == server_counts["4xx"] == 1
    assert e.outcomes["empty"] == server_counts["empty"] == 1
    assert e.outcomes["reset"] == server_counts["reset"] == 1
    assert e.outcomes["timeout"] == 1
    assert e.empty_fields == {"choices": 1}
    report = prof.report()
    assert report is not None
    [closed] = [x for x in report.endpoints if x.outcomes["refused"]]
    assert closed.requests == 1 and closed.endpoint != e.endpoint


def test_user_loop_retry_is_counted_with_its_failure_class(llm: LLMServer) -> None:
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        codes = []
        while not codes or codes[-1] != 200:  # a user's retry loop: 2 x 500, then an answer
            r = c.post(CHAT, json={"test_fail_first": 2, "test_key": "loop", "max_tokens": 2})
            codes.append(r.status_code)
        assert codes == [500, 500, 200]
    e = _one(prof.report(), _ep(llm))
    assert e.requests == 3 == len(llm.wait_logged(3))  # the server logs after it answers
    assert e.retries == 2 and e.retried == {"5xx": 2}
    assert e.outcomes["5xx"] == 2 and e.outcomes["ok"] == 1


# -------------------------------------------------------------------- tokens


def test_tokens_of_every_client_match_the_server_log(llm: LLMServer) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    requests = pytest.importorskip("requests")

    async def with_aiohttp() -> None:
        async with aiohttp.ClientSession() as s:
            async with s.post(llm.url + "/v1/completions", json={"max_tokens": 5}) as r:
                assert (await r.json())["usage"]["completion_tokens"] == 5

    with http.profile() as prof:
        httpx.post(llm.url + CHAT, json={"messages": [{"role": "user", "content": "a b"}]})
        requests.post(
            llm.url + "/v1/completions", json={"prompt": "one two three", "max_tokens": 7}
        )
        req = urllib.request.Request(
            llm.url + "/v1/completions",
            data=json.dumps({"prompt": "x", "max_tokens": 11}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req) as resp:  # noqa: S310 - 127.0.0.1
            assert json.load(resp)["usage"]["completion_tokens"] == 11
        asyncio.run(with_aiohttp())
    log = llm.wait_logged(4)
    report = prof.report()
    assert report is not None
    total_p = sum(e.prompt_tokens for e in report.endpoints)
    total_c = sum(e.completion_tokens for e in report.endpoints)
    assert total_p == sum(e.prompt_tokens for e in log)
    assert total_c == sum(e.completion_tokens for e in log) == 8 + 7 + 11 + 5
    comp = _one(report, _ep(llm, "/v1/completions"))
    assert comp.clients == ["aiohttp", "requests", "urllib"]
    assert comp.requests == 3 and comp.with_usage == 3
    assert report.requests == 4  # requests -> urllib3 -> http.client counted once


# ----------------------------------------------------------------- streaming


def test_stream_ttft_is_the_servers_first_chunk_delay(llm: LLMServer) -> None:
    body = {"stream": True, "max_tokens": 6, "test_delay_ms": 150, "test_chunk_delay_ms": 10}
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        with c.stream("POST", CHAT, json=body) as r:
            lines = [x for x in r.iter_lines() if x]
    assert lines[-1] == "data: [DONE]" and len(lines) == 6 + 2
    [s] = [s for s in _spans(prof) if s.stream and s.endpoint == _ep(llm)]
    assert 0.15e9 <= s.ttft < (s.end - s.start)
    e = _one(prof.report(), _ep(llm))
    assert e.streams == 1 and e.chunks >= 6
    [logged] = [x for x in llm.wait_logged(1) if x.stream]
    assert e.completion_tokens == 6 == logged.completion_tokens  # from the usage chunk
    assert e.ttft.p50 is not None and e.ttft.p50 >= 150.0
    # 10 ms per token on the server; a loaded client may read several chunks at once, so
    # the gaps are checked as a whole: the stream lasts the server's delays
    assert e.inter_chunk.p50 is not None
    assert (s.end - s.start) >= 0.95 * (150 + 5 * 10) * 1e6
    assert e.outcomes["ok"] == 1


def test_stream_is_never_read_ahead_of_the_user(llm: LLMServer) -> None:
    body = {"stream": True, "max_tokens": 4, "test_chunk_delay_ms": 100}
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        with c.stream("POST", CHAT, json=body) as r:
            it = r.iter_raw()
            first = next(it)
            assert first.startswith(b"data: ")
            assert _spans(prof) == []  # still open: the request ends when the user stops reading
            rest = b"".join(it)
    assert rest.endswith(b"data: [DONE]\n\n")
    e = _one(prof.report(), _ep(llm))
    assert e.requests == 1 and e.streams == 1


# ---------------------------------------------------------------- openai SDK


def test_openai_retries_are_attempts_of_one_request(llm: LLMServer) -> None:
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=llm.url + "/v1", api_key="x", max_retries=3)
    with http.profile() as prof:
        out = sdk.with_options(timeout=30).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello there"}],
            max_tokens=5,
            extra_body={"test_fail_first": 2, "test_key": "sdk"},
        )
    assert out.usage is not None and out.usage.completion_tokens == 5
    llm.wait_logged(3)
    assert [e.outcome for e in llm.log if e.key == "sdk"] == ["5xx", "5xx", "ok"]
    e = _one(prof.report(), _ep(llm))
    assert e.clients == ["openai"]  # its httpx sends are its attempts, not requests
    assert e.requests == 1 and e.attempts == 3
    assert e.retries == 2 and e.retried == {"5xx": 2}
    assert e.outcomes["ok"] == 1 and e.completion_tokens == 5


def test_openai_async_stream(llm: LLMServer) -> None:
    openai = pytest.importorskip("openai")

    async def main() -> list[str]:
        sdk = openai.AsyncOpenAI(base_url=llm.url + "/v1", api_key="x", max_retries=0)
        stream = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            stream=True,
            extra_body={"test_delay_ms": 80},
        )
        got = [c.choices[0].delta.content async for c in stream if c.choices]
        await sdk.close()
        return got

    with http.profile() as prof:
        got = asyncio.run(main())
    assert got == ["tok "] * 4
    e = _one(prof.report(), _ep(llm))
    assert e.clients == ["openai"] and e.requests == 1 and e.attempts == 1
    assert e.streams == 1 and e.completion_tokens == 4
    assert e.ttft.p50 is not None and e.ttft.p50 >= 80.0


def test_openai_gives_up_on_a_closed_port_as_refused() -> None:
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{closed_port()}/v1", api_key="x", max_retries=1)
    with http.profile() as prof:
        with pytest.raises(openai.APIConnectionError):
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    report = prof.report()
    assert report is not None
    [e] = report.endpoints
    assert e.requests == 1 and e.attempts == 2
    assert e.outcomes["refused"] == 1 and e.retried == {"refused": 1}


def test_an_sdk_call_that_raises_before_sending_leaves_nothing_in_flight(llm: LLMServer) -> None:
    """A call the SDK refuses before any attempt (a body it cannot encode) is no
    request and does not stay in flight: an in-flight count left up would make every
    later idle moment of the thread a wait on rollouts."""
    openai = pytest.importorskip("openai")
    from gyreprof.integrations._auto import rollout_log as rl

    sdk = openai.OpenAI(base_url=llm.url + "/v1", api_key="x", max_retries=0)
    msg = [{"role": "user", "content": "x"}]
    with http.profile() as prof:
        before = rl.thread_log().spans_core.in_flight
        with pytest.raises(Exception) as info:
            sdk.chat.completions.create(model="m", messages=msg, extra_body={"x": object()})
        assert isinstance(info.value, TypeError)  # refused before sending
        assert rl.thread_log().spans_core.in_flight == before
        sdk.chat.completions.create(model="m", messages=msg, max_tokens=2)
        assert rl.thread_log().spans_core.in_flight == before
    e = _one(prof.report(), _ep(llm))
    assert e.requests == 1 and e.attempts == 1 and e.outcomes["ok"] == 1


# ------------------------------------------------------------- batches, tail


def _gather(srv: LLMServer, delays: list[int]) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as c:
            rs = await asyncio.gather(
                *[c.post(CHAT, json={"max_tokens": 2, "test_delay_ms": d}) for d in delays]
            )
            assert all(r.status_code == 200 for r in rs)

    asyncio.run(main())


def test_gather_with_one_slow_request_has_a_long_tail(llm: LLMServer) -> None:
    with http.profile() as prof:
        _gather(llm, [20] * 9 + [600])
    report = prof.report()
    assert report is not None and report.batch_count == 1
    [b] = report.batches
    assert b.requests == 10 and b.tail_requests == 1 and b.tokens == 20
    # the slow one is the tail, whatever the load does to the fast ones' latency
    assert b.slowest_ms >= 600 and b.median_ms < b.slowest_ms / 2
    # the nine fast ones end well before the slow one: the tail is the batch's rest
    assert b.tail_share > 0.5
    assert b.words.startswith("the batch waited ") and b.words.endswith("its last 1 of 10 requests")
    assert report.tail_dominates
    e = _one(report, _ep(llm))
    assert e.in_flight_max == 10 and e.batches == 1


def test_gather_of_equally_slow_requests_has_no_tail(llm: LLMServer) -> None:
    # slow, but evenly so: the naive "the batch was slow, so it had a long tail" is wrong
    with http.profile() as prof:
        _gather(llm, [800] * 10)
    report = prof.report()
    assert report is not None and report.batch_count == 1
    assert report.batches[0].tail_share < 0.3
    assert not report.tail_dominates


def test_sequential_requests_make_no_batch(llm: LLMServer) -> None:
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        for _ in range(5):
            c.post(CHAT, json={"max_tokens": 1})
    report = prof.report()
    assert report is not None and report.batch_count == 0
    assert _one(report, _ep(llm)).in_flight_max == 1


def test_thread_pool_batch_across_threads(llm: LLMServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    together = threading.Barrier(6)  # the pool's threads start lazily: send all at once

    def one(d: int) -> int:
        together.wait(timeout=30)
        return httpx.post(llm.url + CHAT, json={"max_tokens": 3, "test_delay_ms": d}).status_code

    with http.profile() as prof, ThreadPoolExecutor(6) as pool:
        assert list(pool.map(one, [150] * 5 + [800])) == [200] * 6
    report = prof.report()
    assert report is not None and report.batch_count == 1, report.batches
    assert report.batches[0].requests == 6 and report.batches[0].tail_share > 0.5, report.batches


# ------------------------------------------------------------------ bad bodies


def test_non_json_and_oversized_bodies_are_counted_not_raised(llm: LLMServer) -> None:
    big = rl.BODY_CAP + 4096
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        r = c.post(CHAT, json={"test_body": "text"})
        assert r.text == "<html>this is not json</html>"
        r = c.post(CHAT, json={"test_body": f"big:{big}", "max_tokens": 9})
        assert len(r.content) == big and r.json()["usage"]["completion_tokens"] == 9
    e = _one(prof.report(), _ep(llm))
    assert e.not_json == 1 and e.oversized == 1
    assert e.outcomes["ok"] == 2
    assert e.completion_tokens == 0  # the big body was not scanned
    assert e.bytes_in >= big


def test_scan_body_is_bounded_and_reads_the_named_fields() -> None:
    assert rl.scan_body(b'{"choices": [], "usage": {"prompt_tokens": 3}}') == (3, -1, "choices", 0)
    assert rl.scan_body(b'{"object": "list", "data": []}')[2] == "data"
    assert rl.scan_body(b'{"choices": [{"x": 1}], "data": []}')[2] is None  # choices wins
    assert rl.scan_body(b" []")[2] == "(list)"
    assert rl.scan_body(b"not json")[3] == 1
    assert rl.scan_body(b"{" + b" " * rl.BODY_CAP + b"}")[3] == 2


# ------------------------------------------------- the client is unchanged


def test_instrumentation_changes_no_result_or_exception(llm: LLMServer) -> None:
    with http.profile():
        with httpx.Client(base_url=llm.url) as c:
            req = c.build_request("POST", CHAT, json={"max_tokens": 3})
            patched = c.send(req)
            bare = type(c).send.__wrapped__(
                c, c.build_request("POST", CHAT, json={"max_tokens": 3})
            )
            assert patched.status_code == bare.status_code
            assert patched.json()["usage"] == bare.json()["usage"]
            assert patched.json()["choices"] == bare.json()["choices"]
            errs = []
            for send in (c.send, lambda r: type(c).send.__wrapped__(c, r)):
                try:
                    send(c.build_request("POST", CHAT, json={"test_reset": 1}))
                except Exception as exc:  # noqa: BLE001 - compared below
                    errs.append(type(exc))
            assert errs == [httpx.ReadError, httpx.ReadError]
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(  # noqa: S310 - 127.0.0.1
                urllib.request.Request(
                    llm.url + CHAT,
                    data=json.dumps({"test_status": 502}).encode(),
                    headers={"content-type": "application/json"},
                )
            )
        assert info.value.code == 502


def test_patching_twice_counts_once(llm: LLMServer) -> None:
    from gyreprof.integrations.http import httpx as httpx_instrumentor

    httpx_instrumentor.install(httpx)
    httpx_instrumentor.install(httpx)
    with http.profile() as prof:
        httpx.post(llm.url + CHAT, json={"max_tokens": 1})
    assert _one(prof.report(), _ep(llm)).requests == 1


# ------------------------------------------------------------ records, folding


def test_record_round_trip_and_corrupt_records(llm: LLMServer, tmp_path: Any) -> None:
    with http.profile() as prof:
        _gather(llm, [10, 10, 50])
    logs = rl.logs_since(prof._mark)
    record = rollout_record.from_logs(logs)
    assert record is not None
    path = tmp_path / "1.rollouts.json"
    path.write_text(record.to_json())
    again = rollout_record.read(path)
    assert again.rows() == record.rows()
    assert rollout_record.report([again]) == prof.report()
    bad = json.loads(record.to_json())
    bad["spans"][0][3] = "weird"
    path.write_text(json.dumps(bad))
    with pytest.raises(CorruptDataError):
        rollout_record.read(path)
    bad["spans"][0] = bad["spans"][0][:3]
    path.write_text(json.dumps(bad))
    with pytest.raises(CorruptDataError):
        rollout_record.read(path)
    path.write_text("[" * 100000)
    with pytest.raises(ValueError):
        rollout_record.read(path)
    path.write_text('{"format": "gyreprof.rollout-record/9"}')
    with pytest.raises(ValueError):
        rollout_record.read(path)


def test_report_json_round_trip(llm: LLMServer) -> None:
    with http.profile() as prof:
        _gather(llm, [5, 5, 5, 60])
    report = prof.report()
    assert report is not None
    data = json.loads(json.dumps(report.to_dict()))
    assert data["format"] == ar.FORMAT
    assert ar.RolloutReport.from_dict(data) == report
    assert "rollout requests (4 over 1 endpoint(s))" in str(report)


def test_old_spans_fold_into_totals(monkeypatch: pytest.MonkeyPatch, llm: LLMServer) -> None:
    monkeypatch.setattr(rl, "SPAN_CAP", 8)
    with http.profile() as prof, httpx.Client(base_url=llm.url) as c:
        for _ in range(13):
            c.post(CHAT, json={"max_tokens": 2})
    report = prof.report()
    assert report is not None
    e = _one(report, _ep(llm))
    assert e.requests == 13 and e.completion_tokens == 26 and e.outcomes["ok"] == 13
    assert report.folded_requests == 8 and report.notes


def test_endpoint_folding() -> None:
    assert rl.fold_path("/v1/models/123/x?y=1") == "/v1/models/{id}/x"
    assert rl.fold_path("/v1/batches/batch_abc123def456ghi789") == "/v1/batches/{id}"
    assert rl.fold_path("/v1/files/1f0e2d3c4b5a69788") == "/v1/files/{id}"
    assert rl.fold_path("/v1/chat/completions") == "/v1/chat/completions"
    assert rl.endpoint("HTTPS", "h", None, "/a") == "https://h:443/a"


# -------------------------------------------------------------- core spans


def test_core_spans_in_flight_gauge() -> None:
    from gyreprof._core.recorder import Spans
    from gyreprof.recording.profiler import Profiler

    prof = Profiler(["request"])
    spans = Spans(prof.recorder)
    a = spans.begin()
    b = spans.begin()
    c = spans.begin()
    assert spans.in_flight == 3 and spans.max_in_flight == 3
    spans.end(0, b)
    spans.end(0, a)
    d = spans.begin()
    spans.end(0, c)
    spans.end(0, d)
    assert spans.end(0, d) >= 0 and spans.unmatched == 1
    g = spans.gauge()
    assert g["in_flight"] == 0 and g["max_in_flight"] == 3 and g["begun"] == 4
    assert 0 < g["at_max_ns"] <= g["busy_ns"] <= g["elapsed_ns"]
    assert 1.0 <= g["mean_in_flight"] * g["elapsed_ns"] / g["busy_ns"] <= 3.0
    assert prof.summary().phases["request"].count == 5  # ring and histograms, as record()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            spans.begin()
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1  # one writer per recorder, as every core write


def test_in_flight_and_batches_on_known_spans() -> None:
    def row(start: int, end: int, pid: int = 1) -> ar.SpanRow:
        return ar.SpanRow(
            "e", start, end, "ok", 1, 2, -1, 0, 1, (), 0, 0, False, None, 0, 0, "x", pid
        )

    # 0..10 and 5..20 overlap (one batch), 30..31 alone, 40..50 in another process
    spans = [row(0, 10), row(5, 20), row(30, 31), row(40, 50, pid=2), row(45, 46, pid=2)]
    mean, peak, at_max, busy = ar.in_flight(spans)
    assert peak == 2 and busy == 20 + 1 + 10
    assert at_max == pytest.approx((5 + 1) / 50)
    assert mean == pytest.approx((10 + 15 + 1 + 10 + 1) / 50)
    bs = sorted(ar.batches_of([s for s in spans if s.pid == 1]), key=lambda b: b.start_ns)
    assert [b.requests for b in bs] == [2]
    # the first request ended at 10 of 20: the batch waited half its time for the last one
    assert bs[0].tail_share == pytest.approx(0.5) and bs[0].tail_requests == 1
    report = ar.analyse(spans)
    assert report is not None and report.batch_count == 2


# ------------------------------------------------ requests and aiohttp failures


def test_requests_failure_classes_and_event_stream(llm: LLMServer) -> None:
    requests = pytest.importorskip("requests")
    url = llm.url + CHAT
    with http.profile() as prof:
        with pytest.raises(requests.ConnectionError):
            requests.post(f"http://127.0.0.1:{closed_port()}{CHAT}", json={})
        with pytest.raises(requests.Timeout):
            requests.post(url, json={"test_delay_ms": 400}, timeout=0.05)
        with pytest.raises(requests.ConnectionError):
            requests.post(url, json={"test_reset": 1})
        with requests.post(
            url, json={"stream": True, "max_tokens": 3, "test_delay_ms": 60}, stream=True
        ) as r:
            lines = [x for x in r.iter_lines() if x]
    assert lines[-1] == b"data: [DONE]"
    report = prof.report()
    assert report is not None
    e = _one(report, _ep(llm))
    assert e.outcomes["timeout"] == 1 and e.outcomes["reset"] == 1 and e.outcomes["ok"] == 1
    assert e.streams == 1 and e.completion_tokens == 3
    assert e.ttft.p50 is not None and e.ttft.p50 >= 60.0
    assert sum(x.outcomes["refused"] for x in report.endpoints) == 1


def test_aiohttp_failure_classes(llm: LLMServer) -> None:
    aiohttp = pytest.importorskip("aiohttp")

    async def main() -> list[str]:
        seen = []
        async with aiohttp.ClientSession() as s:
            for url, body, timeout in (
                (f"http://127.0.0.1:{closed_port()}{CHAT}", {}, 5.0),
                (llm.url + CHAT, {"test_delay_ms": 400}, 0.05),
                (llm.url + CHAT, {"test_status": 500}, 5.0),
                (llm.url + CHAT, {"test_empty": 1}, 5.0),
            ):
                try:
                    t = aiohttp.ClientTimeout(total=timeout)
                    async with s.post(url, json=body, timeout=t) as r:
                        await r.read()
                        seen.append(str(r.status))
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    seen.append(type(exc).__name__)
        return seen

    with http.profile() as prof:
        seen = asyncio.run(main())
    assert seen[2:] == ["500", "200"]
    report = prof.report()
    assert report is not None
    e = _one(report, _ep(llm))
    assert e.outcomes["timeout"] == 1 and e.outcomes["5xx"] == 1 and e.outcomes["empty"] == 1
    assert sum(x.outcomes["refused"] for x in report.endpoints) == 1


def test_unknown_library_version_is_left_alone_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gyreprof.integrations.http import _common

    assert _common.known("httpx", "0.28.1")
    assert not _common.known("aiohttp", "9.1.0")
    assert not _common.known("requests", None)
    assert "aiohttp 9.1.0 is not a version this instrumentation knows" in capsys.readouterr().err


def test_each_synchronous_request_is_a_wait_of_its_own_span(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the plain send (http._common.PlainSend) hands a plain request's span to the thread's
    # training state; a thread with none yet goes through trainer_wait (a worker thread,
    # not the default trainer: no wait), and a metadata probe is never a wait
    import requests

    from gyreprof.integrations._auto import rollout_log as rl
    from gyreprof.integrations._auto import state as st
    from gyreprof.integrations._auto.thread_state import ThreadState

    calls: list[tuple[int, int, int]] = []
    monkeypatch.setattr(
        ThreadState,
        "request_wait",
        lambda self, a, b, default_main: calls.append((a, b, threading.get_ident())),
    )
    probe = rl.capped(rl.endpoint("http", "127.0.0.1", llm.port, "/v1/models"))
    seen: list[Any] = []

    def worker() -> None:
        with http.profile() as prof:
            httpx.post(llm.url + CHAT, json={"max_tokens": 1})  # no state yet
            seen.append(list(calls))
            st.thread_state()  # the thread now has its training state
            httpx.post(llm.url + CHAT, json={"max_tokens": 1, "test_delay_ms": 50})
            requests.post(llm.url + CHAT, json={"max_tokens": 1, "test_delay_ms": 50})
            rl.probe_endpoints.add(probe)
            try:
                httpx.get(llm.url + "/v1/models")  # a probe: a span, no wait
            finally:
                rl.probe_endpoints.discard(probe)
            seen.append(_spans(prof))

    th = threading.Thread(target=worker)
    th.start()
    th.join(60)
    [before, spans] = seen
    assert before == [] and len(spans) == 4 and spans[3].endpoint == probe
    assert [(s.start, s.end, th.ident) for s in spans[1:3]] == calls
    assert all(end - start >= 50_000_000 for start, end, _ in calls)


def test_a_training_threads_plain_requests_are_data_waits_of_its_timeline(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the plain send hands a plain request's span to the thread's timeline
    # (its request_wait): on a thread that trains, the spans become the open
    # collect block's data wait, from the first request's start to the last one's end
    import requests

    from gyreprof.integrations._auto import state as st

    monkeypatch.setattr(st, "_default_main", st._default_main)  # update_signal clears it
    seen: list[tuple[int, int, int, int]] = []
    tsc: list[bool] = []

    def worker() -> None:
        c = httpx.Client(base_url=llm.url)
        req = c.build_request("POST", CHAT, json={"max_tokens": 1})
        s = requests.Session()
        prep = s.prepare_request(requests.Request("POST", llm.url + CHAT, json={"max_tokens": 1}))
        with http.profile() as prof:
            t = st.thread_state()
            st.update_signal(t, t.now())  # the thread trains: its requests are waits
            tsc.append(bool(t.srec.use_tsc))
            for send in (lambda: c.send(req), lambda: s.send(prep)):
                send()
                last = _spans(prof)[-1]
                seen.append((t.blk_start, t.blk_end, last.start, last.end))
        c.close()

    th = threading.Thread(target=worker)
    th.start()
    th.join(60)
    assert len(seen) == 2, seen
    (b0, e0, s0, end0), (b1, e1, s1, end1) = seen
    assert 0 < s0 < end0 <= s1 < end1
    if tsc == [False]:  # the sampler's clock is CLOCK_MONOTONIC: the same ns
        assert (b0, e0) == (s0, end0) and (b1, e1) == (s0, end1)
    else:  # the TSC's offset from CLOCK_MONOTONIC is added to both ends
        assert e0 - b0 == end0 - s0 and e1 - b1 == end1 - s0


def test_http_client_and_urllib3_directly_counted_once(llm: LLMServer) -> None:
    import http.client as http_client

    urllib3 = pytest.importorskip("urllib3")
    body = json.dumps({"prompt": "a b", "max_tokens": 3})
    with http.profile() as prof:
        conn = http_client.HTTPConnection("127.0.0.1", llm.port, timeout=10)
        conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
        resp = conn.getresponse()
        assert json.loads(resp.read())["usage"]["completion_tokens"] == 3
        conn.close()
        pool = urllib3.PoolManager()
        r = pool.request("POST", llm.url + "/v1/completions", body=body.encode())
        assert r.status == 200
        bad = http_client.HTTPConnection("127.0.0.1", closed_port(), timeout=10)
        with pytest.raises(ConnectionRefusedError):
            bad.request("GET", "/x")
    llm.wait_logged(2)  # the server logs a request after it answers
    report = prof.report()
    assert report is not None
    e = _one(report, _ep(llm, "/v1/completions"))
    assert e.requests == 2 == len([x for x in llm.log if x.path == "/v1/completions"])
    assert e.clients == ["http.client"] and e.completion_tokens >= 3
    assert sum(x.outcomes["refused"] for x in report.endpoints) == 1


def test_the_launcher_registers_every_client_the_patches_know() -> None:
    # the bootstrap registers http.CLIENTS (each client's module loads when it is
    # imported): a client module that patches a library the list lacks would go
    # uninstrumented under gyreprof run
    import importlib

    listed: set[str] = set()
    for name, module in http.CLIENTS.items():
        inst = importlib.import_module(f"gyreprof.integrations.http.{module}")
        assert name in inst.MODULES
        listed.update(inst.MODULES)
    assert listed == set(http.CLIENTS)
