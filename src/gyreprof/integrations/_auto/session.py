"""Profiling from code (no ``gyreprof run``): the same patches, this process only."""

from __future__ import annotations

from typing import Any

from gyreprof.analysis import run as run_result
from gyreprof.integrations._auto import collect
from gyreprof.integrations._auto import state as st


class Session:
    """Fresh sampler and trainer profilers for the calling thread (and any thread that
    records while the session is open); ``report()`` judges them like ``gyreprof run``.

    ``sampler`` / ``trainer``: the calling thread's Profilers (phases
    ``env_step, env_reset, step_async, step_wait, fwd, generate`` and ``wait, compute``).
    Use as a context manager to fix the end of the profiled span; without
    ``with`` the profilers keep recording.
    """

    def __init__(self, what: str, loop: str | None) -> None:
        self.what = what
        self._mark = st.fresh_threads()
        t = st.new_thread()
        self.sampler: Any = t.sampler
        self.trainer: Any = t.trainer
        self._loop = loop
        self._final: tuple[Any, Any] | None = None

    def _snapshots(self) -> tuple[Any, Any]:
        if self._final is not None:
            return self._final
        from gyreprof.model.snapshot import merge

        ts = st.threads_since(self._mark)
        out = []
        for side in ("sampler", "trainer"):
            snaps = [getattr(t, side).snapshot() for t in ts]
            out.append(merge(snaps))
        return out[0], out[1]

    def snapshot(self) -> tuple[Any, Any]:
        """``(sampler, trainer)`` Snapshots, all threads of the session merged."""
        return self._snapshots()

    def report(self) -> run_result.RunReport:
        """The report ``gyreprof run`` would print, for this process."""
        import os

        sampler, trainer = self._snapshots()
        loops = (self._loop,) if self._loop else ()
        entry = run_result.ProcessEntry(
            os.getpid(), "main", True, "in-process", loops, sampler, trainer
        )
        report = run_result.RunReport(
            command=[self.what],
            exit_code=None,
            processes=[entry],
            sampler=collect._merge([sampler]),
            trainer=collect._merge([trainer]),
            python_processes=1,
            rollouts=self._rollouts(),
        )
        collect._judge(report, [entry])
        return report

    def _rollouts(self) -> Any:
        """The session's HTTP rollout report (a session that records requests gives it)."""
        return None

    def close(self) -> None:
        """End the profiled span: later calls no longer reach this session's numbers."""
        if self._final is None:
            st.close_open_steps(st.threads_since(self._mark))
            self._final = self._snapshots()
            st.fresh_threads()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
