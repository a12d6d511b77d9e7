"""``aiohttp``: ``ClientSession._request``, one span per request, its body scanned by
``ClientResponse.read`` when the user reads it."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http._common import active, guard, known, late_body, new

MODULES: tuple[str, ...] = ("aiohttp",)

_patches = Patches()
_lock = threading.RLock()

#: the response attribute holding its request until its body is read
OPEN = "_gyreprof_request"


def _url(session: Any, str_or_url: Any) -> str:
    url = str(str_or_url)
    base = getattr(session, "_base_url", None)
    if base is not None and not url.startswith(("http://", "https://")):
        return str(base.join(type(base)(url)))
    return url


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
    req.late = True
    token = active.set(req)
    try:
        resp = await wrapped(*args, **kwargs)
    except BaseException as exc:
        active.reset(token)
        guard(req.fail, rl.classify_exception(exc))
        guard(req.finish)
        raise
    active.reset(token)
    status = getattr(resp, "status", None)
    if isinstance(status, int):
        req.outcome = rl.status_class(status)
    guard(req.finish)
    try:
        setattr(resp, OPEN, req)
    except (AttributeError, TypeError):
        pass
    return resp


async def _read(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    data = await wrapped(*args, **kwargs)
    req = getattr(instance, OPEN, None)
    if req is not None and isinstance(data, bytes):
        setattr(instance, OPEN, None)  # scanned once (read() caches its body)
        guard(late_body, req.span, req, data)
    return data


def install(mod: ModuleType) -> bool:
    if not known("aiohttp", getattr(mod, "__version__", None)):
        return False
    with _lock:
        _patches.wrap_tree(mod.ClientSession, {"_request": _request}, hot=True)
        _patches.wrap_tree(mod.ClientResponse, {"read": _read}, hot=True)
    return True


def instrument() -> bool:
    """Patch aiohttp (imported now if it is not yet)."""
    return install(importlib.import_module("aiohttp"))


def uninstrument() -> None:
    with _lock:
        _patches.undo()
