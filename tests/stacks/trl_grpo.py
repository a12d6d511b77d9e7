"""TRL GRPOTrainer on a tiny randomly initialised local model, with its own clocks.

    python trl_grpo.py MODE MAX_STEPS

Nothing is downloaded: the model is a 2-layer ``LlamaConfig`` built in place and
the tokenizer a WordLevel model from the ``tokenizers`` library, wrapped as a
``PreTrainedTokenizerFast``; the dataset is a Python list. CPU only.

MODE ``gen``: long completions on a narrow model (generation dominates a step);
MODE ``update``: short completions on a wider model, each generation batch
reused for several optimizer steps (the update dominates). Prints one line
``STACK_JSON {...}``: the script's own clock around each ``model.generate`` call
and around the whole ``trainer.train()``, the optimizer steps it counted, TRL's
own ``step_time`` metric and TRL's profiling timers (``profiling_context``: the
durations TRL would send to wandb/mlflow, caught here instead).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.extras import profiling  # noqa: E402

WORDS = "the a cat dog sat ran on under mat log red blue big small one two three four".split()
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        padding_side="left",
    )


def reward_len(completions: list[str], **kwargs: Any) -> list[float]:
    """Reward a completion for each ``cat`` in it (anything learnable will do)."""
    return [float(c.split().count("cat")) for c in completions]


def main() -> int:
    mode = sys.argv[1]
    max_steps = int(sys.argv[2])
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

    # the script's own clock around every generate call of the model
    gen_spans: list[tuple[float, float]] = []
    real_generate = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_generate(*args, **kwargs)
        finally:
            gen_spans.append((t0, time.perf_counter()))

    model.generate = generate  # type: ignore[method-assign]

    # TRL's own profiling timers (profiling_context), caught as TRL logs them
    trl_timers: dict[str, list[float]] = defaultdict(list)
    real_log = profiling.ProfilingContext._log_metrics

    def log_metrics(self: Any, duration: float) -> None:
        trl_timers[self.name].append(duration)
        real_log(self, duration)

    profiling.ProfilingContext._log_metrics = log_metrics  # type: ignore[method-assign]

    step_ends: list[float] = []  # when each optimizer step ended

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
            # every completion its full length: no early end of sequence
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
            reward_funcs=reward_len,
            args=args,
            train_dataset=data,
            processing_class=tok,
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        history = list(trainer.state.log_history)
    handle.remove()
    step_time = [float(h["step_time"]) for h in history if "step_time" in h]
    gen_s = sum(b - a for a, b in gen_spans)
    # the steady loop: from the end of the first optimizer step to the end of the last
    # (start-up and the first step left out), and the generation inside it
    lo, hi = step_ends[0], step_ends[-1]
    steady_gen_s = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in gen_spans)
    out = {
        "stack": "trl_grpo",
        "mode": mode,
        "pid": os.getpid(),
        "max_steps": max_steps,
        "train_s": train_s,
        "generate_calls": len(gen_spans),
        "generate_s": gen_s,
        "optimizer_steps": len(step_ends),
        # the share of the training loop spent generating (the trainer's wait on its
        # sampler): over the whole train() call, and over the steady steps
        "wait_ratio_all": gen_s / train_s,
        "wait_ratio": steady_gen_s / (hi - lo) if hi > lo else None,
        "steady_s": hi - lo,
        "trl_step_time_s": sum(step_time),
        "trl_step_times": len(step_time),
        "trl_timers": {k: {"count": len(v), "sum_s": sum(v)} for k, v in trl_timers.items()},
    }
    print("STACK_JSON " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
