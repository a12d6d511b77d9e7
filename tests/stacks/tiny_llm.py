"""What the LLM stack scripts share: an offline environment, a tokenizer built in place, tiny
randomly initialised Llamas, TRL's GRPO settings for them, and the scripts' own clocks.

Nothing is downloaded: the tokenizer is a WordLevel model from the ``tokenizers`` library
wrapped as a ``PreTrainedTokenizerFast``, the model a ``LlamaConfig`` built here, the
dataset a Python list. Importing this module sets the offline variables first, so the
scripts import it before transformers, TRL or datasets.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

WORDS = "the a cat dog sat ran on under mat log red blue big small one two three four".split()
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]

Span = tuple[float, float]

# the two model shapes of the GRPO scripts: generation dominates a step on the narrow
# one, the update on the wide one
NARROW = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "heads": 4}
WIDE = {"hidden_size": 384, "intermediate_size": 1536, "num_hidden_layers": 4, "heads": 4}


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


#: a plain chat template (each message's content, then a space), so that a model
#: server can render a conversation
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"


def chat_tokenizer() -> PreTrainedTokenizerFast:
    """:func:`tokenizer` with :data:`CHAT_TEMPLATE`, for a model a server loads."""
    tok = tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    return tok


def llama(
    tok: PreTrainedTokenizerFast, shape: dict[str, int], max_positions: int = 256
) -> LlamaForCausalLM:
    """A randomly initialised Llama of ``shape`` (``NARROW``, ``WIDE`` or the like) for ``tok``."""
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"],
        num_hidden_layers=shape["num_hidden_layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["heads"],
        max_position_embeddings=max_positions,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def reward_len(completions: list[str], **kwargs: Any) -> list[float]:
    """Reward a completion for each ``cat`` in it (anything learnable will do)."""
    return [float(c.split().count("cat")) for c in completions]


def prompts_dataset() -> Any:
    """The GRPO scripts' prompts: every run of 4 words, 4 times over."""
    from datasets import Dataset

    prompts = [" ".join(WORDS[i : i + 4]) for i in range(len(WORDS) - 4)]
    return Dataset.from_dict({"prompt": prompts * 4})


def grpo_args(out_dir: str, gen: bool, max_steps: int) -> Any:
    """GRPOConfig for the two modes: long completions, each generation used once (``gen``),
    or short ones, each generation batch reused for 4 optimizer steps."""
    from trl import GRPOConfig

    return GRPOConfig(
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


def clock_generate(model: LlamaForCausalLM) -> list[Span]:
    """The script's own clock around every ``model.generate`` call, from now on."""
    spans: list[Span] = []

    def generate(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            # the class's generate, looked up at each call: a profiler may patch it later
            return type(model).generate(model, *args, **kwargs)
        finally:
            spans.append((t0, time.perf_counter()))

    model.generate = generate  # type: ignore[method-assign]
    return spans


def catch_trl_timers() -> dict[str, list[float]]:
    """TRL's own profiling timers (``profiling_context``), caught as TRL logs them: the
    durations it would send to wandb or mlflow."""
    from trl.extras import profiling

    timers: dict[str, list[float]] = defaultdict(list)
    real_log = profiling.ProfilingContext._log_metrics

    def log_metrics(self: Any, duration: float) -> None:
        timers[self.name].append(duration)
        real_log(self, duration)

    profiling.ProfilingContext._log_metrics = log_metrics  # type: ignore[method-assign]
    return timers


def clock_optimizer_steps() -> tuple[list[float], Any]:
    """When each optimizer step ends (every torch optimizer); the list and the hook's handle."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    ends: list[float] = []
    handle = register_optimizer_step_post_hook(lambda *a, **k: ends.append(time.perf_counter()))
    return ends, handle


def steady_share(spans: list[Span], step_ends: list[float]) -> float | None:
    """Seconds of ``spans`` in the steady loop, from the end of the first optimizer step to
    the end of the last (start-up and the first step left out), over that loop's length."""
    if len(step_ends) < 2 or step_ends[-1] <= step_ends[0]:
        return None
    lo, hi = step_ends[0], step_ends[-1]
    inside = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)
    return inside / (hi - lo)
