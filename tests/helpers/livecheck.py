"""Whether this build has gyreprof.live (the shared-memory segments), for skipping."""

from __future__ import annotations

import pytest


def has_live() -> bool:
    try:
        import gyreprof.live as live
    except ImportError:
        return False
    return callable(getattr(live, "attach", None))


needs_live = pytest.mark.skipif(
    not has_live(), reason="gyreprof.live (shared-memory segments) not built"
)
