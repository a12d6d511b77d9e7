"""Type stubs for gyreprof._core.gate (compiled)."""

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

class Gate:
    original: Callable[..., Any]
    wrapper: Callable[..., Any]
    def __init__(
        self,
        original: Callable[..., Any],
        wrapper: Callable[..., Any],
        var: ContextVar[Any] | None = None,
        attr: str | None = None,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, objtype: Any = None) -> Any: ...
