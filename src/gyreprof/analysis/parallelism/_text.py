"""Plain-text helpers shared by the census and the check: tables, pids, plurals.

Numbers (bytes, percentages, counts) are spelled by :mod:`gyreprof._format`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["fmt_pids", "plural", "shorten", "span", "table"]


def table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def span(lo: int | None, hi: int | None) -> str:
    if lo is None or hi is None:
        return "?"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def fmt_pids(pids: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(p) for p in pids[:limit])
    return shown + (f", … (+{len(pids) - limit})" if len(pids) > limit else "")


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def plural(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
