"""An ``openai`` SDK client loop against an OpenAI-compatible server, with the answers' own counts.

    python openai_serve_client.py BASE_URL MODEL N

``N`` chat completions, ``N`` streamed chat completions (``stream_options.include_usage``:
the last chunk carries ``usage``) and ``N`` text completions, one at a time, then a
batch of ``N`` chat completions sent together from a thread pool. Prints
``STACK_JSON {...}``: the requests made per route and the tokens the server's
answers reported (``usage``).
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

PROMPTS = ["the cat sat on", "a dog ran under", "the red log", "one two three"]


def main() -> int:
    base, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0, timeout=120)
    counts: dict[str, dict[str, int]] = {}

    def add(route: str, usage: Any) -> None:
        c = counts.setdefault(route, {"requests": 0, "prompt": 0, "completion": 0})
        c["requests"] += 1
        if usage is not None:
            c["prompt"] += usage.prompt_tokens
            c["completion"] += usage.completion_tokens

    def chat(i: int) -> Any:
        msg = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
        return client.chat.completions.create(model=model, messages=msg, max_tokens=3 + i % 4)

    for i in range(n):
        add("/v1/chat/completions", chat(i).usage)
    chunks = 0
    for i in range(n):
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
            max_tokens=4,
            stream=True,
            stream_options={"include_usage": True},
        )
        usage = None
        for chunk in stream:
            chunks += 1
            usage = chunk.usage or usage
        add("/v1/chat/completions", usage)
    for i in range(n):
        answer = client.completions.create(
            model=model, prompt=PROMPTS[i % len(PROMPTS)], max_tokens=5
        )
        add("/v1/completions", answer.usage)
    with ThreadPoolExecutor(max_workers=n) as pool:
        for answer in pool.map(chat, range(n)):
            add("/v1/chat/completions", answer.usage)
    print("STACK_JSON " + json.dumps({"stack": "openai_serve", "counts": counts, "chunks": chunks}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
