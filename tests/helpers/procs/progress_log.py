"""Makes progress: appends a line to its log (argv[1]) every 50 ms and sleeps in between."""

from __future__ import annotations

import sys
import time

print("ready", flush=True)
step = 0
with open(sys.argv[1], "a", encoding="utf-8") as log:
    while True:
        step += 1
        log.write(f"step {step}\n")
        log.flush()
        time.sleep(0.05)
