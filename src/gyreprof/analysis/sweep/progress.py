"""Progress display of a sweep on stderr (private helper of ``gyreprof.analysis.sweep``).

A rich progress bar when rich is installed and stderr is a terminal; otherwise
one line: rewritten in place on a terminal, or a line per finished run when
stderr goes to a file or a pipe (logs stay readable). Never required.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class SweepProgress:
    """Counts runs; ``start(desc)`` before one, ``done(text)`` after it, ``skip(n)`` for
    repeats that will not run, ``close()`` at the end."""

    def __init__(self, *, enabled: bool, total: int, title: str, stream: TextIO | None = None):
        self.enabled = enabled
        self.total = max(1, int(total))
        self.title = title
        self.count = 0
        self.desc = ""
        self._stream: TextIO = stream if stream is not None else sys.stderr
        self._rich: Any = None
        self._task: Any = None
        self._inline = False
        if not enabled:
            return
        is_tty = bool(getattr(self._stream, "isatty", lambda: False)())
        if is_tty:
            try:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )
            except ImportError:
                self._inline = True
            else:
                self._rich = Progress(
                    TextColumn("[bold]{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=Console(file=self._stream),
                    transient=False,
                )
                self._rich.start()
                self._task = self._rich.add_task(title, total=self.total)

    def _write_inline(self) -> None:
        width = 24
        filled = int(width * self.count / self.total)
        bar = "#" * filled + "." * (width - filled)
        line = f"{self.title} [{bar}] {self.count}/{self.total} {self.desc}"
        self._stream.write("\r" + line[:119].ljust(119))
        self._stream.flush()

    def start(self, desc: str) -> None:
        self.desc = desc
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, description=f"{self.title}: {desc}")
        elif self._inline:
            self._write_inline()

    def done(self, text: str) -> None:
        self.count += 1
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, advance=1)
            self._rich.console.print(f"  {self.desc}: {text}", highlight=False, markup=False)
        elif self._inline:
            self._write_inline()
        else:
            self._stream.write(f"{self.title} [{self.count}/{self.total}] {self.desc}: {text}\n")
            self._stream.flush()

    def skip(self, n: int) -> None:
        """Repeats that will not run (their value failed): shrink the total."""
        if n <= 0:
            return
        self.total = max(self.count, self.total - n, 1)
        if self.enabled and self._rich is not None:
            self._rich.update(self._task, total=self.total)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, total=self.count or 1, completed=self.count)
            self._rich.stop()
            self._rich = None
        elif self._inline:
            self._stream.write("\n")
            self._stream.flush()
            self._inline = False
