"""``urllib.request`` and ``http.client``: one span per request.

- ``urllib.request``: ``OpenerDirector.open`` (``urlopen``), the body scanned as the
  user reads it;
- ``http.client`` used directly (or urllib3 without requests): ``HTTPConnection.request``
  to ``getresponse``, the body scanned as the user reads it. Under a layer above that
  owns its request (requests, urllib) both pass straight through.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http._common import (
    active,
    ended,
    guard,
    late_body,
    new,
    trainer_wait,
)

MODULES: tuple[str, ...] = ("urllib.request", "http.client")

_patches = Patches()
_lock = threading.RLock()

#: the instance attribute holding the request ``HTTPConnection.request`` opened
OPEN = "_gyreprof_request"


def wrap_read(resp: Any, req: rl.Request) -> None:
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
                    late_body(req.span, req, body)
            elif isinstance(data, bytes):
                req.bytes_in += len(data)
        except Exception:  # noqa: BLE001, S110 - never into the user's code
            pass
        return data

    resp.read = read


def _answered(req: rl.Request, resp: Any, at_end: bool = False) -> None:
    """``req`` has its answer ``resp``: recorded, its body scanned as the user reads it,
    the thread's wait on it reported (until the span's end when ``at_end``, else now)."""
    status = getattr(resp, "status", None)
    if isinstance(status, int):
        req.outcome = rl.status_class(status)
    guard(req.finish)
    guard(wrap_read, resp, req)
    guard(trainer_wait, req.start, req.end if at_end else rl._now(), "http")


# ---------------------------------------------------------------- urllib.request


def _open(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    fullurl = args[0] if args else kwargs.get("fullurl")
    if active.get() is not None or fullurl is None:
        return wrapped(*args, **kwargs)
    url = fullurl if isinstance(fullurl, str) else getattr(fullurl, "full_url", "")
    req = guard(new, guard(rl.endpoint_of_url, url) or "", "urllib")
    if req is None:
        return wrapped(*args, **kwargs)
    req.attempts = 1
    req.late = True
    token = active.set(req)
    try:
        resp = wrapped(*args, **kwargs)
    except BaseException as exc:
        active.reset(token)
        code = getattr(exc, "code", None)
        if isinstance(code, int):  # an HTTPError: the status's class, its body scanned
            guard(req.fail, rl.status_class(code))  # as the user reads it (its usage)
            ended(req, None)
            guard(wrap_read, exc, req)
        else:
            ended(req, exc)
        raise
    active.reset(token)
    _answered(req, resp)
    return resp


# ------------------------------------------------------------------ http.client


def _conn_endpoint(conn: Any, url: Any) -> str:
    import http.client

    scheme = "https" if isinstance(conn, http.client.HTTPSConnection) else "http"
    path = url if isinstance(url, str) else ""
    if path.startswith(("http://", "https://")):  # through a proxy: the absolute URL
        return rl.endpoint_of_url(path)
    return rl.endpoint(scheme, str(conn.host), conn.port, path)


def _conn_request(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTPConnection.request(method, url, ...)``: a request starts (its answer is
    ``getresponse``'s)."""
    if active.get() is not None:  # urllib, requests: their layer owns it
        return wrapped(*args, **kwargs)
    url = args[1] if len(args) > 1 else kwargs.get("url")
    req = guard(new, guard(_conn_endpoint, instance, url) or "", "http.client")
    if req is None:
        return wrapped(*args, **kwargs)
    req.attempts = 1
    req.late = True
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(req.fail, rl.classify_exception(exc))
        guard(req.finish)
        raise
    try:
        setattr(instance, OPEN, req)
    except (AttributeError, TypeError):
        pass
    return result


def _conn_getresponse(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        req = getattr(instance, OPEN, None)
    except Exception:  # noqa: BLE001 - an attribute that raises: not ours
        req = None
    if req is None:  # no request of this layer open on the connection
        return wrapped(*args, **kwargs)
    setattr(instance, OPEN, None)
    try:
        resp = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(req.fail, rl.classify_exception(exc))
        guard(req.finish)
        raise
    _answered(req, resp, at_end=True)
    return resp


def install_urllib(mod: ModuleType) -> bool:
    with _lock:
        _patches.wrap_tree(mod.OpenerDirector, {"open": _open}, hot=True)
    return True


def install_http_client(mod: ModuleType) -> bool:
    """``http.client`` used directly, or through urllib3 without requests."""
    with _lock:
        _patches.wrap_tree(
            mod.HTTPConnection,
            {"request": _conn_request, "getresponse": _conn_getresponse},
            hot=True,
        )
        # a class default: ``getresponse``'s read of a connection whose request this layer
        # did not open finds it here, not by raising and catching AttributeError
        _patches.set(mod.HTTPConnection, OPEN, None)
    return True


def install(mod: ModuleType) -> bool:
    """Patch ``mod``: ``urllib.request`` or ``http.client``."""
    if mod.__name__ == "http.client":
        return install_http_client(mod)
    return install_urllib(mod)


def instrument() -> bool:
    """Patch urllib.request and http.client (both in the standard library)."""
    return install(importlib.import_module("http.client")) and install(
        importlib.import_module("urllib.request")
    )


def uninstrument() -> None:
    with _lock:
        _patches.undo()
