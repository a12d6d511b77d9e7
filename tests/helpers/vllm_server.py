"""A local test server (stdlib only) that speaks the HTTP protocol TRL's ``VLLMClient`` uses.

TRL 1.16's ``trl vllm-serve`` only starts ``vllm serve`` (with
``VLLM_SERVER_DEV_MODE=1`` and the NCCL weight-transfer engine); its client,
``trl.generation.vllm_client.VLLMClient``, talks to vLLM's own server. The routes
and payloads here are the ones that client sends and reads:

- ``GET /health`` (200, empty body), ``GET /v1/models`` (``data[0].id``),
  ``GET /server_info?config_format=json`` (``vllm_config``: ``weight_transfer_config``,
  ``model_config.logprobs_mode``), ``GET /get_world_size`` (``world_size``);
  ``GET /metrics`` answers 404 and is not logged (a profiler's read of the server's
  figures, not a client's request);
- ``POST /v1/completions`` (``VLLMClient.generate``): ``prompt`` a list of token-id
  lists (or strings), ``n`` completions per prompt, ``max_tokens``, ``logprobs``;
  the choices come prompt-major, each with ``prompt_token_ids``, ``token_ids`` and
  vLLM's completion ``logprobs`` (``tokens`` as ``"token_id:<id>"``,
  ``token_logprobs``, ``top_logprobs``), plus ``usage`` (prompt tokens once per
  prompt, completion tokens over every choice);
- ``POST /v1/chat/completions`` (``VLLMClient.chat``, one conversation a request):
  ``prompt_token_ids``, choices with ``token_ids`` and chat ``logprobs.content``;
- the weight sync of vLLM's dev mode: ``POST /init_weight_transfer_engine``,
  ``/start_weight_update``, ``/update_weights`` (``update_info``: ``names``,
  ``dtype_names``, ``shapes``), ``/finish_weight_update``, ``/reset_prefix_cache``
  (each answers ``{"success": true}``). The NCCL broadcast that goes with
  ``/update_weights`` on a real server is not part of HTTP and is not here.

A generation request takes ``base_ms + token_ms * max_tokens`` (plus, in arrival
order, the extra delays of :meth:`VLLMServer.schedule`: a known slow request);
``/update_weights`` takes ``sync_ms``. Completion token ids are deterministic,
below ``vocab_size``. Every request is logged once answered (:attr:`VLLMServer.log`,
a list of :class:`Entry`); tests compare the client-side figures with it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from helpers.json_http import JSONHandler

GENERATION = ("/v1/completions", "/v1/chat/completions")
WEIGHT_SYNC = (
    "/init_weight_transfer_engine",
    "/start_weight_update",
    "/update_weights",
    "/finish_weight_update",
    "/reset_prefix_cache",
)
FIRST_TOKEN = 4  # ids below are the tokenizer's special tokens


@dataclass
class Entry:
    method: str
    path: str
    status: int
    prompts: int  # prompts (a completion request) or conversations (chat: 1)
    choices: int
    prompt_tokens: int
    completion_tokens: int
    delay_ms: float
    params: int = 0  # tensors announced by an /update_weights
    t_received: float = 0.0  # time.monotonic() when the request was read, and answered
    t_answered: float = 0.0


class _Handler(JSONHandler):
    server: _Server

    def _log(self, method: str, path: str, status: int, **kw: Any) -> None:
        entry = Entry(
            method=method,
            path=path,
            status=status,
            prompts=kw.get("prompts", 0),
            choices=kw.get("choices", 0),
            prompt_tokens=kw.get("prompt_tokens", 0),
            completion_tokens=kw.get("completion_tokens", 0),
            delay_ms=kw.get("delay_ms", 0.0),
            params=kw.get("params", 0),
            t_received=kw.get("t_received", 0.0),
            t_answered=time.monotonic(),
        )
        with self.server.changed:
            self.server.log.append(entry)
            self.server.changed.notify_all()

    # ------------------------------------------------------------------ GET

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        srv = self.server
        if path == "/health":
            self._send_json(200, None)
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": srv.model, "object": "model"}]})
        elif path == "/server_info":
            config = {
                "model_config": {"model": srv.model, "logprobs_mode": "processed_logprobs"},
                "weight_transfer_config": {"backend": "nccl"},
            }
            self._send_json(200, {"vllm_config": config})
        elif path == "/get_world_size":
            self._send_json(200, {"world_size": 1})
        elif path == "/metrics":  # a profiler's read of the server's figures: not logged
            self._send_json(404, {"detail": "Not Found"})
            return
        else:
            self._send_json(404, {"detail": "Not Found"})
            self._log("GET", path, 404)
            return
        self._log("GET", path, 200)

    # ----------------------------------------------------------------- POST

    def do_POST(self) -> None:
        t0 = time.monotonic()
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        if not isinstance(body, dict):
            self._send_json(400, {"detail": "the body is not a JSON object"})
            self._log("POST", path, 400)
            return
        if path in WEIGHT_SYNC:
            params = 0
            delay = 0.0
            if path == "/update_weights":
                info = body.get("update_info") or {}
                params = len(info.get("names") or [])
                delay = self.server.sync_ms
                if delay > 0:
                    time.sleep(delay / 1000.0)
            self._send_json(200, {"success": True})
            self._log("POST", path, 200, params=params, delay_ms=delay)
            return
        if path not in GENERATION:
            self._send_json(404, {"detail": "Not Found"})
            self._log("POST", path, 404)
            return
        chat = path == "/v1/chat/completions"
        if chat:
            text = " ".join(str(m.get("content", "")) for m in body.get("messages") or [])
            prompts: list[list[int]] = [self._ids(text)]
        else:
            raw_prompts = body.get("prompt") or []
            if isinstance(raw_prompts, str) or (raw_prompts and isinstance(raw_prompts[0], int)):
                raw_prompts = [raw_prompts]
            prompts = [p if isinstance(p, list) else self._ids(str(p)) for p in raw_prompts]
        per = int(body.get("n") or 1)
        max_tokens = int(body.get("max_tokens") or 16)
        delay = self.server.delay_ms(max_tokens)
        if delay > 0:
            time.sleep(delay / 1000.0)
        want_logprobs = body.get("logprobs") not in (None, False)
        choices = []
        for i, p in enumerate(prompts):
            for k in range(per):
                ids = [
                    FIRST_TOKEN + (len(p) + 7 * i + 3 * k + j) % (self.server.vocab - FIRST_TOKEN)
                    for j in range(max_tokens)
                ]
                choices.append(self._choice(len(choices), p, ids, chat, want_logprobs))
        completion = sum(len(c["token_ids"]) for c in choices)
        prompt_tokens = sum(len(p) for p in prompts)
        answer: dict[str, Any] = {
            "id": f"cmpl-{self.server.next_id()}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.server.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
            },
        }
        if chat:
            answer["prompt_token_ids"] = prompts[0]
        self._send_json(200, answer)
        self._log(
            "POST",
            path,
            200,
            prompts=len(prompts),
            choices=len(choices),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion,
            delay_ms=delay,
            t_received=t0,
        )

    def _ids(self, text: str) -> list[int]:
        span = self.server.vocab - FIRST_TOKEN
        return [FIRST_TOKEN + sum(map(ord, w)) % span for w in text.split()] or [FIRST_TOKEN]

    @staticmethod
    def _choice(
        index: int, prompt: list[int], ids: list[int], chat: bool, want_logprobs: bool
    ) -> dict[str, Any]:
        tokens = [f"token_id:{t}" for t in ids]
        lp = [-1.0 - (t % 3) / 10 for t in ids]
        logprobs: dict[str, Any] | None = None
        if want_logprobs and chat:
            logprobs = {
                "content": [
                    {
                        "token": tok,
                        "logprob": v,
                        "bytes": None,
                        "top_logprobs": [{"token": tok, "logprob": v}],
                    }
                    for tok, v in zip(tokens, lp, strict=True)
                ]
            }
        elif want_logprobs:
            logprobs = {
                "text_offset": list(range(len(ids))),
                "token_logprobs": lp,
                "tokens": tokens,
                "top_logprobs": [{tok: v} for tok, v in zip(tokens, lp, strict=True)],
            }
        choice: dict[str, Any] = {
            "index": index,
            "logprobs": logprobs,
            "finish_reason": "length",
            "stop_reason": None,
            "token_ids": ids,
        }
        if chat:
            choice["message"] = {"role": "assistant", "content": " ".join(tokens)}
        else:
            choice["text"] = " ".join(tokens)
            choice["prompt_token_ids"] = prompt
        return choice


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(
        self, model: str, vocab: int, base_ms: float, token_ms: float, sync_ms: float
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.model = model
        self.vocab = vocab
        self.base_ms = base_ms
        self.token_ms = token_ms
        self.sync_ms = sync_ms
        self.changed = threading.Condition(threading.Lock())
        self.log: list[Entry] = []
        self.extra: list[float] = []
        self._ids = 0

    def delay_ms(self, max_tokens: int) -> float:
        with self.changed:
            extra = self.extra.pop(0) if self.extra else 0.0
        return self.base_ms + self.token_ms * max_tokens + extra

    def next_id(self) -> int:
        with self.changed:
            self._ids += 1
            return self._ids


class VLLMServer:
    """The server, started in a daemon thread; ``close()`` (or ``with``) stops it."""

    def __init__(
        self,
        *,
        model: str = "tiny",
        vocab_size: int = 16,
        base_ms: float = 0.0,
        token_ms: float = 0.0,
        sync_ms: float = 0.0,
    ) -> None:
        if vocab_size <= FIRST_TOKEN:
            raise ValueError(f"vocab_size must be above {FIRST_TOKEN}, got {vocab_size}")
        self._srv = _Server(model, vocab_size, base_ms, token_ms, sync_ms)
        self.port: int = self._srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()

    @property
    def log(self) -> list[Entry]:
        with self._srv.changed:
            return list(self._srv.log)

    def schedule(self, extra_ms: list[float]) -> None:
        """Extra delays for the next generation requests, in arrival order."""
        with self._srv.changed:
            self._srv.extra = list(extra_ms)

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> VLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
