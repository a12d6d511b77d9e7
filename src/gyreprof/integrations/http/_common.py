"""What every HTTP client's instrumentor shares: who owns a request, the trainer's wait
on one, the plain request's path, and the guards that keep the bookkeeping out of the
user's way.

Layers never count twice: the outermost patched call of a context (a thread, an
asyncio task) owns the request, :data:`active` says so, and the layers under it pass
straight through (the openai SDK's transport sends become its attempts).

A request repeated to the same endpoint after a failure in the same context (a user's
retry loop) is a retry. Nothing here changes what a client returns, raises or retries:
every wrapper calls the original with the same arguments and hands back its result or
exception unchanged; the bookkeeping around it is guarded and never raises into the
user's code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gyreprof._support.errors import InvalidValueError
from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._auto import state as st

# library -> (lowest known, first unknown), as (major, minor)
KNOWN: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "httpx": ((0, 23), (1, 0)),
    "httpx2": ((2, 0), (3, 0)),
    "requests": ((2, 20), (3, 0)),
    "aiohttp": ((3, 8), (4, 0)),
    "openai": ((1, 0), (4, 0)),
}

#: the request the outermost patched call of this context owns (None: no request open);
#: kept in the request log, below the server-metrics reader that marks its own reads
active = rl.active


def known(lib: str, version: object) -> bool:
    """``lib`` at ``version`` is one this instrumentation knows; else a warning (once)
    and False: the library is left alone."""
    m = re.match(r"\s*(\d+)\.(\d+)", version) if isinstance(version, str) else None
    lo, hi = KNOWN[lib]
    if m is not None and lo <= (int(m.group(1)), int(m.group(2))) < hi:
        st.preload()  # the first request does not pay for the imports
        if st.run_dir is not None:
            from gyreprof.integrations._auto import rollout_record  # noqa: F401
        return True

    st.warn_once(
        lib,
        f"{lib} {version} is not a version this instrumentation knows (known: {lib}>="
        f"{lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}); {lib} is not instrumented in this run",
    )
    return False


def trainer_wait(start_ns: int, end_ns: int, kind: str) -> None:
    """The calling thread was blocked on rollout requests from ``start_ns`` to ``end_ns``
    (CLOCK_MONOTONIC ns): ``kind`` ``"http"`` for one synchronous request.

    The one place a wait on rollouts is reported from, called on the waiting thread at
    the end of every synchronous request it made itself. On a thread whose waits count
    (it trains, or it is the default trainer: ``state.waiting_thread``) the request is
    a data wait (``state.data_wait``): a training thread blocked on generation is in the
    trainer's ``wait``. Its kind is ``own``: the thread asked for this rollout and waits
    for it, so nothing is generated for it while it trains (the loop is synchronous,
    as when it steps its own envs). Every other thread (a rollout pool's
    worker) is left alone: the training thread's wait is then its ``Future.result`` or
    queue get, which ``patch_queue`` reports. A request inside such a wait (``in_wait``)
    is part of it."""
    if rl.probe_endpoints and rl.last_is_probe():
        return  # a cloud metadata probe (Ray's start-up) is no wait on rollouts
    t = getattr(st.tls, "t", None)
    if t is None:
        if not (st._default_main and st.default_trainer_here()):
            return
        # the default trainer's first wait: its state is made now; the wait is placed
        # after the profilers' set-up, with its duration (as patch_queue's first wait)
        t = st.thread_state()
        end = t.now()
        st.data_wait(t, end - max(0, end_ns - start_ns), end, "own")
        return
    # when its waits count (``state.waiting_thread``'s gate), a data wait of kind own, on
    # the thread's clock (CLOCK_MONOTONIC, the requests', unless the TSC)
    t.request_wait(start_ns, end_ns, st._default_main)


def guard(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or None if the bookkeeping fails: never into the user's code."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - instrumentation must not change the client
        return None


def new(ep: str, client: str) -> rl.Request:
    return rl.Request(rl.capped(ep), client)


def content_length(headers: Any) -> int:
    try:
        v = headers.get("content-length")
        return int(v) if v else 0
    except (TypeError, ValueError, AttributeError):
        return 0


def is_sse(headers: Any) -> bool:
    try:
        return "event-stream" in (headers.get("content-type") or "")
    except AttributeError:
        return False


def late_body(span: rl.Span | None, req: rl.Request, data: bytes) -> None:
    """A body read after the request was recorded (urllib, http.client, a requests stream
    that is no event stream): update its span."""
    req.body(data)
    if span is None:
        return
    span.bytes_in = req.bytes_in
    span.prompt_tokens = req.prompt_tokens
    span.completion_tokens = req.completion_tokens
    span.body_flag = req.body_flag
    if req.empty_field is not None and span.outcome == "ok":
        span.outcome = "empty"
        span.empty_field = req.empty_field


def ended(req: rl.Request, exc: BaseException | None, end_ns: int = -1) -> None:
    """A synchronous request ``req`` whose call ended (``exc``: the exception it raised):
    its failure classified, the request finished, the thread's wait on it reported
    (until ``end_ns``, else now)."""
    if exc is not None:
        guard(req.fail, rl.classify_exception(exc))
    guard(req.finish)
    guard(trainer_wait, req.start, end_ns if end_ns >= 0 else rl._now(), "http")


def plain_failed(
    log: rl.ThreadLog,
    ep: str,
    client: str,
    start: int,
    retried: tuple[str, ...],
    sent: int,
    exc: BaseException,
) -> None:
    """A plain send that raised: its span, classified by the exception, and the training
    thread's wait on it; never raises into the user's code."""
    try:
        outcome = rl.classify_exception(exc)
        trainer_wait(
            start, log.record_plain(ep, client, start, retried, outcome, None, sent), "http"
        )
    except Exception:  # noqa: BLE001, S110 - never into the user's code
        pass


class PlainSend:
    """How a client's *plain* request (one synchronous attempt, no stream, no layer above
    owning it) is sent and recorded with no :class:`rollout_log.Request` made: its
    endpoint (``cache`` by the URL, or by the URL's ``key_attr``; ``endpoint(url)`` on a
    miss, which caches what it finds), the calling thread's log, the bytes sent (the
    request's ``body_attr`` when bytes or str, else ``sent_else(request)``, else 0), the
    row and the trainer's wait on it. ``layer`` (not None) is set in :data:`active`
    while the original runs, for the layers below. ``plain(send, request, args,
    kwargs)`` calls ``send(request, *args, **kwargs)`` (a bound original). The
    bookkeeping never raises into the caller: when it fails before the send, the
    original is called uninstrumented; after it, the answer is returned as it came."""

    __slots__ = ("client", "layer", "cache", "key_attr", "endpoint", "body_attr", "sent_else")

    def __init__(
        self,
        client: str,
        *,
        cache: dict[Any, str],
        endpoint: Callable[[Any], str],
        body_attr: str,
        key_attr: str | None = None,
        sent_else: Callable[[Any], int] | None = None,
        layer: Any = None,
    ) -> None:
        if not isinstance(client, str) or not isinstance(body_attr, str):
            raise InvalidValueError("client and body_attr must be strings")
        if not isinstance(cache, dict):
            raise InvalidValueError(f"cache must be a dict, got {type(cache).__name__}")
        if not callable(endpoint):
            raise InvalidValueError("PlainSend needs a callable endpoint")
        if key_attr is not None and not isinstance(key_attr, str):
            raise InvalidValueError("key_attr must be an attribute name or None")
        if sent_else is not None and not callable(sent_else):
            raise InvalidValueError("sent_else must be callable or None")
        self.client = client
        self.layer = layer
        self.cache = cache
        self.key_attr = key_attr
        self.endpoint = endpoint
        self.body_attr = body_attr
        self.sent_else = sent_else

    def plain(
        self, send: Callable[..., Any], request: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            url = request.url
            key = url if self.key_attr is None else getattr(url, self.key_attr, None)
            ep = self.cache.get(key) if key is not None else None
            if ep is None:
                ep = self.endpoint(url)
            log = rl.thread_log()
            start, retried = log.open_plain(ep)
            body = getattr(request, self.body_attr, None)
            if isinstance(body, (bytes, str)):
                sent = len(body)
            elif self.sent_else is not None:
                sent = self.sent_else(request)
            else:
                sent = 0
        except Exception:  # noqa: BLE001 - uninstrumented rather than broken
            return send(*args, **kwargs)
        layer = self.layer
        token = active.set(layer) if layer is not None else None
        try:
            resp = send(*args, **kwargs)
        except BaseException as exc:
            if token is not None:
                active.reset(token)
            plain_failed(log, ep, self.client, start, retried, sent, exc)
            raise
        if token is not None:
            active.reset(token)
        try:
            status = resp.status_code
            outcome = rl.status_class(status)
            data = getattr(resp, "_content", None)
            end = log.record_plain(
                ep, self.client, start, retried, outcome,
                data if isinstance(data, bytes) else None, sent,
            )  # fmt: skip
            trainer_wait(start, end, "http")
        except Exception:  # noqa: BLE001, S110 - never into the user's code
            pass
        return resp


def start_recording() -> None:
    """A process's first request, under ``gyreprof run``: it records (its start file, its
    save at exit) as a process whose first env step it is would."""
    if st.run_dir is not None:
        # loaded now, not at exit: defining its dataclasses runs ``exec``, which at exit
        # would make a process ended by Ctrl-C exit 1 instead of by SIGINT
        from gyreprof.integrations._auto import rollout_record

        # a process killed later keeps its requests up to its last flush
        rollout_record.start_flusher(st.run_dir, lambda: st._saved_pid)
        from gyreprof.integrations.http import server_metrics

        server_metrics.start()  # the rollout servers' own figures, read off this thread
        if getattr(st.tls, "t", None) is None:
            st.new_thread()
