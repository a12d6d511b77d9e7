"""HTTP rollout clients: one span per request, per endpoint, one instrumentor per client.

::

    from gyreprof.integrations import http

    with http.profile() as prof:
        results = asyncio.run(generate_batch(prompts))   # httpx, requests, aiohttp,
    print(prof.report())                                  # urllib or the openai SDK

The clients, one module each, each with ``instrument()`` and ``uninstrument()``:
:mod:`.httpx` (and ``httpx2``), :mod:`.requests`, :mod:`.urllib` (``urllib.request``
and ``http.client``), :mod:`.aiohttp`, :mod:`.openai`; :mod:`._common` holds what
they share (who owns a request, the plain request's path, the trainer's wait).

:func:`instrument` patches every client when (if ever) it is imported, through
wrapt's post-import hooks; :func:`uninstrument` puts back every patched attribute.
Both nest: ``gyreprof run`` instruments for the whole process, and a :func:`profile`
inside it (or inside another profile) leaves the patches on when it ends; a profile on
its own restores what it patched when it ends. Only what a version this code knows is
patched (others are left alone with a warning).

``profile()`` records every request made from then on, in any thread, until the
``with`` block ends. ``report()`` is the
:class:`~gyreprof.analysis.rollouts.RolloutReport` of those requests (None when there
were none): per endpoint requests, attempts, outcome classes, retries, latency, bytes,
tokens, streams and in-flight figures, and the batches with their tail share.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gyreprof.integrations._instrument import when_imported

if TYPE_CHECKING:
    from gyreprof.analysis.rollouts import RolloutReport

__all__ = ["CLIENTS", "HttpProfile", "instrument", "instrumented", "profile", "uninstrument"]

#: module imported -> the instrumentor module (``gyreprof.integrations.http.<name>``)
CLIENTS: dict[str, str] = {
    "httpx": "httpx",
    "httpx2": "httpx",
    "openai": "openai",
    "requests": "requests",
    "urllib.request": "urllib",
    "http.client": "urllib",
    "aiohttp": "aiohttp",
}

_lock = threading.RLock()
_depth = 0  # instrument() calls not yet undone
_registered = False  # the post-import hooks (wrapt's cannot be removed: they check _depth)


def _instrumentor(name: str) -> Any:
    return importlib.import_module(f"gyreprof.integrations.http.{CLIENTS[name]}")


def _install(name: str, module: ModuleType) -> None:
    """Client ``name`` is imported as ``module``: patched while instrumented."""
    with _lock:
        if _depth > 0:
            inst = _instrumentor(name)  # loads the request log with it, not at start-up
            from gyreprof.integrations._auto import rollout_log
            from gyreprof.integrations.http._common import start_recording

            # under ``gyreprof run``, a process's first request makes it a recording one
            rollout_log.first_request_hook = start_recording
            inst.install(module)


def _hook(name: str) -> Any:
    def hook(module: ModuleType) -> None:
        _install(name, module)

    return hook


def instrumented() -> bool:
    """The HTTP clients are instrumented (by :func:`instrument`, not yet undone)."""
    return _depth > 0


def instrument() -> None:
    """Patch every HTTP client now (those imported) or when it is imported. Each call
    is undone by one :func:`uninstrument`; the patches stay until the last one."""
    global _depth, _registered
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        if not _registered:
            _registered = True
            for name in CLIENTS:
                when_imported(name, _hook(name))  # now, for the clients already imported
            return
        for name in CLIENTS:
            module = sys.modules.get(name)
            if module is not None:
                _install(name, module)


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute of every client
    is its original object again."""
    global _depth
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth > 0:
            return
        for name in set(CLIENTS.values()):
            mod = sys.modules.get(f"gyreprof.integrations.http.{name}")
            if mod is not None:
                mod.uninstrument()
        rl: Any = sys.modules.get("gyreprof.integrations._auto.rollout_log")
        if rl is not None:  # what _install set: a later request no longer starts recording
            rl.first_request_hook = None


class HttpProfile:
    """The requests recorded since :func:`profile` started (all threads)."""

    def __init__(self) -> None:
        from gyreprof.integrations._auto import rollout_log as rl

        instrument()
        self._mark = rl.mark()
        self._final: Any = None
        self._closed = False

    def _record(self) -> Any:
        from gyreprof.integrations._auto import rollout_log as rl
        from gyreprof.integrations._auto import rollout_record

        return rollout_record.from_logs(rl.logs_since(self._mark))

    def report(self) -> RolloutReport | None:
        """The rollout report of the requests so far (or up to the end of the ``with``)."""
        from gyreprof.integrations._auto import rollout_record

        record = self._final if self._closed else self._record()
        return rollout_record.report([record]) if record is not None else None

    def close(self) -> None:
        """End the profiled span: later requests no longer reach this profile, and the
        patches it made are undone (those of ``gyreprof run`` or an enclosing profile stay)."""
        if not self._closed:
            from gyreprof.integrations._auto import rollout_log as rl

            self._final = self._record()
            self._closed = True
            rl.mark()
            uninstrument()

    def __enter__(self) -> HttpProfile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def profile() -> HttpProfile:
    """Start recording this process's HTTP rollout requests (a context manager)."""
    return HttpProfile()
