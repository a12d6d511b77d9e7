"""``aiohttp``: ``ClientSession._request``, one span per request, ended when the user has
read its body (``response.content`` at its end) or released the response.

The body is read through the response's ``StreamReader``, whatever the user calls:
``async for line in response.content``, ``iter_chunked``, ``iter_any``,
``iter_chunks``, ``readline``, ``read``, or ``ClientResponse.read`` / ``text`` /
``json`` (which read it whole). An event-stream answer is a stream: each read the user
makes is a chunk (its time to first token, the gaps between chunks, bytes and the
token counts read across chunk boundaries). Any other answer is scanned whole once it
has been read (``rollout_log.BODY_CAP`` bytes at most), as the other clients' answers
are. The outermost read counts (``readline`` reads through ``readuntil``, ``read()``
through ``readany``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http._common import active, guard, is_sse, known, new

MODULES: tuple[str, ...] = ("aiohttp",)

_patches = Patches()
_lock = threading.RLock()

#: the ``StreamReader`` methods a user's read goes through (each timed when outermost)
READS: tuple[str, ...] = ("read", "readany", "readline", "readuntil", "readchunk", "readexactly")
#: answers whose body is being read: ``id(StreamReader)`` -> its state (the reader has
#: ``__slots__``: nothing can be set on it); at most ``OPEN_CAP`` (the oldest dropped)
OPEN_CAP = 4096


class Body:
    """An answer whose body the user has not finished reading."""

    __slots__ = ("req", "reader", "sse", "parts", "size", "depth")

    def __init__(self, req: rl.Request, reader: Any, sse: bool) -> None:
        self.req = req
        self.reader = reader
        self.sse = sse
        self.parts: list[bytes] = []
        self.size = 0
        self.depth = 0  # reads in progress (the outermost one counts)


_open: dict[int, Body] = {}


def _url(session: Any, str_or_url: Any) -> str:
    url = str(str_or_url)
    base = getattr(session, "_base_url", None)
    if base is not None and not url.startswith(("http://", "https://")):
        return str(base.join(type(base)(url)))
    return url


def _answered(req: rl.Request, resp: Any) -> bool:
    """The headers of ``req``'s answer are in: its body is awaited (or, already at its
    end, the request ends now)."""
    status = getattr(resp, "status", None)
    if isinstance(status, int):
        req.outcome = rl.status_class(status)
    reader = resp.content
    sse = is_sse(resp.headers)
    req.stream = sse
    body = Body(req, reader, sse)
    if reader.at_eof():  # no body (a shared empty reader): nothing left to read
        _close(body)
        return True
    if len(_open) >= OPEN_CAP:  # answers never read nor released: the oldest go
        for key in list(_open)[: OPEN_CAP // 2]:
            _close(_open.pop(key))
    _open[id(reader)] = body
    return True


def _close(body: Body, exc: BaseException | None = None) -> None:
    """The body was read to its end, its read failed, or the response was released."""
    req = body.req
    if req.finished:
        return
    if exc is not None:
        req.fail(rl.classify_exception(exc))
    if not body.sse:
        if body.size > rl.BODY_CAP:
            req.bytes_in += body.size
            req.body_flag = 2
        elif body.size or exc is None:
            req.body(b"".join(body.parts))
        body.parts = []
    req.finish()


def _got(body: Body, data: Any) -> None:
    """The user read ``data`` (a read's result) from the body."""
    if type(data) is tuple:  # readchunk: (data, end of an HTTP chunk)
        data = data[0]
    if isinstance(data, (bytes, bytearray)) and data:
        if body.sse:
            body.req.chunk(bytes(data))
        else:
            if body.size <= rl.BODY_CAP:
                body.parts.append(bytes(data))
            body.size += len(data)
    if body.reader.at_eof():
        if _open.get(id(body.reader)) is body:
            del _open[id(body.reader)]
        _close(body)


def _failed(body: Body, exc: BaseException) -> None:
    if _open.get(id(body.reader)) is body:
        del _open[id(body.reader)]
    _close(body, exc)


async def _content_read(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """Any ``StreamReader`` read: timed when it is the outermost read of an answer's body."""
    body = _open.get(id(instance)) if _open else None
    if body is None or body.depth or body.reader is not instance:
        return await wrapped(*args, **kwargs)
    body.depth += 1
    try:
        data = await wrapped(*args, **kwargs)
    except BaseException as exc:
        body.depth -= 1
        if not isinstance(exc, (GeneratorExit, StopAsyncIteration)):
            guard(_failed, body, exc)
        raise
    body.depth -= 1
    guard(_got, body, data)
    return data


def _released(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClientResponse.release`` / ``close``: the user is done with the answer."""
    if _open:
        reader = getattr(instance, "content", None)
        body = _open.pop(id(reader), None) if reader is not None else None
        if body is not None:
            if body.reader is reader:
                guard(_close, body)
            else:
                _open[id(reader)] = body
    return wrapped(*args, **kwargs)


async def _request(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClientSession._request(method, str_or_url, ...)``."""
    str_or_url = args[1] if len(args) > 1 else kwargs.get("str_or_url")
    if active.get() is not None or str_or_url is None:
        return await wrapped(*args, **kwargs)
    ep = guard(rl.endpoint_of_url, guard(_url, instance, str_or_url) or "")
    req = guard(new, ep or "", "aiohttp")
    if req is None:
        return await wrapped(*args, **kwargs)
    req.attempts = 1
    token = active.set(req)
    try:
        resp = await wrapped(*args, **kwargs)
    except BaseException as exc:
        active.reset(token)
        guard(req.fail, rl.classify_exception(exc))
        guard(req.finish)
        raise
    active.reset(token)
    if guard(_answered, req, resp) is None:
        guard(req.finish)  # the bookkeeping failed: recorded at the headers
    return resp


def install(mod: ModuleType) -> bool:
    if not known("aiohttp", getattr(mod, "__version__", None)):
        return False
    with _lock:
        _patches.wrap_tree(mod.ClientSession, {"_request": _request}, hot=True)
        _patches.wrap_tree(mod.ClientResponse, {"release": _released, "close": _released}, hot=True)
        _patches.wrap_tree(mod.StreamReader, dict.fromkeys(READS, _content_read), hot=True)
    return True


def instrument() -> bool:
    """Patch aiohttp (imported now if it is not yet)."""
    return install(importlib.import_module("aiohttp"))


def uninstrument() -> None:
    with _lock:
        _patches.undo()
        for body in list(_open.values()):
            guard(_close, body)
        _open.clear()
