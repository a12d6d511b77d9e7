"""Two threads take two locks in opposite orders and deadlock; the main thread joins
them. Prints ``ready`` once both wait."""

from __future__ import annotations

import threading

lock_a = threading.Lock()
lock_b = threading.Lock()
both = threading.Barrier(2)


def first() -> None:
    with lock_a:
        both.wait()
        with lock_b:
            pass


def second() -> None:
    with lock_b:
        both.wait()
        with lock_a:
            pass


threads = [
    threading.Thread(target=first, name="first"),
    threading.Thread(target=second, name="second"),
]
for t in threads:
    t.start()
print("ready", flush=True)
for t in threads:
    t.join()
