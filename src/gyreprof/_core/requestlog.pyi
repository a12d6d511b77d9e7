"""Type stubs for gyreprof._core.requestlog (compiled)."""

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from gyreprof._core.recorder import Spans

class RequestLog:
    ident: int
    spans: list[Any]
    core_ok: bool
    spans_core: Spans | None
    def bind_plain(
        self,
        last_failure: ContextVar[Any],
        scan: Callable[[Any, int], tuple[int, int, str | None, int]],
        body_cap: int,
        span_cap: int,
    ) -> None: ...
    def open_plain(self, ep: str) -> tuple[int, tuple[str, ...]]: ...
    def record_plain(
        self,
        ep: str,
        client: str,
        start: int,
        retried: tuple[str, ...],
        outcome: str,
        data: Any,
        bytes_out: int,
    ) -> int: ...

class PlainSend:
    original: Callable[..., Any]
    wrapper: Callable[..., Any]
    client: str
    def __init__(
        self,
        original: Callable[..., Any],
        wrapper: Callable[..., Any],
        *,
        active: ContextVar[Any],
        layer: Any,
        client: str,
        cache: dict[Any, str],
        key_attr: str | None,
        endpoint: Callable[[Any], str],
        body_attr: str,
        sent_else: Callable[[Any], int] | None,
        logs: dict[str, Any],
        state: dict[str, Any],
        probes: set[str] | frozenset[str],
        wait: Callable[[int, int, str], None],
        failed: Callable[..., None],
    ) -> None: ...
    def plain(
        self, client: Any, request: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, objtype: Any = None) -> Any: ...
