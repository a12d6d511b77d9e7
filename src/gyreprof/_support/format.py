"""How gyreprof writes numbers for people: one spelling for each kind (ASCII only).

==============  =====================  ======================================
kind            function               looks like
==============  =====================  ======================================
duration (ns)   :func:`fmt_ns`         ``850 ns``, ``12.3 us``, ``1.2 s``
count           :func:`fmt_count`      ``950``, ``12.1k``, ``3.4M``
rate            :func:`fmt_rate`       ``12.1k/s``
fraction        :func:`fmt_pct`        ``12.5%`` (from 0.125)
bytes           :func:`fmt_bytes`      ``950 B``, ``512 MiB``, ``2.7 GiB``
two sizes       :func:`fmt_bytes_range`  ``0.9 -> 2.7 GiB``
ratio           :func:`fmt_factor`     ``3.2x``
speed-up        :func:`fmt_speedup`    ``0.5% faster``, ``3.2x as fast``
relative change :func:`fmt_change_pct` ``+12%``, ``-3.4%``
long text       :func:`shorten`        ``python train.py --conf...``
user text       :func:`safe_name`      ``env\\x1b[2J`` (control characters as escapes)
==============  =====================  ======================================

Tables: :func:`text_table` (aligned plain text) and :func:`markdown_table`.

Missing values (``None`` or NaN) print as ``-``.
"""

from __future__ import annotations

import math
from collections.abc import Collection

#: the name of the whole-step row, everywhere (here, not in ``histogram``: a renderer that
#: names it must not load numpy, which the launcher's report would pay for an empty run)
STEP = "(step)"
#: the rows of a sampler's wall time no phase timed, and the time it sat idle handing its
#: data over (the keys of ``Verdict.sampler_shares``; the run report and ``top`` name them)
UNTIMED = "(untimed)"
IDLE = "(idle)"


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


def fmt_pct(fraction: float | None) -> str:
    """A fraction as a percentage with one decimal: 0.125 -> '12.5%'."""
    if fraction is None or math.isnan(fraction):
        return "-"
    return f"{100.0 * fraction:.1f}%"


_BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def byte_unit(n: float) -> tuple[float, str]:
    """The binary unit ``n`` bytes are written in: (its size in bytes, its name), e.g.
    ``(2**30, "GiB")``; for axis labels that share one unit."""
    for size, name in _BYTE_UNITS:
        if abs(n) >= size:
            return float(size), name
    return 1.0, "B"


def fmt_bytes(n: float | None) -> str:
    """A size in bytes, binary units, three significant figures: '950 B', '512 MiB', '2.7 GiB'."""
    if n is None or math.isnan(float(n)):
        return "-"
    size, name = byte_unit(float(n))
    if size == 1.0:
        return f"{float(n):.0f} B"
    return f"{float(n) / size:.3g} {name}"


def fmt_bytes_range(a: float, b: float) -> str:
    """Two sizes in the unit of the larger: '0.9 -> 2.7 GiB'."""
    size, name = byte_unit(max(a, b))
    if size == 1.0:
        return f"{a:.0f} -> {b:.0f} B"
    return f"{a / size:.2g} -> {b / size:.2g} {name}"


def fmt_factor(x: float | None) -> str:
    """A ratio: '3.2x', 'inf x'."""
    if x is None or math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf x"
    return f"{x:.3g}x"


def fmt_speedup(speedup: float | None) -> str:
    """How much faster, from a ratio of rates (new / old): '0.5% faster' below 2x, then
    '3.2x as fast'; 'arbitrarily faster' for an infinite ratio."""
    if speedup is None or math.isnan(speedup):
        return "-"
    if math.isinf(speedup):
        return "arbitrarily faster"
    if speedup < 2.0:
        return f"{fmt_pct(speedup - 1.0)} faster"
    return f"{speedup:.3g}x as fast"


def fmt_change_pct(change: float | None) -> str:
    """A relative change (new / old - 1) with its sign: 0.12 -> '+12%', -0.034 -> '-3.4%'.

    Whole percent from 9.5% up, one decimal below (so small changes keep a digit).
    """
    if change is None or math.isnan(change):
        return "-"
    pct = 100.0 * change
    return f"{pct:+.0f}%" if abs(pct) >= 9.5 else f"{pct:+.1f}%"


def text_table(
    headers: list[str],
    rows: list[list[str]],
    align_left: int = 1,
    *,
    right: Collection[int] | None = None,
    indent: str = "",
) -> str:
    """Aligned plain-text table, two spaces between columns, each line after ``indent``.

    The first ``align_left`` columns are left-aligned and the rest right-aligned; or,
    with ``right``, exactly the columns of those indices are right-aligned.
    """
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def to_right(i: int) -> bool:
        return i in right if right is not None else i >= align_left

    def line(cells: list[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.rjust(widths[i]) if to_right(i) else cell.ljust(widths[i]))
        return indent + "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def shorten(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters, ending in ``...`` when cut."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 3)] + "..." if width >= 3 else text[:width]


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def safe_name(text: object) -> str:
    """``text`` made safe to print to a terminal: control characters (escape sequences,
    bells, carriage returns, newlines, the C1 range, bidirectional overrides) become
    visible escapes such as ``\\x1b`` and ``\\n``; a backslash stays a backslash and
    ordinary Unicode (accents, CJK, emoji) is kept as it is.

    Every user-given name (phase, counter, label, process title) and every line read
    from a log goes through this before it reaches a terminal or a plain-text report.
    """
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    out = []
    for ch in s:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return "".join(out)


def plot_text(text: object) -> str:
    """``text`` made safe for a matplotlib label, title or legend: :func:`safe_name`,
    then every ``$`` escaped so mathtext does not parse it (``cost $x$`` stays literal)."""
    return safe_name(text).replace("$", r"\$")


def safe_text(text: object) -> str:
    """A multi-line report made safe to print: each line through :func:`safe_name`, the
    line breaks kept. For whole rendered reports (census, doctor, check) whose lines may
    quote names, paths, command lines or log text."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    return "\n".join(safe_name(line) for line in s.split("\n"))


#: the columns of a summary table (text, Markdown, HTML), worded once
SUMMARY_HEADERS = ("phase", "count", "mean", "p50", "p90", "p99", "p99.9", "max", "share")
