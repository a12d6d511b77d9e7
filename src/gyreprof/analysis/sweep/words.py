"""How the sweep writes a swept value (ASCII only).

Sizes, gains and other numbers use the project's one spelling, :mod:`gyreprof._support.format`
(``fmt_bytes``, ``fmt_bytes_range``, ``fmt_change_pct``, ...); only the value of the
swept setting is written the sweep's own way.
"""

from __future__ import annotations

from typing import Any


def fmt_value(v: Any) -> str:
    """A swept value as people write it: 32, 0.5, 1e-05."""
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, str):
        return repr(v)
    return str(v)
