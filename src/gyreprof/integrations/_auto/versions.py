"""Library versions the automatic instrumentation knows; others are left alone with a warning."""

from __future__ import annotations

import re

# library -> (lowest known, first unknown), as (major, minor)
KNOWN: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "gymnasium": ((0, 29), (2, 0)),
    "stable_baselines3": ((2, 0), (3, 0)),
    "torchrl": ((0, 6), (1, 0)),
}


def _major_minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def known_range(lib: str) -> str:
    lo, hi = KNOWN[lib]
    return f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"


def check(lib: str, version: object) -> str | None:
    """None when ``version`` of ``lib`` is known; else the warning to show."""
    text = str(version) if version is not None else "(no __version__)"
    mm = _major_minor(text) if isinstance(version, str) else None
    lo, hi = KNOWN[lib]
    if mm is not None and lo <= mm < hi:
        return None
    return (
        f"{lib} {text} is not a version this instrumentation knows (known: "
        f"{lib}{known_range(lib)}); {lib} is not instrumented in this run"
    )
