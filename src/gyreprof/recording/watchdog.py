"""Stall watchdog: a background thread that notices when no step completes and says where.

``Watchdog(profiler, stall_after_s)`` polls ``profiler.progress()`` (a read-only
view of the step counter and the open phase) every ``poll_s`` seconds from a
daemon thread.  When no step has completed for ``stall_after_s`` seconds it
writes, once per stall::

    gyreprof watchdog: stalled 5.0 s in phase 'xfer' of step 1234 (phase open 4.8 s)

followed by every thread's Python stack (``faulthandler.dump_traceback``), to
stderr and, when ``dump_to`` is given, appended to that file.  When steps
complete again it writes one ``resumed`` line and is ready for the next stall.

The clock starts at :meth:`Watchdog.start`, so a loop that never completes its
first step within ``stall_after_s`` is reported too.  The hot path pays nothing: the profiler is only read, from the
watchdog's own thread.  ``stop()`` (or leaving the ``with`` block) ends the
thread promptly; the thread is a daemon, so a forgotten watchdog never keeps
the interpreter alive.

Usually created through ``prof.watchdog(stall_after_s, dump_to=None)``.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Protocol

from gyreprof._support.errors import ArgumentTypeError
from gyreprof._support.validate import check_output_path, check_positive_number


class ProgressLike(Protocol):
    """What the watchdog reads of a progress reading (``gyreprof.Profiler.progress()`` and
    ``LiveReader.progress()`` return a ``gyreprof._support.block.Progress``)."""

    @property
    def step(self) -> int: ...
    @property
    def steps_completed(self) -> int: ...
    @property
    def phase(self) -> str | None: ...
    @property
    def phase_since_ns(self) -> int: ...
    @property
    def now_ns(self) -> int: ...


class Progressing(Protocol):
    """Anything the watchdog can watch: a ``progress()`` that returns :class:`ProgressLike`."""

    def progress(self) -> ProgressLike: ...


_MIN_POLL_S = 0.005
_MAX_POLL_S = 1.0


def _stack_dump() -> str:
    """Every thread's Python stack as text, via faulthandler (works whatever sys.stderr is)."""
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        faulthandler.dump_traceback(tmp, all_threads=True)
        tmp.seek(0)
        return tmp.read().decode("utf-8", errors="replace")


class Watchdog:
    """Watch a profiler's step counter and report stalls (see the module docstring).

    ``profiler``: anything with ``progress()`` returning an object with the fields
    ``step``, ``steps_completed``, ``phase``, ``phase_since_ns`` and ``now_ns``
    (``gyreprof.Profiler``).  ``stall_after_s``: seconds without a completed step
    that count as a stall.  ``dump_to``: a file that each report is appended to
    (its folder must exist).  ``poll_s``: how often to look; by default a quarter
    of ``stall_after_s``, between 5 ms and 1 s.
    """

    def __init__(
        self,
        profiler: Progressing,
        stall_after_s: float,
        dump_to: str | os.PathLike[str] | None = None,
        poll_s: float | None = None,
    ) -> None:
        if not callable(getattr(profiler, "progress", None)):
            raise ArgumentTypeError(
                f"Watchdog needs an object with a progress() method (a gyreprof.Profiler), "
                f"got {type(profiler).__name__}"
            )
        stall_after_s = check_positive_number("stall_after_s", stall_after_s, unit="seconds")
        if poll_s is None:
            poll_s = min(_MAX_POLL_S, max(_MIN_POLL_S, stall_after_s / 4.0))
        else:
            poll_s = check_positive_number("poll_s", poll_s, unit="seconds")
        self._dump_to = None if dump_to is None else check_output_path("dump_to", dump_to)
        self.profiler = profiler
        self.stall_after_s = stall_after_s
        self.poll_s = poll_s
        self.stalls = 0  #: stalls reported so far
        self.last_report: str | None = None  #: the text of the latest stall report
        self.error: BaseException | None = None  #: set if progress() raised; the thread ended
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ control
    @property
    def dump_to(self) -> Path | None:
        return self._dump_to

    @property
    def running(self) -> bool:
        """Whether the watching thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Watchdog:
        """Start watching (idempotent); returns self."""
        with self._lock:
            if self.running:
                return self
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gyreprof-watchdog", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop watching and wait up to ``timeout_s`` for the thread to end (idempotent)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def __enter__(self) -> Watchdog:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (
            f"Watchdog(stall_after_s={self.stall_after_s}, poll_s={self.poll_s}, "
            f"dump_to={str(self._dump_to) if self._dump_to else None!r}, {state}, "
            f"stalls={self.stalls})"
        )

    # ------------------------------------------------------------------ thread
    def _run(self) -> None:
        try:
            last = self.profiler.progress()
        except Exception as exc:
            self._fail(exc)
            return
        last_done = int(last.steps_completed)
        since = time.monotonic()
        stalled_at: float | None = None
        while not self._stop.wait(self.poll_s):
            try:
                prog = self.profiler.progress()
            except Exception as exc:
                self._fail(exc)
                return
            now = time.monotonic()
            done = int(prog.steps_completed)
            if done != last_done:
                if stalled_at is not None:
                    self._emit(
                        f"gyreprof watchdog: resumed after {now - since:.1f} s "
                        f"(steps completed: {done})\n"
                    )
                    stalled_at = None
                last_done = done
                since = now
                continue
            if stalled_at is None and now - since >= self.stall_after_s:
                stalled_at = now
                self._report(prog, now - since)

    def _report(self, prog: ProgressLike, stalled_s: float) -> None:
        head = f"gyreprof watchdog: {describe_stall(prog, stalled_s)}"
        text = f"{head}\n{_stack_dump()}"
        self.stalls += 1
        self.last_report = text
        self._emit(text)

    def _emit(self, text: str) -> None:
        stream = sys.stderr
        if stream is not None:
            try:
                stream.write(text)
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed stderr must not kill the watchdog
        if self._dump_to is not None:
            try:
                with open(self._dump_to, "a", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                if stream is not None:
                    try:
                        stream.write(f"gyreprof watchdog: cannot write {self._dump_to}: {exc}\n")
                    except (OSError, ValueError):
                        pass

    def _fail(self, exc: BaseException) -> None:
        self.error = exc
        self._emit(f"gyreprof watchdog: stopped, progress() raised {type(exc).__name__}: {exc}\n")


def describe_stall(prog: ProgressLike, stalled_s: float) -> str:
    """'stalled 5.0 s in phase 'xfer' of step 1234 (phase open 4.8 s)' from a Progress."""
    step = int(prog.step)
    done = int(prog.steps_completed)
    phase = prog.phase
    if phase is not None:
        since_ns = int(prog.phase_since_ns)
        if since_ns < 0:  # the profiler does not know when the phase opened
            return f"stalled {stalled_s:.1f} s in phase {phase!r} of step {step}"
        open_s = max(0.0, (int(prog.now_ns) - since_ns) / 1e9)
        return (
            f"stalled {stalled_s:.1f} s in phase {phase!r} of step {step} "
            f"(phase open {open_s:.1f} s)"
        )
    if step == 0:
        return f"stalled {stalled_s:.1f} s before the first step began"
    if step > done:
        return f"stalled {stalled_s:.1f} s in step {step}, outside any phase"
    return f"stalled {stalled_s:.1f} s between steps, after step {step}"
