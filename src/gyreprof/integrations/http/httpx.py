"""httpx (and ``httpx2``, the fork the ``openai`` SDK ships on): ``Client.send`` and
``AsyncClient.send``, one span per request.

A plain request (no stream) is :class:`~._common.PlainSend`'s. A streamed answer
(``stream=True``) has its byte stream wrapped, so its chunks are timed as the user reads
them (never ahead); the request is recorded when the stream has been read or closed.
Under an openai SDK request (``openai.py``) each send is an *attempt* of the SDK's
request, and an attempt after a failed one is a retry.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http._common import (
    PlainSend,
    active,
    content_length,
    guard,
    known,
    trainer_wait,
)

#: the modules this instrumentor patches (each when imported)
MODULES: tuple[str, ...] = ("httpx", "httpx2")

_patches = Patches()
_lock = threading.RLock()

_by_ref: dict[Any, str] = {}


def endpoint(url: Any) -> str:
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


def sent(request: Any) -> int:
    """Bytes of the request body when httpx holds it whole (the usual JSON body), else
    its content-length.

    Here and elsewhere ``getattr(obj, "_content", None)``, never ``obj.__dict__``:
    reading an instance's ``__dict__`` builds it, and every later attribute read of that
    object (the client's own, the user's) then goes through the dictionary."""
    data = getattr(request, "_content", None)
    return len(data) if isinstance(data, bytes) else content_length(request.headers)


def _headers_sent(request: Any) -> int:
    return content_length(request.headers)


_plain = PlainSend(
    "httpx",
    cache=_by_ref,
    key_attr="_uri_reference",
    endpoint=endpoint,
    body_attr="_content",
    sent_else=_headers_sent,
)


def _forget_endpoints() -> None:
    """A forked child counts its own endpoints (``rollout_log._endpoints`` is emptied
    there): the names cached with the parent's cap are dropped."""
    _by_ref.clear()


os.register_at_fork(after_in_child=_forget_endpoints)


# ------------------------------------------------------------------ attempts


def begin_attempt(req: rl.Request, request: Any) -> None:
    """An attempt of the SDK request ``req`` starts (after a failed one: a retry)."""
    if req.attempts > 0:
        req.retried += (req.outcome,)
        req.outcome = "ok"
        req.empty_field = None
        req.body_flag = 0
    req.attempts += 1
    if not req.endpoint:
        req.endpoint = endpoint(request.url)
        req.check_retry()
    req.bytes_out += sent(request)


def answer(req: rl.Request, resp: Any, stream: bool, mod: ModuleType, t0: int) -> None:
    """The answer of ``req``'s attempt (``t0`` its start; 0: a request of its own)."""
    req.outcome = rl.status_class(resp.status_code)
    if t0 > 0:  # an attempt of an SDK request
        req.log.record(rl.ATTEMPT, rl._now() - t0)
    if stream:
        req.stream = True
        req.open_stream = True
        wrap = _stream_class(mod, resp.stream)
        if wrap is None:  # a stream of a kind we do not know: recorded at the headers
            req.open_stream = False
            req.stream = False
            return
        resp.stream = wrap(resp.stream, req, req.attempts)
        return
    data = getattr(resp, "_content", None)
    if isinstance(data, bytes):
        req.body(data)


def open_request(request: Any) -> rl.Request:
    """A request of httpx's own (not an SDK attempt) starts."""
    req = rl.Request(endpoint(request.url), "httpx")
    req.attempts = 1
    req.bytes_out = sent(request)
    return req


def done(req: rl.Request, resp: Any, stream: bool, mod: ModuleType) -> None:
    """A request of httpx's own has its answer: recorded now, or when its stream has
    been read."""
    answer(req, resp, stream, mod, 0)
    if not req.open_stream:
        req.finish()


def _stream_done(req: rl.Request, n: int) -> None:
    if n != req.attempts:  # an earlier attempt's answer (read by the SDK before its retry)
        return
    req.open_stream = False
    if not req.in_call:
        req.finish()


def _chunk_failed(req: rl.Request, n: int, exc: BaseException) -> None:
    guard(req.fail, rl.classify_exception(exc))
    guard(_stream_done, req, n)


_streams: dict[tuple[int, str], Any] = {}


def _stream_class(mod: ModuleType, stream: Any) -> Any:
    """The timed stream class of ``mod`` for ``stream`` (sync or async), or None."""
    kind = (
        "sync"
        if isinstance(stream, mod.SyncByteStream)
        else "async"
        if isinstance(stream, mod.AsyncByteStream)
        else None
    )
    if kind is None:
        return None
    cls = _streams.get((id(mod), kind))
    if cls is None:
        cls = _streams[(id(mod), kind)] = (_sync_stream if kind == "sync" else _async_stream)(mod)
    return cls


def _sync_stream(mod: ModuleType) -> Any:
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
                    guard(req.chunk, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                _chunk_failed(req, self._n, exc)
                raise
            guard(_stream_done, req, self._n)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                guard(_stream_done, self._req, self._n)

    return TimedStream


def _async_stream(mod: ModuleType) -> Any:
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
                    guard(req.chunk, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                _chunk_failed(req, self._n, exc)
                raise
            guard(_stream_done, req, self._n)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                guard(_stream_done, self._req, self._n)

    return TimedAsyncStream


# ------------------------------------------------------------------ the sends


def _start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, bool]:
    """What a ``send(request, *, stream=False, ...)`` call is: ``(owner, request,
    stream)``, ``owner`` the request that a layer above owns (``active``), else None."""
    request = args[0] if args else kwargs.get("request")
    return active.get(), request, bool(kwargs.get("stream", False))


def _wrappers(mod: ModuleType) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The wrappers of ``mod.Client.send`` and ``mod.AsyncClient.send``; the decisions
    (who owns the request, what its answer means) are shared, only the awaiting differs."""

    def send(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        outer, request, stream = _start(args, kwargs)
        if outer is not None:
            if outer.client != "openai" or request is None:
                return wrapped(*args, **kwargs)  # another layer owns it
            t0 = rl._now()
            guard(begin_attempt, outer, request)
            try:
                resp = wrapped(*args, **kwargs)
            except BaseException as exc:
                guard(outer.fail, rl.classify_exception(exc))
                raise
            guard(answer, outer, resp, stream, mod, t0)
            return resp
        if request is None:
            return wrapped(*args, **kwargs)
        if not stream:
            return _plain.plain(wrapped, request, args, kwargs)
        try:
            req = open_request(request)
        except Exception:  # noqa: BLE001 - uninstrumented rather than broken
            return wrapped(*args, **kwargs)
        try:
            resp = wrapped(*args, **kwargs)
        except BaseException as exc:
            guard(_failed, req, exc)
            guard(trainer_wait, req.start, req.end, "http")
            raise
        try:
            done(req, resp, True, mod)
            if req.finished:
                trainer_wait(req.start, req.end, "http")
        except Exception:  # noqa: BLE001, S110 - never into the user's code
            pass
        return resp

    async def asend(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        outer, request, stream = _start(args, kwargs)
        if outer is not None:
            if outer.client != "openai" or request is None:
                return await wrapped(*args, **kwargs)
            t0 = rl._now()
            guard(begin_attempt, outer, request)
            try:
                resp = await wrapped(*args, **kwargs)
            except BaseException as exc:
                guard(outer.fail, rl.classify_exception(exc))
                raise
            guard(answer, outer, resp, stream, mod, t0)
            return resp
        if request is None:
            return await wrapped(*args, **kwargs)
        try:
            req = open_request(request)
        except Exception:  # noqa: BLE001 - uninstrumented rather than broken
            return await wrapped(*args, **kwargs)
        try:
            resp = await wrapped(*args, **kwargs)
        except BaseException as exc:
            guard(_failed, req, exc)
            raise
        guard(done, req, resp, stream, mod)
        return resp

    return send, asend


def _failed(req: rl.Request, exc: BaseException) -> None:
    req.outcome = rl.classify_exception(exc)
    req.finish()


def install(mod: ModuleType) -> bool:
    """Patch ``mod`` (httpx or httpx2) if its version is known; True when patched."""
    lib = mod.__name__
    if not known(lib, getattr(mod, "__version__", None)):
        return False
    send, asend = _wrappers(mod)
    with _lock:
        _patches.wrap_tree(mod.Client, {"send": send}, hot=True)
        _patches.wrap_tree(mod.AsyncClient, {"send": asend}, hot=True)
    return True


def instrument() -> bool:
    """Patch httpx (imported now if it is not yet) and httpx2 when imported."""
    ok = install(importlib.import_module("httpx"))
    if "httpx2" in sys.modules:
        ok = install(sys.modules["httpx2"]) and ok
    return ok


def instrumented() -> bool:
    """Some httpx module is patched by this instrumentor."""
    return len(_patches) > 0


def uninstrument() -> None:
    """Every patched attribute back to its original."""
    with _lock:
        _patches.undo()
