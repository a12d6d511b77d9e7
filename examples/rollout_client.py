"""A rollout client with timeouts and retries, measured with gyreprof.

A loop that silently retries looks like a slow loop.  This example makes the
retries visible: a small rollout server (HTTP on 127.0.0.1, an ephemeral port)
answers ``POST /rollout`` with a batch of fake trajectories and, on purpose,
sometimes answers too slowly (the client times out), with a 503, or with an empty
batch.  The client

- prints the start-up banner with the request target, timeout and retry settings,
- times each request as the phase ``request`` and the JSON decoding as ``decode``,
- counts ``retry``, ``timeout``, ``http_error``, ``empty`` and the bytes sent and
  received with ``prof.count`` (summaries show each with its rate),
- runs under ``prof.watchdog`` so a stall would print every thread's stack,
- prints the summary at the end.

Run it::

    python examples/rollout_client.py                 # ~200 requests, a few seconds
    python examples/rollout_client.py --fault-rate 0  # no injected faults

It is also a factory for ``gyreprof selfcheck`` (the sampler starts its own
server when no URL is given)::

    cd examples && gyreprof selfcheck rollout_client:make_sampler --kwargs '{"batch_size": 4}'
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gyreprof as gp


# ---------------------------------------------------------------------------- server
class RolloutServer(ThreadingHTTPServer):
    """Serves fake trajectories; a seeded share of requests is slow, fails or is empty."""

    daemon_threads = True

    def __init__(self, fault_rate: float, slow_s: float, seed: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fault_rate = fault_rate
        self.slow_s = slow_s
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.served = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/rollout"

    def next_fault(self) -> str | None:
        with self._lock:
            self.served += 1
            if self._rng.random() >= self.fault_rate:
                return None
            return self._rng.choice(["slow", "slow", "error", "empty"])

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out has closed its socket: writing the late answer fails.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: RolloutServer

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        batch_size = int(request.get("batch_size", 8))
        fault = self.server.next_fault()
        if fault == "slow":
            time.sleep(self.server.slow_s)
        if fault == "error":
            self.send_error(503, "overloaded, try again")
            return
        count = 0 if fault == "empty" else batch_size
        trajectories = [{"tokens": list(range(16)), "reward": 1.0, "id": i} for i in range(count)]
        body = json.dumps({"trajectories": trajectories}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep the example's output readable


def start_server(fault_rate: float = 0.05, slow_s: float = 0.5, seed: int = 0) -> RolloutServer:
    """Start a RolloutServer on 127.0.0.1 in a daemon thread; ``shutdown()`` stops it."""
    server = RolloutServer(fault_rate, slow_s, seed)
    threading.Thread(target=server.serve_forever, name="rollout-server", daemon=True).start()
    return server


# ---------------------------------------------------------------------------- client
class RolloutClient:
    """Requests batches with a timeout per attempt and a bounded number of retries."""

    def __init__(
        self,
        url: str,
        prof: gp.Profiler,
        *,
        batch_size: int = 8,
        timeout_s: float = 0.2,
        max_retries: int = 3,
        backoff_s: float = 0.01,
    ) -> None:
        self.endpoint = url
        self.prof = prof
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    def sample(self) -> list[dict[str, Any]]:
        """One batch of trajectories; raises RuntimeError after ``max_retries`` retries."""
        prof = self.prof
        body = json.dumps({"batch_size": self.batch_size}).encode()
        last_error = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                prof.count("retry")
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(
                self.endpoint, data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with prof.phase("request"):
                    with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                        data = response.read()
            except urllib.error.HTTPError as exc:
                prof.count("http_error")
                last_error = f"HTTP {exc.code}"
                continue
            except TimeoutError:
                prof.count("timeout")
                last_error = f"timed out after {self.timeout_s} s"
                continue
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    prof.count("timeout")
                    last_error = f"timed out after {self.timeout_s} s"
                    continue
                raise
            prof.count("bytes_sent", len(body))
            prof.count("bytes_received", len(data))
            with prof.phase("decode"):
                trajectories: list[dict[str, Any]] = json.loads(data)["trajectories"]
            if not trajectories:
                prof.count("empty")
                last_error = "empty batch"
                continue
            return trajectories
        raise RuntimeError(f"gave up after {self.max_retries} retries: {last_error}")


def make_sampler(
    url: str | None = None, batch_size: int = 8, timeout_s: float = 1.0, fault_rate: float = 0.0
) -> RolloutClient:
    """A client for ``gyreprof selfcheck``; starts a local server when ``url`` is None."""
    if url is None:
        url = start_server(fault_rate=fault_rate).url
    prof = gp.Profiler(["request", "decode"])
    return RolloutClient(url, prof, batch_size=batch_size, timeout_s=timeout_s)


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="batches to fetch")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=0.2, help="seconds per attempt")
    parser.add_argument("--retries", type=int, default=3, help="retries per batch")
    parser.add_argument("--backoff", type=float, default=0.01, help="first backoff, seconds")
    parser.add_argument("--fault-rate", type=float, default=0.05, help="share of bad answers")
    parser.add_argument("--slow", type=float, default=0.4, help="seconds a slow answer takes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None, help="also write the banner to this file")
    args = parser.parse_args(argv)

    server = start_server(args.fault_rate, args.slow, args.seed)
    prof = gp.Profiler(["request", "decode"], warmup_steps=5)
    client = RolloutClient(
        server.url,
        prof,
        batch_size=args.batch_size,
        timeout_s=args.timeout,
        max_retries=args.retries,
        backoff_s=args.backoff,
    )
    gp.banner(
        log=args.log,
        extra={
            "rollout target": client.endpoint,
            "request timeout": f"{client.timeout_s} s per attempt",
            "retries": f"up to {client.max_retries}, backoff {client.backoff_s} s doubling",
            "batch size": client.batch_size,
        },
    )
    failed = 0
    received = 0
    with prof.watchdog(stall_after_s=10.0):
        for _ in range(args.requests):
            prof.begin()
            try:
                received += len(client.sample())
            except RuntimeError as exc:
                failed += 1
                print(f"batch failed: {exc}", flush=True)
        prof.end()
    server.shutdown()
    server.server_close()
    summary = prof.summary()
    print(summary)
    counters = summary.counters
    print(
        f"\n{args.requests} batches, {received} trajectories, {failed} failed; "
        f"{counters.get('retry', 0)} retries ({counters.get('timeout', 0)} timeouts, "
        f"{counters.get('http_error', 0)} HTTP errors, {counters.get('empty', 0)} empty)",
        flush=True,
    )
    return 1 if failed == args.requests else 0


if __name__ == "__main__":
    sys.exit(main())
