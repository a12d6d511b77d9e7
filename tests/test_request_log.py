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
from gyreprof._core.requestlog import RequestLog
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
