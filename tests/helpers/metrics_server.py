"""A local OpenAI-compatible completion server (stdlib only) that keeps vLLM's own
scheduler figures and serves them on ``/metrics`` in vLLM's exposition format.

``MetricsServer(max_num_seqs=4, prefill_ms=5, token_ms=2)`` binds ``127.0.0.1`` on a
free port. ``POST /v1/completions`` and ``/v1/chat/completions`` are admitted at most
``max_num_seqs`` at a time (the rest wait in its queue, first come first served);
an admitted request takes ``prefill_ms`` (its first token), then ``token_ms`` per
completion token (``max_tokens``, default 8). ``warmup_s``: for that long after the
first request arrives no request is admitted (a server that queues only while it
starts). ``metrics=False``: ``/metrics`` answers 404 (a server without metrics).
``answer_metrics=True``: each answer also carries its own ``metrics`` object
(``queued_time``, ``prefill_time``, ``decode_time``, ``e2e_latency``, seconds), as a
server with per-request metrics does.

The counters are real: ``vllm:num_requests_running`` and ``vllm:num_requests_waiting``
are the requests admitted and queued now; the histograms
``vllm:request_queue_time_seconds``, ``vllm:request_prefill_time_seconds``,
``vllm:request_decode_time_seconds``, ``vllm:e2e_request_latency_seconds``,
``vllm:time_to_first_token_seconds`` and ``vllm:inter_token_latency_seconds`` add
each finished request's measured times (``_sum``, ``_count`` and the buckets);
``vllm:kv_cache_usage_perc`` is running / ``max_num_seqs``; ``vllm:num_preemptions_total``
counts nothing (no request is preempted). ``engines=2`` writes two label sets
(``engine="0"``, ``engine="1"``) that split the figures, as a data-parallel server
does. ``server.log`` has each request's own times (:class:`Done`) to check against.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from helpers.json_http import JSONHandler

BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)
HISTOGRAMS = {
    "queue": ("vllm:request_queue_time_seconds", "Time spent in WAITING phase for request."),
    "prefill": ("vllm:request_prefill_time_seconds", "Time spent in PREFILL phase for request."),
    "decode": ("vllm:request_decode_time_seconds", "Time spent in DECODE phase for request."),
    "e2e": ("vllm:e2e_request_latency_seconds", "End to end request latency in seconds."),
    "ttft": ("vllm:time_to_first_token_seconds", "Time to first token in seconds."),
    "itl": ("vllm:inter_token_latency_seconds", "Inter-token latency in seconds."),
}


@dataclass
class Done:
    queue_s: float
    prefill_s: float
    decode_s: float
    e2e_s: float
    tokens: int


class _Hist:
    def __init__(self) -> None:
        self.sum = 0.0
        self.count = 0
        self.buckets = [0] * len(BUCKETS)

    def observe(self, v: float) -> None:
        self.sum += v
        self.count += 1
        for i, b in enumerate(BUCKETS):
            if v <= b:
                self.buckets[i] += 1


class _Handler(JSONHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/metrics" and self.server.metrics:
            data = self.server.exposition().encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self._write(data)
            with self.server.lock:
                self.server.scrapes += 1
            return
        self._send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        n = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            body = {}
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._send_json(404, {"detail": "Not Found"})
            return
        tokens = int(body.get("max_tokens") or 8)
        done = self.server.serve(tokens)
        extra: dict[str, Any] = {}
        if self.server.answer_metrics:
            extra["metrics"] = {"queued_time": done.queue_s, "prefill_time": done.prefill_s,
                                "decode_time": done.decode_s, "e2e_latency": done.e2e_s}  # fmt: skip
        self._send_json(
            200,
            {
                **extra,
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "tiny",
                "choices": [{"index": 0, "text": " tok" * tokens, "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": 3,
                    "completion_tokens": tokens,
                    "total_tokens": 3 + tokens,
                },  # fmt: skip
            },
        )
        with self.server.lock:
            self.server.log.append(done)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(
        self,
        max_num_seqs: int,
        prefill_ms: float,
        token_ms: float,
        warmup_s: float,
        metrics: bool,
        engines: int,
        answer_metrics: bool = False,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer_metrics = answer_metrics
        self.lock = threading.Lock()
        self.admit = threading.Condition(self.lock)
        self.max_num_seqs = max_num_seqs
        self.prefill_s = prefill_ms / 1e3
        self.token_s = token_ms / 1e3
        self.warmup_s = warmup_s
        self.metrics = metrics
        self.engines = engines
        self.running = 0
        self.waiting = 0
        self.first = 0.0
        self.hist = {k: _Hist() for k in HISTOGRAMS}
        self.log: list[Done] = []
        self.scrapes = 0
        self.max_waiting = 0

    def serve(self, tokens: int) -> Done:
        t0 = time.monotonic()
        with self.admit:
            if not self.first:
                self.first = t0
            self.waiting += 1
            self.max_waiting = max(self.max_waiting, self.waiting)
            while self.running >= self.max_num_seqs or (
                time.monotonic() < self.first + self.warmup_s
            ):
                self.admit.wait(0.01)
            self.waiting -= 1
            self.running += 1
        t1 = time.monotonic()
        time.sleep(self.prefill_s)
        t2 = time.monotonic()
        time.sleep(self.token_s * tokens)
        t3 = time.monotonic()
        with self.admit:
            self.running -= 1
            h = self.hist
            h["queue"].observe(t1 - t0)
            h["prefill"].observe(t2 - t1)
            h["decode"].observe(t3 - t2)
            h["e2e"].observe(t3 - t0)
            h["ttft"].observe(t2 - t0)
            for _ in range(max(0, tokens - 1)):
                h["itl"].observe((t3 - t2) / max(1, tokens - 1))
            self.admit.notify_all()
        return Done(t1 - t0, t2 - t1, t3 - t2, t3 - t0, tokens)

    def exposition(self) -> str:
        """The page, as vLLM writes it (engines split the figures between them)."""
        with self.lock:
            running, waiting = self.running, self.waiting
            hists = {k: (h.sum, h.count, list(h.buckets)) for k, h in self.hist.items()}
        k = self.engines
        labels = [f'engine="{i}",model_name="tiny"' for i in range(k)]

        def part(v: float, i: int) -> float:  # engine i's part of v (they add up to v)
            return v / k

        out = [
            "# HELP python_gc_objects_collected_total Objects collected during gc",
            "# TYPE python_gc_objects_collected_total counter",
            'python_gc_objects_collected_total{generation="0"} 1234.0',
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            *(
                f"vllm:num_requests_running{{{lb}}} {part(running, i)}"
                for i, lb in enumerate(labels)
            ),
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            *(
                f"vllm:num_requests_waiting{{{lb}}} {part(waiting, i)}"
                for i, lb in enumerate(labels)
            ),
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            *(f"vllm:kv_cache_usage_perc{{{lb}}} {running / self.max_num_seqs}" for lb in labels),
            "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
            "# TYPE vllm:num_preemptions_total counter",
            *(f"vllm:num_preemptions_total{{{lb}}} 0.0" for lb in labels),
        ]
        for key, (name, doc) in HISTOGRAMS.items():
            total, count, buckets = hists[key]
            out += [f"# HELP {name} {doc}", f"# TYPE {name} histogram"]
            for i, lb in enumerate(labels):
                for b, c in zip(BUCKETS, buckets, strict=True):
                    out.append(f'{name}_bucket{{{lb},le="{b}"}} {part(c, i)}')
                out.append(f'{name}_bucket{{{lb},le="+Inf"}} {part(count, i)}')
                out.append(f"{name}_count{{{lb}}} {part(count, i)}")
                out.append(f"{name}_sum{{{lb}}} {part(total, i)}")
        return "\n".join(out) + "\n"


class MetricsServer:
    """The server in a daemon thread; ``close()`` (or ``with``) stops it."""

    def __init__(
        self,
        max_num_seqs: int = 4,
        prefill_ms: float = 5.0,
        token_ms: float = 2.0,
        warmup_s: float = 0.0,
        metrics: bool = True,
        engines: int = 1,
        answer_metrics: bool = False,
    ) -> None:
        self._srv = _Server(
            max_num_seqs, prefill_ms, token_ms, warmup_s, metrics, engines, answer_metrics
        )
        self.port: int = self._srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()

    @property
    def log(self) -> list[Done]:
        with self._srv.lock:
            return list(self._srv.log)

    @property
    def scrapes(self) -> int:
        with self._srv.lock:
            return self._srv.scrapes

    @property
    def max_waiting(self) -> int:
        with self._srv.lock:
            return self._srv.max_waiting

    def exposition(self) -> str:
        return self._srv.exposition()

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
