"""The binary format of a snapshot (``Snapshot.to_bytes`` / ``Snapshot.from_bytes``).

``SNAPSHOT_MAGIC`` (``GYRS``), a version byte, a compression flag byte (0 zlib, 1 xz),
then compressed: a u32-length-prefixed JSON header (the phases, the packed stat / warm /
first tables, the records written by ``gyreprof.model._serial``, the counters), each
histogram's varint-encoded counts (u32-length-prefixed), and in version 2 the rolling
windows (u32-length-prefixed, little-endian int64 in byte planes, their shape in the
header as ``rolling_shape``). Version 1 kept the rolling windows in the header as lists.
Every read value is checked: bad input is a ``CorruptDataError`` (a ValueError) saying
what and where. :func:`read_encoded` reads the same bytes with each histogram left
encoded (``EncodedSnapshot``), its buckets checked when :func:`add_counts` decodes them.
"""

from __future__ import annotations

import itertools
import json
import lzma
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from gyreprof._core import decode_counts_into, encode_counts, layout_info
from gyreprof._support import limits as _limits
from gyreprof._support.errors import ArgumentTypeError, CorruptDataError, InvalidValueError
from gyreprof._version import __version__
from gyreprof.model.histogram import layout_edges
from gyreprof.model.snapshot.records import (
    _INT64_MAX,
    COUNT_CAP,
    Meta,
    SnapshotConfig,
    SourceRecord,
    Times,
    Totals,
    _plain,
    _record,
)

if TYPE_CHECKING:  # the Snapshot class passes itself in: no import cycle
    from gyreprof.model.snapshot.model import Snapshot

__all__ = ["SNAPSHOT_MAGIC", "SNAPSHOT_VERSION", "add_counts", "read", "read_encoded", "write"]

SNAPSHOT_MAGIC = b"GYRS"
SNAPSHOT_VERSION = 2
# the versions read reads: 1 kept the rolling windows in the JSON header, 2 keeps
# them after the histograms (a u32-length-prefixed block of little-endian int64 in byte
# planes, its shape in the header as "rolling_shape")
_READ_VERSIONS = (1, 2)

_S = TypeVar("_S")


def _lzma_decompress(data: bytes) -> bytes:
    return _limits.inflate_lzma(data, what="snapshot")


def _zlib_decompress(data: bytes) -> bytes:
    return _limits.inflate(data, what="snapshot")


# name -> (flag byte, compress, decompress)
_CODECS: dict[str, tuple[int, Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
    "zlib": (0, lambda b: zlib.compress(b, 9), _zlib_decompress),
    "lzma": (1, lambda b: lzma.compress(b, format=lzma.FORMAT_XZ, preset=6), _lzma_decompress),
}


def write(snap: Snapshot, *, windows: bool = True, compression: str = "zlib") -> bytes:
    """``snap`` as compact bytes: magic, version, codec flag, compressed(JSON header + varint counts).

    ``compression="lzma"`` is ~20% smaller and several times slower than the
    default ``"zlib"``; ``from_bytes`` reads both.
    """
    if compression not in _CODECS:
        raise InvalidValueError(
            f"compression must be one of {sorted(_CODECS)}, got {compression!r}"
        )
    header = {
        "gyreprof": __version__,
        "phases": list(snap.phases),
        "config": _plain(snap.config),
        "stat": snap.stat.tolist(),
        "warm": snap.warm.tolist(),
        "first": snap.first.tolist(),
        "totals": _plain(snap.totals),
        "counters": dict(snap.counters),
        "times": _plain(snap.times),
        "lap_cost_ns": snap.lap_cost_ns,
        "sources": [_plain(s) for s in snap.sources],
        "meta": _plain(snap.meta),
        "counts_len": int(snap.counts.shape[1]),
    }
    rolling = snap.rolling if windows else None
    if rolling is not None:
        header["rolling_shape"] = [int(n) for n in rolling.shape]
    hjson = json.dumps(header, separators=(",", ":"), allow_nan=True).encode()
    parts = [struct.pack("<I", len(hjson)), hjson]
    for row in snap.counts:
        enc = encode_counts(row)
        parts.append(struct.pack("<I", len(enc)))
        parts.append(enc)
    if rolling is not None:
        block = _window_planes(rolling)
        parts.append(struct.pack("<I", len(block)))
        parts.append(block)
    flag, compress, _ = _CODECS[compression]
    body = compress(b"".join(parts))
    return SNAPSHOT_MAGIC + struct.pack("<BB", SNAPSHOT_VERSION, flag) + body


def read(data: bytes | bytearray | memoryview, build: Callable[..., _S]) -> _S:
    """The snapshot ``build`` (the Snapshot class) makes of bytes made by :func:`write`; ``CorruptDataError`` (a ValueError) says what is
    wrong with bad input, ``BudgetError`` (a ValueError) when decoding it would need more
    memory than ``GYREPROF_MEMORY_BUDGET`` allows."""
    return _read(data, build, decode=True)


def read_encoded(data: bytes | bytearray | memoryview, build: Callable[..., _S]) -> _S:
    """As :func:`read`, for ``build`` the EncodedSnapshot class: every record read and
    checked, each histogram's counts kept encoded (``encoded``: one bytes a row, the
    buckets checked when :func:`add_counts` decodes them), no dense array allocated."""
    return _read(data, build, decode=False)


def _read(data: bytes | bytearray | memoryview, build: Callable[..., _S], *, decode: bool) -> _S:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentTypeError(f"Snapshot.from_bytes needs bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < 6:
        raise CorruptDataError(f"not a gyreprof snapshot: {len(data)} bytes is too short")
    if data[:4] != SNAPSHOT_MAGIC:
        raise CorruptDataError("not a gyreprof snapshot: the magic bytes 'GYRS' are missing")
    version = data[4]
    if version not in _READ_VERSIONS:
        raise CorruptDataError(
            f"snapshot format version {version} is not supported (this gyreprof reads "
            f"versions {', '.join(map(str, _READ_VERSIONS))}); upgrade gyreprof on the "
            "reading side"
        )
    codec = next((c for c in _CODECS.values() if c[0] == data[5]), None)
    if codec is None:
        raise CorruptDataError(f"corrupted snapshot: unknown compression flag {data[5]}")
    try:
        body = codec[2](data[6:])
    except (zlib.error, lzma.LZMAError, EOFError) as exc:
        raise CorruptDataError(f"corrupted or truncated snapshot: {exc}") from None
    try:
        return _limits.check_snapshot(build(**_from_body(body, version, decode=decode)))
    except _limits.BudgetError:
        raise
    except ValueError as exc:
        raise CorruptDataError(f"corrupted snapshot: {exc}") from None
    except _limits.DECODE_ERRORS as exc:
        raise CorruptDataError(f"corrupted snapshot: {type(exc).__name__}: {exc}") from None


def _from_body(body: bytes, version: int = 1, *, decode: bool = True) -> dict[str, Any]:
    """The constructor keywords of the snapshot in ``body`` (decompressed): its histograms
    decoded into ``counts`` and checked, or with ``decode=False`` left ``encoded``."""
    if len(body) < 4:
        raise InvalidValueError("header length missing")
    (hlen,) = struct.unpack_from("<I", body, 0)
    if 4 + hlen > len(body):
        raise InvalidValueError("header runs past the end")
    header = json.loads(body[4 : 4 + hlen])
    if not isinstance(header, dict):
        raise InvalidValueError("header is not an object")
    phases = header["phases"]
    if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
        raise InvalidValueError("phase names are not a list of strings")
    config = _record(SnapshotConfig, header["config"], "config")
    lowest, highest, sf = config.layout
    L = int(layout_info(lowest, highest, sf)["counts_len"])
    if header["counts_len"] != L:
        raise InvalidValueError(
            f"counts length {header['counts_len']} does not match the layout ({L})"
        )
    pos = 4 + hlen
    nh = len(phases) + 1
    dense = _limits.check_dense(nh, L, what="snapshot")
    stat = _int_table(header["stat"], (nh, 4), "stat table")
    counts = np.zeros((nh, L), dtype=np.int64) if decode else None
    view = memoryview(body)
    lo = layout_edges(lowest, highest, sf)[0]
    decoded = []  # (total, first, last non-empty bucket) of each row, from its decoding
    encoded = []  # each row's encoded counts, where they are not decoded here
    for h in range(nh):
        if pos + 4 > len(body):
            raise InvalidValueError("histogram data truncated")
        (n,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if pos + n > len(body):
            raise InvalidValueError("histogram data truncated")
        if counts is not None:
            decoded.append(decode_counts_into(view[pos : pos + n], L, counts[h]))
        else:
            encoded.append(body[pos : pos + n])
        pos += n
    rolling_arr = None
    if version >= 2:
        if "rolling" in header:
            raise InvalidValueError("rolling windows in the header of a version 2 snapshot")
        shape = header.get("rolling_shape")
        if shape is not None:
            rolling_arr, pos = _rolling_block(body, pos, shape, dense)
    if pos != len(body):
        raise InvalidValueError(f"{len(body) - pos} unexpected bytes after the histograms")
    _check_counts(decoded, stat, lo)
    warm = _int_table(header["warm"], (nh, 3), "warm-up table")
    if version < 2:
        rolling = header.get("rolling")
        rolling_arr = None if rolling is None else _rolling_table(rolling)
    counters = header["counters"]
    if not isinstance(counters, dict):
        raise InvalidValueError("counters are not a mapping")
    sources = header["sources"]
    if not isinstance(sources, list):
        raise InvalidValueError("sources are not a list")
    lap = header["lap_cost_ns"]
    if not isinstance(lap, (int, float)) or isinstance(lap, bool):
        raise InvalidValueError(f"lap cost {lap!r} is not a number")
    histograms = {"counts": counts} if counts is not None else {"encoded": tuple(encoded)}
    return dict(
        **histograms,
        phases=tuple(phases),
        config=config,
        stat=stat,
        warm=warm,
        first=_int_table(header["first"], (nh,), "first values"),
        totals=_record(Totals, header["totals"], "totals"),
        counters=counters,
        times=_record(Times, header["times"], "times"),
        rolling=rolling_arr,
        lap_cost_ns=float(lap),
        sources=tuple(_record(SourceRecord, src, f"sources[{i}]") for i, src in enumerate(sources)),
        meta=_record(Meta, header.get("meta") or {}, "meta"),
    )


def _rolling_block(body: bytes, pos: int, shape: Any, dense: int) -> tuple[np.ndarray, int]:
    """The rolling windows a version-2 snapshot keeps at ``pos`` of ``body`` (a 4-byte
    length, as each histogram has, then ``rows x width`` little-endian int64 in byte
    planes: ``_window_planes``) and the position after them; the
    declared shape is bounded by the memory budget (on top of ``dense`` bytes of counts)
    before anything is allocated."""
    if (
        type(shape) is not list
        or len(shape) != 2
        or not all(type(n) is int and 0 <= n <= _INT64_MAX for n in shape)
    ):
        raise InvalidValueError(f"rolling window shape {shape!r} is not two sizes")
    rows, width = shape
    _limits.check_dense(rows, width, what="snapshot rolling windows", already=dense)
    if pos + 4 > len(body):
        raise InvalidValueError("rolling windows truncated")
    (n,) = struct.unpack_from("<I", body, pos)
    pos += 4
    if n != 8 * rows * width:
        raise InvalidValueError(
            f"rolling windows take {n} bytes; {rows} x {width} int64 need {8 * rows * width}"
        )
    if pos + n > len(body):
        raise InvalidValueError("rolling windows truncated")
    planes = np.frombuffer(body, dtype=np.uint8, count=n, offset=pos).reshape(8, rows * width)
    table = np.ascontiguousarray(planes.T).view("<i8").reshape(rows, width)
    return table.astype(np.int64), pos + n


def _window_planes(rolling: np.ndarray) -> bytes:
    """The rolling windows as a version-2 snapshot stores them: their little-endian int64
    bytes in 8 planes (every value's lowest byte, then every value's next byte, ...), so
    the mostly-zero high bytes make long runs that zlib compresses fast (the plain int64
    bytes took level 9 twice as long as the JSON lists of version 1)."""
    raw = np.ascontiguousarray(rolling, dtype="<i8").reshape(-1).view(np.uint8)
    return np.ascontiguousarray(raw.reshape(-1, 8).T).tobytes()


def _rolling_table(v: Any) -> np.ndarray:
    """The decoded rolling windows (a list of equal-length lists of integers) as an int64
    table, read flat (twice as fast as ``np.asarray`` of the nested lists)."""
    if not isinstance(v, list):
        raise InvalidValueError("rolling windows have the wrong shape")
    if not v:
        return np.zeros((0, 0), dtype=np.int64)
    # every row a list, all of one length (checked at C speed: no Python loop per row)
    if set(map(type, v)) != {list} or len(set(map(len, v))) != 1:
        raise InvalidValueError("rolling windows have the wrong shape")
    width = len(v[0])
    if width == 0:
        return np.zeros((0, 0), dtype=np.int64)
    flat = itertools.chain.from_iterable(v)
    return np.fromiter(flat, dtype=np.int64, count=len(v) * width).reshape(len(v), width)


def _int_table(v: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """A decoded JSON table as int64, refusing what is not integers of ``shape``."""
    arr = np.asarray(v)
    if arr.shape != shape:
        raise InvalidValueError(f"{what} has the wrong shape")
    if arr.size and arr.dtype.kind not in "iu":
        raise InvalidValueError(f"{what} holds values that are not 64-bit integers")
    # read-only: the Snapshot it goes into takes it as it is, without a copy of its own
    out = np.ascontiguousarray(arr, dtype=np.int64)
    out.flags.writeable = False
    return out


def _check_counts(
    decoded: Sequence[tuple[int, int, int]], stat: np.ndarray, lo: np.ndarray
) -> None:
    """All decoded histograms against their stat records: no negative bucket (the decoder
    writes none), the buckets adding up to the count (at most ``COUNT_CAP``), and the
    extremes inside the buckets that hold values. Read from what the decoder found in
    its one pass (``decode_counts_into``): each row's exact total and its first and last
    bucket holding a count, so the counts are not walked again. ``lo`` holds each bucket's lowest value (increasing), so the bucket of a value ``v``
    is the last with ``lo <= v``: bucket ``i1`` lies above the max's when
    ``lo[i1] > vmax``, and bucket ``i0`` below the min's when ``lo[i0 + 1] <= vmin``."""
    if not len(decoded):
        return
    for h, (got, record) in enumerate(zip(decoded, stat.tolist(), strict=True)):
        _check_row(h, got, record, lo)


def _check_row(h: int, decoded: tuple[int, int, int], record: list[int], lo: np.ndarray) -> None:
    """Histogram ``h``'s decoded ``(total, first, last)`` against its stat ``record``
    (count, sum, min, max): see :func:`_check_counts`."""
    total, i0, i1 = decoded
    n, _, vmin, vmax = record
    if n > COUNT_CAP:
        raise InvalidValueError("a histogram counts more than the 2^62 - 1 values a snapshot holds")
    if total != n:
        raise InvalidValueError("histogram counts do not add up to the recorded totals")
    if n <= 0 or vmin < 0 or vmin > vmax:
        return  # the constructor judges the extremes
    if (i0 < len(lo) - 1 and int(lo[i0 + 1]) <= vmin) or int(lo[i1]) > vmax:
        raise InvalidValueError(
            f"histogram {h}: min {vmin} / max {vmax} lie outside the buckets that hold its values"
        )


def add_counts(
    encoded: Sequence[bytes],
    stat: np.ndarray,
    layout: tuple[int, int, int],
    counts: np.ndarray,
    rows: Sequence[int],
) -> None:
    """Decode each histogram of ``encoded`` (one a row of ``stat``, a snapshot's records,
    read by :func:`read_encoded`) and add it to row ``rows[h]`` of ``counts`` (int64, the
    layout's length): a sum of many snapshots' histograms without a dense copy of each.
    Each row is checked as :func:`read` checks it before anything of it is added
    (``CorruptDataError`` saying what is wrong); a row's buckets are decoded into one
    scratch row, and only the buckets between its first and last that hold a count are
    added and cleared. The caller keeps the sums within int64 (``merge`` refuses rows
    whose counts would pass it, and each row's total is its record's count)."""
    length = counts.shape[1]
    lo = layout_edges(*layout)[0]
    scratch = np.zeros(length, dtype=np.int64)
    try:
        for h, (data, record, dst) in enumerate(zip(encoded, stat.tolist(), rows, strict=True)):
            got = decode_counts_into(data, length, scratch)
            _check_row(h, got, record, lo)
            _, i0, i1 = got
            if i0 >= 0:  # the decoder wrote counts between i0 and i1 only (zeros elsewhere)
                span = slice(i0, i1 + 1)
                np.add(counts[dst, span], scratch[span], out=counts[dst, span])
                scratch[span] = 0
    except ValueError as exc:
        raise CorruptDataError(f"corrupted snapshot: {exc}") from None
