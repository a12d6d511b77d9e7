"""Span rows made by hand for the rollout analysis's tests (``analysis.rollouts.SpanRow``):
one plain finished request, and what a test changes of it."""

from __future__ import annotations

from typing import Any

from gyreprof.analysis import rollouts as ar


def span_row(endpoint: str, start_ns: int, end_ns: int, **changes: Any) -> ar.SpanRow:
    """One ok, non-streamed request of one attempt to ``endpoint`` from ``start_ns`` to
    ``end_ns`` (thread 1 of pid 1, through ``requests``, no tokens known, no bytes), with
    ``changes`` to any other field."""
    fields: dict[str, Any] = dict(
        endpoint=endpoint,
        start=start_ns,
        end=end_ns,
        outcome="ok",
        prompt_tokens=-1,
        completion_tokens=-1,
        ttft=-1,
        chunks=0,
        attempts=1,
        retried=(),
        bytes_in=0,
        bytes_out=0,
        stream=False,
        empty_field=None,
        body_flag=0,
        thread=1,
        client="requests",
        pid=1,
    )
    fields.update(changes)
    return ar.SpanRow(**fields)
