"""Each HTTP client's instrumentor patches and unpatches within one process: after
``uninstrument()`` every patched attribute is the very object it was before (identity),
and a request is no longer recorded; ``http.profile()`` restores what it patched when it
ends, and leaves in place what an enclosing ``instrument()`` (``gyreprof run``) patched.
Real clients against a real server on 127.0.0.1 (tests/helpers/llm_server)."""

from __future__ import annotations

import asyncio
import http.client as http_client
import importlib
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from gyreprof.integrations import http  # noqa: E402
from gyreprof.integrations._auto import rollout_log as rl  # noqa: E402

from helpers.llm_server import LLMServer  # noqa: E402

CHAT = "/v1/chat/completions"
BODY = {"messages": [{"role": "user", "content": "a b"}], "max_tokens": 2}
MISSING = object()


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


def _targets(client: str) -> list[tuple[type, str]]:
    """The attributes the instrumentor of ``client`` patches (classes and names)."""
    if client == "httpx":
        return [(httpx.Client, "send"), (httpx.AsyncClient, "send")]
    if client == "requests":
        requests = pytest.importorskip("requests")
        return [(requests.Session, "send")]
    if client == "urllib":
        urllib3 = pytest.importorskip("urllib3")
        return [
            (urllib.request.OpenerDirector, "open"),
            (http_client.HTTPConnection, "request"),
            (http_client.HTTPConnection, "getresponse"),
            (http_client.HTTPConnection, "_gyreprof_request"),
            (urllib3.connection.HTTPConnection, "request"),
            (urllib3.connection.HTTPConnection, "getresponse"),
        ]
    if client == "aiohttp":
        aiohttp = pytest.importorskip("aiohttp")
        return [(aiohttp.ClientSession, "_request"), (aiohttp.ClientResponse, "release"),
                (aiohttp.ClientResponse, "close"),
                *((aiohttp.StreamReader, name) for name in ("read", "readany", "readline",
                  "readuntil", "readchunk", "readexactly"))]  # fmt: skip
    openai = pytest.importorskip("openai")
    base = openai._base_client
    # the SDK's attempts are its httpx sends: patched with it when they were not
    return [(base.SyncAPIClient, "request"), (base.AsyncAPIClient, "request"),
            *_targets("httpx")]  # fmt: skip


def _state(targets: list[tuple[type, str]]) -> list[Any]:
    out = []
    for cls, name in targets:
        out.append(cls.__dict__.get(name, MISSING))
        out.append(cls.__dict__.get("__init_subclass__", MISSING))
    return out


def _one_request(client: str, url: str) -> None:
    if client == "httpx":
        httpx.post(url + CHAT, json=BODY)
    elif client == "requests":
        importlib.import_module("requests").post(url + CHAT, json=BODY)
    elif client == "urllib":
        with urllib.request.urlopen(url + "/v1/models") as r:  # noqa: S310 - 127.0.0.1
            r.read()
    elif client == "aiohttp":
        aiohttp = importlib.import_module("aiohttp")

        async def go() -> None:
            async with aiohttp.ClientSession() as s, s.post(url + CHAT, json=BODY) as r:
                await r.read()

        asyncio.run(go())
    else:
        sdk = importlib.import_module("openai").OpenAI(
            base_url=url + "/v1", api_key="x", max_retries=0
        )
        sdk.chat.completions.create(model="m", messages=BODY["messages"], max_tokens=2)


def _recorded(fn: Callable[[], None]) -> list[Any]:
    """The spans ``fn`` left in this thread's request log."""
    log = rl.thread_log()
    before = len(log.spans)
    fn()
    return [rl.as_row(s) for s in log.spans[before:]]


@pytest.mark.parametrize("client", ["httpx", "requests", "urllib", "aiohttp", "openai"])
def test_instrument_and_uninstrument_round_trip(client: str, server: LLMServer) -> None:
    targets = _targets(client)
    inst = importlib.import_module(f"gyreprof.integrations.http.{client}")
    assert not http.instrumented()
    before = _state(targets)
    assert inst.instrument()
    try:
        patched = _state(targets)
        for (cls, name), old, new in zip(targets, before[::2], patched[::2], strict=True):
            assert new is not old, f"{cls.__qualname__}.{name} not patched"
            if old is not MISSING and callable(old):
                assert new.__wrapped__ is old  # the original, one wrapper down
        assert inst.instrument()  # twice: nothing more
        assert _state(targets) == patched
        rows = _recorded(lambda: _one_request(client, server.url))
        assert len(rows) == 1 and rows[0][rl.R_OUTCOME] == "ok"
        assert rows[0][rl.R_CLIENT] == {"urllib": "urllib"}.get(client, client)
    finally:
        inst.uninstrument()
    after = _state(targets)
    assert all(a is b for a, b in zip(before, after, strict=True))  # the very originals
    assert _recorded(lambda: _one_request(client, server.url)) == []


def test_profile_restores_what_it_patched(server: LLMServer) -> None:
    targets = [t for c in ("httpx", "requests", "urllib") for t in _targets(c)]
    before = _state(targets)
    with http.profile() as prof:
        assert http.instrumented()
        assert _state(targets)[0] is not before[0]
        httpx.post(server.url + CHAT, json=BODY)
    assert not http.instrumented()
    assert all(a is b for a, b in zip(before, _state(targets), strict=True))
    report = prof.report()
    assert report is not None and sum(e.requests for e in report.endpoints) == 1
    assert _recorded(lambda: _one_request("httpx", server.url)) == []  # no longer recorded


def test_profile_nests_under_a_process_wide_instrumentation(server: LLMServer) -> None:
    targets = _targets("httpx")
    before = _state(targets)
    http.instrument()  # as ``gyreprof run`` does, for the whole process
    try:
        patched = _state(targets)
        with http.profile():
            with http.profile() as inner:
                httpx.post(server.url + CHAT, json=BODY)
            assert _state(targets) == patched  # the enclosing ones keep theirs
        assert http.instrumented() and _state(targets) == patched
        assert inner.report() is not None
        assert len(_recorded(lambda: _one_request("httpx", server.url))) == 1
    finally:
        http.uninstrument()
    assert not http.instrumented()
    assert all(a is b for a, b in zip(before, _state(targets), strict=True))
    http.uninstrument()  # one too many: nothing to undo
    assert not http.instrumented()


def test_a_client_imported_later_is_patched_only_while_instrumented() -> None:
    import sys

    from gyreprof.integrations.http import _common

    seen: list[str] = []
    real = http._instrumentor

    class Fake:
        @staticmethod
        def install(module: Any) -> bool:
            seen.append(module.__name__)
            return True

    http._instrumentor = lambda name: Fake  # type: ignore[assignment]
    try:
        mod = type(sys)("httpx2")
        http._install("httpx2", mod)  # what the post-import hook calls
        assert seen == []  # not instrumented: left alone
        http.instrument()  # the clients already imported are installed now
        assert "httpx" in seen
        seen.clear()
        http._install("httpx2", mod)
        assert seen == ["httpx2"] and rl.first_request_hook is _common.start_recording
    finally:
        http._instrumentor = real  # type: ignore[assignment]
        http.uninstrument()
    assert rl.first_request_hook is None  # the last uninstrument undoes it too
