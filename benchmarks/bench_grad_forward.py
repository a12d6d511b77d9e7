"""What timing every grad-on policy forward would cost (issue 38): a CleanRL DQN-sized
Q-network (4 -> 120 -> 84 -> 2, batch 1) called bare, and called the way
``integrations.libs.torch`` times the first forward after an update (a one-shot global
forward pre-hook that, at the call, removes itself and registers a global forward hook
until the module returns), re-armed before every call.

``gyreprof run`` arms it once per collect block (after each optimizer step), so the
block's first forward is the sampler's ``fwd`` and the rest are named by the stack
sampler. Re-arming for every forward would time them all; this measures its price.
Rounds alternate the two modes; the figure is the median per-call time of each.

    python benchmarks/bench_grad_forward.py --rounds 7 --calls 20000
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def _net() -> Any:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    return nn.Sequential(
        nn.Linear(4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 2)
    ), torch.randn(1, 4)


def bare(net: Any, x: Any, calls: int) -> float:
    """Seconds per call, the module called bare."""
    t0 = time.perf_counter()
    for _ in range(calls):
        net(x)
    return (time.perf_counter() - t0) / calls


def armed(net: Any, x: Any, calls: int) -> float:
    """Seconds per call, the one-shot hooks armed before every call."""
    from torch.nn.modules import module

    held: dict[str, Any] = {}

    def first_return(mod: Any, args: Any, out: Any) -> None:
        if held.get("mod") is mod:
            held.pop("post").remove()
            held["end"] = time.perf_counter_ns()

    def first_call(mod: Any, args: Any) -> None:
        held.pop("pre").remove()
        held["mod"], held["start"] = mod, time.perf_counter_ns()
        held["post"] = module.register_module_forward_hook(first_return, always_call=True)

    t0 = time.perf_counter()
    for _ in range(calls):
        held["pre"] = module.register_module_forward_pre_hook(first_call)
        net(x)
    return (time.perf_counter() - t0) / calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20_000)
    a = p.parse_args(argv)
    net, x = _net()
    bare(net, x, 1000)  # warm
    got: dict[str, list[float]] = {"bare": [], "armed": []}
    for r in range(a.rounds):
        order = (bare, armed) if r % 2 == 0 else (armed, bare)
        for fn in order:
            got[fn.__name__].append(fn(net, x, a.calls))
    b, h = statistics.median(got["bare"]), statistics.median(got["armed"])
    print(f"batch-1 Q-network forward, {a.rounds} rounds of {a.calls} calls")
    print(f"bare  {b * 1e6:7.2f} us a call")
    print(f"armed {h * 1e6:7.2f} us a call  (+{(h - b) * 1e6:.2f} us, {h / b - 1:+.0%})")
    return 0


def test_grad_forward_cost_quick() -> None:
    """Runs (once, small) so this keeps working; the figures live in BENCHMARKS.md."""
    import pytest

    pytest.importorskip("torch")
    assert main(["--rounds", "2", "--calls", "50"]) == 0


if __name__ == "__main__":
    raise SystemExit(main())
