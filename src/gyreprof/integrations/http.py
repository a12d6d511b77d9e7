"""HTTP rollout clients profiled from code, without ``gyreprof run``.

::

    from gyreprof.integrations import http

    with http.profile() as prof:
        results = asyncio.run(generate_batch(prompts))   # httpx, requests, aiohttp,
    print(prof.report())                                  # urllib or the openai SDK

``profile()`` patches the clients the way ``gyreprof run`` does (each when it is
imported; idempotent, and the patches stay for the life of the process) and
records every request made from then on, in any thread, until the ``with``
block ends. ``report()`` is the :class:`~gyreprof.analysis.rollouts.RolloutReport`
of those requests (None when there were none): per endpoint requests, attempts,
outcome classes, retries, latency, bytes, tokens, streams and in-flight figures,
and the batches with their tail share.
"""

from __future__ import annotations

from typing import Any

from gyreprof.analysis.rollouts import RolloutReport

__all__ = ["HttpProfile", "profile"]


class HttpProfile:
    """The requests recorded since :func:`profile` started (all threads)."""

    def __init__(self) -> None:
        from gyreprof.integrations._auto import patch_http
        from gyreprof.integrations._auto import rollout_log as rl

        patch_http.register()
        self._mark = rl.mark()
        self._final: Any = None
        self._closed = False

    def _record(self) -> Any:
        from gyreprof.integrations._auto import rollout_log as rl
        from gyreprof.integrations._auto import rollout_record

        return rollout_record.from_logs(rl.logs_since(self._mark))

    def report(self) -> RolloutReport | None:
        """The rollout report of the requests so far (or up to the end of the ``with``)."""
        from gyreprof.integrations._auto import rollout_record

        record = self._final if self._closed else self._record()
        return rollout_record.report([record]) if record is not None else None

    def close(self) -> None:
        """End the profiled span: later requests no longer reach this profile."""
        if not self._closed:
            from gyreprof.integrations._auto import rollout_log as rl

            self._final = self._record()
            self._closed = True
            rl.mark()

    def __enter__(self) -> HttpProfile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def profile() -> HttpProfile:
    """Start recording this process's HTTP rollout requests (a context manager)."""
    return HttpProfile()
