"""A local OpenAI-compatible test server (stdlib only) that keeps its own log.

``LLMServer()`` binds ``127.0.0.1`` on a free port and serves, one thread per
connection (``http.server.ThreadingHTTPServer``):

- ``POST /v1/chat/completions`` and ``POST /v1/completions``: a JSON answer with
  ``choices`` and ``usage`` (``prompt_tokens`` = words of the prompt,
  ``completion_tokens`` = ``max_tokens`` or 8), or with ``"stream": true`` a
  ``text/event-stream`` of one chunk per completion token, a last chunk with
  ``usage``, then ``data: [DONE]``.
- ``GET /v1/models``: a model list (``data`` is a JSON list field);
- ``GET /metrics``: 404 (this server has no metrics page), counted in ``scrapes`` and not
  logged: it is a profiler's read, not a client's request.

A request whose client left before the answer was written (its timeout) is
logged as ``gone``.

What a request gets is chosen per request, by a header or by the JSON body
(the body wins; ``x-test-...`` headers otherwise):

- ``x-test-delay-ms`` / ``"test_delay_ms"``: latency before the answer (streams:
  before the first chunk);
- ``x-test-chunk-delay-ms`` / ``"test_chunk_delay_ms"``: between stream chunks;
- ``x-test-status`` / ``"test_status"``: answer with this HTTP status (a JSON error);
- ``x-test-fail-first`` / ``"test_fail_first"``: with ``x-test-key`` / ``"test_key"``,
  the first N requests of that key get a 500, then they are answered normally
  (an SDK's retries can then succeed);
- ``x-test-empty`` / ``"test_empty"``: a 200 with ``"choices": []``;
- ``x-test-reset`` / ``"test_reset"``: close the socket with an RST, no answer;
- ``x-test-body`` / ``"test_body"``: ``"text"`` (a non-JSON 200) or ``"big:N"``
  (a 200 JSON body of N bytes with ``usage`` at its end);
- ``x-test-cuts`` / ``"test_cuts"``: byte offsets (a list, or comma-separated) at which
  the answer's body (JSON or event stream) is cut into separate writes, each flushed,
  ``"test_cut_pause_ms"`` (default 1) apart: a client reads the pieces as they come;
- ``x-test-events`` / ``"test_events"``: content events of a stream, words of an
  answer (default: one per completion token), so that a large ``max_tokens`` is
  answered in a few;
- ``x-test-error-usage`` / ``"test_error_usage"``: an injected error status's JSON
  carries ``usage`` too.

``server.schedule(delays_ms)`` queues delays handed out to the next requests in
arrival order (a long tail: ``[10] * 31 + [500]``).

Every request is logged once it is answered (``server.log``, a list of
:class:`Entry`): path, outcome (``ok``, ``5xx``, ``4xx``, ``empty``, ``reset``,
``text``, ``big``), stream or not, the tokens it reported, its key. Tests
compare the client-side figures with it. ``closed_port()`` gives a port on
which nothing listens (a connection there is refused).
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from helpers.json_http import JSONHandler


@dataclass
class Entry:
    path: str
    outcome: str
    status: int
    stream: bool
    prompt_tokens: int
    completion_tokens: int
    key: str | None
    delay_ms: float
    t_received: float = field(default=0.0)


def _words(body: dict[str, Any]) -> int:
    if "messages" in body and isinstance(body["messages"], list):
        text = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
    else:
        text = str(body.get("prompt", ""))
    return max(1, len(text.split()))


class _Handler(JSONHandler):
    server: _Server

    # --------------------------------------------------------------- helpers

    def _knob(self, body: dict[str, Any], name: str) -> Any:
        v = body.get("test_" + name.replace("-", "_"))
        if v is None:
            v = self.headers.get("x-test-" + name)
        return v

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends an RST instead of a FIN
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _log(self, **kw: Any) -> None:
        if self.gone:  # logged as "gone"
            kw["outcome"] = "gone"
        with self.server.lock:
            self.server.log.append(Entry(**kw))
            self.server.changed.notify_all()

    # -------------------------------------------------------------- requests

    def do_GET(self) -> None:
        with self.server.serving():
            self._get()

    def do_POST(self) -> None:
        with self.server.serving():
            self._post()

    def _get(self) -> None:
        t0 = time.monotonic()
        if self.path.split("?", 1)[0] == "/metrics":  # a profiler's read: no log entry
            self._send_json(404, {"error": {"message": "no metrics"}})
            with self.server.lock:
                self.server.scrapes += 1
            return
        if self.path.startswith("/v1/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
            outcome, status = "ok", 200
        else:
            self._send_json(404, {"error": {"message": "not found"}})
            outcome, status = "4xx", 404
        self._log(
            path=self.path,
            outcome=outcome,
            status=status,
            stream=False,
            prompt_tokens=0,
            completion_tokens=0,
            key=None,
            delay_ms=0.0,
            t_received=t0,
        )

    def _post(self) -> None:
        t0 = time.monotonic()
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                body = {}
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        key = self._knob(body, "key")
        key = None if key is None else str(key)
        delay_ms = self._knob(body, "delay-ms")
        scheduled = self.server.next_scheduled()
        delay = float(delay_ms) if delay_ms is not None else (scheduled or 0.0)
        stream = bool(body.get("stream"))
        base: dict[str, Any] = dict(
            path=path, stream=stream, key=key, delay_ms=delay, t_received=t0
        )
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._send_json(404, {"error": {"message": f"no route {path}"}})
            self._log(outcome="4xx", status=404, prompt_tokens=0, completion_tokens=0, **base)
            return
        if delay > 0:
            time.sleep(delay / 1000.0)
        if self._knob(body, "reset"):
            self._log(outcome="reset", status=0, prompt_tokens=0, completion_tokens=0, **base)
            self._reset()
            return
        status = self._knob(body, "status")
        fail_first = self._knob(body, "fail-first")
        if fail_first is not None and key is not None:
            with self.server.lock:
                seen = self.server.keys.get(key, 0)
                self.server.keys[key] = seen + 1
            if seen < int(fail_first):
                status = 500
        if status is not None and int(status) != 200:
            code = int(status)
            err: dict[str, Any] = {"error": {"message": "injected", "code": code}}
            if self._knob(body, "error-usage"):
                err["usage"] = {
                    "prompt_tokens": _words(body),
                    "completion_tokens": int(body.get("max_tokens") or 8),
                }
            self._send_json(code, err)
            outcome = "5xx" if code >= 500 else "4xx"
            self._log(outcome=outcome, status=code, prompt_tokens=0, completion_tokens=0, **base)
            return
        prompt = _words(body)
        completion = int(body.get("max_tokens") or 8)
        chat = path.endswith("chat/completions")
        if self._knob(body, "empty"):
            self._send_json(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": 0,
                        "total_tokens": prompt,
                    },
                },
            )
            self._log(
                outcome="empty", status=200, prompt_tokens=prompt, completion_tokens=0, **base
            )
            return
        special = self._knob(body, "body")
        if special == "text":
            data = b"<html>this is not json</html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self._write(data)
            self._log(outcome="text", status=200, prompt_tokens=0, completion_tokens=0, **base)
            return
        if isinstance(special, str) and special.startswith("big:"):
            size = int(special[4:])
            tail = json.dumps(
                {"usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
            )[1:]
            head = '{"pad": "'
            pad = "x" * max(0, size - len(head) - len(tail) - 3)
            data = (head + pad + '", ' + tail).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self._write(data)
            self._log(
                outcome="big",
                status=200,
                prompt_tokens=prompt,
                completion_tokens=completion,
                **base,
            )
            return
        if stream:
            self._stream(body, chat, prompt, completion, base)
            return
        words = self._knob(body, "events")  # a large max_tokens answered in a few words
        words = completion if words is None else int(words)
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": " ".join(["tok"] * words)},
            }
        else:
            choice = {"index": 0, "finish_reason": "length", "text": " tok" * words}
        self._send_cut(
            body,
            {
                "id": "cmpl-1",
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": str(body.get("model", "tiny")),
                "choices": [choice],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
        )
        self._log(
            outcome="ok", status=200, prompt_tokens=prompt, completion_tokens=completion, **base
        )

    def _cuts(self, body: dict[str, Any]) -> tuple[list[int], float]:
        raw = self._knob(body, "cuts")
        if isinstance(raw, str):
            raw = [int(v) for v in raw.split(",") if v.strip()]
        pause = float(self._knob(body, "cut-pause-ms") or 1.0) / 1000.0
        return sorted({int(v) for v in raw or ()}), pause

    def _pieces(self, data: bytes, cuts: list[int]) -> list[bytes]:
        edges = [0, *(c for c in cuts if 0 < c < len(data)), len(data)]
        return [data[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]

    def _send_cut(self, body: dict[str, Any], obj: Any) -> None:
        """A 200 JSON answer, its body cut where ``test_cuts`` says."""
        cuts, pause = self._cuts(body)
        if not cuts:
            self._send_json(200, obj)
            return
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        for i, piece in enumerate(self._pieces(data, cuts)):
            if i:
                time.sleep(pause)
            self._write(piece)
            self.wfile.flush()

    def _stream(
        self, body: dict[str, Any], chat: bool, prompt: int, completion: int, base: dict[str, Any]
    ) -> None:
        chunk_delay = float(self._knob(body, "chunk-delay-ms") or 0.0)
        cuts, pause = self._cuts(body)
        events = self._knob(body, "events")
        events = completion if events is None else int(events)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        held: list[bytes] = []  # with cuts: the whole stream, sent once made

        def send(obj: Any) -> None:
            text = obj if isinstance(obj, str) else json.dumps(obj)
            data = f"data: {text}\n\n".encode()
            if cuts:
                held.append(data)
                return
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        kind = "chat.completion.chunk" if chat else "text_completion"
        model = str(body.get("model", "tiny"))
        try:
            for i in range(events):
                if i and chunk_delay > 0:
                    time.sleep(chunk_delay / 1000.0)
                if chat:
                    ch: dict[str, Any] = {
                        "index": 0,
                        "delta": {"content": "tok "},
                        "finish_reason": None,
                    }
                else:
                    ch = {"index": 0, "text": " tok", "finish_reason": None}
                send({"id": "c", "object": kind, "created": 0, "model": model, "choices": [ch]})
            send(
                {
                    "id": "c",
                    "object": kind,
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                }
            )
            send("[DONE]")
            for i, piece in enumerate(self._pieces(b"".join(held), cuts)):
                if i:
                    time.sleep(pause)
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went away mid-stream
            self._log(
                outcome="reset", status=200, prompt_tokens=prompt, completion_tokens=0, **base
            )
            return
        self._log(
            outcome="ok", status=200, prompt_tokens=prompt, completion_tokens=completion, **base
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # a batch of many concurrent connections

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.log: list[Entry] = []
        self.keys: dict[str, int] = {}
        self.delays: list[float] = []
        self.busy = 0  # requests read and not yet answered and logged
        self.scrapes = 0  # GET /metrics (answered 404, not logged: not a client's request)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        with self.lock:
            self.busy += 1
        try:
            yield
        finally:
            with self.changed:
                self.busy -= 1
                self.changed.notify_all()

    def next_scheduled(self) -> float | None:
        with self.lock:
            return self.delays.pop(0) if self.delays else None


class LLMServer:
    """The server, started in a daemon thread; ``close()`` (or ``with``) stops it."""

    def __init__(self) -> None:
        self._srv = _Server()
        self.port: int = self._srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()

    @property
    def log(self) -> list[Entry]:
        with self._srv.lock:
            return list(self._srv.log)

    @property
    def scrapes(self) -> int:
        with self._srv.lock:
            return self._srv.scrapes

    def _wait_idle(self, deadline: float) -> None:
        # with self._srv.changed held: until no request is being served
        while self._srv.busy:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self._srv.busy} request(s) still served")
            self._srv.changed.wait(left)

    def settled_log(self, timeout_s: float = 60.0) -> list[Entry]:
        """The log once every request read so far is answered and logged: an answer the
        client has received is logged a moment after it was sent."""
        with self._srv.changed:
            self._wait_idle(time.monotonic() + timeout_s)
            return list(self._srv.log)

    def clear(self, timeout_s: float = 60.0) -> None:
        """Forget the log, keys and schedule, once the requests being served are logged
        (a client that left a slow answer behind would otherwise log into the next test)."""
        with self._srv.changed:
            self._wait_idle(time.monotonic() + timeout_s)
            self._srv.log.clear()
            self._srv.keys.clear()
            self._srv.delays.clear()

    def schedule(self, delays_ms: list[float]) -> None:
        """Delays for the next requests in arrival order (then ``x-test-delay-ms`` or 0)."""
        with self._srv.lock:
            self._srv.delays = list(delays_ms)

    def wait_logged(self, n: int, timeout_s: float = 30.0) -> list[Entry]:
        """The log once it holds at least ``n`` entries (AssertionError after the timeout)."""
        deadline = time.monotonic() + timeout_s
        with self._srv.changed:
            while len(self._srv.log) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"server logged {len(self._srv.log)} of {n} requests")
                self._srv.changed.wait(left)
            return list(self._srv.log)

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> LLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def main() -> None:  # ``python -m helpers.llm_server``: serve until killed (benchmarks, scripts)
    srv = LLMServer()
    print(srv.url, flush=True)
    try:
        threading.Event().wait()
    finally:
        srv.close()


if __name__ == "__main__":
    main()
