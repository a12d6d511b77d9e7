"""A model whose ``generate`` calls its parent class's and an assistant model's
``generate``: one outer call per round. Prints ``GENERATE_CALLS N`` (outer calls)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from typing import Any  # noqa: E402

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

CONFIG = dict(
    vocab_size=32,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=2,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


class Drafting(LlamaForCausalLM):
    """``generate`` drafts with a helper model (a submodule ``helper``) first, then
    generates itself."""

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        self.helper.generate(*args, **kwargs)
        return super().generate(*args, **kwargs)


def main() -> None:
    torch.manual_seed(0)
    model = Drafting(LlamaConfig(**CONFIG))
    model.helper = LlamaForCausalLM(LlamaConfig(**CONFIG))
    ids = torch.tensor([[1, 5, 6, 7]])
    rounds = 3
    for _ in range(rounds):
        model.generate(input_ids=ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    model.helper.generate(input_ids=ids, max_new_tokens=2, do_sample=False)  # one more
    print(f"GENERATE_CALLS {rounds + 1}", flush=True)


if __name__ == "__main__":
    main()
