"""The fast path of a plain synchronous request (httpx, requests: one attempt, no stream)
records its span with no ``Request`` object; its rows must be the general path's."""

from __future__ import annotations

import contextvars
import json
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from gyreprof.integrations import http  # noqa: E402
from gyreprof.integrations._auto import rollout_log as rl  # noqa: E402
from gyreprof.integrations.http import httpx as hx  # noqa: E402

USAGE = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
ANSWERS: list[tuple[int, bytes]] = [
    (200, json.dumps({"choices": [{"index": 0}], "usage": USAGE}).encode()),
    (500, b'{"error": "x"}'),  # a failure: the next request is a retry of it
    (200, json.dumps({"choices": [], "usage": USAGE}).encode()),  # empty
    (200, json.dumps({"object": "list", "data": []}).encode()),  # empty by its data
    (200, b"<html>not json</html>"),
    (404, json.dumps({"choices": []}).encode()),  # a 4xx stays a 4xx
    (200, json.dumps({"choices": [{"i": 0}], "usage": {"prompt_tokens": 7}}).encode()),
]


def _rows(send: Any) -> list[tuple[Any, ...]]:
    """Each answer sent once through ``send`` in a fresh context; the rows without times."""
    before = len(rl.thread_log().spans)

    def run() -> None:
        for status, body in ANSWERS:
            send(status, body)

    contextvars.copy_context().run(run)
    rows = [rl.as_row(s) for s in rl.thread_log().spans[before:]]
    return [r[: rl.R_START] + r[rl.R_END + 1 :] for r in rows]


def test_plain_httpx_rows_are_the_general_paths() -> None:
    prof = http.profile()  # patches httpx
    answers: list[tuple[int, bytes]] = []
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda req: httpx.Response(answers[0][0], content=answers.pop(0)[1])
        )
    )
    req = client.build_request("POST", "http://mock/v1/chat/completions", json={"x": 1})
    bare = type(client).send.__wrapped__  # type: ignore[attr-defined]

    def plain(status: int, body: bytes) -> None:
        answers.append((status, body))
        client.send(req)

    def general(status: int, body: bytes) -> None:
        answers.append((status, body))
        resp = bare(client, req)
        r = hx.open_request(req)
        hx.done(r, resp, False, httpx)

    try:
        got, want = _rows(plain), _rows(general)
    finally:
        prof.close()
    assert len(got) == len(ANSWERS)
    assert got == want
    outcomes = [r[rl.R_OUTCOME - 2] for r in got]  # the row without start and end
    assert outcomes == ["ok", "5xx", "empty", "empty", "ok", "4xx", "ok"]
    assert got[2][rl.R_RETRIED - 2] == ("5xx",)  # after the 500: a retry of it


def test_plain_httpx_failure_is_classified_and_raised() -> None:
    def refuse(req: Any) -> Any:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    with http.profile():
        before = len(rl.thread_log().spans)
        with pytest.raises(httpx.ConnectError):
            client.get("http://mock/v1/models")
        rows = [rl.as_row(s) for s in rl.thread_log().spans[before:]]
    assert len(rows) == 1 and rows[0][rl.R_ATTEMPTS] == 1
    assert rows[0][rl.R_OUTCOME] in ("refused", "error")
    assert rows[0][rl.R_END] >= rows[0][rl.R_START]
