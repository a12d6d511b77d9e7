"""This process's HTTP rollout requests: one :class:`Span` per request, per thread.

The patched clients (``gyreprof.integrations.http``) open a :class:`Request` when a request
starts and finish it when its answer is in (for a stream: when the user's last
read of it ends). Finishing appends one :class:`Span` to the calling thread's
:class:`ThreadLog` (no lock: one writer per thread). A thread keeps its last
``SPAN_CAP`` spans whole (the batches, the in-flight figures and the latency
percentiles are read from them); older ones are folded into per-endpoint
totals, so counts, outcomes, tokens and bytes are never lost.

Each thread also writes its requests into the core (``gyreprof._core.recorder.Spans``
over a Profiler's Recorder with phases ``request, attempt, ttft, inter_token``): the
histograms and ring of the core, and that thread's in-flight count over time
(saved as the record's ``gauges``).

**Endpoint.** ``scheme://host:port/path`` with ids folded: a path segment of
digits, a UUID, a hex string of 8+ characters, or a segment of 16+ characters
with a digit becomes ``{id}``; the query is dropped. A process keeps at most
``ENDPOINT_CAP`` endpoints (the rest are ``(other endpoints)``).

**Outcome** (one per request, also per attempt): ``ok``, ``refused`` (the
connection was refused), ``timeout``, ``reset`` (the connection closed or was
reset under the request), ``4xx``, ``5xx``, ``empty`` (a 2xx whose result list
is empty: ``choices`` when the body has that key, else ``data``, else a
top-level JSON list; a stream whose events never carried a non-empty
``choices``), ``error`` (any other failure).

**Bodies** are scanned, never parsed: at most ``BODY_CAP`` bytes of an answer
the client has already read (or the user reads) are searched for
``"prompt_tokens"``/``"completion_tokens"`` and for the empty result list. A
body that is not JSON (its first byte is neither ``{`` nor ``[``) is counted as
``not_json``; a larger one as ``oversized`` and not scanned. A stream's chunks are
scanned as they are read by one ``StreamScan`` (compiled), whose state carries over
from chunk to chunk: a key or number cut between two chunks is read whole.
"""

from __future__ import annotations

import contextvars
import os
import re
import threading
import time
from typing import Any

from gyreprof._core.bodyscan import StreamScan
from gyreprof._core.bodyscan import scan_body as _scan
from gyreprof._support.errors import InvalidValueError
from gyreprof.analysis.rollouts import SPAN_FIELDS, SpanRow, Totals
from gyreprof.integrations._auto import loop_wait as _lw

OUTCOMES: tuple[str, ...] = ("ok", "refused", "timeout", "reset", "4xx", "5xx", "empty", "error")
FAILURES = frozenset(("refused", "timeout", "reset", "4xx", "5xx", "empty", "error"))
PHASES: tuple[str, ...] = ("request", "attempt", "ttft", "inter_token")
REQUEST, ATTEMPT, TTFT, INTER_TOKEN = 0, 1, 2, 3

#: the columns of a kept span (a tuple of plain values: the garbage collector skips it);
#: (``analysis.rollouts.SPAN_FIELDS``, named there once)
ROW_FIELDS: tuple[str, ...] = SPAN_FIELDS
(
    R_ENDPOINT,
    R_START,
    R_END,
    R_OUTCOME,
    R_PROMPT,
    R_COMPLETION,
    R_TTFT,
    R_CHUNKS,
    R_ATTEMPTS,
    R_RETRIED,
    R_BYTES_IN,
    R_BYTES_OUT,
    R_STREAM,
    R_EMPTY,
    R_FLAG,
    R_THREAD,
    R_CLIENT,
) = range(len(ROW_FIELDS))
Row = tuple[Any, ...]

BODY_CAP = 1 << 20  # bytes of one answer that are scanned for usage and empty lists
SPAN_CAP = 1 << 14  # spans kept whole per thread (older ones are folded into totals)
ENDPOINT_CAP = 256
OTHER_ENDPOINT = "(other endpoints)"

_get_ident = threading.get_ident
_now = time.monotonic_ns  # CLOCK_MONOTONIC: the core's clock, comparable across processes

#: the request the outermost patched HTTP call of this context owns (None: no request
#: open); the layers under it pass through, and so does gyreprof's own metrics read
active: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "gyreprof_http_active", default=None
)


# ----------------------------------------------------------------- endpoints

_ID_SEG = re.compile(
    r"^(?:\d+|[0-9a-fA-F]{8,}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{12})$"
)
_DIGIT = re.compile(r"\d")
_folded: dict[tuple[str, str, int | None, str], str] = {}


def fold_path(path: str) -> str:
    """``path`` with its id segments as ``{id}`` (query and fragment dropped)."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    parts = []
    for seg in path.split("/"):
        if seg and (_ID_SEG.match(seg) or (len(seg) >= 16 and _DIGIT.search(seg))):
            parts.append("{id}")
        else:
            parts.append(seg)
    return "/".join(parts) or "/"


def endpoint(scheme: str, host: str, port: int | None, path: str) -> str:
    """The folded endpoint name (cached per raw scheme, host, port and path)."""
    key = (scheme, host, port, path)
    name = _folded.get(key)
    if name is not None:
        return name
    scheme = (scheme or "http").lower()
    if port is None:
        port = 443 if scheme in ("https", "wss") else 80
    name = f"{scheme}://{host}:{port}{fold_path(path)}"
    if _metadata_host(host):
        probe_endpoints.add(name)
    if len(_folded) < 4096:
        _folded[key] = name
    return name


def endpoint_of_url(url: str) -> str:
    """The folded endpoint of a raw URL string (cached per URL: splitting one costs more
    than the rest of a request's bookkeeping)."""
    name = _by_url.get(url)
    if name is not None:
        return name
    from urllib.parse import urlsplit

    try:
        u = urlsplit(url)
        name = endpoint(u.scheme, u.hostname or "", u.port, u.path)
    except ValueError:
        return OTHER_ENDPOINT
    if len(_by_url) < 4096 and isinstance(url, str):
        _by_url[url] = name
    return name


_by_url: dict[str, str] = {}


# ----------------------------------------------------------------- outcomes

_RESET_NAMES = frozenset(
    (
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
        "ServerDisconnectedError",
        "ClientOSError",
        "ClientPayloadError",
        "RemoteDisconnected",
        "IncompleteRead",
        "ChunkedEncodingError",
        "ProtocolError",
        "BadStatusLine",
    )
)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    todo: list[Any] = [exc]
    while todo and len(out) < 12:
        e = todo.pop(0)
        if not isinstance(e, BaseException) or any(e is o for o in out):
            continue
        out.append(e)
        todo.extend((e.__cause__, e.__context__))
        for attr in ("reason", "os_error"):
            v = getattr(e, attr, None)
            if isinstance(v, BaseException):
                todo.append(v)
        args = getattr(e, "args", ())
        if args and isinstance(args[0], BaseException):
            todo.append(args[0])
    return out


def classify_exception(exc: BaseException) -> str:
    """The outcome class of a request that raised ``exc`` (its cause chain read)."""
    import errno

    chain = _chain(exc)
    for e in chain:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "refused"
    for e in chain:
        if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__:
            return "timeout"
    for e in chain:
        if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return "reset"
    for e in chain:
        if type(e).__name__ in _RESET_NAMES:
            return "reset"
    return "error"


def status_class(status: int) -> str:
    if 500 <= status:
        return "5xx"
    if 400 <= status:
        return "4xx"
    return "ok"


# ------------------------------------------------------------------- bodies


def scan_body(body: bytes) -> tuple[int, int, str | None, int]:
    """``(prompt_tokens, completion_tokens, empty_field, flag)`` of an answer body, in one
    pass of compiled code (``gyreprof._core.bodyscan``, whose docstring says what it
    reads): tokens -1 when not found; ``empty_field`` the result
    list found empty (``choices``, else ``data`` when the body has no ``choices``, or
    ``(list)`` for a top-level ``[]``), else None; ``flag`` 0 scanned, 1 not JSON, 2
    oversized (not scanned)."""
    return _scan(body, BODY_CAP)


#: the figures of a per-request ``metrics`` object (seconds), by the names servers give
#: them (vLLM's finished-request stats, and the shorter names); index into the totals
ANSWER_METRICS: dict[bytes, int] = {
    b"queued_time": 1,
    b"queue_time": 1,
    b"time_in_queue": 1,
    b"prefill_time": 2,
    b"decode_time": 3,
    b"e2e_latency": 4,
    b"e2e_time": 4,
}
_ANSWER_METRIC = re.compile(
    rb'"(' + b"|".join(ANSWER_METRICS) + rb')"\s*:\s*'
    rb"(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
)


def answer_metrics(log: ThreadLog, ep: str, data: bytes) -> None:
    """A JSON answer with a ``"metrics"`` key (a server's per-request figures, as vLLM's
    per-request metrics): its queue, prefill, decode and request times (seconds) after
    that key, added to ``log``'s totals for ``ep`` (an answer with none is not counted)."""
    at = data.find(b'"metrics"')
    got = [0.0] * 5
    seen = False
    for name, value in _ANSWER_METRIC.findall(data, at):
        v = float(value)
        if v == v and v < 1e9:
            got[ANSWER_METRICS[name]] = v
            seen = True
    if not seen:
        return
    totals = log.answer_metrics.get(ep)
    if totals is None:
        if len(log.answer_metrics) >= ENDPOINT_CAP:
            return
        totals = log.answer_metrics[ep] = [0.0] * 5
    totals[0] += 1
    for i in range(1, 5):
        totals[i] += got[i]


# -------------------------------------------------------------------- spans


class Request:
    """A request: what the patched layers learn of it; once :meth:`finish` ran, the
    span the thread keeps (times in ns on CLOCK_MONOTONIC)."""

    __slots__ = (
        *ROW_FIELDS,
        "log",
        "last_chunk",
        "finished",
        "span",
        "scan",
        "in_call",
        "open_stream",
        "late",
    )

    def __init__(self, ep: str, client: str) -> None:
        log = thread_log()
        self.log = log
        self.endpoint = ep
        self.client = client
        self.thread = log.ident
        self.outcome = "ok"
        self.prompt_tokens = -1
        self.completion_tokens = -1
        self.ttft = -1
        self.chunks = 0
        self.attempts = 0
        self.retried: tuple[str, ...] = ()
        self.bytes_in = 0
        self.bytes_out = 0
        self.stream = False
        self.empty_field: str | None = None
        self.body_flag = 0
        self.last_chunk = -1
        self.finished = False
        self.span: Request | None = None  # itself, once finished
        self.end = -1
        self.scan: StreamScan | None = None  # a stream's scan, carried over its chunks
        self.late = False  # its body may be read after it is recorded (urllib, aiohttp)
        self.in_call = False  # the call that opened it has not returned yet
        self.open_stream = False  # its answer is a stream the user has not finished reading
        if ep:
            self.check_retry()
        self.start = log.spans_core.begin() if log.core_ok else _now()

    def check_retry(self) -> None:
        """A request to the endpoint that the last request of this context failed on is
        a retry (a user's loop repeating it), counted with that failure's class."""
        prev = _last_failure.get()
        if prev is not None and prev[0] == self.endpoint:
            self.retried += (prev[1],)

    def body(self, data: bytes) -> None:
        """A whole answer body the client has read: tokens, empty list, flags."""
        self.bytes_in += len(data)
        p, c, empty, flag = _scan(data, BODY_CAP)
        self.body_flag = flag
        if b'"metrics"' in data and flag == 0:
            answer_metrics(self.log, self.endpoint, data)
        if p >= 0:
            self.prompt_tokens = p
        if c >= 0:
            self.completion_tokens = c
        if empty is not None and self.outcome == "ok":
            self.outcome = "empty"
            self.empty_field = empty

    def chunk(self, data: bytes) -> None:
        """A stream chunk the user has just read (never read ahead of them)."""
        now = _now()
        n = len(data)
        self.bytes_in += n
        if not n:
            return
        log = self.log
        if self.ttft < 0:
            self.ttft = now - self.start
            log.record(TTFT, self.ttft)
        elif log.core_ok and log.ident == _get_ident():
            log.rec.record(INTER_TOKEN, now - self.last_chunk)
        self.last_chunk = now
        self.chunks += 1
        scan = self.scan
        if scan is None:
            scan = self.scan = StreamScan()
        scan.feed(data)

    def fail(self, outcome: str) -> None:
        self.outcome = outcome

    def discard(self) -> None:
        """The call ended before any attempt (the client refused to send it): no request.
        Its core span is closed, so the thread's in-flight count comes back down."""
        if self.finished:
            return
        self.finished = True
        log = self.log
        if log.core_ok and log.ident == _get_ident():
            try:
                log.spans_core.end(REQUEST, self.start)
            except Exception:  # noqa: BLE001, S110 - the core refused: nothing was open
                pass

    def finish(self) -> None:
        """Record the request (once); later calls do nothing."""
        if self.finished:
            return
        self.finished = True
        scan = self.scan
        saw_choice = False
        if scan is not None:  # a stream's usage, read across its chunks
            saw_choice = scan.saw_choice
            if scan.prompt_tokens >= 0:
                self.prompt_tokens = scan.prompt_tokens
            if scan.completion_tokens >= 0:
                self.completion_tokens = scan.completion_tokens
        if self.stream and self.outcome == "ok" and self.chunks and not saw_choice:
            self.outcome = "empty"
            self.empty_field = "choices (stream)"
        if self.attempts < 1:
            self.attempts = 1
        log = self.log
        end = -1
        if log.core_ok and log.ident == _get_ident():
            try:
                end = self.start + log.spans_core.end(REQUEST, self.start)
            except Exception:  # noqa: BLE001 - the core refused: the span still counts
                end = -1
        else:
            log = thread_log()
        self.end = end if end >= 0 else _now()
        self.span = self
        # a plain tuple unless a body may still come (urllib, aiohttp): kept spans are
        # many, and tuples of plain values cost the garbage collector nothing
        log.add(self if self.late else self.row())
        if self.outcome != "ok":
            _last_failure.set((self.endpoint, self.outcome))
        elif _last_failure.get() is not None:
            _last_failure.set(None)
        if _lw.idle.t is not None:  # a thread whose event loop waited on requests
            _lw.awaited(self.start, whole=not _lw.in_group())  # a gathered one: a piece

    def row(self) -> Row:
        """The span as a row (``ROW_FIELDS``)."""
        return (
            self.endpoint,
            self.start,
            self.end,
            self.outcome,
            self.prompt_tokens,
            self.completion_tokens,
            self.ttft,
            self.chunks,
            self.attempts,
            self.retried,
            self.bytes_in,
            self.bytes_out,
            self.stream,
            self.empty_field,
            self.body_flag,
            self.thread,
            self.client,
        )


def as_row(span: Request | Row) -> Row:
    return span.row() if isinstance(span, Request) else span


Span = Request  # a finished request is the span a thread keeps


#: the last failed request of this context (thread, asyncio task): (endpoint, outcome)
_last_failure: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "gyreprof_http_last_failure", default=None
)


class ThreadLog:
    """One thread's requests: kept spans, folded totals and its core recorder
    (``spans_core``, a ``Spans`` over it; ``core_ok`` False: no core, times from the
    clock). The plain request's path (one synchronous attempt, no stream, no
    :class:`Request` made) is :meth:`open_plain` and :meth:`record_plain`."""

    __slots__ = ("ident", "spans", "core_ok", "spans_core", "folded", "dropped", "rec", "prof",
                 "span_cap", "answer_metrics")  # fmt: skip

    def __init__(self, span_cap: int | None = None, *, core: bool = True) -> None:
        """``span_cap`` spans kept whole before the older half is folded (default
        ``SPAN_CAP``, at least 2); ``core`` False: no core recorder, times from the clock."""
        if span_cap is None:
            span_cap = SPAN_CAP
        if not isinstance(span_cap, int) or span_cap < 2:
            raise InvalidValueError(f"span_cap must be an integer of at least 2, got {span_cap!r}")
        self.span_cap = span_cap
        self.ident = threading.get_ident()
        self.spans: list[Request | Row] = []
        self.folded: dict[str, Totals] = {}
        self.dropped = 0
        #: per endpoint, the totals of the per-request ``metrics`` objects its answers
        #: carried (``answer_metrics``): ``[answers, queue_s, prefill_s, decode_s, request_s]``
        self.answer_metrics: dict[str, list[float]] = {}
        self.core_ok = False
        self.rec: Any = None
        self.prof: Any = None
        self.spans_core: Any = None
        if not core:
            return
        try:
            from gyreprof._core.recorder import Spans
            from gyreprof.recording.profiler import Profiler

            # the Profiler owns the Recorder (its RecorderSet); made once per thread
            self.prof = Profiler(PHASES, capacity=1 << 12, label="gyreprof-http")
            self.rec = self.prof.recorder
            self.spans_core = Spans(self.rec)
            self.core_ok = True
        except Exception:  # noqa: BLE001, S110 - no core: the spans are still kept in Python
            pass

    def open_plain(self, ep: str) -> tuple[int, tuple[str, ...]]:
        """A plain request to ``ep`` starts on this log's thread: ``(start, retried)``,
        its start (ns: the core span's token, else CLOCK_MONOTONIC now) and the retried
        classes (the context's last failure, when it was at this endpoint)."""
        retried: tuple[str, ...] = ()
        if ep:
            prev = _last_failure.get()
            if prev is not None and prev[0] == ep:
                retried = (prev[1],)
        core = self.spans_core
        return (core.begin() if self.core_ok and core is not None else _now()), retried

    def record_plain(
        self,
        ep: str,
        client: str,
        start: int,
        retried: tuple[str, ...],
        outcome: str,
        data: Any,
        bytes_out: int,
    ) -> int:
        """Record the plain request opened at ``start``: ``outcome`` its status class or
        failure, ``data`` its whole answer body (None: not read). Its row is the one
        :meth:`Request.body` and :meth:`Request.finish` leave for the same request; the
        core span ends and the context's last failure is set. Returns its end (ns)."""
        p = c = -1
        empty = None
        flag = n = 0
        if data is not None:
            n = len(data)
            p, c, empty, flag = _scan(data, BODY_CAP)
            if b'"metrics"' in data and flag == 0:
                answer_metrics(self, ep, data)
            if empty is not None:
                if outcome == "ok":
                    outcome = "empty"
                else:
                    empty = None
        end = -1
        core = self.spans_core
        if self.core_ok and core is not None:
            try:
                end = start + core.end(REQUEST, start)
            except Exception:  # noqa: BLE001 - the core refused: the span still counts
                end = -1
        if end < 0:
            end = _now()
        # ROW_FIELDS: no ttft, no chunks, one attempt, not a stream
        self.add((ep, start, end, outcome, p, c, -1, 0, 1, retried, n, bytes_out, False,
                  empty, flag, self.ident, client))  # fmt: skip
        if outcome != "ok":
            _last_failure.set((ep, outcome))
        elif _last_failure.get() is not None:
            _last_failure.set(None)
        return end

    def record(self, phase: int, ns: int) -> None:
        if self.core_ok and self.ident == threading.get_ident():
            try:
                self.rec.record(phase, ns)
            except Exception:  # noqa: BLE001, S110 - never into the user's code
                pass

    def add(self, span: Request | Row) -> None:
        spans = self.spans
        spans.append(span)
        cap = self.span_cap
        if len(spans) >= cap:
            old = spans[: cap // 2]
            del spans[: cap // 2]
            for s in old:
                row = as_row(s)
                t = self.folded.get(row[R_ENDPOINT])
                if t is None:
                    t = self.folded[row[R_ENDPOINT]] = Totals()
                t.add_span(SpanRow(*row))
            self.dropped += len(old)


_tls = threading.local()
_logs: list[ThreadLog] = []
_lock = threading.Lock()
_endpoints: set[str] = set()


def thread_log() -> ThreadLog:
    try:
        log: ThreadLog = _tls.log
        return log
    except AttributeError:
        pass
    log = ThreadLog()
    _tls.log = log
    with _lock:
        _logs.append(log)
    _on_first_request()
    return log


def capped(ep: str) -> str:
    """``ep``, or the catch-all name once the process has ``ENDPOINT_CAP`` endpoints."""
    if ep in _endpoints:
        return ep
    with _lock:
        if len(_endpoints) >= ENDPOINT_CAP:
            return OTHER_ENDPOINT
        _endpoints.add(ep)
    return ep


def logs() -> list[ThreadLog]:
    with _lock:
        return list(_logs)


def mark() -> int:
    """The registry mark of a profiling session (logs created from here on)."""
    global _tls
    with _lock:
        n = len(_logs)
    _tls = threading.local()
    return n


def logs_since(n: int) -> list[ThreadLog]:
    with _lock:
        return list(_logs[n:])


_started_pid = 0
#: called at a process's first request (``integrations.http`` sets it: under ``gyreprof run`` it
#: makes the process a recording one, with its start file and its save at exit)
first_request_hook: Any = None


def _on_first_request() -> None:
    global _started_pid
    if _started_pid == os.getpid():
        return
    _started_pid = os.getpid()
    hook = first_request_hook
    if hook is not None:
        try:
            hook()
        except Exception:  # noqa: BLE001, S110 - the requests are still recorded here
            pass


def _after_fork_in_child() -> None:
    global _tls, _lock, _logs
    _tls = threading.local()
    _lock = threading.Lock()
    _logs = []
    _endpoints.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ------------------------------------------------------- cloud metadata probes

#: the endpoints of cloud metadata services this process asked (Ray's start-up probes:
#: ``analysis.rollouts.is_metadata_host``); never a wait on rollouts
probe_endpoints: set[str] = set()


_metadata_hosts: dict[str, bool] = {}  # host -> is a metadata service's (hosts are few)


def _metadata_host(host: str) -> bool:
    known = _metadata_hosts.get(host)
    if known is not None:
        return known
    from gyreprof.analysis.rollouts import is_metadata_host

    known = is_metadata_host(host)
    if len(_metadata_hosts) < 4096:
        _metadata_hosts[host] = known
    return known


def last_is_probe() -> bool:
    """The calling thread's last finished request went to a cloud metadata service."""
    log = getattr(_tls, "log", None)
    if log is None or not log.spans:
        return False
    last = log.spans[-1]
    ep = last.endpoint if isinstance(last, Request) else last[R_ENDPOINT]
    return ep in probe_endpoints


# ------------------------------------------------------------ batch groups (issue 23)

#: groups of requests waited on together (``libs.asyncio``: gather, wait, TaskGroup;
#: ``libs.queues``: Executor.map, futures.wait, as_completed), newest ``GROUP_CAP`` kept
GROUP_CAP = 1 << 14
Group = tuple[str, int, int, int, tuple[int, ...]]  # rule, start, end, awaited, threads
_groups: list[Group] = []
_groups_lock = threading.Lock()


def add_group(rule: str, start_ns: int, end_ns: int, n: int, threads: tuple[int, ...]) -> None:
    """A group of requests waited on together from ``start_ns`` to ``end_ns``
    (CLOCK_MONOTONIC), made in ``threads`` (empty: any thread of the process); ``n``
    the awaitables or futures it waited on (0: not known). Any thread may call it."""
    with _groups_lock:
        _groups.append((rule, start_ns, end_ns, n, threads))
        if len(_groups) >= GROUP_CAP:
            del _groups[: GROUP_CAP // 2]


def groups() -> list[Group]:
    with _groups_lock:
        return list(_groups)


def _groups_after_fork() -> None:
    global _groups_lock
    _groups_lock = threading.Lock()
    _groups.clear()


os.register_at_fork(after_in_child=_groups_after_fork)
