"""TRL GRPOTrainer profiled from code (``gyreprof.integrations.trl.profile``), with its own clocks.

    python trl_profile.py MODE MAX_STEPS [JUDGE_URL]

The tiny local model and tokenizer of ``trl_grpo.py`` (nothing is downloaded), the
same two modes: ``gen`` (long completions on a narrow model: generation dominates a
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
from collections import defaultdict
from typing import Any

from trl_grpo import WORDS, reward_len, tokenizer  # sets the offline environment first

# isort: split

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.extras import profiling  # noqa: E402

from gyreprof.integrations import trl as gtrl  # noqa: E402


def main() -> int:
    mode = sys.argv[1]
    max_steps = int(sys.argv[2])
    judge_url = sys.argv[3] if len(sys.argv) > 3 else None
    if mode not in ("gen", "update"):
        raise SystemExit(f"MODE must be gen or update, got {mode!r}")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = tokenizer()
    gen = mode == "gen"
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32 if gen else 384,
        intermediate_size=64 if gen else 1536,
        num_hidden_layers=2 if gen else 4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    prompts = [" ".join(WORDS[i : i + 4]) for i in range(len(WORDS) - 4)]
    data = Dataset.from_dict({"prompt": prompts * 4})

    gen_spans: list[tuple[float, float]] = []  # the script's clock around each generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            # the class's generate, looked up at each call: the session patches it later
            return type(model).generate(model, *args, **kwargs)
        finally:
            gen_spans.append((t0, time.perf_counter()))

    model.generate = generate  # type: ignore[method-assign]

    judge_spans: list[tuple[float, float]] = []
    judge_tokens = [0, 0]  # prompt, completion: as the server's answers said
    rewards: list[Any] = [reward_len]
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

    trl_timers: dict[str, list[float]] = defaultdict(list)
    real_log = profiling.ProfilingContext._log_metrics

    def log_metrics(self: Any, duration: float) -> None:
        trl_timers[self.name].append(duration)
        real_log(self, duration)

    profiling.ProfilingContext._log_metrics = log_metrics  # type: ignore[method-assign]

    step_ends: list[float] = []

    def count_step(*args: Any, **kwargs: Any) -> None:
        step_ends.append(time.perf_counter())

    handle = register_optimizer_step_post_hook(count_step)
    with tempfile.TemporaryDirectory() as out_dir:
        args = GRPOConfig(
            output_dir=out_dir,
            use_cpu=True,
            bf16=False,
            fp16=False,
            report_to="none",
            max_steps=max_steps,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=64 if gen else 4,
            generation_kwargs={"min_new_tokens": 64 if gen else 4},
            num_iterations=1 if gen else 4,
            learning_rate=1e-3,
            logging_steps=1,
            save_strategy="no",
            dataloader_num_workers=0,
            disable_tqdm=True,
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=rewards,
            args=args,
            train_dataset=data,
            processing_class=tok,
        )
        t0 = time.perf_counter()
        with gtrl.profile(trainer) as run:
            trainer.train()
        train_s = time.perf_counter() - t0
    handle.remove()
    report = run.report()
    # the steady loop, as in trl_grpo.py: from the end of the first optimizer step to the
    # end of the last, and the generation (generate calls and judge requests) inside it
    lo, hi = step_ends[0], step_ends[-1]

    def inside(spans: list[tuple[float, float]]) -> float:
        return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)

    steady_gen_s = inside(gen_spans) + inside(judge_spans)
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
        "wait_ratio": steady_gen_s / (hi - lo) if hi > lo else None,
        "trl_timers": {k: {"count": len(v), "sum_s": sum(v)} for k, v in trl_timers.items()},
        "report": report.to_dict(),
        "text": str(report),
    }
    print("STACK_JSON " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
