"""TRL's real ``VLLMClient`` in a GRPO-shaped training loop against a generation server, with
its own clocks.

    python trl_server.py URL MODE API STEPS

What of TRL's server mode runs without vLLM (TRL 1.16; vLLM is CUDA only and not
installed here):

- ``GRPOTrainer(args=GRPOConfig(use_vllm=True, vllm_mode="server"))`` refuses to start:
  ``VLLMGeneration._init_vllm`` (trl/generation/vllm_generation.py, line 294) checks
  ``is_vllm_available()`` and raises ``ImportError("vLLM is not available and
  `use_vllm` is set to True. ...")``.
- ``VLLMClient(...)`` itself raises ``ImportError("vLLM is not installed. ...")`` from
  the same check in its ``__init__`` (trl/generation/vllm_client.py, line 215), though
  nothing it does over HTTP needs vLLM: ``generate``, ``chat``, ``get_world_size``,
  ``get_server_info``, ``weight_update()`` and ``reset_prefix_cache`` are plain
  ``requests`` calls. This script lifts that one check (``is_vllm_available`` in the
  client's module) and uses the real client for all of them.
- ``init_communicator`` and the tensor broadcast of ``update_named_params`` need vLLM
  (``get_ip``, its NCCL weight-transfer engine) and a CUDA device: not run. The HTTP
  call that goes with the broadcast (``POST /update_weights`` with the
  ``update_info`` TRL sends) is sent on the client's own session.

The loop is GRPOTrainer's in server mode, one optimizer step per generation: the
weight sync (``sync_weights``: the update announced inside ``weight_update()``,
then ``reset_prefix_cache``) when the weights changed, the generation of
``NUM_GENERATIONS`` completions for each of 2 prompts (API ``completions``:
``VLLMClient.generate``, one request; API ``chat``: ``VLLMClient.chat``, one request
per conversation from a thread pool: a batch), a reward, the policy-gradient
loss of a tiny local Llama, ``backward`` and ``step``. MODE ``gen``: a narrow model
(the server's generation dominates); ``update``: a wide one (the update does).

Prints ``STACK_JSON {...}``: the script's clocks around each generation, each
sync and each step, the counts it saw and the tokens of the server's answers.
"""

from __future__ import annotations

import json
import os
import sys
import time

import tiny_llm  # sets the offline environment first

# isort: split

import torch  # noqa: E402
import trl.generation.vllm_client as vllm_client  # noqa: E402

NUM_GENERATIONS = 4
MAX_TOKENS = 8
# the trained model's shapes: the server's generation dominates a step on the narrow one
NARROW = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "heads": 2}
WIDE = {"hidden_size": 384, "intermediate_size": 1536, "num_hidden_layers": 4, "heads": 8}


def _lift_vllm_check() -> None:
    """The client's one vLLM check (its ``__init__``): nothing of HTTP needs vLLM."""
    vllm_client.is_vllm_available = lambda *a, **k: True  # type: ignore[attr-defined]


def main() -> int:
    url, mode, api, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if mode not in ("gen", "update") or api not in ("completions", "chat"):
        raise SystemExit(f"MODE gen|update, API completions|chat; got {mode!r} {api!r}")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = tiny_llm.tokenizer()
    model = tiny_llm.llama(tok, NARROW if mode == "gen" else WIDE, max_positions=64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step_ends, handle = tiny_llm.clock_optimizer_steps()

    _lift_vllm_check()
    client = vllm_client.VLLMClient(base_url=url, connection_timeout=30)
    # what TRL asks of the server before its first step
    world = client.get_world_size()
    info = client.get_server_info()
    metadata = [
        (name, str(p.dtype).removeprefix("torch."), list(p.shape))
        for name, p in model.named_parameters()
    ]
    prompts = [" ".join(tiny_llm.WORDS[i : i + 4]) for i in range(2)]
    prompt_ids = [tok(p)["input_ids"] for p in prompts]

    gen_spans: list[tuple[float, float]] = []
    sync_spans: list[tuple[float, float]] = []
    counts = {"generation_requests": 0, "sync_calls": 0, "completions": 0}
    tokens = {"prompt": 0, "completion": 0}
    for step in range(steps):
        if step > 0:  # sync_weights: the weights changed since the last generation
            t0 = time.perf_counter()
            with client.weight_update():  # POST /start_weight_update ... /finish_weight_update
                update_info = {
                    "names": [m[0] for m in metadata],
                    "dtype_names": [m[1] for m in metadata],
                    "shapes": [m[2] for m in metadata],
                    "packed": True,
                }
                r = client.session.post(f"{url}/update_weights", json={"update_info": update_info})
                r.raise_for_status()
            client.reset_prefix_cache()
            sync_spans.append((t0, time.perf_counter()))
            counts["sync_calls"] += 4
        t0 = time.perf_counter()
        if api == "completions":
            out = client.generate(prompt_ids, n=NUM_GENERATIONS, max_tokens=MAX_TOKENS, logprobs=0)
            counts["generation_requests"] += 1
        else:
            conversations = [
                [{"role": "user", "content": p}] for p in prompts for _ in range(NUM_GENERATIONS)
            ]
            out = client.chat(conversations, n=1, max_tokens=MAX_TOKENS, logprobs=0)
            counts["generation_requests"] += len(conversations)
        gen_spans.append((t0, time.perf_counter()))
        completions = out["completion_ids"]
        counts["completions"] += len(completions)
        tokens["completion"] += sum(len(c) for c in completions)
        tokens["prompt"] += sum(len(p) for p in out["prompt_ids"])
        # GRPO: group-normalised rewards, the log-likelihood of each completion
        rewards = torch.tensor([float(c.count(5)) for c in completions])
        groups = rewards.view(-1, NUM_GENERATIONS)
        adv = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).view(
            -1
        )
        full = [
            p + c
            for p, c in zip(
                [out["prompt_ids"][i // NUM_GENERATIONS] for i in range(len(completions))]
                if api == "completions"
                else out["prompt_ids"],
                completions,
                strict=True,
            )
        ]
        ids = torch.tensor(full) % len(tok)
        logits = model(input_ids=ids).logits[:, :-1]
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        loss = -(logp[:, -MAX_TOKENS:].sum(1) * adv).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    handle.remove()
    out_json = {
        "stack": "trl_server",
        "mode": mode,
        "api": api,
        "pid": os.getpid(),
        "world_size": world,
        "weight_transfer": info["weight_transfer_config"],
        "optimizer_steps": len(step_ends),
        "generate_s": sum(b - a for a, b in gen_spans),
        "sync_s": sum(b - a for a, b in sync_spans),
        # the trainer's wait on the server in the steady steps: generation and the weight
        # sync, both HTTP calls the training thread blocks on
        "wait_ratio": tiny_llm.steady_share(gen_spans + sync_spans, step_ends),
        "generation_share": tiny_llm.steady_share(gen_spans, step_ends),
        "tokens": tokens,
        **counts,
    }
    print("STACK_JSON " + json.dumps(out_json), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
