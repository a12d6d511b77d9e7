"""Plain-text helpers shared by the census and the check: tables, pids, plurals."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["fmt_bytes", "fmt_cpu", "fmt_pids", "plural", "shorten", "span", "table"]


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


def fmt_cpu(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def fmt_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns


def fmt_pids(pids: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(p) for p in pids[:limit])
    return shown + (f", … (+{len(pids) - limit})" if len(pids) > limit else "")


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def plural(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
