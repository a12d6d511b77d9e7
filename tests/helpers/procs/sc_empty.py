"""Sampler factories for selfcheck whose results are empty in ways that used to read as
something else: an object whose list field is empty, and an HTTP answer under other keys
(the client reads ``items``; the server sends ``api_version`` and ``data``)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Batch:
    """What the client builds from an answer: no ``__len__``, so no count of its own."""

    def __init__(self, items: list[Any], source: str) -> None:
        self.items = items
        self.source = source


class EmptyFieldSampler:
    def sample(self) -> Batch:
        return Batch([], "rollout-server")


def make_empty_fields() -> EmptyFieldSampler:
    return EmptyFieldSampler()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        body = json.dumps({"api_version": "2", "data": {"samples": [1, 2, 3]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class HttpSampler:
    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/rollouts"

    def sample(self) -> list[Any]:
        import urllib.request  # imported in the call: the import machinery's own catches

        with urllib.request.urlopen(self.url, timeout=10) as resp:
            answer = json.loads(resp.read())
        return list(answer.get("items", []))


def make_http() -> HttpSampler:
    return HttpSampler()
