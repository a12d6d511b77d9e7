"""Crafted inputs for the decoders: a snapshot whose header declares a layout (and
rolling windows) with all-empty histograms, so a few hundred bytes can claim
gigabytes of counts. Used by the adversarial tests and ``benchmarks/crafted_inputs.py``."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from gyreprof._core import layout_info


def join_snapshot(prefix: bytes, header: Any, rows: list[bytes], *, level: int = 6) -> bytes:
    """Snapshot bytes: the 5-byte magic and version of ``prefix``, the plain-codec byte,
    then zlib of the length-prefixed JSON header and histogram rows."""
    hjson = json.dumps(header, separators=(",", ":")).encode()
    parts = [struct.pack("<I", len(hjson)), hjson]
    for r in rows:
        parts += [struct.pack("<I", len(r)), r]
    return prefix[:5] + b"\x00" + zlib.compress(b"".join(parts), level)


def crafted_snapshot(
    n_phases: int, sf: int, highest: int, *, windows: int = 0, lowest: int = 1
) -> bytes:
    """A snapshot whose header declares ``n_phases`` empty histograms of the layout
    (``lowest``, ``highest``, ``sf``) and ``windows`` empty rolling windows."""
    nh = n_phases + 1
    header: dict[str, Any] = {
        "phases": [f"p{i}" for i in range(n_phases)],
        "config": {
            "significant_figures": sf,
            "lowest_ns": lowest,
            "highest_ns": highest,
            "clock": "monotonic",
            "warmup_steps": 0,
            "warmup_ns": 0,
            "window_steps": 10,
        },
        "stat": [[0, 0, -1, -1]] * nh,
        "warm": [[0, 0, 0]] * nh,
        "first": [-1] * nh,
        "totals": {},
        "counters": {},
        "times": {},
        "lap_cost_ns": 10.0,
        "sources": [{}],
        "meta": {},
        "counts_len": layout_info(lowest, highest, sf)["counts_len"],
    }
    if windows:
        header["rolling"] = [[0] * (5 + 6 * nh)] * windows
    return join_snapshot(b"GYRS\x01\x00", header, [b""] * nh, level=9)


def split_snapshot(blob: bytes) -> tuple[bytes, dict[str, Any], list[bytes]]:
    """(prefix, header, count rows) of zlib snapshot bytes; ``join_snapshot`` undoes it."""
    body = zlib.decompress(blob[6:])
    (hlen,) = struct.unpack_from("<I", body, 0)
    header = json.loads(body[4 : 4 + hlen])
    rows, pos = [], 4 + hlen
    while pos < len(body):
        (n,) = struct.unpack_from("<I", body, pos)
        rows.append(body[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return blob[:6], header, rows


def as_version_1(blob: bytes) -> bytes:
    """Version-2 snapshot bytes rewritten as version 1 (the rolling windows a list of int
    lists in the JSON header instead of a block of int64 byte planes after the histograms)."""
    prefix, header, rows = split_snapshot(blob)
    shape = header.pop("rolling_shape", None)
    if shape is not None:
        block = rows.pop()
        k = len(block) // 8  # 8 byte planes of k values (gyreprof.model.snapshot._window_planes)
        raw = bytes(block[j * k + i] for i in range(k) for j in range(8))
        flat = list(struct.unpack(f"<{k}q", raw))
        w = shape[1]
        header["rolling"] = [flat[i * w : (i + 1) * w] for i in range(shape[0])]
    return join_snapshot(b"GYRS\x01", header, rows)
