"""What an export reads: a :class:`gyreprof.recording.source.Source`, resolved once at the exporter's door.

Every exporter goes through :func:`resolve`, so they all accept the same
inputs (a Profiler, a Snapshot, a Summary, an events file, the path of a saved
one, or a Source) and fail the same way on an empty profiler or a file of the
wrong kind. The Source itself lives in :mod:`gyreprof.recording.source`; this module adds
what only exports need (the "nothing recorded" rule, rows, writing text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gyreprof._support.errors import InvalidValueError
from gyreprof.model.histogram import STEP
from gyreprof.model.summary import PhaseStats, Summary
from gyreprof.recording.events import current_unix_offset_ns, unix_offset_ns
from gyreprof.recording.source import Source, load_file
from gyreprof.recording.source import resolve as resolve_source

__all__ = [
    "Resolved",
    "Source",
    "current_unix_offset_ns",
    "is_empty",
    "load_file",
    "require_histograms",
    "resolve",
    "rows",
    "unix_offset_ns",
    "write_text",
]

#: the name exporters used before the Source moved to ``gyreprof.recording.source``
Resolved = Source


def resolve(source: Any, *, what: str, allow_empty: bool = False) -> Source:
    """``gyreprof.recording.source.resolve(source)``; ``what`` names the export in error messages.

    Raises ``InvalidValueError`` (a ValueError) when nothing was recorded (unless
    ``allow_empty``).
    """
    res = resolve_source(source, what=what)
    if res.nothing_to_read and not allow_empty:
        # per_thread=True and no thread has written yet: there is nothing to snapshot
        raise InvalidValueError(_nothing(what))
    if not allow_empty and is_empty(res.summary):
        raise InvalidValueError(_nothing(what))
    return res


def _nothing(what: str) -> str:
    return (
        f"nothing to export to {what}: no phase or step was recorded yet "
        "(time something first: prof.begin() / prof.lap(i), `with prof.phase(name):` "
        "or prof.record(name, duration_ns))"
    )


def is_empty(summary: Summary) -> bool:
    """True when nothing at all was recorded (not even during warm-up)."""
    if summary.events or summary.steps or summary.warmup.steps:
        return False
    return all(st.count == 0 for _, st in rows(summary))


def rows(summary: Summary, *, include_step: bool = True) -> list[tuple[str, PhaseStats]]:
    """(name, stats) for every phase, then the whole step (named STEP) when asked."""
    out = list(summary.phases.items())
    if include_step:
        out.append((STEP, summary.step))
    return out


def require_histograms(summary: Summary, what: str) -> None:
    """ValueError when a summary was saved without its histograms."""
    for name, st in rows(summary):
        if st.count and st.histogram is None:
            raise InvalidValueError(
                f"{what} needs the histograms, but this summary has none for {name!r} "
                "(it was saved with to_dict(histograms=False)); export from the Profiler, "
                "a snapshot file, or a summary saved with Summary.to_json()"
            )


def write_text(text: str, path: Any) -> str | Path | None:
    """Return ``text`` when ``path`` is None, write it to a stream (returning None) or to a
    file (returning its Path)."""
    if path is None:
        return text
    if hasattr(path, "write"):
        path.write(text)
        return None
    from gyreprof._support.io import write_atomic

    p = Path(path)
    write_atomic(p, text.encode("utf-8"))
    return p
