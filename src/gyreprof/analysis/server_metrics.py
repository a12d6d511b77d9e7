"""What a rollout server says of itself: its Prometheus metrics read during a run, and
the figures the rollout report shows per endpoint (``rollouts.endpoints[].server``).

A recording process reads each rollout server's metrics page
(``integrations.http.server_metrics``) at its first request to it, at most once a
second after that, and once more when it saves; each read keeps only the figures
below (:data:`READ_FIELDS`), summed over the page's label sets (engines, models),
the KV-cache use as its largest. Names recognised:

- vLLM: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc`` before v1),
  ``vllm:num_preemptions_total``, and the histograms
  ``vllm:request_queue_time_seconds``, ``vllm:request_prefill_time_seconds``,
  ``vllm:request_decode_time_seconds``, ``vllm:e2e_request_latency_seconds``,
  ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``
  (``vllm:time_per_output_token_seconds`` before it);
- SGLang: ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``,
  ``sglang:token_usage``, ``sglang:num_retracted_requests_total`` (its preemptions),
  and the histograms ``sglang:queue_time_seconds``,
  ``sglang:e2e_request_latency_seconds``, ``sglang:time_to_first_token_seconds``,
  ``sglang:inter_token_latency_seconds`` (SGLang has no prefill and decode times).

**Figures** (:class:`ServerReport`). A histogram's time is the growth of its ``_sum``
between the first and the last read (a counter that went back, a restarted server,
counts from its new start); its share is over the requests' time on the server (the
growth of the end-to-end latency's ``_sum``, else of queue + prefill + decode).
Requests running and waiting: the most and the mean over the reads; the same for the
reads after the endpoint's first request ended (``waiting_after_first_*``: a queue
seen only while the server starts, or while the first batch is admitted, is not one
that lasts). The reads themselves are kept (``series``), for a verdict to read.

**Per-request figures.** A JSON answer that carries a ``metrics`` object (a server's
per-request metrics) gives its queue, prefill, decode and request times
(``rollout_log.ANSWER_METRICS`` names the keys read); they are summed per endpoint
(``ServerReport.answers`` and ``answer_*``), with or without a metrics page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the columns of one read: its time (ns, CLOCK_MONOTONIC), then each figure (None:
#: not on the page)
READ_FIELDS: tuple[str, ...] = (
    "t",
    "running",
    "waiting",
    "kv",
    "queue_s",
    "queue_n",
    "prefill_s",
    "prefill_n",
    "decode_s",
    "decode_n",
    "request_s",
    "request_n",
    "ttft_s",
    "ttft_n",
    "itl_s",
    "itl_n",
    "preemptions",
)

_H = ("_sum", "_count")


def _hist(field_name: str, *names: str) -> dict[str, tuple[str, ...]]:
    return {
        f"{field_name}_s": tuple(n + _H[0] for n in names),
        f"{field_name}_n": tuple(n + _H[1] for n in names),
    }


#: each figure of a read, by the sample names that give it, the first one on the page
#: winning (a server that exposes both an older and a newer name is read once)
SAMPLES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "kv": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    **_hist("queue", "vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    **_hist("prefill", "vllm:request_prefill_time_seconds"),
    **_hist("decode", "vllm:request_decode_time_seconds"),
    **_hist("request", "vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
    **_hist("ttft", "vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    **_hist(
        "itl",
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
}
#: figures read as the largest over the label sets (the others are summed)
MAXED = frozenset(("kv",))
#: the prefixes of the servers known by their names
SOURCES: tuple[tuple[str, str], ...] = (("vllm:", "vllm"), ("sglang:", "sglang"))


def figures(samples: list[tuple[str, float]]) -> dict[str, float]:
    """The figures of one read from its samples ``(name, value)`` (every label set)."""
    by_name: dict[str, float] = {}
    for name, value in samples:
        if value != value:  # NaN: no value
            continue
        if name in by_name:
            by_name[name] = (
                max(by_name[name], value) if name in _MAXED_NAMES else by_name[name] + value
            )
        else:
            by_name[name] = value
    out: dict[str, float] = {}
    for fig, names in SAMPLES.items():
        for n in names:
            if n in by_name:
                out[fig] = by_name[n]
                break
    return out


_MAXED_NAMES = frozenset(n for f in MAXED for n in SAMPLES[f])
WANTED = frozenset(n for names in SAMPLES.values() for n in names)


@dataclass
class ServerSeries:
    """One metrics page's reads, as a process keeps them (its rollout record)."""

    url: str
    #: the endpoints' ``scheme://host:port`` it stands for
    endpoints: list[str] = field(default_factory=list)
    #: ``vllm``, ``sglang``, ``unknown`` (a page with none of the known names); None
    #: when no read succeeded
    source: str | None = None
    #: why the last read failed (None: it did not)
    error: str | None = None
    fields: list[str] = field(default_factory=lambda: list(READ_FIELDS))
    reads: list[list[float | None]] = field(default_factory=list)


@dataclass(frozen=True)
class ServerReport:
    """A rollout endpoint's server, from its own metrics (``source`` None: none read,
    ``none`` says why)."""

    url: str
    source: str | None
    reads: int
    none: str | None = None
    #: requests the server finished between the first and the last read, and their
    #: time on it (seconds, summed)
    requests: int | None = None
    request_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    queue_share: float | None = None
    prefill_share: float | None = None
    decode_share: float | None = None
    ttft_mean_ms: float | None = None
    itl_mean_ms: float | None = None
    running_max: float | None = None
    running_mean: float | None = None
    waiting_max: float | None = None
    waiting_mean: float | None = None
    #: the same over the reads after the endpoint's first request ended
    waiting_after_first_max: float | None = None
    waiting_after_first_mean: float | None = None
    after_first_reads: int = 0
    kv_max: float | None = None
    preemptions: int | None = None
    #: the reads: ``[t_s from the first read, running, waiting, kv]``
    series: list[list[float | None]] = field(default_factory=list)
    #: the answers that carried a per-request ``metrics`` object, and their queue,
    #: prefill, decode and request times (seconds, summed; None: none)
    answers: int = 0
    answer_queue_s: float | None = None
    answer_prefill_s: float | None = None
    answer_decode_s: float | None = None
    answer_request_s: float | None = None


def with_answers(r: ServerReport, totals: list[float] | None) -> ServerReport:
    """``r`` with the per-request ``metrics`` totals of its endpoint's answers
    (``[answers, queue_s, prefill_s, decode_s, request_s]``, ``rollout_log``'s)."""
    import dataclasses

    if not totals or len(totals) != 5 or totals[0] <= 0:
        return r
    return dataclasses.replace(
        r,
        answers=int(totals[0]),
        answer_queue_s=totals[1],
        answer_prefill_s=totals[2],
        answer_decode_s=totals[3],
        answer_request_s=totals[4],
    )


def merged(series: list[ServerSeries]) -> ServerSeries:
    """One page's reads from several processes (the same URL), in time order."""
    first = series[0]
    eps = sorted({e for s in series for e in s.endpoints})
    reads = sorted((r for s in series for r in _rows(s)), key=lambda r: r[0] or 0.0)
    source = next((s.source for s in series if s.source and s.source != "unknown"), None)
    if source is None:
        source = next((s.source for s in series if s.source), None)
    error = next((s.error for s in series if s.error), None)
    return ServerSeries(first.url, eps, source, error, list(READ_FIELDS), reads)


def _rows(s: ServerSeries) -> list[list[float | None]]:
    """The reads in :data:`READ_FIELDS` order (a record's own columns mapped)."""
    if tuple(s.fields) == READ_FIELDS:
        return [list(r) for r in s.reads if len(r) == len(READ_FIELDS)]
    at = [s.fields.index(f) if f in s.fields else -1 for f in READ_FIELDS]
    return [[r[i] if 0 <= i < len(r) else None for i in at] for r in s.reads]


def _growth(values: list[float | None]) -> float | None:
    """How much a counter grew over the reads (a fall: it restarted, counted from 0)."""
    seen = [v for v in values if v is not None]
    if len(seen) < 2:
        return None
    total = 0.0
    for a, b in zip(seen, seen[1:], strict=False):
        total += b - a if b >= a else b
    return total


def _max_mean(values: list[float | None]) -> tuple[float | None, float | None]:
    seen = [v for v in values if v is not None]
    if not seen:
        return None, None
    return max(seen), sum(seen) / len(seen)


def report(s: ServerSeries, first_end_ns: int | None = None) -> ServerReport:
    """The figures of one page's reads; ``first_end_ns``: when the endpoint's first
    request ended (the reads after it make the ``waiting_after_first_*`` figures)."""
    rows = _rows(s)
    if not rows:
        why = s.error or "no read of its metrics succeeded"
        return ServerReport(url=s.url, source=None, reads=0, none=why)
    col = {f: [r[i] for r in rows] for i, f in enumerate(READ_FIELDS)}

    def grown(name: str) -> float | None:
        return _growth(col[name])

    queue, prefill, decode = grown("queue_s"), grown("prefill_s"), grown("decode_s")
    request = grown("request_s")
    if request is None and any(v is not None for v in (queue, prefill, decode)):
        request = sum(v or 0.0 for v in (queue, prefill, decode))
    n = grown("request_n")
    if n is None:
        n = grown("queue_n")

    def share(v: float | None) -> float | None:
        return None if v is None or not request else min(1.0, max(0.0, v / request))

    def mean_ms(name: str) -> float | None:
        total, count = grown(name + "_s"), grown(name + "_n")
        return None if total is None or not count else total / count * 1e3

    running = _max_mean(col["running"])
    waiting = _max_mean(col["waiting"])
    after: list[float | None] = []
    if first_end_ns is not None:
        after = [r[2] for r in rows if r[0] is not None and r[0] >= first_end_ns]
    waiting_after = _max_mean(after)
    kv = [v for v in col["kv"] if v is not None]
    pre = grown("preemptions")
    t0 = rows[0][0] or 0.0
    return ServerReport(
        url=s.url,
        source=s.source,
        reads=len(rows),
        requests=None if n is None else int(round(n)),
        request_s=request,
        queue_s=queue,
        prefill_s=prefill,
        decode_s=decode,
        queue_share=share(queue),
        prefill_share=share(prefill),
        decode_share=share(decode),
        ttft_mean_ms=mean_ms("ttft"),
        itl_mean_ms=mean_ms("itl"),
        running_max=running[0],
        running_mean=running[1],
        waiting_max=waiting[0],
        waiting_mean=waiting[1],
        waiting_after_first_max=waiting_after[0],
        waiting_after_first_mean=waiting_after[1],
        after_first_reads=len(after),
        kv_max=max(kv) if kv else None,
        preemptions=None if pre is None else int(round(pre)),
        series=[[((r[0] or t0) - t0) / 1e9, r[1], r[2], r[3]] for r in rows],
    )
