"""Counts SIGINTs: prints READY, and after the first SIGINT waits 1 s for a second one
(a launcher that forwards the terminal's ^C sends it within milliseconds), then prints
``SIGINTS n`` and exits 0."""

import signal
import time

n = 0


def on_int(signum, frame):
    global n
    n += 1


signal.signal(signal.SIGINT, on_int)
print("READY", flush=True)
while n == 0:
    time.sleep(0.01)
end = time.monotonic() + 1.0
while time.monotonic() < end:
    time.sleep(0.01)
print("SIGINTS", n, flush=True)
