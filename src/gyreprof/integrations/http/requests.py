"""``requests``: ``Session.send``, one span per request (urllib3 and ``http.client``
below it see the request owned and are not counted again).

A plain request (no stream) is :class:`~._common.PlainSend`'s; a streamed event-stream
answer is recorded when the user has read it through ``iter_content``.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http._common import (
    PlainSend,
    active,
    ended,
    guard,
    is_sse,
    known,
    late_body,
    new,
)

MODULES: tuple[str, ...] = ("requests",)

_patches = Patches()
_lock = threading.RLock()

_by_url: dict[Any, str] = {}


def endpoint(url: Any) -> str:
    """The capped endpoint of a prepared request's URL, cached by the URL string; an URL
    that cannot be read is the empty one."""
    if not isinstance(url, str):
        return rl.capped(guard(rl.endpoint_of_url, url) or "")
    ep = _by_url.get(url)
    if ep is None:
        ep = rl.capped(guard(rl.endpoint_of_url, url) or "")
        if len(_by_url) < 4096:
            _by_url[url] = ep
    return ep


def _forget_endpoints() -> None:
    """A forked child counts its own endpoints: the names cached with the parent's cap
    are dropped."""
    _by_url.clear()


os.register_at_fork(after_in_child=_forget_endpoints)

#: what ``active`` holds while a plain ``requests`` send runs (the layers below it, urllib3
#: and ``http.client``, see a request owned and pass through); no span of its own
LAYER = rl.Request.__new__(rl.Request)
LAYER.client = "requests"

_plain = PlainSend("requests", cache=_by_url, endpoint=endpoint, body_attr="body", layer=LAYER)


def answer(req: rl.Request, resp: Any, stream: bool) -> bool:
    """Account the answer; True when the request stays open (an event stream read later)."""
    req.outcome = rl.status_class(resp.status_code)
    if stream:
        if not is_sse(resp.headers):
            late_reads(req, resp)
            return False
        req.stream = True
        original = resp.iter_content

        def iter_content(*args: Any, **kwargs: Any) -> Any:
            try:
                for chunk in original(*args, **kwargs):
                    if isinstance(chunk, bytes):
                        guard(req.chunk, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                guard(req.fail, rl.classify_exception(exc))
                guard(req.finish)
                raise
            guard(req.finish)

        resp.iter_content = iter_content
        return True
    data = getattr(resp, "_content", None)
    if isinstance(data, bytes):
        req.body(data)
    return False


def late_reads(req: rl.Request, resp: Any) -> None:
    """A streamed answer that is no event stream (a JSON error, say): recorded at its
    headers, its body scanned once the user has read it through ``iter_content`` (as
    ``.content`` and ``.json()`` do), ``rollout_log.BODY_CAP`` bytes at most."""
    req.late = True
    original = resp.iter_content

    def iter_content(*args: Any, **kwargs: Any) -> Any:
        got: list[bytes] = []
        size = 0
        for chunk in original(*args, **kwargs):
            if isinstance(chunk, bytes):
                size += len(chunk)
                if size <= rl.BODY_CAP:
                    got.append(chunk)
            yield chunk
        if size <= rl.BODY_CAP:
            guard(late_body, req.span, req, b"".join(got))
        else:
            req.bytes_in += size

    resp.iter_content = iter_content


def _send(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    request = args[0] if args else kwargs.get("request")
    if active.get() is not None or request is None:
        return wrapped(*args, **kwargs)
    stream = bool(kwargs.get("stream", False))
    if not stream:
        return _plain.plain(wrapped, request, args, kwargs)
    req = guard(new, guard(rl.endpoint_of_url, request.url) or "", "requests")
    if req is None:
        return wrapped(*args, **kwargs)
    req.attempts = 1
    body = getattr(request, "body", None)
    if isinstance(body, (bytes, str)):
        req.bytes_out = len(body)
    token = active.set(req)
    try:
        resp = wrapped(*args, **kwargs)
    except BaseException as exc:
        active.reset(token)
        ended(req, exc)
        raise
    active.reset(token)
    if not guard(answer, req, resp, stream):
        ended(req, None)
    return resp


def install(mod: ModuleType) -> bool:
    if not known("requests", getattr(mod, "__version__", None)):
        return False
    with _lock:
        _patches.wrap_tree(mod.Session, {"send": _send}, hot=True)
    return True


def instrument() -> bool:
    """Patch requests (imported now if it is not yet)."""
    return install(importlib.import_module("requests"))


def uninstrument() -> None:
    with _lock:
        _patches.undo()
