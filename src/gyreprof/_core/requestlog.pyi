"""Type stubs for gyreprof._core.requestlog (compiled)."""

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

class RequestLog:
    ident: int
    spans: list[Any]
    core_ok: bool
    spans_core: Any
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
