"""The ``openai`` SDK under ``gyreprof run`` against a real ``transformers serve`` on CPU.

The server is transformers' own (``transformers serve``: FastAPI on uvicorn, the
``transformers[serving]`` extra), serving a tiny randomly initialised Llama saved
to a temp folder with a locally built tokenizer (``tiny_served_model.py``; nothing
is downloaded). The client (``openai_serve_client.py``) makes chat completions,
streamed chat completions, text completions and a thread-pool batch. Checked: each
endpoint's requests against the client's count and the server's own access log,
its tokens against the ``usage`` of the server's answers, the streams, the batch.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from stackhelp import HERE, OFFLINE, StackRun, need

pytestmark = [pytest.mark.slow, pytest.mark.stacks]

N = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    """Until ``GET url`` answers 200 (the model is loaded and the server listens)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"transformers serve exited: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - 127.0.0.1
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)  # a poll of the condition, not a wait for a duration
    raise AssertionError(
        f"transformers serve not ready after {timeout_s} s: {log.read_text()[-3000:]}"
    )


class ServeRun:
    def __init__(self, tmp: Path) -> None:
        model = tmp / "model"
        env = {**os.environ, **OFFLINE}
        subprocess.run(
            [sys.executable, str(HERE / "tiny_served_model.py"), str(model)],
            check=True,
            env=env,
            timeout=200,
            capture_output=True,
        )
        exe = shutil.which("transformers", path=os.path.dirname(sys.executable))
        assert exe is not None
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server_log = tmp / "serve.log"
        argv = [exe, "serve", str(model), "--device", "cpu", "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--log-level", "info"]
        with open(self.server_log, "wb") as out:
            server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_ready(self.url + "/v1/models", server, self.server_log, 240)
            self.run = StackRun(tmp, "openai_serve_client.py", self.url, str(model), str(N))
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        self.data: dict[str, Any] = self.run.data
        self.own: dict[str, Any] = self.run.own

    def access_log(self) -> Counter[tuple[str, str, int]]:
        """uvicorn's access lines: (method, path, status) -> requests."""
        out: Counter[tuple[str, str, int]] = Counter()
        for line in self.server_log.read_text(errors="replace").splitlines():
            if '" ' not in line or "HTTP/1.1" not in line:
                continue
            request, _, status = line.partition('" ')
            method, path, _ = request.rsplit('"', 1)[-1].split(" ", 2)
            out[(method, path, int(status.split()[0]))] += 1
        return out

    def endpoint(self, path: str) -> dict[str, Any]:
        (ep,) = [e for e in self.data["rollouts"]["endpoints"] if e["endpoint"] == self.url + path]
        return ep


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> ServeRun:
    need("torch", "transformers", "tokenizers", "openai", "fastapi", "uvicorn")
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        pytest.skip("transformers[serving] is not installed")
    return ServeRun(tmp_path_factory.mktemp("transformers_serve"))


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_requests_and_tokens_match_the_server(served: ServeRun, path: str) -> None:
    own = served.own["counts"][path]
    ep = served.endpoint(path)
    logged = served.access_log()
    assert logged[("POST", path, 200)] == own["requests"] == ep["requests"]
    assert sum(n for (m, p, s), n in logged.items() if p == path and s != 200) == 0
    assert ep["attempts"] == ep["outcomes"]["ok"] == ep["requests"]
    assert ep["clients"] == ["openai"]
    assert ep["with_usage"] == own["requests"]
    assert ep["prompt_tokens"] == own["prompt"]
    assert ep["completion_tokens"] == own["completion"]
    assert ep["role"] == "generation"


def test_streams_and_the_batch(served: ServeRun) -> None:
    ep = served.endpoint("/v1/chat/completions")
    assert ep["requests"] == 3 * N
    assert ep["streams"] == N
    assert ep["ttft"]["count"] == N
    # the thread pool's N chat completions were in flight together at some point
    assert ep["in_flight_max"] >= 2
    assert ep["batches"] >= 1
    assert served.data["exit_code"] == 0
