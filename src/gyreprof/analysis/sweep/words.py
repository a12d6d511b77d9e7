"""How the sweep writes values, sizes and gains in its report (ASCII only).

These stay private to the sweep until the formatting helpers of ``gyreprof._format``
are unified (bytes: '512 MiB' with three significant digits; gains: '+12%').
"""

from __future__ import annotations

import math
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


_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def byte_unit(n: float) -> tuple[float, str]:
    for size, name in _UNITS:
        if abs(n) >= size:
            return float(size), name
    return 1.0, "B"


def fmt_bytes(n: float | None) -> str:
    """Bytes as '512 MiB', '2.7 GiB'."""
    if n is None or math.isnan(float(n)):
        return "-"
    size, name = byte_unit(float(n))
    return f"{n / size:.3g} {name}"


def fmt_bytes_range(a: float, b: float) -> str:
    """Two sizes in the unit of the larger: '0.9 -> 2.7 GiB'."""
    size, name = byte_unit(max(a, b))
    return f"{a / size:.2g} -> {b / size:.2g} {name}" if size > 1 else f"{a:.0f} -> {b:.0f} B"


def fmt_gain(g: float | None) -> str:
    if g is None or math.isnan(g):
        return "-"
    pct = 100.0 * g
    return f"{pct:+.0f}%" if abs(pct) >= 9.5 else f"{pct:+.1f}%"
