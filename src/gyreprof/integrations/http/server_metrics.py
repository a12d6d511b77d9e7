"""Reading the rollout servers' own metrics while a run goes on (a daemon thread of
each recording process; never the training thread).

**Which pages.** Each rollout endpoint's server is read at ``/metrics`` on the same
scheme, host and port (vLLM and SGLang serve it there), unless ``gyreprof run
--server-metrics URL[,URL...]`` (``$GYREPROF_SERVER_METRICS``) names the pages: one
URL stands for every endpoint; with several, an endpoint takes the one on its own
host and port. ``--server-metrics off`` reads none. Cloud metadata services are never
read.

**When.** The thread starts at the process's first request (``start``); it reads a
page as soon as an endpoint of its server appears (the run's start, as far as the
process can tell), then at most once every ``POLL_S`` seconds while the process has
requests in flight (the gauges, requests running and waiting, then tell the server's
state as the client waits on it; a read at a fixed period lands between a short
run's batches and finds the server idle), at least once every ``IDLE_POLL_S``
seconds, and once more when the process saves its record (``final_reads``, the run's
end). A page that never answered
is tried ``GIVE_UP`` times, then left (its endpoint is reported with no metrics, and
why). Pages are read with ``http.client`` marked as gyreprof's own (the HTTP
instrumentors pass them through: they are no rollout requests), ``TIMEOUT_S`` at
most, ``MAX_PAGE`` bytes at most; only the lines of the recognised names
(``analysis.server_metrics.SAMPLES``, histogram buckets left out) go to
``prometheus_client``'s parser. Without ``prometheus_client`` nothing is read, and the
report says so.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from gyreprof._support.errors import InvalidValueError
from gyreprof.analysis import server_metrics as sm
from gyreprof.integrations._auto import rollout_log as rl

ENV_SERVER_METRICS = "GYREPROF_SERVER_METRICS"  # also ``_auto.options``'s
OFF = "off"
POLL_S = 1.0
IDLE_POLL_S = 5.0  # a page is read this often with no request in flight
TIMEOUT_S = 2.0
GIVE_UP = 3
MAX_PAGE = 8 << 20
MAX_READS = 1 << 14  # reads kept per page (the older half is thinned past it)
_WAKE_S = 0.1  # how often the thread looks for new endpoints

_lock = threading.Lock()
_pages: dict[str, _Page] = {}
_thread_pid = 0
_stop = threading.Event()


class _Page:
    __slots__ = ("series", "failures", "last", "gone")

    def __init__(self, url: str) -> None:
        self.series = sm.ServerSeries(url)
        self.failures = 0
        self.last = 0.0
        self.gone = False  # never answered: given up


def configured() -> list[str] | None:
    """The pages ``$GYREPROF_SERVER_METRICS`` names (None: found by endpoint; an empty
    list: ``off``)."""
    raw = os.environ.get(ENV_SERVER_METRICS, "").strip()
    if not raw:
        return None
    if raw.lower() in (OFF, "none", "0"):
        return []
    return [u.strip() for u in raw.split(",") if u.strip()]


def check_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host; else ValueError naming the option."""
    from urllib.parse import urlsplit

    try:
        u = urlsplit(url)
        ok = u.scheme in ("http", "https") and bool(u.hostname)
        u.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        ok = False
    if not ok:
        raise InvalidValueError(f"server_metrics: {url!r} is not an http(s) URL with a host")
    return url


def _base(endpoint: str) -> str | None:
    """``scheme://host:port`` of an endpoint name, None for the catch-all or a probe."""
    if endpoint == rl.OTHER_ENDPOINT or endpoint in rl.probe_endpoints:
        return None
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        return None
    return f"{scheme}://{rest.split('/', 1)[0]}"


def page_of(base: str, given: list[str] | None) -> str | None:
    """The metrics page of the server at ``base`` (``scheme://host:port``)."""
    if given is None:
        return base + "/metrics"
    if not given:
        return None
    if len(given) == 1:
        return given[0]
    from urllib.parse import urlsplit

    for url in given:
        u = urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        if f"{u.scheme}://{u.hostname}:{port}" == base:
            return url
    return None


def _discover(given: list[str] | None) -> None:
    for ep in list(rl._endpoints):
        base = _base(ep)
        url = page_of(base, given) if base else None
        if url is None or base is None:
            continue
        page = _pages.get(url)
        if page is None:
            with _lock:
                page = _pages.setdefault(url, _Page(url))
        if base not in page.series.endpoints:
            page.series.endpoints.append(base)


# ------------------------------------------------------------------ reading


def fetch(url: str, timeout: float = TIMEOUT_S) -> str:
    """The text of ``url`` (GET); OSError or ValueError (an HTTP error status, a page
    too large) when there is none."""
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname or "", u.port, timeout=timeout)
    token = rl.active.set(_OWN)  # gyreprof's own request: the instrumentors pass it through
    try:
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        conn.request("GET", path, headers={"accept": "text/plain"})
        resp = conn.getresponse()
        data = resp.read(MAX_PAGE + 1)
        if resp.status != 200:
            raise InvalidValueError(f"HTTP {resp.status}")
    finally:
        rl.active.reset(token)
        conn.close()
    if len(data) > MAX_PAGE:
        raise InvalidValueError(f"a metrics page larger than {MAX_PAGE} bytes")
    return data.decode("utf-8", "replace")


#: a sample line of a known server (its name, then its labels or its value)
_SAMPLE_LINE = re.compile(r"^((?:vllm|sglang):[A-Za-z0-9_:]*)[{ \t][^\n]*", re.M)


def parse(text: str) -> tuple[str, dict[str, float]]:
    """``(source, figures)`` of a metrics page: its server (``vllm``, ``sglang``,
    ``unknown``) and the figures of :data:`analysis.server_metrics.READ_FIELDS` it has.
    ValueError when the page is not Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    source = "unknown"
    lines = []
    for m in _SAMPLE_LINE.finditer(text):
        name = m.group(1)
        if source == "unknown":
            source = "vllm" if name[0] == "v" else "sglang"
        if name in sm.WANTED:
            lines.append(m.group(0))
    samples: list[tuple[str, float]] = []
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        samples.extend((s.name, float(s.value)) for s in family.samples)
    return source, sm.figures(samples)


def read_page(page: _Page) -> None:
    """One read of ``page`` (any failure noted on it, never raised)."""
    page.last = time.monotonic()
    t = float(rl._now())
    try:
        source, figs = parse(fetch(page.series.url))
    except ImportError:
        page.series.error = "prometheus_client is not installed (pip install prometheus-client)"
        page.gone = True
        return
    except Exception as exc:  # noqa: BLE001 - any failure is the server's having no page
        page.failures += 1
        page.series.error = f"{type(exc).__name__}: {str(exc)[:160]}"
        if not page.series.reads and page.failures >= GIVE_UP:
            page.gone = True
        return
    page.series.error = None
    page.series.source = source
    reads = page.series.reads
    reads.append([t, *(figs.get(f) for f in sm.READ_FIELDS[1:])])
    if len(reads) > MAX_READS:  # a very long run: every other one of the older half
        half = MAX_READS // 2
        reads[:half] = reads[:half:2]


class _Own:
    """What :data:`_common.active` holds while a page is read: gyreprof's own request."""

    client = "gyreprof"


_OWN: Any = _Own()


def _busy() -> bool:
    """A request of this process is in flight (its threads' request logs; read from
    this thread without their locks: a count a moment old is good enough here)."""
    return any(log.core_ok and log.spans_core.in_flight > 0 for log in rl.logs())


def _due(page: _Page, now: float, busy: bool) -> bool:
    if page.gone:
        return False
    if page.last == 0.0:
        return True
    gap = now - page.last
    return gap >= IDLE_POLL_S or (busy and gap >= POLL_S)


def _loop(given: list[str] | None, stop: threading.Event) -> None:
    # the first round at once: the process's first request made its endpoint known
    # just before this thread started, and the page is read before its answer comes
    while True:
        try:
            _discover(given)
            now = time.monotonic()
            busy = _busy()
            for page in list(_pages.values()):
                if _due(page, now, busy):
                    read_page(page)
        except Exception:  # noqa: BLE001, S110 - a failed round is tried again
            pass
        if stop.wait(_WAKE_S):
            return


def start() -> bool:
    """Start this process's reader thread (once per process); False when none is
    needed (``--server-metrics off``) or it already runs."""
    global _thread_pid
    given = configured()
    if given == [] or _thread_pid == os.getpid():
        return False
    _thread_pid = os.getpid()
    _stop.clear()
    try:
        threading.Thread(
            target=_loop, args=(given, _stop), name="gyreprof-server-metrics", daemon=True
        ).start()
    except RuntimeError:  # the interpreter is shutting down
        return False
    return True


def final_reads() -> None:
    """The run's end: the thread stops and every page is read once more."""
    if _thread_pid != os.getpid():
        return
    _stop.set()
    try:
        _discover(configured())
    except Exception:  # noqa: BLE001, S110 - the pages found so far are read
        pass
    for page in list(_pages.values()):
        if not page.gone:
            read_page(page)


def series() -> list[sm.ServerSeries]:
    """The pages read (or tried) so far by this process."""
    with _lock:
        pages = list(_pages.values())
    out = []
    for p in pages:
        s = p.series
        out.append(sm.ServerSeries(s.url, list(s.endpoints), s.source, s.error,
                                   list(s.fields), [list(r) for r in s.reads]))  # fmt: skip
    return out


def reset() -> None:
    """Forget every page and stop the thread (tests; a forked child)."""
    global _thread_pid, _stop
    _stop.set()
    _stop = threading.Event()
    with _lock:
        _pages.clear()
    _thread_pid = 0


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    reset()


os.register_at_fork(after_in_child=_after_fork_in_child)
