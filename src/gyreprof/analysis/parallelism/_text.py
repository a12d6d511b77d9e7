"""Plain-text helpers shared by the census and the check: pid lists, spans, plurals.

Numbers (bytes, percentages, counts), tables and shortened text are spelled by
:mod:`gyreprof._support.format`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["fmt_pids", "plural", "span"]


def span(lo: int | None, hi: int | None) -> str:
    if lo is None or hi is None:
        return "?"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def fmt_pids(pids: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(p) for p in pids[:limit])
    return shown + (f", ... (+{len(pids) - limit})" if len(pids) > limit else "")


def plural(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
