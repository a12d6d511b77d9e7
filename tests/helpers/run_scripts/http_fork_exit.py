"""A forked child sends N chat completions (requests) and leaves by ``os._exit``:
``http_fork_exit.py URL N``. The parent sends none. Prints ``CHILD <pid>``."""

from __future__ import annotations

import os
import sys

import requests

url, n = sys.argv[1], int(sys.argv[2])
pid = os.fork()
if pid == 0:
    for _ in range(n):
        requests.post(url + "/v1/chat/completions", json={"max_tokens": 2}, timeout=30)
    os._exit(0)
os.waitpid(pid, 0)
print("CHILD", pid, flush=True)
