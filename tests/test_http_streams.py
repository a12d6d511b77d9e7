"""Streamed answers and token counts through every client, cut anywhere (issue 34).

A real 127.0.0.1 server (``tests/helpers/llm_server``) writes an OpenAI-style answer
(chat completion chunks with a final ``usage`` chunk, or one JSON body) in pieces cut
at the byte offsets a test picks; the real clients read them as they come, patched as
``gyreprof run`` patches them. Tokens must be exact whatever the cuts, for httpx (sync
and async), requests, the openai SDK, aiohttp (each of its ways to read a body) and
urllib; ``usage`` is read for every status. The compiled scan alone is checked against
the regular expressions it stands for, cut at every byte.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gyreprof._core.bodyscan import StreamScan
from gyreprof.analysis import rollouts as ar
from gyreprof.integrations import http
from gyreprof.integrations._auto import rollout_log as rl

from helpers.llm_server import LLMServer

CHAT = "/v1/chat/completions"
PROMPT = "one two three four five"  # 5 prompt tokens (the server counts words)
BIG = 611178002  # a count long enough to be cut inside


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


def _spans(prof: http.HttpProfile) -> list[ar.SpanRow]:
    rows = [rl.as_row(s) for log in rl.logs_since(prof._mark) for s in log.spans]
    return [ar.SpanRow(*row) for row in rows]


def _body(cuts: list[int], stream: bool, max_tokens: int = BIG, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "tiny",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "test_cuts": cuts,
        "test_cut_pause_ms": 2,
        **extra,
    }
    body["test_events"] = 3
    if stream:
        body["stream"] = True
    return body


# ------------------------------------------------------------- the scan alone

_TOKENS = re.compile(rb'"(prompt|completion)_tokens"\s*:\s*(\d{1,12})')
_CHOICE = re.compile(rb'"choices"\s*:\s*\[\s*[^\]\s]')


def _reference(data: bytes) -> tuple[int, int, bool]:
    p = c = -1
    for key, value in _TOKENS.findall(data):
        if key == b"prompt":
            p = int(value)
        else:
            c = int(value)
    return p, c, _CHOICE.search(data) is not None


def _scanned(pieces: list[bytes]) -> tuple[int, int, bool]:
    s = StreamScan()
    for piece in pieces:
        s.feed(piece)
    return s.prompt_tokens, s.completion_tokens, s.saw_choice


def _sse(prompt: int, completion: int, events: int = 2) -> bytes:
    out = []
    for _ in range(events):
        ev = {"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]}  # fmt: skip
        out.append(f"data: {json.dumps(ev)}\n\n")
    last = {"id": "c", "choices": [], "usage": {"prompt_tokens": prompt,
            "completion_tokens": completion, "total_tokens": prompt + completion}}  # fmt: skip
    out.append(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n")
    return "".join(out).encode()


def test_a_number_cut_between_chunks_is_read_whole() -> None:
    assert _scanned([b'{"usage":{"completion_tokens":611178', b"002}}"]) == (-1, 611178002, False)
    assert _scanned([b'{"usage":{"completion_tok', b'ens"', b" :", b" 7", b"}}"]) == (-1, 7, False)
    assert _scanned([b'"choices"', b":", b" [", b" {"]) == (-1, -1, True)
    assert _scanned([b'"choices": [', b" ]"]) == (-1, -1, False)
    # the closing quote of one key may open the next one (as the expression reads it)
    assert _scanned([b'"prompt_tokens"completion_tokens": 3']) == (-1, 3, False)
    # 12 digits at most, as the whole-body scan reads them
    assert _scanned([b'"prompt_tokens": 1234567890123']) == (123456789012, -1, False)


def test_every_cut_of_a_real_answer_reads_the_same() -> None:
    data = _sse(17, BIG)
    want = _reference(data)
    assert want == (17, BIG, True)
    for i in range(len(data) + 1):
        assert _scanned([data[:i], data[i:]]) == want, i
    body = json.dumps({"choices": [{"message": {"content": "x"}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 123456}}).encode()  # fmt: skip
    for i in range(len(body) + 1):
        for j in range(i, len(body) + 1, 7):
            assert _scanned([body[:i], body[i:j], body[j:]]) == (3, 123456, True), (i, j)


@st.composite
def _cut(draw: Any, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=12)))
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_cuts_of_answers_match_the_expressions(data: st.DataObject) -> None:
    prompt = data.draw(st.integers(0, 10**12 - 1))
    completion = data.draw(st.integers(0, 10**12 - 1))
    whole = data.draw(st.sampled_from([
        _sse(prompt, completion, data.draw(st.integers(0, 3))),
        json.dumps({"choices": [], "usage": {"prompt_tokens": prompt,
                                             "completion_tokens": completion}},
                   indent=data.draw(st.sampled_from([None, 1, 4]))).encode(),
    ]))  # fmt: skip
    pieces = data.draw(_cut(whole))
    assert _scanned(pieces) == _reference(whole)
    assert _scanned(pieces)[:2] == (prompt, completion)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.data())
def test_any_bytes_cut_anywhere_match_the_expressions(whole: bytes, data: st.DataObject) -> None:
    # bytes rich in the keys' own pieces, so that near-misses are common
    alphabet = [b'"', b"prompt_tokens", b"completion_tokens", b"choices", b":", b" ", b"[",
                b"]", b"1", b"42", b"_tokens", b"\n", b"x"]  # fmt: skip
    parts = data.draw(st.lists(st.sampled_from(alphabet), max_size=120))
    # once a non-empty choices list was seen, the scan skips to the token keys: drawn often
    head = data.draw(st.sampled_from([b"", b'"choices": [{', b'"choices":[]']))
    whole = head + whole[:20] + b"".join(parts)
    assert _scanned(data.draw(_cut(whole))) == _reference(whole)


def test_a_request_reads_its_stream_across_chunks() -> None:
    req = rl.Request("http://h:1/v1/chat/completions", "httpx")
    req.stream = True
    data = _sse(9, BIG)
    for i in range(0, len(data), 5):
        req.chunk(data[i : i + 5])
    req.finish()
    assert (req.prompt_tokens, req.completion_tokens, req.outcome) == (9, BIG, "ok")


# ------------------------------------------------- every client, cut on the wire

httpx = pytest.importorskip("httpx")
pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

CLIENTS = ["httpx", "httpx-async", "requests", "openai", "openai-async", "aiohttp-lines",
           "aiohttp-chunked", "aiohttp-any", "aiohttp-readline", "aiohttp-read",
           "aiohttp-chunks"]  # fmt: skip


def _stream_with(client: str, url: str, body: dict[str, Any]) -> int:
    """Read the streamed answer of ``body`` with ``client`` as a user does; the bytes read."""
    if client == "httpx":
        with httpx.Client() as c, c.stream("POST", url + CHAT, json=body) as r:
            return sum(len(b) for b in r.iter_bytes())
    if client == "httpx-async":

        async def go_httpx() -> int:
            async with httpx.AsyncClient() as c, c.stream("POST", url + CHAT, json=body) as r:
                return sum([len(b) async for b in r.aiter_bytes()])

        return asyncio.run(go_httpx())
    if client == "requests":
        requests = pytest.importorskip("requests")
        with requests.post(url + CHAT, json=body, stream=True) as r:
            return sum(len(b) for b in r.iter_content(chunk_size=None))
    if client.startswith("openai"):
        openai = pytest.importorskip("openai")
        kw = {k: v for k, v in body.items() if k.startswith("test_")}
        args = dict(model="tiny", messages=body["messages"], max_tokens=body["max_tokens"],
                    stream=True, extra_body=kw)  # fmt: skip
        if client == "openai":
            sdk = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            return sum(1 for _ in sdk.chat.completions.create(**args))

        async def go_sdk() -> int:
            sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            n = sum([1 async for _ in await sdk.chat.completions.create(**args)])
            await sdk.close()
            return n

        return asyncio.run(go_sdk())
    return asyncio.run(_aiohttp_read(client.split("-", 1)[1], url, body))


async def _aiohttp_read(how: str, url: str, body: dict[str, Any]) -> int:
    aiohttp = pytest.importorskip("aiohttp")
    async with aiohttp.ClientSession() as s, s.post(url + CHAT, json=body) as r:
        n = 0
        if how == "lines":
            async for line in r.content:
                n += len(line)
        elif how == "chunked":
            async for piece in r.content.iter_chunked(7):
                n += len(piece)
        elif how == "any":
            async for piece in r.content.iter_any():
                n += len(piece)
        elif how == "chunks":
            async for piece, _ in r.content.iter_chunks():
                n += len(piece)
        elif how == "readline":
            while line := await r.content.readline():
                n += len(line)
        elif how == "read":
            n = len(await r.read())
        elif how == "json":
            n = len(json.dumps(await r.json(content_type=None)))
        else:
            raise AssertionError(how)
        return n


def _the_one(prof: http.HttpProfile) -> ar.SpanRow:
    spans = [s for s in _spans(prof) if s.endpoint.endswith(CHAT)]
    assert len(spans) == 1, spans
    return spans[0]


@pytest.mark.parametrize("client", CLIENTS)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(cuts=st.lists(st.integers(1, 900), max_size=6))
def test_streams_cut_anywhere_give_exact_tokens(
    server: LLMServer, client: str, cuts: list[int]
) -> None:
    server.clear()
    with http.profile() as prof:
        _stream_with(client, server.url, _body(cuts, stream=True))
    [entry] = server.settled_log()
    s = _the_one(prof)
    assert (s.prompt_tokens, s.completion_tokens) == (entry.prompt_tokens, entry.completion_tokens)
    assert (s.prompt_tokens, s.completion_tokens) == (5, BIG)
    assert s.stream and s.outcome == "ok" and s.chunks >= 1 and s.ttft >= 0
    assert s.bytes_in > 0


def test_each_of_the_cuts_on_the_wire(server: LLMServer) -> None:
    """One answer cut at every fifth byte of its usage event: each cut through each of
    the stream clients (a cut in the number itself is among them)."""
    whole = _sse(5, BIG, 3)
    at = whole.index(b'"completion_tokens"', whole.index(b'"usage"'))
    for client in ("httpx", "requests", "aiohttp-any", "openai"):
        for cut in range(at, at + 32, 3):
            server.clear()
            with http.profile() as prof:
                _stream_with(client, server.url, _body([cut, cut + 3], stream=True))
            s = _the_one(prof)
            assert (s.prompt_tokens, s.completion_tokens) == (5, BIG), (client, cut)


def test_aiohttp_stream_is_timed_as_it_is_read(server: LLMServer) -> None:
    """Chunks 30 ms apart: the request ends once its body was read, not at its headers;
    its time to first token and its chunks are those the user read."""
    server.clear()
    body = {**_body([], stream=True, max_tokens=6), "test_events": 6, "test_chunk_delay_ms": 30}
    with http.profile() as prof:
        n = asyncio.run(_aiohttp_read("lines", server.url, body))
    s = _the_one(prof)
    assert n > 0 and s.stream and s.client == "aiohttp"
    assert s.chunks >= 7  # a line a read: 6 events, usage, [DONE] and the blank lines
    assert s.ttft >= 0 and (s.end - s.start) >= 5 * 30e6  # the whole body, not the headers
    assert s.end - s.start - s.ttft >= 4 * 30e6
    assert (s.prompt_tokens, s.completion_tokens) == (5, 6)
    e = prof.report()
    assert e is not None and e.endpoints[0].streams == 1 and e.endpoints[0].ttft.count == 1


def test_aiohttp_released_unread_ends_the_request(server: LLMServer) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    server.clear()

    async def go() -> None:
        async with (
            aiohttp.ClientSession() as s,
            s.post(server.url + CHAT, json=_body([], stream=True, max_tokens=4)) as r,
        ):
            await r.content.readline()  # one line, then released

    with http.profile() as prof:
        asyncio.run(go())
    s = _the_one(prof)
    assert s.stream and s.chunks == 1 and s.outcome == "ok"


@pytest.mark.parametrize(
    "client", ["httpx", "requests", "urllib", "aiohttp-read", "aiohttp-json", "aiohttp-chunked"]
)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(cuts=st.lists(st.integers(1, 400), max_size=5))
def test_json_answers_cut_anywhere_give_exact_tokens(
    server: LLMServer, client: str, cuts: list[int]
) -> None:
    server.clear()
    body = _body(cuts, stream=False)
    with http.profile() as prof:
        if client == "httpx":
            httpx.post(server.url + CHAT, json=body)
        elif client == "requests":
            pytest.importorskip("requests").post(server.url + CHAT, json=body)
        elif client == "urllib":
            req = urllib.request.Request(server.url + CHAT, data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(req) as r:  # noqa: S310 - 127.0.0.1
                while r.read(50):
                    pass
        else:
            asyncio.run(_aiohttp_read(client.split("-", 1)[1], server.url, body))
    s = _the_one(prof)
    assert (s.prompt_tokens, s.completion_tokens, s.outcome) == (5, BIG, "ok")
    assert not s.stream and s.body_flag == 0


# ----------------------------------------------------------- usage at any status


@pytest.mark.parametrize(
    "client", ["httpx", "requests", "requests-stream", "urllib", "aiohttp", "openai"]
)
@pytest.mark.parametrize("status", [429, 500, 503])
def test_usage_is_read_at_every_status(server: LLMServer, client: str, status: int) -> None:
    server.clear()
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 12,
            "test_status": status, "test_error_usage": 1}  # fmt: skip
    with http.profile() as prof:
        if client == "httpx":
            assert httpx.post(server.url + CHAT, json=body).status_code == status
        elif client.startswith("requests"):
            requests = pytest.importorskip("requests")
            r = requests.post(server.url + CHAT, json=body, stream=client != "requests")
            assert r.status_code == status and r.json()["usage"]
        elif client == "urllib":
            req = urllib.request.Request(server.url + CHAT, data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})  # fmt: skip
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req)  # noqa: S310 - 127.0.0.1
            assert json.loads(err.value.read())["usage"]
        elif client == "aiohttp":
            aiohttp = pytest.importorskip("aiohttp")

            async def go() -> None:
                async with aiohttp.ClientSession() as s, s.post(server.url + CHAT, json=body) as r:
                    assert r.status == status and (await r.json())["usage"]

            asyncio.run(go())
        else:
            openai = pytest.importorskip("openai")
            sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.APIStatusError):
                sdk.chat.completions.create(
                    model="m", messages=body["messages"], max_tokens=12,
                    extra_body={"test_status": status, "test_error_usage": 1},
                )  # fmt: skip
    s = _the_one(prof)
    assert s.outcome == ("5xx" if status >= 500 else "4xx")
    assert (s.prompt_tokens, s.completion_tokens) == (5, 12), client
