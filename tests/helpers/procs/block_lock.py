"""Blocked on a threading.Lock that its own main thread already holds."""

from __future__ import annotations

import threading

lock = threading.Lock()
lock.acquire()
print("ready", flush=True)
lock.acquire()  # never released
