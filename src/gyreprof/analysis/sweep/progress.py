"""Progress of a sweep on stderr (private helper of ``gyreprof.analysis.sweep``).

One shape wherever stderr goes, a terminal, a file or a pipe: a line per finished
run, ``sweep batch_size [3/8] batch_size=16: 12.1k samples/s``. A run takes seconds
to minutes, so a line each is enough to see it move; the same lines read well in a
log, and nothing needs a terminal or an optional package.
"""

from __future__ import annotations

import sys
from typing import TextIO


class SweepProgress:
    """Counts runs; ``start(desc)`` before one, ``done(text)`` after it (one line),
    ``skip(n)`` for repeats that will not run, ``close()`` at the end."""

    def __init__(
        self, *, enabled: bool, total: int, title: str, stream: TextIO | None = None
    ) -> None:
        self.enabled = enabled
        self.total = max(1, int(total))
        self.title = title
        self.count = 0
        self.desc = ""
        self._stream = stream

    def start(self, desc: str) -> None:
        self.desc = desc

    def done(self, text: str) -> None:
        self.count += 1
        if not self.enabled:
            return
        stream = self._stream if self._stream is not None else sys.stderr
        try:
            stream.write(f"{self.title} [{self.count}/{self.total}] {self.desc}: {text}\n")
            stream.flush()
        except (OSError, ValueError):  # stderr closed or gone: progress is never required
            self.enabled = False

    def skip(self, n: int) -> None:
        """Repeats that will not run (their value failed): shrink the total."""
        if n > 0:
            self.total = max(self.count, self.total - n, 1)

    def close(self) -> None:
        """Nothing to undo: every line is complete when written."""
