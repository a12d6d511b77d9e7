"""Sends chat completions (httpx) to URL until interrupted; prints READY after the first."""

from __future__ import annotations

import sys

import httpx

with httpx.Client(base_url=sys.argv[1]) as client:
    client.post("/v1/chat/completions", json={"max_tokens": 2})
    print("READY", flush=True)
    while True:
        client.post("/v1/chat/completions", json={"max_tokens": 2, "test_delay_ms": 5})
