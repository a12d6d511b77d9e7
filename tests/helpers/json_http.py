"""The base of the local test servers' request handlers: quiet, HTTP/1.1, no Nagle delay,
JSON answers, and a client that left noted rather than raised."""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    gone = False  # the client went away before its answer was written (its timeout)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # no Nagle: a header write and a small body write would wait ~40 ms for an ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError:
            self.gone = True
            self.close_connection = True

    def _send_json(self, status: int, obj: Any | None) -> int:
        """Answer ``status`` with ``obj`` as JSON (None: an empty body); the body's length."""
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        if obj is not None:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self._write(data)
        return len(data)
