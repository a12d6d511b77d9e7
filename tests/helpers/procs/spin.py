"""Busy loop with no progress: writes one line to its log (argv[1]), then spins forever."""

from __future__ import annotations

import sys

with open(sys.argv[1], "a", encoding="utf-8") as log:
    log.write("started\n")
print("ready", flush=True)
n = 0
while True:
    n += 1
