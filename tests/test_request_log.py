"""The plain-request path of a thread's request log (``rollout_log.ThreadLog``'s
``open_plain`` / ``record_plain``) and the plain send over it
(``gyreprof.integrations.http._common.PlainSend``): the row it appends, the retry it
reads and the failure it leaves in the context, the fold, the log without a core, the
send's choices and its refusals."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from typing import Any

import pytest

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http import _common
from gyreprof.integrations.http._common import PlainSend

EP = "http://mock:80/v1/chat/completions"
BODY = json.dumps(
    {"choices": [{"index": 0}], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
)


class _Log(rl.ThreadLog):
    """A thread log with no core (times from CLOCK_MONOTONIC) that notes each row added."""

    __slots__ = ("added",)

    def add(self, row: Any) -> None:
        self.added.append(row)
        super().add(row)


def _log(span_cap: int = 1 << 10) -> _Log:
    log = _Log(span_cap, core=False)
    log.added = []
    return log


def test_rows_retries_and_the_context_failure() -> None:
    var = rl._last_failure
    log = _log()
    before = var.get()  # what an earlier failing request of this thread's context left

    def run() -> None:
        var.set(None)
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
    assert var.get() == before  # the context it ran in kept it


def test_the_row_that_fills_the_kept_spans_folds_the_older_half() -> None:
    log = _log(span_cap=4)
    rows = []
    for _ in range(4):
        start, retried = log.open_plain(EP)
        log.record_plain(EP, "httpx", start, retried, "ok", None, 0)
        rows.append(log.added[-1])
    assert log.added == rows and len(rows) == 4
    assert log.spans == rows[2:] and log.dropped == 2  # the fourth row filled the cap
    assert log.folded[EP].requests == 2


def test_the_thread_log_records_through_its_core() -> None:
    log = rl.ThreadLog()
    assert log.core_ok
    start, retried = log.open_plain(EP)
    before = log.spans_core.gauge()["ended"]
    end = log.record_plain(EP, "httpx", start, retried, "ok", BODY.encode(), 1)
    assert log.spans_core.gauge()["ended"] == before + 1
    assert log.spans[-1][1:3] == (start, end) and end >= start


def test_refusals_and_a_log_without_its_span_object() -> None:
    for bad in (1, 0, "3"):
        with pytest.raises(ValueError, match="span_cap"):
            rl.ThreadLog(bad, core=False)  # type: ignore[arg-type]
    log = rl.ThreadLog(core=False)
    assert not log.core_ok and log.spans_core is None
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
    """What the trainer's wait reads of a thread's training state: its ``request_wait``."""

    def __init__(self) -> None:
        self.waits: list[tuple[int, int, int]] = []

    def request_wait(self, start: int, end: int, default_main: int) -> None:
        self.waits.append((start, end, default_main))


def _plain(
    answer: Any, monkeypatch: pytest.MonkeyPatch, *, layer: Any = None, key_attr: str | None = None
) -> Any:
    """A client class whose ``send`` is wrapped as the clients' are (a plain request is
    PlainSend's), over ``answer(request, **kw)``, with its own thread log, and the record
    of every call (the trainer's wait and the failure path noted, not run)."""
    calls: list[Any] = []
    log = _log()
    monkeypatch.setattr(rl, "thread_log", lambda: log)
    monkeypatch.setattr(
        _common, "trainer_wait", lambda a, b, kind: calls.append(("wait", a, b, kind))
    )
    monkeypatch.setattr(
        _common,
        "plain_failed",
        lambda lg, ep, client, a, retried, sent, exc: calls.append(
            ("failed", ep, type(exc).__name__, sent)
        ),
    )

    def endpoint(url: Any) -> str:
        calls.append(("endpoint", url))
        if url == "bad":
            raise RuntimeError("an URL that cannot be read")
        return f"ep:{url}"

    plain = PlainSend(
        "t",
        layer=layer,
        cache={"cached": "ep:from-cache"},
        key_attr=key_attr,
        endpoint=endpoint,
        body_attr="body",
        sent_else=(lambda r: int(r.headers["content-length"])),
    )

    class Client:
        def send(self, request: Any, *args: Any, **kw: Any) -> Any:
            calls.append(("original", args, kw, _common.active.get()))
            return answer(request, **kw)

    original = Client.__dict__["send"]

    def wrapper(wrapped: Any, instance: Any, args: Any, kw: Any) -> Any:
        calls.append(("wrapper", args[1:], kw))
        if _common.active.get() is None and not kw.get("stream", False) and args:
            return plain.plain(wrapped, args[0], args, kw)
        return wrapped(*args, **kw)

    patches = Patches()
    patches.wrap(Client, "send", wrapper)
    Client.log, Client.calls, Client.original = log, calls, original  # type: ignore[attr-defined]
    Client.patches = patches  # type: ignore[attr-defined]
    return Client


def test_a_plain_send_is_recorded_with_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = _plain(lambda r, **kw: _Resp(200, BODY.encode()), monkeypatch)
    c, calls, log = cls(), cls.calls, cls.log
    resp = c.send(_Req("u1", b"12345"))
    assert resp.status_code == 200 and calls[:2] == [("wrapper", (), {}), ("endpoint", "u1")]
    assert calls[2] == ("original", (), {}, None)
    row = log.spans[-1]
    assert row[0] == "ep:u1" and row[3:6] == ("ok", 3, 5) and row[11] == 5 and row[-1] == "t"
    assert calls[3] == ("wait", row[1], row[2], "http")  # the trainer's rule decides
    calls.clear()
    c.send(_Req("cached", "abc"), timeout=3)  # the cache's endpoint; a str body
    assert [x[0] for x in calls] == ["wrapper", "original", "wait"]  # no endpoint read
    assert calls[1] == ("original", (), {"timeout": 3}, None)
    row = log.spans[-1]
    assert row[0] == "ep:from-cache" and row[11] == 3
    c.send(_Req("probe", None))  # no body held: sent_else
    assert cls.send.__wrapped__ is cls.original  # wrapped like the function it replaces
    assert log.spans[-1][11] == 9
    cls.patches.undo()
    assert cls.__dict__["send"] is cls.original


def test_the_trainers_wait_reads_the_threads_state_and_skips_probes() -> None:
    from gyreprof.integrations._auto import state as st

    seen: list[Any] = []

    def worker() -> None:
        t = _State()
        st.tls.t = t
        try:
            log = rl.thread_log()
            start, _ = log.open_plain(EP)
            end = log.record_plain(EP, "t", start, (), "ok", None, 0)
            _common.trainer_wait(start, end, "http")
            rl.probe_endpoints.add(EP)  # the last request went to a metadata service
            try:
                _common.trainer_wait(start, end, "http")
            finally:
                rl.probe_endpoints.discard(EP)
            seen.append((t.waits, start, end))
        finally:
            st.tls.t = None

    th = threading.Thread(target=worker)
    th.start()
    th.join(30)
    [(waits, start, end)] = seen
    assert waits == [(start, end, st._default_main)]  # one wait: the probe is none


def test_status_classes_bodies_and_what_is_not_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([_Resp(503, b"{}"), _Resp(404, "text"), _Resp(200, b'{"choices": []}')])
    cls = _plain(lambda r, **kw: next(answers), monkeypatch, layer="layer")
    c, calls, log = cls(), cls.calls, cls.log
    for _ in range(3):
        c.send(_Req("u"))
    assert [r[3] for r in log.spans] == ["5xx", "4xx", "empty"]
    assert log.spans[1][10] == 0  # a str answer body is not read
    assert [x[3] for x in calls if x[0] == "original"] == ["layer"] * 3  # set for the layers
    assert _common.active.get() is None  # and reset after
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
        _common.active.set("above")  # type: ignore[arg-type]
        c.send(_Req("u"))

    contextvars.copy_context().run(owned)  # a layer above owns it: straight through
    assert [x[0] for x in calls] == ["wrapper", "original"]
    calls.clear()
    cls.send(c, _Req("u"))  # called through the class: the same path
    assert [x[0] for x in calls] == ["wrapper", "endpoint", "original", "wait"]


def test_the_originals_answer_and_exceptions_are_untouched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def answer(r: Any, **kw: Any) -> Any:
        if r.url == "raise":
            raise ConnectionRefusedError("refused")
        return _Resp("not a status")  # the bookkeeping fails after the send

    cls = _plain(answer, monkeypatch, layer="layer")
    c, calls = cls(), cls.calls
    resp = c.send(_Req("u"))
    assert resp.status_code == "not a status"  # returned as it came, no row
    assert cls.log.spans == []
    with pytest.raises(ConnectionRefusedError, match="refused"):
        c.send(_Req("raise"))
    assert calls[-1] == ("failed", "ep:raise", "ConnectionRefusedError", 2)
    assert _common.active.get() is None  # reset on the way out
    calls.clear()
    c.send(_Req("bad"))  # the endpoint cannot be read: sent uninstrumented
    assert [x[0] for x in calls] == ["wrapper", "endpoint", "original"] and calls[2][3] is None
    with pytest.raises(TypeError):
        c.send()  # no request: the original's own signature error


def test_plain_send_refusals_are_value_errors() -> None:
    ok: dict[str, Any] = {
        "cache": {}, "key_attr": None, "endpoint": print, "body_attr": "body",
        "sent_else": None, "layer": None,
    }  # fmt: skip
    PlainSend("c", **ok)
    for bad, match in (
        ({"endpoint": None}, "callable endpoint"),
        ({"sent_else": 3}, "sent_else"),
        ({"body_attr": None}, "strings"),
        ({"key_attr": 1}, "key_attr"),
        ({"cache": []}, "cache must be a dict"),
    ):
        with pytest.raises(ValueError, match=match):
            PlainSend("c", **{**ok, **bad})
    with pytest.raises(ValueError, match="strings"):
        PlainSend(None, **ok)  # type: ignore[arg-type]
