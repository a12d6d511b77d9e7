"""multiprocessing's instrumentor (:func:`instrument` / :func:`uninstrument`): a child
saves its profile at the end of ``_bootstrap``, before ``os._exit``, with the exception its
``run`` died of, if any (``_auto.deaths``).

Fork and forkserver children leave through ``os._exit`` (no ``atexit``); spawn
children through ``sys.exit``. Either way ``BaseProcess._bootstrap`` returns
first, so the save runs there (once per process; ``atexit`` is the fallback).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import deaths
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import Instrumentor


def _bootstrap(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        deaths.guard_run(self)  # the exception its run dies of (a feeder's), kept
        try:
            return original(self, *args, **kwargs)
        finally:
            st.save("mp-exit")

    return _bootstrap


def install(process: ModuleType) -> None:
    _inst.patches.replace_tree(process.BaseProcess, ("_bootstrap",), _bootstrap)


_inst = Instrumentor("multiprocessing", {"multiprocessing.process": install})


def instrument() -> None:
    """Patch ``multiprocessing.process`` now (imported) or when it is imported; undone by
    one :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
