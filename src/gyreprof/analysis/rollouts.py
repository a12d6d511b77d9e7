"""Rollout requests read back: per endpoint figures, in-flight over time, batches and their tail.

Input: the spans of HTTP rollout requests (:class:`SpanRow`, one per request, times
in ns on CLOCK_MONOTONIC, which every process of a machine shares) and the totals
of requests that were folded out of the kept spans. Output: a :class:`RolloutReport`.

**In flight** (per endpoint, over every process): from the first request's start
to the last one's end, the mean number of requests in flight, the most at once and
the share of that time spent at the most.

**Tokens** are read from each answer's ``usage`` (``prompt_tokens``,
``completion_tokens``; a stream's last chunk carries it when the server sends it).
**Tokens/s** of an endpoint: its completion tokens over its busy wall time (the
time at least one request to it was in flight), what the service delivered as the
client saw it. **Time to first token** of a stream: from the request's start to
the first chunk of its answer the user read; **inter-chunk time**: per stream, the
mean gap between its later chunks (the percentiles are over streams).

**Batch.** A batch is a group of requests the trainer (or a sampler) waited on
together. Under ``gyreprof run`` the waits record their *groups*
(:class:`Group`): ``asyncio.gather``, ``asyncio.wait`` and ``asyncio.TaskGroup``
(the thread that awaited them), ``ThreadPoolExecutor.map``,
``concurrent.futures.wait`` and ``as_completed`` (the threads that completed the
futures). A group's requests are those of its process and threads that started and
ended inside its interval; a request inside several groups (a gather inside a
gather) belongs to the outermost. A group with 2+ requests is a batch, named by its
rule (``BatchReport.rule``). Requests in no group fall back to *busy periods*: a
maximal interval of one endpoint in one process during which at least one request
to it was in flight, with at least two requests (rule ``"busy period"``). A client
that sends one request at a time makes none; a pipeline that always keeps a request
in flight is one. ``RolloutReport.batch_rules`` counts the batches by rule.

**Tail share** of a batch of ``n`` requests: with ``k = max(1, n // 10)``, the part
of its wall time after its ``(n-k)``-th request ended, i.e. the time it waited for
its last ``k`` requests, during which at most 10% of them (at least one) were
still in flight: "the batch waited 41% of its time for its last 3 of 32 requests".
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from gyreprof._support import forms as _forms
from gyreprof.analysis.server_metrics import ServerReport
from gyreprof.model._serial import Record, serial_format

FORMAT = "gyreprof.rollouts/1"
OUTCOMES: tuple[str, ...] = ("ok", "refused", "timeout", "reset", "4xx", "5xx", "empty", "error")
FAILURES = frozenset(OUTCOMES[1:])
#: batches listed whole in a report (the slowest); the run's figures use them all
BATCHES_LISTED = 50
#: the median tail share from which the verdict says the tail dominates
TAIL_DOMINATES = 0.25
#: points of an endpoint's in-flight series (each the most in flight in its bucket)
SERIES_POINTS = 200

#: the columns of a kept span (``integrations._auto.rollout_log`` keeps its rows in them)
SPAN_FIELDS: tuple[str, ...] = (
    "endpoint",
    "start",
    "end",
    "outcome",
    "prompt_tokens",
    "completion_tokens",
    "ttft",
    "chunks",
    "attempts",
    "retried",
    "bytes_in",
    "bytes_out",
    "stream",
    "empty_field",
    "body_flag",
    "thread",
    "client",
)


@dataclass(frozen=True)
class SpanRow:
    """One request: times in ns; tokens and ``ttft`` -1 when unknown."""

    endpoint: str
    start: int
    end: int
    outcome: str
    prompt_tokens: int
    completion_tokens: int
    ttft: int
    chunks: int
    attempts: int
    retried: tuple[str, ...]
    bytes_in: int
    bytes_out: int
    stream: bool
    empty_field: str | None
    body_flag: int
    thread: int
    client: str
    pid: int = 0


@dataclass
class Totals:
    """Figures of requests whose spans were not kept whole (a thread's oldest ones)."""

    requests: int = 0
    attempts: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    retried: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    with_usage: int = 0
    streams: int = 0
    chunks: int = 0
    not_json: int = 0
    oversized: int = 0
    empty_fields: dict[str, int] = field(default_factory=dict)
    clients: dict[str, int] = field(default_factory=dict)

    def add_span(self, s: SpanRow) -> None:
        self.requests += 1
        self.attempts += s.attempts
        _bump(self.outcomes, s.outcome)
        for r in s.retried:
            _bump(self.retried, r)
        self.bytes_in += s.bytes_in
        self.bytes_out += s.bytes_out
        if s.prompt_tokens >= 0 or s.completion_tokens >= 0:
            self.with_usage += 1
            self.prompt_tokens += max(0, s.prompt_tokens)
            self.completion_tokens += max(0, s.completion_tokens)
        if s.stream:
            self.streams += 1
            self.chunks += s.chunks
        if s.body_flag == 1:
            self.not_json += 1
        elif s.body_flag == 2:
            self.oversized += 1
        if s.empty_field is not None:
            _bump(self.empty_fields, s.empty_field)
        _bump(self.clients, s.client)

    def add(self, o: Totals) -> None:
        for name in (
            "requests",
            "attempts",
            "bytes_in",
            "bytes_out",
            "prompt_tokens",
            "completion_tokens",
            "with_usage",
            "streams",
            "chunks",
            "not_json",
            "oversized",
        ):
            setattr(self, name, getattr(self, name) + getattr(o, name))
        for name in ("outcomes", "retried", "empty_fields", "clients"):
            mine: dict[str, int] = getattr(self, name)
            for k, v in getattr(o, name).items():
                mine[k] = mine.get(k, 0) + v


def _bump(d: dict[str, int], k: str, n: int = 1) -> None:
    d[k] = d.get(k, 0) + n


@dataclass(frozen=True)
class Percentiles:
    """Milliseconds (None: no value)."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    count: int = 0


def percentiles_ms(values_ns: list[int]) -> Percentiles:
    if not values_ns:
        return Percentiles()
    v = sorted(values_ns)
    n = len(v)

    def at(q: float) -> float:
        i = min(n - 1, max(0, int(-(-q * n // 1)) - 1))  # nearest rank
        return v[i] / 1e6

    return Percentiles(at(0.5), at(0.9), at(0.99), v[-1] / 1e6, n)


#: the rule of a batch read from the requests' times alone (no group recorded)
BUSY_PERIOD = "busy period"


@dataclass(frozen=True)
class Group:
    """Requests waited on together, as recorded: the ``rule`` that made the group (the
    call waited in), its process, its interval (ns, CLOCK_MONOTONIC), the awaitables
    or futures it waited on (0: not known) and the threads whose requests it holds
    (empty: any thread of the process)."""

    rule: str
    pid: int
    start: int
    end: int
    awaited: int
    threads: tuple[int, ...] = ()


@dataclass(frozen=True)
class BatchReport:
    """One batch: a recorded group with 2+ requests, or a busy period (``rule``)."""

    endpoint: str
    pid: int
    start_ns: int
    wall_ms: float
    requests: int
    tokens: int
    median_ms: float
    slowest_ms: float
    tail_requests: int
    tail_share: float
    rule: str = BUSY_PERIOD

    @property
    def words(self) -> str:
        return tail_words(self.tail_share, self.tail_requests, self.requests)


def tail_words(share: float, k: int, n: int) -> str:
    """ "the batch waited 41% of its time for its last 3 of 32 requests"."""
    return f"the batch waited {share * 100:.0f}% of its time for its last {k} of {n} requests"


@dataclass(frozen=True)
class EndpointReport:
    """One endpoint's requests over the run."""

    endpoint: str
    clients: list[str]
    requests: int
    attempts: int
    retries: int
    retried: dict[str, int]
    outcomes: dict[str, int]
    latency: Percentiles
    bytes_in: int
    bytes_out: int
    prompt_tokens: int
    completion_tokens: int
    with_usage: int
    tokens_per_s: float | None
    streams: int
    chunks: int
    ttft: Percentiles
    inter_chunk: Percentiles
    in_flight_mean: float | None
    in_flight_max: int
    at_max_share: float | None
    not_json: int
    oversized: int
    empty_fields: dict[str, int]
    batches: int
    processes: int
    #: requests in flight over time: ``[t_s, most in flight]`` per bucket of the
    #: endpoint's active time (``SERIES_POINTS`` buckets at most; t from its first start)
    concurrency: list[list[float]] = field(default_factory=list)
    #: what the endpoint is to a trainer when its route is a known one (``route_role``):
    #: ``"generation"``, ``"weight sync"``, ``"control"``; None for any other route
    role: str | None = None
    #: the sum of its kept requests' latencies (ms): the time callers spent blocked on it
    total_ms: float = 0.0
    #: its server's own figures, from its metrics page (``analysis.server_metrics``);
    #: None when its server's page was not looked for (a control or weight-sync route)
    server: ServerReport | None = None

    @property
    def failures(self) -> int:
        return sum(v for k, v in self.outcomes.items() if k in FAILURES)


@serial_format(FORMAT)
@dataclass(frozen=True)
class RolloutReport(Record):
    """HTTP rollout requests of a run (format ``gyreprof.rollouts/1``): per endpoint
    figures, the batches (the slowest listed) and their run-level tail figures."""

    endpoints: list[EndpointReport]
    batches: list[BatchReport]
    batch_count: int
    batch_wall: Percentiles
    tail_share_p50: float | None
    tail_share_p90: float | None
    tail_share_max: float | None
    typical_tail: str | None
    tail_dominates: bool
    folded_requests: int = 0
    notes: list[str] = field(default_factory=list)
    #: batches by the rule that made them (a group's call, or ``"busy period"``)
    batch_rules: dict[str, int] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(e.requests for e in self.endpoints)

    def __str__(self) -> str:
        return _forms.text("text.rollouts", self)

    def to_markdown(self) -> str:
        return _forms.text("markdown.rollouts", self)


# ------------------------------------------------------------------- analysis


def in_flight(spans: list[SpanRow]) -> tuple[float | None, int, float | None, int]:
    """``(mean, max, share of time at max, busy ns)`` over [first start, last end]."""
    if not spans:
        return None, 0, None, 0
    events: list[tuple[int, int]] = []
    for s in spans:
        events.append((s.start, 1))
        events.append((max(s.start, s.end), -1))
    events.sort(key=lambda e: (e[0], e[1]))  # ends before starts at the same instant
    t0 = events[0][0]
    t_end = events[-1][0]
    # the max first, then the time at it
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    cur = 0
    area = 0
    at_max = 0
    busy = 0
    last = t0
    for t, d in events:
        dt = t - last
        if dt > 0:
            area += dt * cur
            if cur > 0:
                busy += dt
            if cur == peak:
                at_max += dt
        cur += d
        last = t
    span = t_end - t0
    if span <= 0:
        return float(peak), peak, 1.0, 0
    return area / span, peak, at_max / span, busy


def concurrency_series(spans: list[SpanRow], points: int = SERIES_POINTS) -> list[list[float]]:
    """``[[t_s, most in flight], ...]``: the active time cut into ``points`` buckets."""
    if not spans:
        return []
    events = sorted(
        [(s.start, 1) for s in spans] + [(max(s.start, s.end), -1) for s in spans],
        key=lambda e: (e[0], e[1]),
    )
    t0, t1 = events[0][0], events[-1][0]
    width = max(1, (t1 - t0) // points + 1)
    peaks = [0] * points
    cur = 0
    for t, d in events:
        if d > 0:
            cur += 1
            b = min(points - 1, (t - t0) // width)
            peaks[b] = max(peaks[b], cur)
        else:
            cur -= 1
    # a bucket with no start keeps the count carried into it
    out: list[list[float]] = []
    cur = 0
    i = 0
    for b in range(points):
        edge = t0 + b * width
        while i < len(events) and events[i][0] < edge:
            cur += events[i][1]
            i += 1
        out.append([(b * width) / 1e9, float(max(peaks[b], cur))])
        if edge > t1:
            break
    return out


def batches_of(spans: list[SpanRow]) -> list[BatchReport]:
    """The busy periods with 2+ requests of one endpoint in one process."""
    out: list[BatchReport] = []
    if not spans:
        return out
    ordered = sorted(spans, key=lambda s: s.start)
    group: list[SpanRow] = []
    group_end = -1
    for s in ordered:
        if group and s.start > group_end:
            if len(group) >= 2:
                out.append(_batch(group))
            group = []
        group.append(s)
        group_end = max(group_end, s.end) if len(group) > 1 else s.end
    if len(group) >= 2:
        out.append(_batch(group))
    return out


def _batch(group: list[SpanRow], rule: str = BUSY_PERIOD) -> BatchReport:
    n = len(group)
    start = min(s.start for s in group)
    end = max(s.end for s in group)
    wall = max(1, end - start)
    lat = sorted(s.end - s.start for s in group)
    ends = sorted(s.end for s in group)
    k = max(1, n // 10)
    tail = end - ends[n - k - 1]
    tokens = sum(max(0, s.completion_tokens) for s in group)
    eps: dict[str, int] = {}
    for s in group:
        _bump(eps, s.endpoint)
    return BatchReport(
        endpoint=max(eps, key=lambda e: eps[e]),  # the endpoint most of its requests went to
        pid=group[0].pid,
        start_ns=start,
        wall_ms=wall / 1e6,
        requests=n,
        tokens=tokens,
        median_ms=lat[(n - 1) // 2] / 1e6,
        slowest_ms=lat[-1] / 1e6,
        tail_requests=k,
        tail_share=min(1.0, max(0.0, tail / wall)),
        rule=rule,
    )


def grouped(
    spans: list[SpanRow], groups: list[Group]
) -> tuple[list[tuple[Group, list[SpanRow]]], list[SpanRow]]:
    """The groups with the requests each holds (outermost first: a request inside
    several belongs to the longest), and the requests in no group."""
    ordered = sorted(spans, key=lambda s: s.start)
    starts = [s.start for s in ordered]
    taken = [False] * len(ordered)
    out: list[tuple[Group, list[SpanRow]]] = []
    for g in sorted(groups, key=lambda g: (g.start - g.end, g.start)):
        members: list[SpanRow] = []
        for i in range(bisect_left(starts, g.start), bisect_right(starts, g.end)):
            s = ordered[i]
            if taken[i] or s.pid != g.pid or s.end > g.end:
                continue
            if g.threads and s.thread not in g.threads:
                continue
            taken[i] = True
            members.append(s)
        if members:
            out.append((g, members))
    out.sort(key=lambda gm: gm[0].start)
    rest = [s for s, t in zip(ordered, taken, strict=True) if not t]
    return out, rest


def _endpoint(
    name: str, spans: list[SpanRow], folded: Totals | None, batches: int
) -> EndpointReport:
    t = Totals()
    for s in spans:
        t.add_span(s)
    if folded is not None:
        t.add(folded)
    mean, peak, at_max, busy = in_flight(spans)
    kept_tokens = sum(max(0, s.completion_tokens) for s in spans)
    tps = kept_tokens / (busy / 1e9) if busy > 0 and kept_tokens > 0 else None
    streams = [s for s in spans if s.stream and s.ttft >= 0]
    gaps = [
        (s.end - s.start - s.ttft) // (s.chunks - 1)
        for s in streams
        if s.chunks > 1 and s.end - s.start > s.ttft
    ]
    outcomes = {k: t.outcomes.get(k, 0) for k in OUTCOMES}
    return EndpointReport(
        endpoint=name,
        clients=sorted(t.clients),
        requests=t.requests,
        attempts=t.attempts,
        retries=sum(t.retried.values()),
        retried=dict(sorted(t.retried.items())),
        outcomes=outcomes,
        latency=percentiles_ms([s.end - s.start for s in spans]),
        bytes_in=t.bytes_in,
        bytes_out=t.bytes_out,
        prompt_tokens=t.prompt_tokens,
        completion_tokens=t.completion_tokens,
        with_usage=t.with_usage,
        tokens_per_s=tps,
        streams=t.streams,
        chunks=t.chunks,
        ttft=percentiles_ms([s.ttft for s in streams]),
        inter_chunk=percentiles_ms(gaps),
        in_flight_mean=mean,
        in_flight_max=peak,
        at_max_share=at_max,
        not_json=t.not_json,
        oversized=t.oversized,
        empty_fields=dict(sorted(t.empty_fields.items())),
        batches=batches,
        processes=len({s.pid for s in spans}),
        concurrency=concurrency_series(spans),
        role=route_role(name),
        total_ms=sum(s.end - s.start for s in spans) / 1e6,
    )


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(-(-q * len(v) // 1)) - 1))]


def analyse(
    spans: list[SpanRow],
    folded: dict[str, Totals] | None = None,
    groups: list[Group] | None = None,
) -> RolloutReport | None:
    """The report of these requests (``groups``: those recorded, making the batches
    where they hold requests); None when there are none."""
    folded = folded or {}
    if not spans and not any(t.requests for t in folded.values()):
        return None
    by_ep: dict[str, list[SpanRow]] = {}
    for s in spans:
        by_ep.setdefault(s.endpoint, []).append(s)
    all_batches: list[BatchReport] = []
    per_ep_batches: dict[str, int] = {}
    held, rest = grouped(spans, groups or [])
    for g, members in held:
        if len(members) >= 2:
            b = _batch(members, g.rule)
            all_batches.append(b)
            _bump(per_ep_batches, b.endpoint)
    rest_by_ep: dict[str, list[SpanRow]] = {}
    for s in rest:
        rest_by_ep.setdefault(s.endpoint, []).append(s)
    for name, ss in rest_by_ep.items():
        by_pid: dict[int, list[SpanRow]] = {}
        for s in ss:
            by_pid.setdefault(s.pid, []).append(s)
        for group in by_pid.values():
            bs = batches_of(group)
            per_ep_batches[name] = per_ep_batches.get(name, 0) + len(bs)
            all_batches.extend(bs)
    names = sorted(set(by_ep) | {k for k, t in folded.items() if t.requests})
    endpoints = [
        _endpoint(n, by_ep.get(n, []), folded.get(n), per_ep_batches.get(n, 0)) for n in names
    ]
    endpoints.sort(key=lambda e: -e.requests)
    shares = [b.tail_share for b in all_batches]
    walls = [int(b.wall_ms * 1e6) for b in all_batches]
    typical = None
    if all_batches:
        ranked = sorted(all_batches, key=lambda b: b.tail_share)
        typical = ranked[(len(ranked) - 1) // 2].words
    p50 = _q(shares, 0.5)
    folded_n = sum(t.requests for t in folded.values())
    notes = []
    if folded_n:
        notes.append(
            f"{folded_n} older request(s) counted in the totals only: latency, in-flight and "
            "batch figures come from the requests kept whole"
        )
    listed = sorted(all_batches, key=lambda b: -b.wall_ms)[:BATCHES_LISTED]
    rules: dict[str, int] = {}
    for b in all_batches:
        _bump(rules, b.rule)
    return RolloutReport(
        endpoints=endpoints,
        batches=listed,
        batch_count=len(all_batches),
        batch_wall=percentiles_ms(walls),
        tail_share_p50=p50,
        tail_share_p90=_q(shares, 0.9),
        tail_share_max=max(shares) if shares else None,
        typical_tail=typical,
        tail_dominates=bool(p50 is not None and p50 >= TAIL_DOMINATES),
        folded_requests=folded_n,
        notes=notes,
        batch_rules=dict(sorted(rules.items(), key=lambda kv: -kv[1])),
    )


# ------------------------------------------------------- cloud metadata probes

#: hosts of the cloud metadata services: Ray's start-up (``usage_lib``, the TPU check)
#: and cloud SDKs ask them which cloud they run on; they are no rollout endpoint
METADATA_HOSTS = frozenset(
    (
        "metadata.google.internal",
        "metadata.goog",
        "169.254.169.254",  # AWS, Azure, GCP, OpenStack, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server
        "fd00:ec2::254",  # AWS, over IPv6
    )
)


def is_metadata_host(host: str) -> bool:
    """``host`` is a cloud metadata service: a name or address of :data:`METADATA_HOSTS`,
    or any link-local address (169.254.0.0/16, fe80::/10), where those services live."""
    import ipaddress

    h = host.strip("[]").lower().rstrip(".")
    if h in METADATA_HOSTS:
        return True
    try:
        return ipaddress.ip_address(h.split("%", 1)[0]).is_link_local
    except ValueError:
        return False


def endpoint_host(endpoint: str) -> str:
    """The host of an endpoint name ``scheme://host:port/path`` (an IPv6 host is written
    without brackets there); ``""`` when the name has none."""
    _, sep, rest = endpoint.partition("://")
    if not sep:
        return ""
    hostport = rest.split("/", 1)[0]
    host, colon, port = hostport.rpartition(":")
    return host if colon and port.isdigit() else hostport


def is_metadata_endpoint(endpoint: str) -> bool:
    """The endpoint is a cloud metadata service's (:func:`is_metadata_host`)."""
    return is_metadata_host(endpoint_host(endpoint))


def without_metadata_probes(
    spans: list[SpanRow], folded: dict[str, Totals]
) -> tuple[list[SpanRow], dict[str, Totals], str | None]:
    """The spans and folded totals without the requests to cloud metadata services, and
    the one note line naming those probes (None when there were none): they are never
    shown as a rollout endpoint, nor in batches, in-flight or tail figures."""
    probes: dict[str, int] = {}
    kept: list[SpanRow] = []
    for s in spans:
        if is_metadata_endpoint(s.endpoint):
            probes[s.endpoint] = probes.get(s.endpoint, 0) + 1
        else:
            kept.append(s)
    kept_folded: dict[str, Totals] = {}
    for ep, t in folded.items():
        if is_metadata_endpoint(ep):
            probes[ep] = probes.get(ep, 0) + t.requests
        else:
            kept_folded[ep] = t
    if not probes:
        return spans, folded, None
    n = sum(probes.values())
    hosts = sorted({endpoint_host(ep) for ep in probes})
    note = (
        f"{n} cloud metadata probe(s) left out of the rollouts (to {', '.join(hosts[:4])}"
        f"{', ...' if len(hosts) > 4 else ''}): a library asking which cloud it runs on "
        "(Ray does at start-up), not a rollout service"
    )
    return kept, kept_folded, note


# ------------------------------------------------------------- known server routes

#: the routes of the generation servers TRL trains against, by what they are to the
#: trainer. TRL 1.16's ``VLLMClient`` talks to ``vllm serve`` (``trl vllm-serve`` now
#: only starts it, with ``VLLM_SERVER_DEV_MODE=1``): generation through the OpenAI routes
#: and ``/inference/v1/generate``; the weight sync through the dev-mode routes of vLLM's
#: weight-transfer engine, the prefix-cache reset after each sync included. The routes of
#: the earlier ``trl vllm-serve`` script (TRL < 1.0: ``/generate/``,
#: ``/init_communicator/``, ``/update_named_param/``, ...) are named too.
TRL_ROUTES: dict[str, str] = {
    "/v1/completions": "generation",
    "/v1/chat/completions": "generation",
    "/inference/v1/generate": "generation",
    "/v1/chat/completions/render": "generation",
    "/generate": "generation",
    "/chat": "generation",
    "/init_weight_transfer_engine": "weight sync",
    "/start_weight_update": "weight sync",
    "/update_weights": "weight sync",
    "/finish_weight_update": "weight sync",
    "/reset_prefix_cache": "weight sync",
    "/init_communicator": "weight sync",
    "/update_named_param": "weight sync",
    "/batch_update_named_params": "weight sync",
    "/close_communicator": "weight sync",
    "/health": "control",
    "/v1/models": "control",
    "/server_info": "control",
    "/get_world_size": "control",
}


def route_role(endpoint: str) -> str | None:
    """The role of ``endpoint`` (``scheme://host:port/path``, as the request log names it)
    when its path is one of ``TRL_ROUTES`` or ends with one (a trailing ``/`` ignored),
    else None."""
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        return None
    slash = rest.find("/")
    path = rest[slash:] if slash >= 0 else "/"
    if len(path) > 1:
        path = path.rstrip("/")
    role = TRL_ROUTES.get(path)
    if role is None:  # a server behind a path prefix (``http://host/vllm/v1/completions``)
        for route in sorted(TRL_ROUTES, key=len, reverse=True):
            if path.endswith(route):
                return TRL_ROUTES[route]
    return role


def generation_endpoints(endpoints: list[EndpointReport]) -> list[EndpointReport]:
    """The endpoints a trainer waits on for generation: all but the known weight-sync and
    control routes (all of them when that leaves none)."""
    kept = [e for e in endpoints if e.role not in ("weight sync", "control")]
    return kept or list(endpoints)


def weight_sync_words(report: RolloutReport) -> str | None:
    """ "weight sync: 28 requests to 4 endpoints, 322 ms in all (the slowest route
    /update_weights, p50 7.5 ms)", or None without weight-sync requests."""
    sync = [e for e in report.endpoints if e.role == "weight sync"]
    n = sum(e.requests for e in sync)
    if not n:
        return None
    total = sum(e.total_ms for e in sync)
    worst = max(sync, key=lambda e: e.total_ms)
    route = worst.endpoint.partition("://")[2]
    route = route[route.find("/") :] if "/" in route else route
    p50 = "-" if worst.latency.p50 is None else f"{worst.latency.p50:.1f} ms"
    return (
        f"weight sync: {n} requests to {len(sync)} endpoint(s), {total:.0f} ms in all (the "
        f"slowest route {route}, p50 {p50})"
    )
