"""Save a tiny randomly initialised causal LM and a locally built tokenizer to a folder, for a
model server to load (nothing is downloaded).

    python tiny_served_model.py DIR

The model is ``tiny_llm.py``'s narrow 2-layer Llama; the tokenizer its WordLevel one, with a plain chat template (each message's content, then a space) so that chat
completions can render a conversation.
"""

from __future__ import annotations

import sys

import tiny_llm  # sets the offline environment first

# isort: split

import torch  # noqa: E402


def main() -> int:
    out = sys.argv[1]
    torch.manual_seed(0)
    tok = tiny_llm.chat_tokenizer()
    model = tiny_llm.llama(tok, tiny_llm.NARROW)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
