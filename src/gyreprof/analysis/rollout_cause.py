"""Why a trainer that waits on a rollout service waits: the cause, in the service's
own terms, from the client's requests and the server's figures (issue 34).

The sampler is a server here, so the env-loop advice (time the env, the forward) does
not apply; what to change is the server's capacity, the client's concurrency or the
answers' length. :func:`find` reads a run's :class:`~gyreprof.analysis.rollouts.RolloutReport`
and names the first cause that holds, in this order:

1. **one slow replica**: two or more generation endpoints, the slowest taking at least
   :data:`SLOW_REPLICA` times the fastest's time a request: the step waits for it;
2. **the server queues**: after its first request ended (a queue seen only while the
   server starts is not one), requests waited in the server's queue on average at
   least :data:`QUEUE_MEAN` at a read, or its queue held them at least
   :data:`QUEUE_SHARE` of their time on it, by the reads that caught it at work; when
   no read after the first answer caught the server at work (a short run, read at its
   start and end), the queue-time histogram's growth decides alone; among replicas, the
   one that queues is named, beside its peers' time a request and slots, and the step is
   its own setting;
3. **the long tail**: half the batches wait at least their tail share for their last
   10% of requests (``RolloutReport.tail_dominates``);
4. **too few requests at once**: its KV cache stayed under :data:`KV_ROOM` and it
   queued nothing after start-up: by the reads that caught it at work, or, when none
   did, by its queue-time histogram (under :data:`NO_QUEUE_SHARE`): it had room for
   more than the client sent;
5. otherwise **generation itself**: the server's decode (or prefill) time, or the
   requests' latency and tokens/s without a metrics page.

A cause is a :class:`RolloutCause`; its ``next`` is a step a user can take without
touching gyreprof: a server flag, the client's concurrency, ``max_tokens``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gyreprof.analysis.rollouts import EndpointReport, RolloutReport, generation_endpoints
from gyreprof.analysis.server_metrics import ServerReport

__all__ = [
    "KV_FULL",
    "KV_ROOM",
    "NO_QUEUE_SHARE",
    "QUEUE_MEAN",
    "QUEUE_SHARE",
    "SLOW_REPLICA",
    "RolloutCause",
    "find",
]

SLOW_REPLICA = 1.5  # the slowest replica's time a request, against the fastest's
QUEUE_MEAN = 1.0  # requests waiting in the server's queue, mean over the reads
QUEUE_SHARE = 0.2  # share of a request's time on the server spent queued
KV_ROOM = 0.5  # a KV cache peak under this leaves room for more sequences
KV_FULL = 0.9  # a KV cache peak at or above this is full: more sequences do not fit
NO_QUEUE_SHARE = 0.05  # queued less than this share of their time: no queue at all
MIN_REQUESTS = 2  # a replica's requests for its time to be compared


@dataclass(frozen=True)
class RolloutCause:
    """The cause of a trainer's wait on rollouts: ``kind`` (``"slow replica"``,
    ``"server queueing"``, ``"long tail"``, ``"under-concurrency"``, ``"generation"``),
    ``short`` (for a headline), ``words`` (its figures) and ``next`` (what to change),
    about ``endpoint``."""

    kind: str
    endpoint: str
    short: str
    words: str
    next: str


def find(report: RolloutReport) -> RolloutCause | None:
    """The cause of the wait on ``report``'s generation endpoints (see the module doc);
    None without requests."""
    eps = [e for e in generation_endpoints(report.endpoints) if e.requests > 0]
    if not eps:
        return None
    main = max(eps, key=lambda e: e.total_ms)
    return (
        _slow_replica(eps)
        or _queueing(main, eps)
        or _tail(report, main)
        or _underfed(main)
        or _generation(main)
    )


def _per_request_ms(e: EndpointReport) -> float:
    return e.total_ms / e.requests if e.requests else 0.0


def _slow_replica(eps: list[EndpointReport]) -> RolloutCause | None:
    known = [e for e in eps if e.requests >= MIN_REQUESTS and e.total_ms > 0]
    if len(known) < 2:
        return None
    slow = max(known, key=_per_request_ms)
    fast = min(known, key=_per_request_ms)
    ratio = _per_request_ms(slow) / max(_per_request_ms(fast), 1e-9)
    if ratio < SLOW_REPLICA:
        return None
    words = (
        f"one replica is slow: {slow.endpoint} took {_per_request_ms(slow):.0f} ms a request "
        f"({slow.requests} requests, {slow.completion_tokens} completion tokens, "
        f"{slow.total_ms / 1000:.2f} s in all) against {_per_request_ms(fast):.0f} ms on "
        f"{fast.endpoint} ({fast.requests} requests, {fast.completion_tokens} completion "
        f"tokens, {fast.total_ms / 1000:.2f} s), {ratio:.1f}x; a step waits for its slowest "
        f"replica"
    )
    queue = _queue_words(slow.server)
    if queue is not None:
        words += f"; that replica's server {queue}"
    return RolloutCause(
        kind="slow replica",
        endpoint=slow.endpoint,
        short=f"one replica ({_host(slow.endpoint)}) is {ratio:.1f}x slower than the fastest",
        words=words,
        next=(
            f"give {_host(slow.endpoint)} fewer requests (in proportion to its speed) or "
            f"bring it to the others' settings"
            + (" (it queues: raise its --max-num-seqs)" if queue is not None else "")
        ),
    )


def _busy_after_first(s: ServerReport) -> list[list[float | None]]:
    """The reads after the endpoint's first request ended (the last ``after_first_reads``
    of the series) that caught the server running requests: the witnesses of its steady
    state. A short run read at its start and end has none: its histograms then decide."""
    if s.after_first_reads < 1:
        return []
    after = s.series[-s.after_first_reads :]
    return [r for r in after if len(r) > 2 and (r[1] or 0.0) >= 1]


def _queue_words(s: ServerReport | None) -> str | None:
    """The words saying that the server queues, with the figures that decided it; None
    when it does not (see the module doc)."""
    if s is None or s.source is None:
        return None
    share = s.queue_share or 0.0
    busy = _busy_after_first(s)
    if not busy:
        if share < QUEUE_SHARE:
            return None
        return (
            f"queues: {share:.0%} of a request's time on the server was spent queued "
            f"({s.queue_s or 0.0:.2f} s of {s.request_s or 0.0:.2f} s, from its queue-time "
            f"histogram; its {s.reads} reads of the gauges never caught it at work after its "
            f"first answer)"
        )
    waiting = [r[2] or 0.0 for r in busy]
    mean, peak = sum(waiting) / len(waiting), max(waiting)
    if not (mean >= QUEUE_MEAN or (peak >= 1 and share >= QUEUE_SHARE)):
        return None
    words = (
        f"queues: {mean:.1f} requests waiting on average (max {peak:.0f}) at the "
        f"{len(busy)} reads that caught it at work after its first answer"
    )
    if s.queue_share is not None:
        words += f", {s.queue_share:.0%} of a request's time on the server spent queued"
    if s.running_max is not None:
        words += f"; it ran at most {s.running_max:.0f} at once"
    return words


def _queueing(e: EndpointReport, eps: list[EndpointReport]) -> RolloutCause | None:
    """The server of ``e`` (the endpoint the run spent longest on) queues. Among several
    replicas (``eps``, the generation endpoints), the one that queues is named, beside
    its peers' time a request and how many each ran at once: a replica started with
    fewer slots than the others queues, and slows each step, short of being
    :data:`SLOW_REPLICA` times slower (a real vLLM with 1 slot against one with 8, on
    the CPU: 1.26x)."""
    s = e.server
    queue = _queue_words(s)
    if s is None or queue is None:
        return None
    full = s.kv_max is not None and s.kv_max >= KV_FULL
    kv = f" and its KV cache peaked at {s.kv_max:.0%}" if s.kv_max is not None else ""
    others = [o for o in eps if o is not e]
    if full:
        step = (
            "add a replica, or give the server more KV-cache memory "
            "(vLLM --gpu-memory-utilization): its cache is full"
        )
    elif others:
        step = _replica_step(e, others)
    else:
        step = (
            "raise the server's concurrent sequences (vLLM --max-num-seqs, SGLang "
            "--max-running-requests), or add a replica"
        )
    words = f"the server ({s.source}) {queue}{kv}"
    short = "the server queues the requests"
    if others:
        host = _host(e.endpoint)
        short = f"one of {len(eps)} replicas ({host}) queues the requests"
        peers = ", ".join(
            f"{_per_request_ms(o):.0f} ms on {_host(o.endpoint)}{_at_once(o)}" for o in others
        )
        words = (
            f"the replica {host} ({s.source}) {queue}{kv}; it took "
            f"{_per_request_ms(e):.0f} ms a request ({e.requests} requests) against {peers}"
        )
    return RolloutCause(
        kind="server queueing", endpoint=e.endpoint, short=short, words=words, next=step
    )


def _at_once(e: EndpointReport) -> str:
    """`` (its server queued nothing, ran up to N at once)`` for a replica's words."""
    s = e.server
    if s is None or s.source is None:
        return ""
    calm = "queued nothing" if _queue_words(s) is None else "queued too"
    ran = f", ran up to {s.running_max:.0f} at once" if s.running_max is not None else ""
    return f" (its server {calm}{ran})"


def _replica_step(e: EndpointReport, others: list[EndpointReport]) -> str:
    """What to change when replica ``e`` queues: its own slots, to its calm peers' when
    some queue nothing, else more replicas."""
    host = _host(e.endpoint)
    calm = [o for o in others if o.server is not None and _queue_words(o.server) is None]
    if not calm:
        return (
            "every replica queues: raise their concurrent sequences (vLLM --max-num-seqs, "
            "SGLang --max-running-requests), or add a replica"
        )
    ran = [o.server.running_max for o in calm if o.server and o.server.running_max]
    peer = f" (up to {max(ran):.0f} ran at once on its peers)" if ran else ""
    return (
        f"raise {host}'s concurrent sequences (vLLM --max-num-seqs, SGLang "
        f"--max-running-requests) to its peers'{peer}, or send it fewer requests than "
        f"them: {', '.join(_host(o.endpoint) for o in calm)} queued nothing"
    )


def _tail(report: RolloutReport, e: EndpointReport) -> RolloutCause | None:
    if not report.tail_dominates or report.tail_share_p50 is None:
        return None
    typical = f" ({report.typical_tail})" if report.typical_tail else ""
    return RolloutCause(
        kind="long tail",
        endpoint=e.endpoint,
        short=f"the long tail: batches wait {report.tail_share_p50:.0%} for their last answers",
        words=(
            f"the long tail: half the batches wait at least {report.tail_share_p50:.0%} of "
            f"their time for their last 10% of requests{typical}"
        ),
        next=(
            "cap max_tokens (the last answers are the longest) or pack prompts of like "
            "length together, so that a batch's answers end together"
        ),
    )


def _underfed(e: EndpointReport) -> RolloutCause | None:
    s = e.server
    if s is None or s.source is None:
        return None
    busy = _busy_after_first(s)
    if not busy:
        # no read caught it at work: its histograms must show no queue at all, and its
        # KV cache's peak must be known (below: under KV_ROOM)
        quiet = s.queue_share is not None and s.queue_share < NO_QUEUE_SHARE
        if not quiet or s.kv_max is None:
            return None
    elif any((r[2] or 0.0) > 0 for r in busy):
        return None  # (the histograms' queue time may be the start-up's: not asked here)
    if s.kv_max is not None and s.kv_max >= KV_ROOM:
        return None
    have = max(1, e.in_flight_max)
    factor = 8 if not s.kv_max else max(2, min(8, math.floor(0.8 / s.kv_max)))
    want = have * factor
    at_max = f" ({e.at_max_share:.0%} of the time at that cap)" if e.at_max_share else ""
    kv = f", and its KV cache peaked at {s.kv_max:.0%}" if s.kv_max is not None else ""
    return RolloutCause(
        kind="under-concurrency",
        endpoint=e.endpoint,
        short=f"the client sends too few requests at once ({have})",
        words=(
            f"the client keeps at most {have} requests in flight{at_max}; the server "
            f"({s.source}) queued none after start-up"
            + (
                f" and ran at most {s.running_max or 0:.0f} at once"
                if busy
                else f" (queueing was {s.queue_share or 0.0:.1%} of its requests' time)"
            )
            + f"{kv}: it has room for more"
        ),
        next=(
            f"raise the rollout concurrency from {have} to about {want} (the requests sent "
            f"at once: the batch's size, the pool's or the semaphore's limit)"
        ),
    )


def _generation(e: EndpointReport) -> RolloutCause:
    s = e.server
    p50 = "-" if e.latency.p50 is None else f"{e.latency.p50:.0f} ms"
    rate = f", {e.tokens_per_s:.0f} completion tokens/s" if e.tokens_per_s else ""
    words = f"generation itself: p50 {p50} a request{rate}"
    if s is not None and s.source is not None and s.decode_share is not None:
        words += f"; on the server, decode is {s.decode_share:.0%} of a request's time"
        if s.prefill_share is not None:
            words += f" and prefill {s.prefill_share:.0%}"
        if s.itl_mean_ms is not None:
            words += f" ({s.itl_mean_ms:.1f} ms a token)"
    return RolloutCause(
        kind="generation",
        endpoint=e.endpoint,
        short="generation itself is the wait",
        words=words,
        next=(
            "shorter answers (max_tokens), a smaller or quantized model, or more replicas "
            "sharing the requests"
        ),
    )


def _host(endpoint: str) -> str:
    rest = endpoint.partition("://")[2] or endpoint
    return rest.split("/", 1)[0]
