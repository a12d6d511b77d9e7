"""Blocked in recv on a loopback TCP connection nobody writes to (port in argv[1])."""

from __future__ import annotations

import socket
import sys

sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("ready", flush=True)
sock.recv(1024)  # the test's server never sends
