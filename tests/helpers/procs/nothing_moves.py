"""Loops that look alive and move nothing (and one healthy one), for the doctor's tests.

python nothing_moves.py MODE READY_FILE LOG_FILE [ARG]

- ``refused PORT``: connects to 127.0.0.1:PORT (nothing listens), logs a WARNING with
  the refused error and retries every 20 ms;
- ``timeout URL``: GETs URL with a 0.1 s timeout (the server never answers), logs the
  timeout and retries;
- ``storm``: logs only INFO lines: no rollouts yet, retrying (attempt N), every 10 ms;
- ``poll``: logs one line, then polls an empty batch source and sleeps 50 ms each time;
- ``buffered``: prints (to stdout, block-buffered) and waits forever without flushing;
- ``loading``: prints (block-buffered) and burns the CPU for good (a slow model load);
- ``healthy``: logs a step line every 10 ms, and a retry line every 10th step;
- ``heartbeat``: logs the same ``step=0 ... waiting`` line every 20 ms;
- ``ranks``: logs ``waiting for ranks 1/2`` every 20 ms;
- ``slow``: logs ``step N (working)`` every 20 ms; N moves every 0.25 s;
- ``flood``: logs 2 MiB of lines (a step line every 200 of them) every 50 ms.

READY_FILE is written once the loop runs.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import urllib.request
from pathlib import Path

mode, ready, log_path = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
arg = sys.argv[4] if len(sys.argv) > 4 else ""


def main() -> None:
    if mode in ("buffered", "loading"):
        print("loading the model ...")  # stays in the buffer: stdout is a file, no -u
        ready.write_text("ready")
        if mode == "loading":
            x = 0
            while True:
                x += 1
        threading.Event().wait()
        return
    with open(log_path, "a", encoding="utf-8") as log:

        def say(text: str) -> None:
            log.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            log.flush()

        ready.write_text("ready")
        n = 0
        if mode == "poll":
            say("INFO waiting for batches")
        while True:
            n += 1
            if mode == "refused":
                try:
                    socket.create_connection(("127.0.0.1", int(arg)), timeout=1.0).close()
                except OSError as exc:
                    say(
                        f"WARNING rollout server 127.0.0.1:{arg} unreachable: {exc}; "
                        "retrying in 20 ms"
                    )
                time.sleep(0.02)
            elif mode == "timeout":
                try:
                    urllib.request.urlopen(arg, timeout=0.1).close()
                except OSError as exc:
                    say(f"ERROR request to {arg} failed ({exc}); retry {n}")
            elif mode == "storm":
                say(f"INFO sampler: no rollouts available yet, retrying (attempt {n})")
                time.sleep(0.01)
            elif mode == "poll":
                batch: list[int] = []  # the source never has anything
                if not batch:
                    time.sleep(0.05)
            elif mode == "healthy":
                say(f"step {n} loss=0.{n % 97:02d}")
                if n % 10 == 0:
                    say("WARNING request failed, retrying (attempt 1)")
                time.sleep(0.01)
            elif mode == "heartbeat":
                say("INFO step=0 loss=nan waiting for the learner")
                time.sleep(0.02)
            elif mode == "ranks":
                say("INFO waiting for ranks 1/2")
                time.sleep(0.02)
            elif mode == "flood":
                for k in range(10):
                    log.write(("DEBUG " + "x" * 1000 + "\n") * 200 + f"step {n * 10 + k}\n")
                log.flush()
                time.sleep(0.05)
            elif mode == "slow":
                say(f"INFO step {int(n * 0.02 / 0.25)} (working)")
                time.sleep(0.02)
            else:
                raise SystemExit(f"unknown mode {mode!r}")


main()
