"""The compiled plain-request path of a thread's request log
(``gyreprof._core.requestlog.RequestLog``, the base of ``rollout_log.ThreadLog``): the row
it appends, the retry it reads and the failure it leaves in the context, the fold it hands
to ``add``, the log without a core, and its refusals."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from typing import Any

import pytest

from gyreprof._core.bodyscan import scan_body
from gyreprof._core.requestlog import PlainSend, RequestLog
from gyreprof.integrations._auto import hooks
from gyreprof.integrations._auto import rollout_log as rl

EP = "http://mock:80/v1/chat/completions"
BODY = json.dumps(
    {"choices": [{"index": 0}], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
)


class _Log(RequestLog):
    __slots__ = ("added",)

    def add(self, row: Any) -> None:
        self.added.append(row)
        self.spans.append(row)


def _log(var: contextvars.ContextVar[Any], span_cap: int = 1 << 10) -> _Log:
    log = _Log()
    log.bind_plain(var, scan_body, rl.BODY_CAP, span_cap)
    log.spans = []
    log.added = []
    log.ident = threading.get_ident()
    return log  # no core: times from CLOCK_MONOTONIC


def test_rows_retries_and_the_context_failure() -> None:
    var: contextvars.ContextVar[Any] = contextvars.ContextVar("t_last_failure", default=None)
    log = _log(var)

    def run() -> None:
        t0 = time.monotonic_ns()
        start, retried = log.open_plain(EP)
        assert retried == () and start >= t0
        end = log.record_plain(EP, "httpx", start, retried, "5xx", b'{"error": 1}', 12)
        assert end >= start and var.get() == (EP, "5xx")
        row = log.spans[-1]
        assert row == (EP, start, end, "5xx", -1, -1, -1, 0, 1, (), 12, 12, False, None, 0,
                       log.ident, "httpx")  # fmt: skip
        start, retried = log.open_plain(EP)
        assert retried == ("5xx",)  # the same endpoint after a failure: a retry of it
        assert log.open_plain("http://other:80/")[1] == ()
        assert log.open_plain("")[1] == ()  # no endpoint: never a retry
        end = log.record_plain(EP, "requests", start, retried, "ok", BODY.encode(), 7)
        row = log.spans[-1]
        assert row[3:6] == ("ok", 3, 5) and row[9] == ("5xx",) and row[-1] == "requests"
        assert var.get() is None  # a success clears the context's failure
        log.record_plain(EP, "httpx", start, (), "ok", b'{"choices": []}', 0)
        assert log.spans[-1][3] == "empty" and log.spans[-1][13] == "choices"
        assert var.get() == (EP, "empty")
        log.record_plain(EP, "httpx", start, (), "4xx", b'{"choices": []}', 0)
        assert log.spans[-1][3] == "4xx" and log.spans[-1][13] is None  # a 4xx stays one
        log.record_plain(EP, "httpx", start, (), "refused", None, 0)  # no body read
        assert log.spans[-1][3:6] == ("refused", -1, -1) and log.spans[-1][10] == 0

    contextvars.copy_context().run(run)
    assert var.get() is None  # the context it ran in kept it


def test_the_row_that_fills_the_kept_spans_goes_to_add() -> None:
    var: contextvars.ContextVar[Any] = contextvars.ContextVar("t_fold", default=None)
    log = _log(var, span_cap=3)
    for _ in range(4):
        start, retried = log.open_plain(EP)
        log.record_plain(EP, "httpx", start, retried, "ok", None, 0)
    assert len(log.spans) == 4 and log.added == [log.spans[2], log.spans[3]]


def test_the_thread_log_records_through_its_core() -> None:
    log = rl.ThreadLog()
    assert log.core_ok
    start, retried = log.open_plain(EP)
    before = log.spans_core.gauge()["ended"]
    end = log.record_plain(EP, "httpx", start, retried, "ok", BODY.encode(), 1)
    assert log.spans_core.gauge()["ended"] == before + 1
    assert log.spans[-1][1:3] == (start, end) and end >= start


def test_refusals_are_value_errors() -> None:
    log = RequestLog()
    with pytest.raises(ValueError, match="not bound"):
        log.open_plain(EP)
    with pytest.raises(ValueError, match="not bound"):
        log.record_plain(EP, "httpx", 1, (), "ok", None, 0)
    var: contextvars.ContextVar[Any] = contextvars.ContextVar("t_refusals", default=None)
    with pytest.raises(ValueError, match="ContextVar"):
        log.bind_plain({}, scan_body, 10, 10)
    with pytest.raises(ValueError, match="callable"):
        log.bind_plain(var, None, 10, 10)
    with pytest.raises(ValueError, match="at least 2"):
        log.bind_plain(var, scan_body, 10, 1)
    log.bind_plain(var, scan_body, 10, 10)
    with pytest.raises(ValueError, match="not bound"):  # no spans list yet
        log.open_plain(EP)
    with pytest.raises(TypeError):  # the core span is a Spans or None, nothing else
        log.spans_core = object()
    log.spans = []
    log.core_ok = True  # said usable with no span object: the clock, not a crash
    start, _ = log.open_plain(EP)
    assert log.record_plain(EP, "httpx", start, (), "ok", None, 0) >= start


# ------------------------------------------------------------------ PlainSend


class _Req:
    """A request as the clients hold one: its URL, its body (bytes, str or other)."""

    def __init__(self, url: Any, body: Any = b"{}") -> None:
        self.url = url
        self.body = body
        self.headers = {"content-length": "9"}


class _Resp:
    def __init__(self, status: Any, content: Any = None) -> None:
        self.status_code = status
        self._content = content


class _State:
    """What PlainSend reads of a thread's training state: its ``request_wait``."""

    def __init__(self) -> None:
        self.waits: list[tuple[int, int, int]] = []

    def request_wait(self, start: int, end: int, default_main: int) -> None:
        self.waits.append((start, end, default_main))


def _plain(answer: Any, *, layer: Any = None, key_attr: str | None = None) -> Any:
    """A client class whose ``send`` is a PlainSend over ``answer(request, **kw)``, with
    its own thread-local log and state namespaces, and the record of every call."""
    active: contextvars.ContextVar[Any] = contextvars.ContextVar("t_active", default=None)
    failure: contextvars.ContextVar[Any] = contextvars.ContextVar("t_fail", default=None)
    calls: list[Any] = []
    log = _log(failure)
    logs: dict[str, Any] = {"_tls": threading.local(), "thread_log": lambda: log}
    state: dict[str, Any] = {"tls": threading.local(), "_default_main": 7}

    def original(self: Any, request: Any, *args: Any, **kw: Any) -> Any:
        calls.append(("original", args, kw, active.get()))
        return answer(request, **kw)

    def wrapper(self: Any, request: Any, *args: Any, **kw: Any) -> Any:
        calls.append(("wrapper", args, kw))
        if active.get() is None and not kw.get("stream", False):
            return Client.send.plain(self, request, args, kw)
        return original(self, request, *args, **kw)

    def endpoint(url: Any) -> str:
        calls.append(("endpoint", url))
        if url == "bad":
            raise RuntimeError("an URL that cannot be read")
        return f"ep:{url}"

    class Client:
        send = hooks.mark(
            PlainSend(
                original,
                wrapper,
                active=active,
                layer=layer,
                client="t",
                cache={"cached": "ep:from-cache"},
                key_attr=key_attr,
                endpoint=endpoint,
                body_attr="body",
                sent_else=(lambda r: int(r.headers["content-length"])),
                logs=logs,
                state=state,
                probes={"ep:probe"},
                wait=lambda a, b, kind: calls.append(("wait", a, b, kind)),
                failed=lambda lg, ep, client, a, retried, sent, exc: calls.append(
                    ("failed", ep, type(exc).__name__, sent)
                ),
            ),
            original,
        )

    Client.active, Client.log, Client.state, Client.calls = active, log, state, calls  # type: ignore[attr-defined]
    return Client


def test_a_plain_send_is_recorded_with_its_wait() -> None:
    cls = _plain(lambda r, **kw: _Resp(200, BODY.encode()))
    c, calls, log = cls(), cls.calls, cls.log
    resp = c.send(_Req("u1", b"12345"))  # vectorcall, no state on the thread yet
    assert resp.status_code == 200 and calls[0] == ("endpoint", "u1")
    assert calls[1] == ("original", (), {}, None)
    row = log.spans[-1]
    assert row[0] == "ep:u1" and row[3:6] == ("ok", 3, 5) and row[11] == 5 and row[-1] == "t"
    assert calls[2] == ("wait", row[1], row[2], "http")  # the Python rule decides
    calls.clear()
    t = _State()
    cls.state["tls"].t = t
    c.send(_Req("cached", "abc"), timeout=3)  # the cache's endpoint; a str body
    assert calls == [("original", (), {"timeout": 3}, None)]
    row = log.spans[-1]
    assert row[0] == "ep:from-cache" and row[11] == 3
    assert t.waits == [(row[1], row[2], 7)]  # the thread's state, the default main read
    c.send(_Req("probe", None))  # no body held: sent_else; a probe is no wait
    cls.send.__wrapped__  # noqa: B018 - marked like the function it replaces
    assert log.spans[-1][11] == 9 and len(t.waits) == 1


def test_status_classes_bodies_and_what_is_not_plain() -> None:
    answers = iter([_Resp(503, b"{}"), _Resp(404, "text"), _Resp(200, b'{"choices": []}')])
    cls = _plain(lambda r, **kw: next(answers), layer="layer")
    c, calls, log = cls(), cls.calls, cls.log
    for _ in range(3):
        c.send(_Req("u"))
    assert [r[3] for r in log.spans] == ["5xx", "4xx", "empty"]
    assert log.spans[1][10] == 0  # a str answer body is not read
    assert [x[3] for x in calls if x[0] == "original"] == ["layer"] * 3  # set for the layers
    assert cls.active.get() is None  # and reset after
    calls.clear()
    answers = iter([_Resp(200)] * 4)
    c.send(_Req("u"), stream=True)
    c.send(_Req("u"), "positional")
    assert [x[0] for x in calls] == [
        "wrapper",
        "original",
        "wrapper",
        "endpoint",
        "original",
        "wait",
    ]
    assert calls[1][2] == {"stream": True} and calls[4][1] == ("positional",)
    calls.clear()

    def owned() -> None:
        cls.active.set("above")
        c.send(_Req("u"))

    contextvars.copy_context().run(owned)  # a layer above owns it: the wrapper's
    assert [x[0] for x in calls] == ["wrapper", "original"]
    calls.clear()
    cls.send.__call__(c, _Req("u"))  # tp_call: through the wrapper, then plain
    assert [x[0] for x in calls] == ["wrapper", "endpoint", "original", "wait"]


def test_the_originals_answer_and_exceptions_are_untouched() -> None:
    def answer(r: Any, **kw: Any) -> Any:
        if r.url == "raise":
            raise ConnectionRefusedError("refused")
        return _Resp("not a status")  # the bookkeeping fails after the send

    cls = _plain(answer, layer="layer")
    c, calls = cls(), cls.calls
    resp = c.send(_Req("u"))
    assert resp.status_code == "not a status"  # returned as it came, no row
    assert cls.log.spans == []
    with pytest.raises(ConnectionRefusedError, match="refused"):
        c.send(_Req("raise"))
    assert calls[-1] == ("failed", "ep:raise", "ConnectionRefusedError", 2)
    assert cls.active.get() is None  # reset on the way out
    calls.clear()
    c.send(_Req("bad"))  # the endpoint cannot be read: sent uninstrumented
    assert [x[0] for x in calls] == ["endpoint", "original"] and calls[1][3] is None
    with pytest.raises(TypeError):
        c.send()  # no request: the wrapper's own signature error


def test_plain_send_refusals_are_value_errors() -> None:
    var: contextvars.ContextVar[Any] = contextvars.ContextVar("t_ps", default=None)
    ok: dict[str, Any] = {
        "active": var, "layer": None, "client": "c", "cache": {}, "key_attr": None,
        "endpoint": print, "body_attr": "body", "sent_else": None, "logs": {},
        "state": {}, "probes": set(), "wait": print, "failed": print,
    }  # fmt: skip
    PlainSend(print, print, **ok)
    for bad, match in (
        ({"active": {}}, "ContextVar"),
        ({"endpoint": None}, "callable endpoint"),
        ({"sent_else": 3}, "sent_else"),
        ({"client": None}, "strings"),
        ({"key_attr": 1}, "key_attr"),
        ({"cache": []}, "cache must be a dict"),
        ({"probes": []}, "probes must be a set"),
    ):
        with pytest.raises(ValueError, match=match):
            PlainSend(print, print, **{**ok, **bad})
    with pytest.raises(ValueError, match="callable original"):
        PlainSend(None, print, **ok)
