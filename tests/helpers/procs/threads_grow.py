"""Thread count grows: starts a new thread that waits forever every 30 ms (a retry storm's shape)."""

from __future__ import annotations

import threading
import time

stop = threading.Event()
print("ready", flush=True)
while threading.active_count() < 500:  # a cap so a forgotten process stays harmless
    threading.Thread(target=stop.wait, daemon=True).start()
    time.sleep(0.03)
stop.wait()
