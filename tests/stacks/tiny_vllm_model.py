"""Save a tiny randomly initialised Qwen2 and a locally built tokenizer to a folder, for a
real vLLM server on the CPU to load (nothing is downloaded).

    python tiny_vllm_model.py DIR

Its attention heads are 32 wide: vLLM's CPU attention refuses narrower ones. The
tokenizer is ``tiny_llm.py``'s WordLevel one, with a plain chat template.
"""

from __future__ import annotations

import sys

import tiny_llm  # sets the offline environment first

# isort: split

import torch  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402


def main() -> int:
    out = sys.argv[1]
    torch.manual_seed(0)
    tok = tiny_llm.chat_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
