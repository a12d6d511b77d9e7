"""Inclusive instruction counts of named functions from a callgrind output file, the one
reading the instruction-count benchmarks share (``bench_http.py``, ``bench_run.py``)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: the tool's command before the profiled program's (an output file is added per run)
VALGRIND = ("valgrind", "--tool=callgrind")


def inclusive(cg: str | Path, names: Sequence[str], what: str) -> dict[str, int]:
    """``callgrind_annotate``'s inclusive count of each function in ``names`` (C names, as
    ``map_next``) in the output file ``cg``; a name it did not count raises RuntimeError
    naming ``what`` was run."""
    ann = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--inclusive=yes", "--threshold=100", str(cg)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    got = {}
    for fn in names:
        m = re.search(r"^\s*([\d,]+) .*:" + re.escape(fn) + r"(?: |$)", ann, re.M)
        if m is None:
            raise RuntimeError(f"callgrind counted no {fn} for {what}")
        got[fn] = int(m.group(1).replace(",", ""))
    return got
