"""multiprocessing: a child saves its profile at the end of ``_bootstrap``, before ``os._exit``.

Fork and forkserver children leave through ``os._exit`` (no ``atexit``); spawn
children through ``sys.exit``. Either way ``BaseProcess._bootstrap`` returns
first, so the save runs there (once per process; ``atexit`` is the fallback).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import hooks
from gyreprof.integrations._auto import state as st


def _bootstrap(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        finally:
            st.save("mp-exit")

    return _bootstrap


def install(process: ModuleType) -> None:
    hooks.patch_methods(process.BaseProcess, ("_bootstrap",), _bootstrap)


def register() -> None:
    hooks.when_imported("multiprocessing.process", install)
