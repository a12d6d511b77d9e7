"""Save a tiny randomly initialised causal LM and a locally built tokenizer to a folder, for a
model server to load (nothing is downloaded).

    python tiny_served_model.py DIR

The model is ``trl_grpo.py``'s narrow 2-layer ``LlamaConfig``; the tokenizer its WordLevel
one, with a plain chat template (each message's content, then a space) so that chat
completions can render a conversation.
"""

from __future__ import annotations

import sys

from trl_grpo import tokenizer  # sets the offline environment first

# isort: split

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"


def main() -> int:
    out = sys.argv[1]
    torch.manual_seed(0)
    tok = tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
