"""Reads a byte stream from a loopback TCP connection (port in argv[1]) until it
closes: most of its time is spent blocked in recv, yet it makes progress."""

from __future__ import annotations

import socket
import sys

sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("ready", flush=True)
while sock.recv(65536):
    pass
