"""Retries a connection with exponential backoff and logs at DEBUG only (nothing shows:
logging is not configured): ``backoff.py HOST PORT [THREADS]``.

Each attempt waits at most 0.2 s; the backoff starts at 20 ms and doubles up to
0.2 s. Prints ``ready`` after its third failed attempt. With THREADS, the main thread
instead starts a new thread every 50 ms that connects and waits for a reply (which never
comes) -- THREADS of them at most.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time

log = logging.getLogger("client")


def connect(host: str, port: int) -> socket.socket:
    delay, attempts = 0.02, 0
    while True:
        try:
            return socket.create_connection((host, port), timeout=0.2)
        except OSError as exc:
            attempts += 1
            log.debug("connect to %s:%s failed (%s), again in %.2f s", host, port, exc, delay)
            if attempts == 3:
                print("ready", flush=True)
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def ask(host: str, port: int) -> None:
    with socket.create_connection((host, port)) as s:
        s.recv(1)


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        for i in range(int(sys.argv[3])):
            threading.Thread(target=ask, args=(host, port), daemon=True).start()
            if i == 2:
                print("ready", flush=True)
            time.sleep(0.05)
        threading.Event().wait()
    connect(host, port)


main()
