"""TRL GRPOTrainer profiled from code (``gyreprof.integrations.trl.profile``), with its own clocks.

    python trl_profile.py MODE MAX_STEPS [JUDGE_URL]

The tiny local model and tokenizer of ``tiny_llm.py`` (nothing is downloaded), and
``trl_grpo.py``'s two modes: ``gen`` (long completions on a narrow model: generation dominates a
step) and ``update`` (short completions on a wider model, each generation reused
for 4 optimizer steps: the update dominates). With ``JUDGE_URL`` (an
OpenAI-compatible server) the reward is an LLM judge: one ``openai`` SDK request
per completion, sent from the training thread while it scores a generation batch,
so the trainer waits on HTTP requests as well as on ``generate``.

Prints ``STACK_JSON {...}``: the script's clocks (``perf_counter`` around every
``model.generate`` call and every judge request, the optimizer steps' ends), TRL's
own profiling timers, and the session's report (``gyreprof.run/1``) and its text.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import tiny_llm  # sets the offline environment first

# isort: split

import torch  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from gyreprof.integrations import trl as gtrl  # noqa: E402


def main() -> int:
    mode = sys.argv[1]
    max_steps = int(sys.argv[2])
    judge_url = sys.argv[3] if len(sys.argv) > 3 else None
    if mode not in ("gen", "update"):
        raise SystemExit(f"MODE must be gen or update, got {mode!r}")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = tiny_llm.tokenizer()
    gen = mode == "gen"
    model = tiny_llm.llama(tok, tiny_llm.NARROW if gen else tiny_llm.WIDE)
    gen_spans = tiny_llm.clock_generate(model)

    judge_spans: list[tuple[float, float]] = []
    judge_tokens = [0, 0]  # prompt, completion: as the server's answers said
    rewards: list[Any] = [tiny_llm.reward_len]
    if judge_url is not None:
        import openai

        client = openai.OpenAI(base_url=judge_url + "/v1", api_key="test", max_retries=0)

        def judge(completions: list[str], **kwargs: Any) -> list[float]:
            out = []
            for c in completions:
                t0 = time.perf_counter()
                answer = client.chat.completions.create(
                    model="judge",
                    messages=[{"role": "user", "content": f"rate: {c}"}],
                    max_tokens=2,
                )
                judge_spans.append((t0, time.perf_counter()))
                if answer.usage is not None:
                    judge_tokens[0] += answer.usage.prompt_tokens
                    judge_tokens[1] += answer.usage.completion_tokens
                out.append(float(len(answer.choices)))
            return out

        rewards.append(judge)

    trl_timers = tiny_llm.catch_trl_timers()
    step_ends, handle = tiny_llm.clock_optimizer_steps()
    with tempfile.TemporaryDirectory() as out_dir:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=rewards,
            args=tiny_llm.grpo_args(out_dir, gen, max_steps),
            train_dataset=tiny_llm.prompts_dataset(),
            processing_class=tok,
        )
        t0 = time.perf_counter()
        with gtrl.profile(trainer) as run:
            trainer.train()
        train_s = time.perf_counter() - t0
    handle.remove()
    report = run.report()
    out = {
        "stack": "trl_profile",
        "mode": mode,
        "pid": os.getpid(),
        "train_s": train_s,
        "generate_calls": len(gen_spans),
        "generate_s": sum(b - a for a, b in gen_spans),
        "judge_requests": len(judge_spans),
        "judge_s": sum(b - a for a, b in judge_spans),
        "judge_tokens": judge_tokens,
        "optimizer_steps": len(step_ends),
        # the steady loop, as in trl_grpo.py, and the generation inside it: generate
        # calls and judge requests
        "wait_ratio": tiny_llm.steady_share(gen_spans + judge_spans, step_ends),
        "trl_timers": {k: {"count": len(v), "sum_s": sum(v)} for k, v in trl_timers.items()},
        "report": report.to_dict(),
        "text": str(report),
    }
    print("STACK_JSON " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
