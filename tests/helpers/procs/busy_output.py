"""A CPU-busy loop whose output depends on argv[1]; touches argv[2] once started.

- ``print``: prints a progress line to stdout about every 20 ms of work (flushed);
- ``quiet``: prints one line, then spins without writing anything;
- ``file``: writes a line about every 20 ms to argv[3], a file it holds open for
  writing (a log or an event file), and nothing to stdout.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def work(seconds: float) -> int:
    """Burn the CPU for about ``seconds``."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


mode = sys.argv[1]
out = open(sys.argv[3], "a", encoding="utf-8") if mode == "file" else sys.stdout  # noqa: SIM115
print("started", file=out, flush=True)
Path(sys.argv[2]).write_text("ready")
step = 0
while True:
    n = work(0.02)
    step += 1
    if mode != "quiet":
        print(f"step {step} ({n} iterations)", file=out, flush=True)
