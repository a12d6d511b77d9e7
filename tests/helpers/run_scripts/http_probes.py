"""Cloud metadata probes, then rollouts: ``http_probes.py URL N``.

The main thread asks ``metadata.google.internal`` (httpx and requests, as Ray's
start-up does; the name does not resolve off a cloud, so each fails at once) and a
link-local IPv6 address with no interface named (refused by the kernel at once: no
packet leaves; 169.254.169.254 is not asked, it may be a real metadata service), then
sends N chat completions (httpx) to URL, and records a user's own Profiler with two
phases. Prints ``requests N``.
"""

from __future__ import annotations

import sys

import httpx
import requests

import gyreprof as gp

url, n = sys.argv[1], int(sys.argv[2])
probes = 0
for probe in (
    lambda: httpx.get("http://metadata.google.internal/computeMetadata/v1", timeout=0.5),
    lambda: requests.get("http://metadata.google.internal/computeMetadata/v1", timeout=0.5),
    lambda: httpx.get("http://[fe80::1]:9/latest/meta-data/", timeout=0.5),
):
    try:
        probe()
    except Exception:  # noqa: BLE001 - off a cloud the name does not resolve
        pass
    probes += 1
mine = gp.Profiler(["load", "parse"])
with httpx.Client(base_url=url) as client:
    for _ in range(n):
        mine.begin()
        with mine.phase("load"):
            r = client.post("/v1/chat/completions", json={"max_tokens": 3})
        with mine.phase("parse"):
            r.json()
print("probes", probes, flush=True)
print("requests", n, flush=True)
