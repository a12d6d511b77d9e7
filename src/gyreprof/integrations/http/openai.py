"""The ``openai`` SDK: ``SyncAPIClient.request`` / ``AsyncAPIClient.request``.

The SDK call is the request; each ``httpx`` send under it is an *attempt*
(``httpx.py``), and an attempt after a failed one is a retry (counted with the
failure's class). A streamed answer is recorded when the user has read it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http._common import active, guard, known, trainer_wait

MODULES: tuple[str, ...] = ("openai",)

_patches = Patches()
_lock = threading.RLock()


def _open() -> tuple[rl.Request | None, Any]:
    """An SDK request starts: ``(req, token)``; ``req`` None when a layer above owns it
    or the bookkeeping failed (the call is then passed through)."""
    if active.get() is not None:
        return None, None
    req = guard(rl.Request, "", "openai")
    if req is None:
        return None, None
    req.in_call = True
    return req, active.set(req)


def _failed(req: rl.Request, exc: BaseException) -> None:
    if req.attempts == 0:  # refused before any attempt: the call's own failure
        guard(req.fail, rl.classify_exception(exc))


def _close(req: rl.Request, token: Any, wait: bool) -> None:
    active.reset(token)
    guard(finish, req)
    if wait and not req.open_stream:
        guard(trainer_wait, req.start, rl._now(), "http")


def finish(req: rl.Request) -> None:
    """The SDK call returned: its request is recorded (a stream: once read), or discarded
    when no attempt was made (a body the SDK could not encode)."""
    req.in_call = False
    if req.attempts > 0 and not req.open_stream:
        req.finish()
    elif req.attempts == 0:
        req.discard()


def _request(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    req, token = _open()
    if req is None:
        return wrapped(*args, **kwargs)
    try:
        return wrapped(*args, **kwargs)
    except BaseException as exc:
        _failed(req, exc)
        raise
    finally:
        _close(req, token, True)


async def _arequest(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    req, token = _open()
    if req is None:
        return await wrapped(*args, **kwargs)
    try:
        return await wrapped(*args, **kwargs)
    except BaseException as exc:
        _failed(req, exc)
        raise
    finally:
        _close(req, token, False)  # an asyncio task's request is no thread's wait


def install(mod: ModuleType) -> bool:
    """Patch the SDK (the package, once it has finished importing): its base clients."""
    if not known("openai", getattr(mod, "__version__", None)):
        return False
    base = getattr(mod, "_base_client", None)
    if base is None:
        base = importlib.import_module("openai._base_client")
    with _lock:
        _patches.wrap_tree(base.SyncAPIClient, {"request": _request}, hot=True)
        _patches.wrap_tree(base.AsyncAPIClient, {"request": _arequest}, hot=True)
    return True


_own_httpx = False  # this instrumentor patched httpx itself (undone with it)


def instrument() -> bool:
    """Patch the openai SDK (imported now if it is not yet), and httpx under it when it
    is not patched yet: an SDK request's attempts are its httpx sends."""
    global _own_httpx
    from gyreprof.integrations.http import httpx as transport

    with _lock:
        if not transport.instrumented():
            _own_httpx = transport.instrument()
        return install(importlib.import_module("openai"))


def uninstrument() -> None:
    global _own_httpx
    from gyreprof.integrations.http import httpx as transport

    with _lock:
        _patches.undo()
        if _own_httpx:
            _own_httpx = False
            transport.uninstrument()
