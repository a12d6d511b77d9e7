"""HTTP rollout clients: one span per request (``rollout_log``), patched on import.

Patched, each only when it is imported and of a version this code knows
(others are left alone with a warning, as every integration does):

- ``httpx`` and ``httpx2`` (the fork the ``openai`` SDK ships on): ``Client.send``,
  ``AsyncClient.send``; a streamed answer (``stream=True``) has its byte stream
  wrapped, so its chunks are timed as the user reads them (never ahead);
- ``requests``: ``Session.send`` (urllib3 and ``http.client`` below it are not
  counted again);
- ``urllib.request``: ``OpenerDirector.open`` (``urlopen``), the body scanned as the
  user reads it;
- ``http.client`` used directly (or urllib3 without requests): ``HTTPConnection.request``
  to ``getresponse``, the body scanned as the user reads it;
- ``aiohttp``: ``ClientSession._request``, the body scanned by ``ClientResponse.read``;
- the ``openai`` SDK: ``SyncAPIClient.request`` / ``AsyncAPIClient.request``. The SDK
  call is the request; each ``httpx`` send under it is an *attempt*, and an attempt
  after a failed one is a retry (counted with the failure's class).

Layers never count twice: the outermost patched call of a context (a thread, an
asyncio task) owns the request, a context variable says so, and the layers under
it pass straight through (the SDK's transport sends become its attempts).

A request repeated to the same endpoint after a failure in the same context (a
user's retry loop) is a retry too. Nothing here changes what a client returns,
raises or retries: every wrapper calls the original with the same arguments and
hands back its result or exception unchanged; the bookkeeping around it is
guarded and never raises into the user's code.
"""

from __future__ import annotations

import contextvars
import os
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof._core.gate import Gate
from gyreprof._core.requestlog import PlainSend
from gyreprof.integrations._auto import hooks
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

#: the request the outermost patched call of this context owns (None: no request open)
_active: contextvars.ContextVar[rl.Request | None] = contextvars.ContextVar(
    "gyreprof_http_active", default=None
)


def _known(lib: str, version: object) -> bool:
    from gyreprof.integrations._auto import state as st

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
    # the thread's clock (CLOCK_MONOTONIC, the requests', unless the TSC): compiled
    t.request_wait(start_ns, end_ns, st._default_main)


# ---------------------------------------------------------------- the common part


def _guard(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or None if the bookkeeping fails: never into the user's code."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - instrumentation must not change the client
        return None


def _new(ep: str, client: str) -> rl.Request:
    return rl.Request(rl.capped(ep), client)


_by_ref: dict[Any, str] = {}


def _httpx_endpoint(url: Any) -> str:
    """The endpoint of an httpx URL, cached by its parsed reference (a tuple)."""
    ref = getattr(url, "_uri_reference", None)
    if ref is not None:
        ep = _by_ref.get(ref)
        if ep is not None:
            return ep
    ep = rl.capped(rl.endpoint(url.scheme, url.host, url.port, url.path))
    if ref is not None and len(_by_ref) < 4096:
        _by_ref[ref] = ep
    return ep


def _httpx_sent(request: Any) -> int:
    """Bytes of the request body when httpx holds it whole (the usual JSON body).

    Here and below ``getattr(obj, "_content", None)``, never ``obj.__dict__``: reading
    an instance's ``__dict__`` builds it, and every later attribute read of that object
    (the client's own, the user's) then goes through the dictionary."""
    data = getattr(request, "_content", None)
    return len(data) if isinstance(data, bytes) else _content_length(request.headers)


def _content_length(headers: Any) -> int:
    try:
        v = headers.get("content-length")
        return int(v) if v else 0
    except (TypeError, ValueError, AttributeError):
        return 0


def _is_sse(headers: Any) -> bool:
    try:
        return "event-stream" in (headers.get("content-type") or "")
    except AttributeError:
        return False


def _late_body(span: rl.Span | None, req: rl.Request, data: bytes) -> None:
    """A body read after the request was recorded (urllib, aiohttp): update its span."""
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


# ------------------------------------------------------------------------ httpx


def _httpx_begin(req: rl.Request, request: Any) -> None:
    """An attempt of ``req`` starts (the SDK's retries: the previous one failed)."""
    if req.attempts > 0:
        req.retried += (req.outcome,)
        req.outcome = "ok"
        req.empty_field = None
        req.body_flag = 0
    req.attempts += 1
    if not req.endpoint:
        req.endpoint = _httpx_endpoint(request.url)
        req.check_retry()
    req.bytes_out += _httpx_sent(request)


def _httpx_answer(req: rl.Request, resp: Any, stream: bool, mod: ModuleType, t0: int) -> None:
    req.outcome = rl.status_class(resp.status_code)
    if t0 > 0:  # an attempt of an SDK request
        req.log.record(rl.ATTEMPT, rl._now() - t0)
    if stream:
        req.stream = True
        req.open_stream = True
        wrap = _sync_wrapper(mod) if isinstance(resp.stream, mod.SyncByteStream) else None
        if wrap is None:
            wrap = _async_wrapper(mod) if isinstance(resp.stream, mod.AsyncByteStream) else None
        if wrap is None:  # a stream of a kind we do not know: recorded at the headers
            req.open_stream = False
            req.stream = False
            return
        resp.stream = wrap(resp.stream, req, req.attempts)
        return
    data = getattr(resp, "_content", None)
    if isinstance(data, bytes):
        req.body(data)


def _stream_done(req: rl.Request, n: int) -> None:
    if n != req.attempts:  # an earlier attempt's answer (read by the SDK before its retry)
        return
    req.open_stream = False
    if not req.in_call:
        req.finish()


_wrappers: dict[tuple[int, str], Any] = {}


def _sync_wrapper(mod: ModuleType) -> Any:
    key = (id(mod), "sync")
    cls = _wrappers.get(key)
    if cls is not None:
        return cls

    class TimedStream(mod.SyncByteStream):  # type: ignore[misc, name-defined]
        """The answer's byte stream, each chunk timed as the user reads it."""

        def __init__(self, inner: Any, req: rl.Request, n: int) -> None:
            self._inner = inner
            self._req = req
            self._n = n

        def __iter__(self) -> Any:
            req = self._req
            try:
                for chunk in self._inner:
                    _guard(req.chunk, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                _guard(req.fail, rl.classify_exception(exc))
                _guard(_stream_done, req, self._n)
                raise
            _guard(_stream_done, req, self._n)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                _guard(_stream_done, self._req, self._n)

    _wrappers[key] = TimedStream
    return TimedStream


def _async_wrapper(mod: ModuleType) -> Any:
    key = (id(mod), "async")
    cls = _wrappers.get(key)
    if cls is not None:
        return cls

    class TimedAsyncStream(mod.AsyncByteStream):  # type: ignore[misc, name-defined]
        """The answer's byte stream, each chunk timed as the user reads it."""

        def __init__(self, inner: Any, req: rl.Request, n: int) -> None:
            self._inner = inner
            self._req = req
            self._n = n

        async def __aiter__(self) -> Any:
            req = self._req
            try:
                async for chunk in self._inner:
                    _guard(req.chunk, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                _guard(req.fail, rl.classify_exception(exc))
                _guard(_stream_done, req, self._n)
                raise
            _guard(_stream_done, req, self._n)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                _guard(_stream_done, self._req, self._n)

    _wrappers[key] = TimedAsyncStream
    return TimedAsyncStream


def _httpx_open(request: Any) -> rl.Request:
    req = rl.Request(_httpx_endpoint(request.url), "httpx")
    req.attempts = 1
    req.bytes_out = _httpx_sent(request)
    return req


def _httpx_done(req: rl.Request, resp: Any, stream: bool, mod: ModuleType) -> None:
    """A plain httpx request's answer: recorded now, or when its stream has been read."""
    req.outcome = rl.status_class(resp.status_code)
    if stream:
        _httpx_answer(req, resp, True, mod, 0)
        if req.open_stream:
            return
    else:
        data = getattr(resp, "_content", None)
        if data is not None:
            req.body(data)
    req.finish()


def _httpx_failed(req: rl.Request, exc: BaseException) -> None:
    req.outcome = rl.classify_exception(exc)
    req.finish()


def _plain_failed(
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


def _httpx_send(mod: ModuleType) -> hooks.Make:
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            outer = _active.get()
            if outer is not None:
                if outer.client != "openai":
                    return original(self, request, *args, **kwargs)  # another layer owns it
                return _attempt(original, self, request, args, kwargs, outer, mod)
            if not kwargs.get("stream", False):
                return plain.plain(self, request, args, kwargs)
            try:
                req = _httpx_open(request)
            except Exception:  # noqa: BLE001 - uninstrumented rather than broken
                return original(self, request, *args, **kwargs)
            try:
                resp = original(self, request, *args, **kwargs)
            except BaseException as exc:
                _guard(_httpx_failed, req, exc)
                _guard(trainer_wait, req.start, req.end, "http")
                raise
            try:
                _httpx_done(req, resp, kwargs.get("stream", False), mod)
                if req.finished:
                    trainer_wait(req.start, req.end, "http")
            except Exception:  # noqa: BLE001, S110 - never into the user's code
                pass
            return resp

        plain = _plain_send(
            original,
            send,
            "httpx",
            layer=None,
            cache=_by_ref,
            key_attr="_uri_reference",
            endpoint=_httpx_endpoint,
            body_attr="_content",
            sent_else=_httpx_headers_sent,
        )
        return plain

    return make


def _httpx_headers_sent(request: Any) -> int:
    """Bytes of a request body httpx does not hold whole: its content-length."""
    return _content_length(request.headers)


def _plain_send(
    original: Callable[..., Any], wrapper: Callable[..., Any], client: str, **how: Any
) -> PlainSend:
    """The patched ``send`` of ``client`` (``_core/requestlog.PlainSend``): a plain request
    (one synchronous attempt, no stream, no layer above owning it) recorded in compiled
    code, with this module's context variable, the thread logs, the training state and
    the Python paths for the rest (``trainer_wait`` on a thread with no training state
    yet, ``_plain_failed`` for a send that raised); ``how`` says how ``client``'s request
    reads (its endpoint cache and key, its body)."""
    return PlainSend(
        original,
        wrapper,
        active=_active,
        client=client,
        logs=vars(rl),
        state=vars(st),
        probes=rl.probe_endpoints,
        wait=trainer_wait,
        failed=_plain_failed,
        **how,
    )


def _attempt(
    original: Callable[..., Any],
    client: Any,
    request: Any,
    args: Any,
    kwargs: Any,
    req: rl.Request,
    mod: ModuleType,
) -> Any:
    """One transport send of an SDK request (its attempt)."""
    t0 = rl._now()
    _guard(_httpx_begin, req, request)
    try:
        resp = original(client, request, *args, **kwargs)
    except BaseException as exc:
        _guard(req.fail, rl.classify_exception(exc))
        raise
    _guard(_httpx_answer, req, resp, bool(kwargs.get("stream", False)), mod, t0)
    return resp


async def _aattempt(
    original: Callable[..., Any],
    client: Any,
    request: Any,
    args: Any,
    kwargs: Any,
    req: rl.Request,
    mod: ModuleType,
) -> Any:
    t0 = rl._now()
    _guard(_httpx_begin, req, request)
    try:
        resp = await original(client, request, *args, **kwargs)
    except BaseException as exc:
        _guard(req.fail, rl.classify_exception(exc))
        raise
    _guard(_httpx_answer, req, resp, bool(kwargs.get("stream", False)), mod, t0)
    return resp


def _httpx_asend(mod: ModuleType) -> hooks.Make:
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            outer = _active.get()
            if outer is not None:
                if outer.client != "openai":
                    return await original(self, request, *args, **kwargs)
                return await _aattempt(original, self, request, args, kwargs, outer, mod)
            try:
                req = _httpx_open(request)
            except Exception:  # noqa: BLE001 - uninstrumented rather than broken
                return await original(self, request, *args, **kwargs)
            try:
                resp = await original(self, request, *args, **kwargs)
            except BaseException as exc:
                _guard(_httpx_failed, req, exc)
                raise
            _guard(_httpx_done, req, resp, kwargs.get("stream", False), mod)
            return resp

        return send

    return make


def install_httpx(mod: ModuleType) -> None:
    lib = mod.__name__
    if not _known(lib, getattr(mod, "__version__", None)):
        return
    hooks.patch_methods(mod.Client, ("send",), _httpx_send(mod))
    hooks.patch_methods(mod.AsyncClient, ("send",), _httpx_asend(mod))


# ------------------------------------------------------------------ openai SDK


def _sdk_finish(req: rl.Request) -> None:
    req.in_call = False
    if req.attempts > 0 and not req.open_stream:
        req.finish()
    elif req.attempts == 0:  # refused before sending (a body it cannot encode): none
        req.discard()


def _sdk_request(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:
            return original(self, *args, **kwargs)
        req = _guard(rl.Request, "", "openai")
        if req is None:
            return original(self, *args, **kwargs)
        req.in_call = True
        token = _active.set(req)
        try:
            return original(self, *args, **kwargs)
        except BaseException as exc:
            if req.attempts == 0:
                _guard(req.fail, rl.classify_exception(exc))
            raise
        finally:
            _active.reset(token)
            _guard(_sdk_finish, req)
            if not req.open_stream:
                _guard(trainer_wait, req.start, rl._now(), "http")

    return request


def _sdk_arequest(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:
            return await original(self, *args, **kwargs)
        req = _guard(rl.Request, "", "openai")
        if req is None:
            return await original(self, *args, **kwargs)
        req.in_call = True
        token = _active.set(req)
        try:
            return await original(self, *args, **kwargs)
        except BaseException as exc:
            if req.attempts == 0:
                _guard(req.fail, rl.classify_exception(exc))
            raise
        finally:
            _active.reset(token)
            _guard(_sdk_finish, req)

    return request


def install_openai(mod: ModuleType) -> None:
    """``openai`` (the package, once it has finished importing): its base clients."""
    if not _known("openai", getattr(mod, "__version__", None)):
        return
    base = getattr(mod, "_base_client", None)
    if base is None:
        import importlib

        base = importlib.import_module("openai._base_client")
    hooks.patch_methods(base.SyncAPIClient, ("request",), _sdk_request)
    hooks.patch_methods(base.AsyncAPIClient, ("request",), _sdk_arequest)


# --------------------------------------------------------------------- requests


def _requests_answer(req: rl.Request, resp: Any, stream: bool) -> bool:
    """Account the answer; True when the request stays open (an event stream read later)."""
    req.outcome = rl.status_class(resp.status_code)
    if stream:
        if not _is_sse(resp.headers):
            return False
        req.stream = True
        original = resp.iter_content

        def iter_content(*args: Any, **kwargs: Any) -> Any:
            try:
                for chunk in original(*args, **kwargs):
                    if isinstance(chunk, bytes):
                        _guard(req.chunk, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                _guard(req.fail, rl.classify_exception(exc))
                _guard(req.finish)
                raise
            _guard(req.finish)

        resp.iter_content = iter_content
        return True
    data = getattr(resp, "_content", None)
    if isinstance(data, bytes):
        req.body(data)
    return False


def _requests_send(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def send(self: Any, request: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:
            return original(self, request, **kwargs)
        if not kwargs.get("stream", False):
            return plain.plain(self, request, (), kwargs)
        req = _guard(_new, _guard(rl.endpoint_of_url, request.url) or "", "requests")
        if req is None:
            return original(self, request, **kwargs)
        req.attempts = 1
        body = request.body
        if isinstance(body, (bytes, str)):
            req.bytes_out = len(body)
        token = _active.set(req)
        try:
            resp = original(self, request, **kwargs)
        except BaseException as exc:
            _active.reset(token)
            _guard(req.fail, rl.classify_exception(exc))
            _guard(req.finish)
            _guard(trainer_wait, req.start, rl._now(), "http")
            raise
        _active.reset(token)
        if not _guard(_requests_answer, req, resp, bool(kwargs.get("stream", False))):
            _guard(req.finish)
            _guard(trainer_wait, req.start, rl._now(), "http")
        return resp

    plain = _plain_send(
        original,
        send,
        "requests",
        layer=_REQUESTS_LAYER,
        cache=_by_url,
        key_attr=None,
        endpoint=_requests_endpoint,
        body_attr="body",
        sent_else=None,
    )
    return plain


#: what ``_active`` holds while a plain ``requests`` send runs (the layers below it, urllib3
#: and ``http.client``, see a request owned and pass through); no span of its own
_REQUESTS_LAYER = rl.Request.__new__(rl.Request)
_REQUESTS_LAYER.client = "requests"


_by_url: dict[Any, str] = {}


def _requests_endpoint(url: Any) -> str:
    """The capped endpoint of a prepared request's URL, cached by the URL string (as
    httpx's by its parsed reference); an URL that cannot be read is the empty one."""
    if not isinstance(url, str):
        return rl.capped(_guard(rl.endpoint_of_url, url) or "")
    ep = _by_url.get(url)
    if ep is None:
        ep = rl.capped(_guard(rl.endpoint_of_url, url) or "")
        if len(_by_url) < 4096:
            _by_url[url] = ep
    return ep


def _forget_endpoints() -> None:
    """A forked child counts its own endpoints (``rollout_log._endpoints`` is emptied
    there): the names cached with the parent's cap are dropped."""
    _by_ref.clear()
    _by_url.clear()


os.register_at_fork(after_in_child=_forget_endpoints)


def install_requests(mod: ModuleType) -> None:
    if not _known("requests", getattr(mod, "__version__", None)):
        return
    hooks.patch_methods(mod.Session, ("send",), _requests_send)


# ---------------------------------------------------------------- urllib.request


def _wrap_read(resp: Any, req: rl.Request) -> None:
    """The response's ``read``: the bytes the user reads (up to the cap) are scanned once
    the body has been read whole."""
    original = resp.read
    got: list[bytes] = []
    size = [0]

    def read(*args: Any, **kwargs: Any) -> Any:
        data = original(*args, **kwargs)
        try:
            if isinstance(data, bytes) and size[0] <= rl.BODY_CAP:
                whole = not args and kwargs.get("amt") is None
                if data:
                    got.append(data)
                    size[0] += len(data)
                if whole or not data:
                    body = b"".join(got)
                    got.clear()
                    size[0] = rl.BODY_CAP + 1  # scanned once
                    _late_body(req.span, req, body)
            elif isinstance(data, bytes):
                req.bytes_in += len(data)
        except Exception:  # noqa: BLE001, S110 - never into the user's code
            pass
        return data

    resp.read = read


def _urllib_open(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def open(self: Any, fullurl: Any, *args: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:
            return original(self, fullurl, *args, **kwargs)
        url = fullurl if isinstance(fullurl, str) else getattr(fullurl, "full_url", "")
        req = _guard(_new, _guard(rl.endpoint_of_url, url) or "", "urllib")
        if req is None:
            return original(self, fullurl, *args, **kwargs)
        req.attempts = 1
        req.late = True
        token = _active.set(req)
        try:
            resp = original(self, fullurl, *args, **kwargs)
        except BaseException as exc:
            _active.reset(token)
            code = getattr(exc, "code", None)
            outcome = rl.status_class(code) if isinstance(code, int) else None
            _guard(req.fail, outcome or rl.classify_exception(exc))
            _guard(req.finish)
            _guard(trainer_wait, req.start, rl._now(), "http")
            raise
        _active.reset(token)
        status = getattr(resp, "status", None)
        if isinstance(status, int):
            req.outcome = rl.status_class(status)
        _guard(req.finish)
        _guard(_wrap_read, resp, req)
        _guard(trainer_wait, req.start, rl._now(), "http")
        return resp

    return open


def install_urllib(mod: ModuleType) -> None:
    hooks.patch_methods(mod.OpenerDirector, ("open",), _urllib_open)


# ------------------------------------------------------------------ http.client


def _conn_endpoint(conn: Any, url: Any) -> str:
    import http.client

    scheme = "https" if isinstance(conn, http.client.HTTPSConnection) else "http"
    path = url if isinstance(url, str) else ""
    if path.startswith(("http://", "https://")):  # through a proxy: the absolute URL
        return rl.endpoint_of_url(path)
    return rl.endpoint(scheme, str(conn.host), conn.port, path)


def _conn_request(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``HTTPConnection.request``: a request starts (its answer is ``getresponse``'s)."""

    def request(self: Any, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:  # urllib, requests: their layer owns it
            return original(self, method, url, *args, **kwargs)
        req = _guard(_new, _guard(_conn_endpoint, self, url) or "", "http.client")
        if req is None:
            return original(self, method, url, *args, **kwargs)
        req.attempts = 1
        req.late = True
        try:
            result = original(self, method, url, *args, **kwargs)
        except BaseException as exc:
            _guard(req.fail, rl.classify_exception(exc))
            _guard(req.finish)
            raise
        try:
            self._gyreprof_request = req
        except (AttributeError, TypeError):
            pass
        return result

    # a request owned by a layer above (requests, urllib) goes to the original in C
    return Gate(original, request, var=_active)


def _conn_getresponse(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def getresponse(self: Any, *args: Any, **kwargs: Any) -> Any:
        req = getattr(self, "_gyreprof_request", None)
        if req is None:
            return original(self, *args, **kwargs)
        self._gyreprof_request = None
        try:
            resp = original(self, *args, **kwargs)
        except BaseException as exc:
            _guard(req.fail, rl.classify_exception(exc))
            _guard(req.finish)
            raise
        status = getattr(resp, "status", None)
        if isinstance(status, int):
            req.outcome = rl.status_class(status)
        _guard(req.finish)
        _guard(_wrap_read, resp, req)
        _guard(trainer_wait, req.start, req.end, "http")
        return resp

    # a connection with no request of this layer open goes to the original in C
    return Gate(original, getresponse, attr="_gyreprof_request")


def install_http_client(mod: ModuleType) -> None:
    """``http.client`` used directly, or through urllib3 without requests (a layer above
    that is patched owns its requests: these pass through under it)."""
    hooks.patch_methods(mod.HTTPConnection, ("request",), _conn_request)
    hooks.patch_methods(mod.HTTPConnection, ("getresponse",), _conn_getresponse)
    try:
        # a class default: ``getresponse``'s read of a connection whose request this layer
        # did not open (every request under requests' or urllib's send, which own theirs)
        # finds it here, not by raising and catching AttributeError (~1.7 k instructions)
        mod.HTTPConnection._gyreprof_request = None
    except (AttributeError, TypeError):
        pass


# ---------------------------------------------------------------------- aiohttp


def _aiohttp_url(session: Any, str_or_url: Any) -> str:
    url = str(str_or_url)
    base = getattr(session, "_base_url", None)
    if base is not None and not url.startswith(("http://", "https://")):
        return str(base.join(type(base)(url)))
    return url


def _aiohttp_request(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def _request(self: Any, method: Any, str_or_url: Any, *args: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:
            return await original(self, method, str_or_url, *args, **kwargs)
        ep = _guard(rl.endpoint_of_url, _guard(_aiohttp_url, self, str_or_url) or "")
        req = _guard(_new, ep or "", "aiohttp")
        if req is None:
            return await original(self, method, str_or_url, *args, **kwargs)
        req.attempts = 1
        req.late = True
        token = _active.set(req)
        try:
            resp = await original(self, method, str_or_url, *args, **kwargs)
        except BaseException as exc:
            _active.reset(token)
            _guard(req.fail, rl.classify_exception(exc))
            _guard(req.finish)
            raise
        _active.reset(token)
        status = getattr(resp, "status", None)
        if isinstance(status, int):
            req.outcome = rl.status_class(status)
        _guard(req.finish)
        try:
            resp._gyreprof_request = req
        except (AttributeError, TypeError):
            pass
        return resp

    return _request


def _aiohttp_read(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def read(self: Any) -> Any:
        data = await original(self)
        req = getattr(self, "_gyreprof_request", None)
        if req is not None and isinstance(data, bytes):
            self._gyreprof_request = None  # scanned once (read() caches its body)
            _guard(_late_body, req.span, req, data)
        return data

    return read


def install_aiohttp(mod: ModuleType) -> None:
    if not _known("aiohttp", getattr(mod, "__version__", None)):
        return
    hooks.patch_methods(mod.ClientSession, ("_request",), _aiohttp_request)
    hooks.patch_methods(mod.ClientResponse, ("read",), _aiohttp_read)


def _start_recording() -> None:
    """A process's first request, under ``gyreprof run``: it records (its start file, its
    save at exit) as a process whose first env step it is would."""
    from gyreprof.integrations._auto import state as st

    if st.run_dir is not None:
        # loaded now, not at exit: defining its dataclasses runs ``exec``, which at exit
        # would make a process ended by Ctrl-C exit 1 instead of by SIGINT
        from gyreprof.integrations._auto import rollout_record

        # a process killed later keeps its requests up to its last flush
        rollout_record.start_flusher(st.run_dir, lambda: st._saved_pid)
        if getattr(st.tls, "t", None) is None:
            st.new_thread()


INSTALLERS: dict[str, Callable[[ModuleType], None]] = {
    "httpx": install_httpx,
    "httpx2": install_httpx,
    "openai": install_openai,
    "requests": install_requests,
    "urllib.request": install_urllib,
    "http.client": install_http_client,
    "aiohttp": install_aiohttp,
}


def install(name: str, module: ModuleType) -> None:
    """Patch client ``name`` (one of ``http_hooks.CLIENTS``), now imported as ``module``."""
    rl.first_request_hook = _start_recording
    INSTALLERS[name](module)


def register() -> None:
    """Patch each HTTP client when (if ever) it is imported (``http_hooks.register``
    does the same without loading this module first)."""
    for name, patch in INSTALLERS.items():
        hooks.when_imported(name, patch)
    rl.first_request_hook = _start_recording
