"""TRL GRPOTrainer on a tiny randomly initialised local model, with its own clocks.

    python trl_grpo.py MODE MAX_STEPS

Nothing is downloaded (``tiny_llm.py``: a Llama built in place, a WordLevel tokenizer, a
list of prompts). CPU only.

MODE ``gen``: long completions on a narrow model (generation dominates a step);
MODE ``update``: short completions on a wider model, each generation batch
reused for several optimizer steps (the update dominates). Prints one line
``STACK_JSON {...}``: the script's own clock around each ``model.generate`` call
and around the whole ``trainer.train()``, the optimizer steps it counted, TRL's
own ``step_time`` metric and TRL's profiling timers (``profiling_context``: the
durations TRL would send to wandb/mlflow, caught here instead).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
import time

import tiny_llm  # sets the offline environment first

# isort: split

import torch  # noqa: E402
from trl import GRPOTrainer  # noqa: E402


def main() -> int:
    mode = sys.argv[1]
    max_steps = int(sys.argv[2])
    if mode not in ("gen", "update"):
        raise SystemExit(f"MODE must be gen or update, got {mode!r}")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = tiny_llm.tokenizer()
    gen = mode == "gen"
    model = tiny_llm.llama(tok, tiny_llm.NARROW if gen else tiny_llm.WIDE)
    gen_spans = tiny_llm.clock_generate(model)
    trl_timers = tiny_llm.catch_trl_timers()
    step_ends, handle = tiny_llm.clock_optimizer_steps()
    with tempfile.TemporaryDirectory() as out_dir:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=tiny_llm.reward_len,
            args=tiny_llm.grpo_args(out_dir, gen, max_steps),
            train_dataset=tiny_llm.prompts_dataset(),
            processing_class=tok,
        )
        t0 = time.perf_counter()
        # under one C-level call callgrind can name (benchmarks/bench_run.py --instructions)
        list(itertools.starmap(trainer.train, [()]))
        train_s = time.perf_counter() - t0
        history = list(trainer.state.log_history)
    handle.remove()
    step_time = [float(h["step_time"]) for h in history if "step_time" in h]
    gen_s = sum(b - a for a, b in gen_spans)
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
        "wait_ratio": tiny_llm.steady_share(gen_spans, step_ends),
        "steady_s": step_ends[-1] - step_ends[0],
        "trl_step_time_s": sum(step_time),
        "trl_step_times": len(step_time),
        "trl_timers": {k: {"count": len(v), "sum_s": sum(v)} for k, v in trl_timers.items()},
    }
    print("STACK_JSON " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
