"""CSV: ``to_csv()`` of the result types (one row per phase, or per window)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gyreprof._support import forms as _forms
from gyreprof._support import io as _io
from gyreprof.model.histogram import STEP
from gyreprof.render.text import phase_rows

if TYPE_CHECKING:
    from gyreprof.model.summary import Summary
    from gyreprof.model.window import Window

__all__ = ["PHASE_COLUMNS", "WINDOW_COLUMNS", "summary", "windows", "write"]

#: the per-phase columns of a summary's CSV (after the phase name)
PHASE_COLUMNS = ("count", "mean", "min", "max", "p50", "p90", "p99", "p999", "share", "sum_ns")
#: the columns of a window CSV
WINDOW_COLUMNS = (
    "window",
    "source",
    "warmup",
    "start_ns",
    "end_ns",
    "first_step",
    "steps",
    "phase",
    "count",
    "mean",
    "p50",
    "p90",
    "p99",
    "max",
    "share",
)


def summary(s: Summary) -> str:
    """One row per phase (and the whole step): name, count, mean, min, max, pXX, share."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["phase", *PHASE_COLUMNS])
    for name, st in phase_rows(s):
        w.writerow([name, *(getattr(st, c) for c in PHASE_COLUMNS)])
    return buf.getvalue()


def windows(ws: Sequence[Window]) -> str:
    """One row per window and phase (the whole step as ``(step)``)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(WINDOW_COLUMNS)
    for win in ws:
        head = [win.index, win.source, win.warmup, win.start_ns, win.end_ns]
        head += [win.first_step, win.steps]
        stats = list(win.phases.items()) + ([(STEP, win.step)] if win.step is not None else [])
        for name, st in stats:
            w.writerow([*head, name, st.count, st.mean, st.p50, st.p90, st.p99, st.max, st.share])
    return buf.getvalue()


def write(text: str, path: str | os.PathLike[str] | None) -> str:
    """``text``, written to ``path`` (atomically) as well when given."""
    if path is not None:
        _io.write_atomic(Path(path), text.encode("utf-8"))
    return text


# the result classes find these by name (gyreprof._support.forms): they sit below this floor
_forms.register("csv", summary, write)
