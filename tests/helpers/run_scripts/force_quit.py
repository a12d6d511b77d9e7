"""The common "second Ctrl-C force-quits" handler: the first SIGINT asks the loop to
stop cleanly (exit 0, after ``WAIT_S`` more seconds of work), a second one force-quits
(prints FORCE-QUIT, exit 3). Prints READY once the handler is in place."""

import os
import signal
import time

WAIT_S = 0.5
asked: list[float] = []


def on_int(signum, frame):
    if asked:
        print("FORCE-QUIT", flush=True)
        os._exit(3)
    asked.append(time.monotonic())


signal.signal(signal.SIGINT, on_int)
print("READY", flush=True)
while not asked:
    time.sleep(0.005)
while time.monotonic() < asked[0] + WAIT_S:
    time.sleep(0.005)
print("STOPPED CLEANLY", flush=True)
