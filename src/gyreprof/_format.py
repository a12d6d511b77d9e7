"""Small formatting helpers shared by the text reports (ASCII only)."""

from __future__ import annotations

import math


def fmt_ns(value: float | int | None) -> str:
    """A duration in ns as a short ASCII string: '850 ns', '12.3 us', '4.56 ms', '1.20 s'."""
    if value is None:
        return "-"
    v = float(value)
    if math.isnan(v):
        return "-"
    a = abs(v)
    if a < 1e3:
        return f"{v:.0f} ns"
    if a < 1e6:
        return f"{v / 1e3:.3g} us"
    if a < 1e9:
        return f"{v / 1e6:.3g} ms"
    return f"{v / 1e9:.3g} s"


def fmt_count(x: float | None) -> str:
    """A count without unit: 950, 12.1k, 3.4M, 1.2G ('-' for None or NaN)."""
    if x is None or math.isnan(x):
        return "-"
    a = abs(x)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def fmt_rate(value: float | None) -> str:
    """A rate per second: '950/s', '12.1k/s', '3.4M/s'."""
    text = fmt_count(value)
    return text if text == "-" else text + "/s"


def fmt_pct(fraction: float) -> str:
    if fraction is None or math.isnan(fraction):
        return "-"
    return f"{100.0 * fraction:.1f}%"


def text_table(headers: list[str], rows: list[list[str]], align_left: int = 1) -> str:
    """Aligned plain-text table; the first ``align_left`` columns are left-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: list[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.ljust(widths[i]) if i < align_left else cell.rjust(widths[i]))
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)
