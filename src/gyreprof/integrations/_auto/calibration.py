"""The instrumentation's own per-call costs, measured once per run for each Python.

Each process prices what it adds to the loop it measures: the env wrappers
(``libs.gymnasium.measure_costs``, ~25 ms of CPU) and the recording forms
(``recording.profiler.form_costs``, ~10 ms, through :func:`form_cost_source`, which the
bootstrap sets for every Profiler of the process, the user's own included). Under ``gyreprof run`` the first process
of an interpreter to measure them writes them into the run's folder
(``calibration-<key>.json``, ``key`` naming the interpreter and this gyreprof), and
every later process of that interpreter takes them from there: a run's spawn and
forkserver workers, started on the same machine seconds later, each saved ~35 ms (a
fork child has them in memory already). A file that cannot be read, or holds a value
no measurement gives (not a finite number of ns in ``[0, 1 ms)``, a name missing or
unknown), is not used: the process measures its own and writes them.
"""

from __future__ import annotations

import binascii
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gyreprof._support.io import read_bytes, write_atomic
from gyreprof._version import __version__

#: no wrapper or recording form costs a millisecond a call
LIMIT_NS = 1e6


def path(run_dir: Path | None) -> Path | None:
    """This interpreter's file in the run's folder ``run_dir``; None outside a run (None)."""
    if run_dir is None:
        return None
    ident = "\0".join(
        (os.path.realpath(sys.executable), sys.version, __version__, os.path.realpath(__file__))
    )
    tag = sys.implementation.cache_tag or "python"
    return run_dir / f"calibration-{tag}-{binascii.crc32(ident.encode()):08x}.json"


def _read(where: Path) -> dict[str, Any]:
    """The file's entries; {} where it is missing, a link, not a regular file, over its
    cap (``_support.io``'s ``calibration`` kind), unreadable or not one JSON object."""
    try:
        if where.is_symlink():  # the run's own files are never links
            return {}
        got = json.loads(read_bytes(where, "calibration"))
    except (OSError, ValueError):  # a FIFO or device, too big, not UTF-8 JSON
        return {}
    return got if isinstance(got, dict) else {}


def valid(costs: Any, names: Iterable[str]) -> dict[str, float] | None:
    """``costs`` as floats when it holds exactly ``names``, each a finite number of ns in
    ``[0, LIMIT_NS)``; else None."""
    want = list(names)
    if not isinstance(costs, dict) or set(costs) != set(want):
        return None
    out = {}
    for name in want:
        v = costs[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        f = float(v)
        if not 0.0 <= f < LIMIT_NS:  # NaN fails both
            return None
        out[name] = f
    return out


def shared(
    run_dir: Path | None,
    entry: str,
    names: Iterable[str],
    measure: Callable[[], dict[str, float]],
) -> dict[str, float]:
    """``entry``'s costs (ns per call, by name) from the file of the run in ``run_dir`` for
    this interpreter, else measured now with ``measure()`` and added to the file (outside
    a run, ``run_dir`` None: measured)."""
    want = list(names)
    where = path(run_dir)
    if where is not None:
        got = valid(_read(where).get(entry), want)
        if got is not None:
            return got
    costs = measure()
    if where is not None and valid(costs, want) is not None:
        entries = _read(where)
        entries[entry] = {k: float(costs[k]) for k in want}
        try:
            write_atomic(where, json.dumps(entries, sort_keys=True).encode())
        except OSError:
            pass  # the next process measures its own
    return costs


def form_cost_source(
    run_dir: Path | None,
) -> Callable[[str, tuple[str, ...], Callable[[], dict[str, float]]], dict[str, float]]:
    """The recording forms' costs shared through the run's file, one entry per clock
    (``forms.<clock>``): what ``recording.profiler.set_form_cost_source`` takes."""

    def source(
        clock: str, forms: tuple[str, ...], measure: Callable[[], dict[str, float]]
    ) -> dict[str, float]:
        return shared(run_dir, f"forms.{clock}", forms, measure)

    return source
