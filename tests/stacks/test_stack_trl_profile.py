"""``gyreprof.integrations.trl.profile(trainer)`` on a real TRL ``GRPOTrainer`` run, from code
(no ``gyreprof run``), against the script's own clocks and the judge server's log.

``trl_profile.py`` trains the tiny local model of ``trl_grpo.py`` (nothing is
downloaded) with two rewards: a local one and an LLM judge, one ``openai`` SDK
request per completion to a local OpenAI-compatible server started here
(``helpers.llm_server``), sent by the training thread while it scores each
generation batch. Mode ``gen``: generation dominates a step; mode ``update``: the
update does (each generation reused for 4 optimizer steps). Checked: ``generate``
counted once per call with the script's time, every optimizer step counted, one
trainer step per generation round, the wait ratio within 0.1 of the script's share
of generation (``generate`` and the judge's requests) in a step, the verdict both
ways, and the judge's requests and tokens against the server's log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stackhelp import HERE, OFFLINE, need, stack_json

from helpers.llm_server import LLMServer

pytestmark = pytest.mark.slow

STEPS = 12


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    need("torch", "transformers", "trl", "datasets", "tokenizers", "openai")


class ProfiledRun:
    """One run of ``trl_profile.py`` with a judge server: the script's figures (its
    session's report under ``report``) and the server's log."""

    def __init__(self, tmp: Path, mode: str) -> None:
        with LLMServer() as server:
            proc = subprocess.run(
                [sys.executable, str(HERE / "trl_profile.py"), mode, str(STEPS), server.url],
                capture_output=True,
                text=True,
                env={**os.environ, **OFFLINE},
                timeout=280,
                check=False,
            )
            self.log = server.log
        (tmp / "script.stdout").write_text(proc.stdout)
        (tmp / "script.stderr").write_text(proc.stderr)
        assert proc.returncode == 0, proc.stderr[-4000:]
        self.own: dict[str, Any] = stack_json(proc.stdout)
        self.report: dict[str, Any] = self.own["report"]


@pytest.fixture(scope="module")
def gen_slow(tmp_path_factory: pytest.TempPathFactory) -> ProfiledRun:
    return ProfiledRun(tmp_path_factory.mktemp("trl_profile_gen"), "gen")


@pytest.fixture(scope="module")
def update_slow(tmp_path_factory: pytest.TempPathFactory) -> ProfiledRun:
    return ProfiledRun(tmp_path_factory.mktemp("trl_profile_update"), "update")


@pytest.mark.parametrize("which", ["gen_slow", "update_slow"])
def test_generate_and_updates_are_counted(which: str, request: pytest.FixtureRequest) -> None:
    run: ProfiledRun = request.getfixturevalue(which)
    own, rep = run.own, run.report
    calls = STEPS if which == "gen_slow" else STEPS // 4
    assert own["optimizer_steps"] == STEPS
    assert own["generate_calls"] == calls
    assert own["trl_timers"]["GRPOTrainer.transformers.generate"]["count"] == calls
    gen = rep["sampler"]["phases"]["generate"]
    assert gen["count"] == calls
    timed = gen["sum_ns"] / 1e9
    # the script's clock wraps the same calls from just outside
    assert 0.8 * own["generate_s"] - 0.02 <= timed <= own["generate_s"] * 1.02, (timed, own)
    trainer = rep["trainer"]
    assert trainer["counters"]["optim_steps"] == STEPS
    # one trainer step per generation round; its updates are counted apart
    assert trainer["phases"]["compute"]["count"] == calls
    assert [p["role"] for p in rep["processes"]] == ["main"]


def test_wait_ratio_matches_the_script_clock(
    gen_slow: ProfiledRun, update_slow: ProfiledRun
) -> None:
    for run in (gen_slow, update_slow):
        assert run.report["wait"] is not None
        assert abs(run.report["wait"]["ratio"] - run.own["wait_ratio"]) <= 0.1, run.own
    # the two runs point opposite ways by the script's own clock
    assert gen_slow.own["wait_ratio"] > 0.6
    assert update_slow.own["wait_ratio"] < 0.3


def test_verdict_both_ways(gen_slow: ProfiledRun, update_slow: ProfiledRun) -> None:
    assert gen_slow.report["verdict"]["bound"] == "sampler"
    assert update_slow.report["verdict"]["bound"] == "trainer"
    assert "sampler-bound" in gen_slow.own["text"]


@pytest.mark.parametrize("which", ["gen_slow", "update_slow"])
def test_judge_requests_against_the_server_log(which: str, request: pytest.FixtureRequest) -> None:
    run: ProfiledRun = request.getfixturevalue(which)
    served = [e for e in run.log if e.path == "/v1/chat/completions"]
    assert len(served) == run.own["judge_requests"] > 0
    roll = run.report["rollouts"]
    assert roll is not None
    (ep,) = [e for e in roll["endpoints"] if e["endpoint"].endswith("/v1/chat/completions")]
    assert ep["requests"] == ep["attempts"] == len(served)
    assert ep["outcomes"]["ok"] == len(served)
    assert ep["prompt_tokens"] == sum(e.prompt_tokens for e in served) == run.own["judge_tokens"][0]
    assert ep["completion_tokens"] == sum(e.completion_tokens for e in served)
    assert ep["completion_tokens"] == run.own["judge_tokens"][1]
    assert ep["clients"] == ["openai"]
    assert ep["role"] == "generation"  # a known OpenAI route
    # one request at a time, from the training thread: no batch
    assert ep["batches"] == 0 and ep["in_flight_max"] == 1
    assert "rollout requests" in run.own["text"]
    assert any(
        n.startswith("rollouts: the trainer waits on generation") for n in run.report["notes"]
    )


# ------------------------------------------------------------------ the argument


def test_profile_wants_a_trl_trainer(tmp_path: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
    from trl import GRPOTrainer

    from gyreprof.integrations import trl as gtrl

    with pytest.raises(TypeError, match=r"TRL trainer \(trl.GRPOTrainer.*got str"):
        gtrl.profile("GRPOTrainer")
    with pytest.raises(TypeError, match=r"instance, got the class GRPOTrainer"):
        gtrl.profile(GRPOTrainer)
    with pytest.raises(TypeError, match=r"TRL trainer .* got Module"):
        gtrl.profile(torch.nn.Module())
    config = LlamaConfig(
        vocab_size=16,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    plain = Trainer(
        model=LlamaForCausalLM(config),
        args=TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none"),
    )
    with pytest.raises(TypeError, match=r"got Trainer; a plain transformers Trainer"):
        gtrl.profile(plain)
