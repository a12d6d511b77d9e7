"""TRL's server mode: the real ``VLLMClient`` (TRL 1.16) under ``gyreprof run`` against a local
server that speaks its HTTP protocol (``helpers.vllm_server``), in a GRPO-shaped loop
(``trl_server.py``: weight sync, generation, reward, update), against the server's
log and the script's clocks.

vLLM itself cannot run here (CUDA only), so ``GRPOTrainer(use_vllm=True,
vllm_mode="server")`` refuses to start and ``VLLMClient`` refuses to be built: the
first test pins both checks. The script lifts the client's check; everything it
then does goes over real HTTP.

- ``chat_gen``: ``VLLMClient.chat`` (one request per conversation, a thread pool of
  8: one batch per step), 5 ms per token, the last request of every batch 120 ms
  slower; a narrow model: generation dominates.
- ``completions_update``: ``VLLMClient.generate`` (one request per step, n=4), a
  fast server and a wide model: the update dominates.

Checked: each endpoint's requests and tokens against the server's log, each
known route's role (generation, weight sync, control), the batches and their tail
share against the tail the server's own clock saw, the wait ratio within 0.1 of
the script's, the verdict both ways, the verdict's words naming the generation
route (not a weight sync or a health check) and the weight sync.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from stackhelp import StackRun, need

from helpers.vllm_server import GENERATION, WEIGHT_SYNC, Entry, VLLMServer

pytestmark = pytest.mark.slow

STEPS = 8
PER_BATCH = 8  # conversations per step in the chat run (2 prompts x 4 generations)
SLOW_MS = 120.0


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    need("torch", "transformers", "trl", "tokenizers", "requests")


class ServerRun:
    def __init__(self, tmp: Path, mode: str, api: str, server: VLLMServer) -> None:
        with server:
            self.url = server.url
            self.run = StackRun(tmp, "trl_server.py", server.url, mode, api, str(STEPS))
            self.log = server.log
        self.data: dict[str, Any] = self.run.data
        self.own: dict[str, Any] = self.run.own
        self.rollouts: dict[str, Any] = self.data["rollouts"]

    def endpoint(self, path: str) -> dict[str, Any]:
        (ep,) = [e for e in self.rollouts["endpoints"] if e["endpoint"] == self.url + path]
        return ep

    def served(self, path: str) -> list[Entry]:
        return [e for e in self.log if e.path == path]


@pytest.fixture(scope="module")
def chat_gen(tmp_path_factory: pytest.TempPathFactory) -> ServerRun:
    server = VLLMServer(vocab_size=22, token_ms=5.0)
    server.schedule(([0.0] * (PER_BATCH - 1) + [SLOW_MS]) * STEPS)
    return ServerRun(tmp_path_factory.mktemp("trl_server_chat"), "gen", "chat", server)


@pytest.fixture(scope="module")
def completions_update(tmp_path_factory: pytest.TempPathFactory) -> ServerRun:
    server = VLLMServer(vocab_size=22, token_ms=0.5)
    return ServerRun(
        tmp_path_factory.mktemp("trl_server_completions"), "update", "completions", server
    )


def test_server_mode_needs_vllm() -> None:
    """What refuses to run without vLLM (TRL 1.16), in TRL's own words."""
    from trl.import_utils import is_vllm_available

    if is_vllm_available():
        pytest.skip("vLLM is installed here")
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    with pytest.raises(ImportError, match=r"vLLM is not installed"):
        VLLMClient(base_url="http://127.0.0.1:9")
    generation = VLLMGeneration.__new__(VLLMGeneration)  # the check GRPOTrainer reaches
    generation.model = generation.accelerator = None
    with pytest.raises(ImportError, match=r"vLLM is not available and `use_vllm` is set"):
        generation._init_vllm()


@pytest.mark.parametrize("which", ["chat_gen", "completions_update"])
def test_requests_and_tokens_match_the_server_log(
    which: str, request: pytest.FixtureRequest
) -> None:
    run: ServerRun = request.getfixturevalue(which)
    path = "/v1/chat/completions" if which == "chat_gen" else "/v1/completions"
    served = run.served(path)
    assert len(served) == run.own["generation_requests"]
    assert len(served) == (STEPS * PER_BATCH if which == "chat_gen" else STEPS)
    ep = run.endpoint(path)
    assert ep["role"] == "generation"
    assert ep["requests"] == ep["attempts"] == ep["outcomes"]["ok"] == len(served)
    assert ep["clients"] == ["requests"]
    assert ep["prompt_tokens"] == sum(e.prompt_tokens for e in served)
    assert ep["completion_tokens"] == sum(e.completion_tokens for e in served)
    assert ep["completion_tokens"] == run.own["tokens"]["completion"]
    assert ep["with_usage"] == len(served)


@pytest.mark.parametrize("which", ["chat_gen", "completions_update"])
def test_weight_sync_is_its_own_role(which: str, request: pytest.FixtureRequest) -> None:
    run: ServerRun = request.getfixturevalue(which)
    roles = {e["endpoint"][len(run.url) :]: e["role"] for e in run.rollouts["endpoints"]}
    for path in WEIGHT_SYNC[1:]:  # all but the NCCL group's set-up, which is not run
        assert roles[path] == "weight sync"
        ep = run.endpoint(path)
        assert ep["requests"] == len(run.served(path)) == STEPS - 1
    for path in ("/health", "/v1/models", "/server_info", "/get_world_size"):
        assert roles[path] == "control"
    (update,) = {e.params for e in run.served("/update_weights")}
    assert update > 0
    assert sum(e["requests"] for e in run.rollouts["endpoints"]) == len(run.log)
    assert not [e for e in run.log if e.path not in GENERATION and e.status != 200]
    (line,) = [n for n in run.data["notes"] if n.startswith("rollouts: ")]
    gen_path = "/v1/chat/completions" if which == "chat_gen" else "/v1/completions"
    assert f"from {run.url}{gen_path} " in line  # the generation route, not a sync call
    assert f"weight sync: {4 * (STEPS - 1)} requests to 4 endpoint(s)" in line


def _server_tail_shares(batch: list[Entry]) -> float:
    """A batch's tail share by the server's own clock: from its last request's answer back
    to the one before, over the batch's wall time."""
    start = min(e.t_received for e in batch)
    ends = sorted(e.t_answered for e in batch)
    return (ends[-1] - ends[-2]) / (ends[-1] - start)


def test_chat_batches_and_their_tail(chat_gen: ServerRun) -> None:
    roll = chat_gen.rollouts
    ep = chat_gen.endpoint("/v1/chat/completions")
    # one thread-pool batch per step; on a loaded machine a step's pool may leave a gap
    # with nothing in flight (its last threads started late), which splits its busy period
    assert ep["batches"] == roll["batch_count"]
    assert STEPS <= roll["batch_count"] <= STEPS + 2
    listed = roll["batches"]
    assert len(listed) == roll["batch_count"]
    assert sum(b["requests"] for b in listed) >= STEPS * PER_BATCH - 2
    whole = [b for b in listed if b["requests"] == PER_BATCH]
    assert len(whole) >= STEPS - 2
    assert ep["in_flight_max"] == PER_BATCH
    served = chat_gen.served("/v1/chat/completions")
    batches = [served[i : i + PER_BATCH] for i in range(0, len(served), PER_BATCH)]
    own = statistics.median(_server_tail_shares(b) for b in batches)
    # the client sees each request a little longer than the server does
    assert abs(roll["tail_share_p50"] - own) <= 0.15, (roll["tail_share_p50"], own)
    # the mean request is fast; a batch's time is its one slow request's: the naive
    # "mean latency" view of the endpoint misses it
    for b in whole:
        assert b["tail_requests"] == 1
        assert b["slowest_ms"] >= SLOW_MS
        assert b["median_ms"] < b["slowest_ms"] - SLOW_MS / 2
    assert "for its last 1 of 8 requests" in roll["typical_tail"]


def test_wait_ratio_and_verdict_both_ways(
    chat_gen: ServerRun, completions_update: ServerRun
) -> None:
    for run in (chat_gen, completions_update):
        assert run.data["wait"] is not None
        assert abs(run.data["wait"]["ratio"] - run.own["wait_ratio"]) <= 0.1, run.own
        assert run.data["trainer"]["counters"]["optim_steps"] == STEPS
    assert chat_gen.own["wait_ratio"] > 0.6
    assert completions_update.own["wait_ratio"] < 0.3
    assert chat_gen.data["verdict"]["bound"] == "sampler"
    assert completions_update.data["verdict"]["bound"] == "trainer"
