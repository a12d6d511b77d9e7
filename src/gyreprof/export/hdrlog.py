"""HdrHistogram V2 compressed histograms and the interval log format, both directions.

gyreprof's counts arrays have HdrHistogram's exact layout, so a histogram is
exported by encoding its counts, not by re-bucketing. The wire form of one
histogram (big-endian throughout):

- 4-byte compression cookie (base ``0x1c849304``; written as ``0x1c849314``,
  the word-size nibble set as HdrHistogram's Java writer sets it), 4-byte
  length of what follows, then zlib of:
- 40-byte header: encoding cookie (base ``0x1c849303``), payload length,
  normalizing index offset, significant figures, lowest discernible value
  (int64), highest trackable value (int64), integer-to-double ratio (float64);
- the counts, ZigZag LEB128 varints with runs of zeros as negative numbers
  (``gyreprof._core.encode_counts``).

The log is text: ``#[...]`` comment lines (format version, StartTime,
BaseTime), a legend line, then one line per interval histogram:
``Tag=<tag>,<start s>,<length s>,<max>,<base64 histogram>``. Readers such as
HdrHistogram's HistogramLogProcessor, HdrHistogramVisualizer and the Python
``hdrhistogram`` package read what :func:`hdr_log` writes.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import math
import os
import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from gyreprof._core import (
    Histogram,
    decode_counts,
    encode_counts,
    layout_info,
    percentiles_from_counts,
)
from gyreprof._support import checks as _checks
from gyreprof._support import io as _io
from gyreprof._support import limits as _limits
from gyreprof._support.errors import (
    ArgumentTypeError,
    CorruptDataError,
    InvalidValueError,
    MissingFileError,
)
from gyreprof._support.validate import check_positive_number
from gyreprof._version import __version__
from gyreprof.export._source import Resolved, require_histograms, resolve, write_text
from gyreprof.model.histogram import STEP, layout_edges

ENCODING_COOKIE_BASE = 0x1C849303
COMPRESSION_COOKIE_BASE = 0x1C849304
_V2_WORD_NIBBLE = 0x10  # HdrHistogram writes V2 cookies with this nibble set
_OLD_COOKIES = {0x1C849301: "V1", 0x1C849302: "V1", 0x1C849308: "V0", 0x1C849309: "V0"}
_HEADER = struct.Struct(">IIiiqqd")  # 40 bytes
_OUTER = struct.Struct(">II")
LOG_FORMAT_VERSION = "1.3"
LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'

_RE_START = re.compile(r"^#\[StartTime:\s*([-+0-9.eE]+)")
_RE_BASE = re.compile(r"^#\[BaseTime:\s*([-+0-9.eE]+)")
_TAG_BAD = re.compile(r"[\s,=]")


def _cookie_base(cookie: int) -> int:
    return cookie & ~0xF0


# ------------------------------------------------------------------- histogram


@dataclass(frozen=True)
class HdrHistogramData:
    """A decoded HdrHistogram: counts in HdrHistogram's layout plus its parameters.

    Values are in the histogram's integer unit (ns for gyreprof's own
    histograms); ``percentile`` multiplies by ``integer_to_double_ratio``.
    """

    counts: np.ndarray
    lowest: int
    highest: int
    significant_figures: int
    integer_to_double_ratio: float = 1.0

    @property
    def layout(self) -> tuple[int, int, int]:
        return self.lowest, self.highest, self.significant_figures

    @property
    def total_count(self) -> int:
        return int(self.counts.sum())

    def percentiles(self, qs: Sequence[float]) -> np.ndarray:
        """Values at percentiles ``qs`` (0..100): the one rule (gyreprof._core.histogram), no
        exact extremes to clamp to."""
        vals = percentiles_from_counts(
            np.ascontiguousarray(self.counts, dtype=np.int64), list(qs), *self.layout, -1, -1
        )
        return np.asarray(vals) * self.integer_to_double_ratio

    def percentile(self, q: float) -> float:
        return float(self.percentiles([q])[0])

    def _nonzero(self) -> np.ndarray:
        return np.flatnonzero(self.counts)

    @property
    def min(self) -> float:
        """Lowest value the smallest occupied bucket holds (NaN when empty)."""
        nz = self._nonzero()
        if not len(nz):
            return math.nan
        lo, _ = layout_edges(*self.layout)
        return float(lo[nz[0]]) * self.integer_to_double_ratio

    @property
    def max(self) -> float:
        """Highest value the largest occupied bucket holds (NaN when empty)."""
        nz = self._nonzero()
        if not len(nz):
            return math.nan
        lo, width = layout_edges(*self.layout)
        return float(lo[nz[-1]] + width[nz[-1]] - 1) * self.integer_to_double_ratio

    @property
    def mean(self) -> float:
        """Mean of bucket midpoints weighted by counts (NaN when empty)."""
        n = self.total_count
        if not n:
            return math.nan
        lo, width = layout_edges(*self.layout)
        mid = lo + (width - 1) / 2.0
        return float((mid * self.counts).sum() / n) * self.integer_to_double_ratio

    def __add__(self, other: HdrHistogramData) -> HdrHistogramData:
        if not isinstance(other, HdrHistogramData):
            return NotImplemented
        if (
            other.layout != self.layout
            or other.integer_to_double_ratio != self.integer_to_double_ratio
        ):
            raise InvalidValueError(
                f"cannot add histograms of different layouts {self.layout} and {other.layout}"
            )
        _checks.check_counts(  # Python ints: a sum past int64 is refused, never wrapped
            np.asarray(self.counts, dtype=object) + np.asarray(other.counts, dtype=object),
            what="the sum of two histograms",
        )
        return HdrHistogramData(
            counts=self.counts + other.counts,
            lowest=self.lowest,
            highest=self.highest,
            significant_figures=self.significant_figures,
            integer_to_double_ratio=self.integer_to_double_ratio,
        )

    def encode(self) -> str:
        """Base64 V2 compressed form (what a log line carries)."""
        return encode_histogram(self.counts, *self.layout, ratio=self.integer_to_double_ratio)


def encode_histogram(
    counts: np.ndarray,
    lowest: int,
    highest: int,
    significant_figures: int,
    *,
    ratio: float = 1.0,
) -> str:
    """Base64 text of a V2 compressed histogram from a counts array in HdrHistogram layout."""
    L = int(layout_info(lowest, highest, significant_figures)["counts_len"])
    arr = np.ascontiguousarray(counts, dtype=np.int64)
    if arr.shape != (L,):
        raise InvalidValueError(
            f"counts must have {L} entries for this layout, got shape {arr.shape}"
        )
    payload = encode_counts(arr)
    inner = (
        _HEADER.pack(
            ENCODING_COOKIE_BASE | _V2_WORD_NIBBLE,
            len(payload),
            0,
            significant_figures,
            lowest,
            highest,
            float(ratio),
        )
        + payload
    )
    comp = zlib.compress(inner, 6)
    outer = _OUTER.pack(COMPRESSION_COOKIE_BASE | _V2_WORD_NIBBLE, len(comp)) + comp
    return base64.b64encode(outer).decode("ascii")


def decode_histogram(data: str | bytes) -> HdrHistogramData:
    """Decode a base64 V2 compressed histogram; ``CorruptDataError`` (a ValueError) names
    what is wrong, ``BudgetError`` (a ValueError) says when it would not fit the memory budget.

    Cost: the declared layout is checked against the memory budget
    (``gyreprof._support.limits``) before the counts array is allocated, and the zlib
    body may inflate only to what that layout can hold (40 header bytes plus at
    most 9 bytes per bucket).
    """
    return _decode_histogram(data, 0)[0]


def _decode_histogram(data: str | bytes, already: int) -> tuple[HdrHistogramData, int]:
    """Decode, refusing counts that would take ``already`` + this one's bytes past the budget."""
    if not isinstance(data, (str, bytes, bytearray, memoryview)):
        raise ArgumentTypeError(
            f"decode_histogram takes base64 text or bytes, got {type(data).__name__}"
        )
    if isinstance(data, str):
        data = data.strip().encode("ascii", "replace")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CorruptDataError(f"broken base64 in the histogram ({exc})") from None
    if len(raw) < _OUTER.size:
        raise CorruptDataError(f"histogram too short: {len(raw)} bytes after base64")
    cookie, length = _OUTER.unpack_from(raw, 0)
    if _cookie_base(cookie) != COMPRESSION_COOKIE_BASE:
        old = _OLD_COOKIES.get(_cookie_base(cookie))
        if old:
            raise CorruptDataError(f"histogram uses the {old} encoding; only V2 is supported")
        raise CorruptDataError(
            f"bad cookie 0x{cookie:08x}: not a V2 compressed HdrHistogram "
            f"(expected 0x{COMPRESSION_COOKIE_BASE:08x})"
        )
    body = raw[_OUTER.size :]
    if length != len(body):
        raise CorruptDataError(f"length field says {length} compressed bytes, {len(body)} follow")
    # the header comes first: read it alone, then inflate only what its layout can hold
    head = zlib.decompressobj()
    try:
        inner = head.decompress(body, _HEADER.size)
    except zlib.error as exc:
        raise CorruptDataError(f"corrupted histogram: zlib says {exc}") from None
    if len(inner) < _HEADER.size:
        raise CorruptDataError(f"histogram header truncated: {len(inner)} bytes")
    icookie, plen, norm, sf, lowest, highest, ratio = _HEADER.unpack_from(inner, 0)
    if _cookie_base(icookie) != ENCODING_COOKIE_BASE:
        raise CorruptDataError(
            f"bad encoding cookie 0x{icookie:08x} inside the compressed histogram"
        )
    if norm != 0:
        raise CorruptDataError(
            f"normalizing index offset {norm} (a shifted histogram) is not supported"
        )
    if not math.isfinite(ratio) or ratio <= 0:
        raise CorruptDataError(f"integer-to-double ratio {ratio} is not a positive number")
    try:
        L = int(layout_info(lowest, highest, sf)["counts_len"])
    except (ValueError, OverflowError) as exc:
        raise CorruptDataError(
            f"impossible histogram settings lowest={lowest} highest={highest} "
            f"significant_figures={sf}: {exc}"
        ) from None
    total = _limits.check_dense(1, L, what="HdrHistogram", already=already)
    if plen < 0 or plen > 9 * (L + 1):
        raise CorruptDataError(f"payload length {plen} is impossible for {L} buckets")
    inner = _limits.inflate(body, what="histogram", cap=_HEADER.size + plen)
    if plen > len(inner) - _HEADER.size:
        raise CorruptDataError(
            f"payload length {plen} runs past the {len(inner) - _HEADER.size} bytes present"
        )
    counts = decode_counts(inner[_HEADER.size : _HEADER.size + plen], L)
    _checks.check_counts(counts, what="histogram")  # no negative count, no int64 wrap
    hist = HdrHistogramData(counts, int(lowest), int(highest), int(sf), float(ratio))
    return hist, total


# ------------------------------------------------------------------------- log


@dataclass(frozen=True)
class HdrInterval:
    """One line of an interval log."""

    tag: str | None
    start_s: float  # as written: seconds after BaseTime (absolute when there is none)
    length_s: float
    max_value: float  # as written (the writer's max divided by its unit ratio)
    histogram: HdrHistogramData

    @property
    def end_s(self) -> float:
        return self.start_s + self.length_s


@dataclass(frozen=True)
class HdrLog:
    """A parsed HdrHistogram interval log."""

    intervals: list[HdrInterval]
    start_time_s: float | None = None  # Unix seconds of #[StartTime], if present
    base_time_s: float | None = None  # Unix seconds of #[BaseTime], if present
    comments: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.intervals)

    def __iter__(self) -> Iterator[HdrInterval]:
        return iter(self.intervals)

    @property
    def tags(self) -> list[str | None]:
        """Tags in order of first appearance (None: untagged lines)."""
        seen: list[str | None] = []
        for iv in self.intervals:
            if iv.tag not in seen:
                seen.append(iv.tag)
        return seen

    def histogram(self, tag: str | None = None) -> HdrHistogramData:
        """All intervals of ``tag`` added up (``tag=None``: the untagged lines)."""
        hs = [iv.histogram for iv in self.intervals if iv.tag == tag]
        if not hs:
            raise InvalidValueError(f"no interval tagged {tag!r} in this log; tags: {self.tags}")
        total = hs[0]
        for h in hs[1:]:
            total = total + h
        return total


def parse_hdr_log(text: str, *, name: str = "log") -> HdrLog:
    """Parse the text of an interval log; ValueError names the line at fault."""
    intervals: list[HdrInterval] = []
    comments: list[str] = []
    start = base = None
    recognised = False
    dense = 0  # bytes of counts decoded so far: all of them stay within the memory budget
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            comments.append(line)
            m = _RE_START.match(line)
            if m:
                start = _float(m.group(1), name, n, "StartTime")
                recognised = True
            m = _RE_BASE.match(line)
            if m:
                base = _float(m.group(1), name, n, "BaseTime")
                recognised = True
            if line.startswith("#[Histogram log format version"):
                recognised = True
            continue
        if line.startswith('"StartTimestamp"') or line.startswith('"Timestamp"'):
            recognised = True
            continue
        tag: str | None = None
        body = line
        if body.startswith("Tag="):
            cut = body.find(",")
            if cut < 0:
                raise CorruptDataError(f"{name}: line {n}: a Tag= with nothing after it")
            tag, body = body[4:cut], body[cut + 1 :]
        parts = body.split(",", 3)
        if len(parts) != 4:
            raise CorruptDataError(
                f"{name}: line {n} is not an HdrHistogram log line "
                f"(expected start,length,max,histogram): {line[:80]!r}"
            )
        t0 = _float(parts[0], name, n, "start timestamp")
        length = _float(parts[1], name, n, "interval length")
        mx = _float(parts[2], name, n, "interval max")
        if length < 0 or mx < 0:
            what = "interval length" if length < 0 else "interval max"
            raise CorruptDataError(
                f"{name}: line {n}: negative {what} {parts[1 if length < 0 else 2]}"
            )
        try:
            hist, dense = _decode_histogram(parts[3], dense)
        except _limits.BudgetError as exc:
            raise _limits.BudgetError(f"{name}: line {n}: {exc}") from None
        except ValueError as exc:
            raise CorruptDataError(f"{name}: line {n}: {exc}") from None
        intervals.append(HdrInterval(tag, t0, length, mx, hist))
        recognised = True
    if not recognised:
        raise CorruptDataError(
            f"{name} is not an HdrHistogram log: no #[...] header, legend or interval line"
        )
    return HdrLog(intervals, start, base, comments)


def _float(text: str, name: str, n: int, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise CorruptDataError(f"{name}: line {n}: {what} {text!r} is not a number") from None
    if not math.isfinite(v):
        raise CorruptDataError(f"{name}: line {n}: {what} {text!r} is not finite")
    return v


def read_hdr_log(source: str | os.PathLike[str] | IO[str]) -> HdrLog:
    """Read an HdrHistogram interval log from a path or an open text stream.

    A path must name a regular file of at most ``gyreprof._support.io.INPUT_CAPS["hdr_log"]``
    bytes (FIFOs, devices and larger files: ValueError); a stream is read up to
    that cap. The histograms decoded from one log share one memory budget.
    """
    cap = _io.input_cap("hdr_log")
    if hasattr(source, "read"):
        name = getattr(source, "name", "log")
        text = source.read(cap + 1)  # type: ignore[union-attr]
        if not isinstance(text, str):
            raise ArgumentTypeError(
                f"read_hdr_log needs a text stream, {name} gives {type(text).__name__}"
            )
        if len(text) > cap:
            raise InvalidValueError(
                f"{name} holds more than {_io.fmt_size(cap)}, the cap for a log"
            )
        return parse_hdr_log(text, name=str(name))
    p = Path(source)  # type: ignore[arg-type]
    if not p.exists():
        raise MissingFileError(f"no such file: {p}")
    try:
        text = _io.read_text(p, "hdr_log")
    except UnicodeDecodeError:
        raise CorruptDataError(f"{p} is not an HdrHistogram log (not UTF-8 text)") from None
    if not text.strip():
        raise CorruptDataError(f"{p} is empty, not an HdrHistogram log")
    return parse_hdr_log(text, name=str(p))


# ---------------------------------------------------------------------- writer


def _tag(name: str, taken: set[str]) -> str:
    tag = _TAG_BAD.sub("_", name) or "_"
    while tag in taken:
        tag += "_"
    taken.add(tag)
    return tag


def _interval_lines(
    res: Resolved, interval_s: float, include_step: bool, ratio: float, base_ns: int
) -> tuple[list[tuple[float, int, str]], str]:
    """(start_s, order, line) per interval and phase, cut from the raw events."""
    ef = res.events_file("interval_s (intervals cut from the ring)")
    ev, tids = ef.events, ef.tids
    keep = ev["duration_ns"] >= 0
    if ef.warmup:
        steady = np.zeros(len(ev), dtype=bool)
        for t, s in ef.steady_start_ns.items():
            steady |= (tids == t) & (ev["start_ns"] >= s)
        keep &= steady
    ev = ev[keep]
    if len(ev) == 0:
        raise InvalidValueError("no steady-state events in the ring to cut into intervals")
    step_ns = int(interval_s * 1e9)
    keys = (ev["start_ns"] - base_ns) // step_ns
    lowest, highest, sf = res.snapshot.layout  # type: ignore[union-attr]
    names = list(ef.phases)
    taken: set[str] = set()
    tags = [_tag(n, taken) for n in names]
    step_tag = _tag("step", taken)
    out = []
    for k in np.unique(keys).tolist():
        in_k = ev[keys == k]
        for order, pid in enumerate([*range(len(names)), -1]):
            if pid == -1 and not include_step:
                continue
            d = in_k["duration_ns"][in_k["phase"] == pid]
            if not len(d):
                continue
            h = Histogram(lowest, highest, sf)
            h.record_many(d)
            b64 = encode_histogram(h.counts_array(), lowest, highest, sf)
            tag = tags[pid] if pid >= 0 else step_tag
            start_s = k * interval_s
            line = f"Tag={tag},{start_s:.6f},{interval_s:.6f},{int(d.max()) / ratio:.6f},{b64}"
            out.append((start_s, order, line))
    note = f"{len(ev)} steady-state events of the ring cut into {interval_s:g} s intervals"
    if ef.overwritten:
        note += f"; the ring had dropped the {ef.overwritten} oldest events"
    return out, note


def hdr_log(
    source: Any,
    path: str | os.PathLike[str] | IO[str] | None = None,
    *,
    interval_s: float | None = None,
    include_step: bool = True,
    max_value_unit_ratio: float = 1e6,
) -> Path | str | None:
    """Write an HdrHistogram V2 interval log: one tag per phase (plus ``step``).

    By default each phase gets one interval holding its whole steady-state
    histogram (full resolution). With ``interval_s`` (a live Profiler or an
    events file from ``save_events``) the raw events are cut into intervals of
    that many seconds.
    Interval_Max is written in ms (max ns / ``max_value_unit_ratio``), as
    HdrHistogram's own writer does. ``path``: a file (returns its Path), an
    open text stream (returns None) or None (returns the text).
    """
    res = resolve(source, what="an HdrHistogram log")
    s = res.summary
    require_histograms(s, "an HdrHistogram log")
    ratio = check_positive_number("max_value_unit_ratio", max_value_unit_ratio)
    if interval_s is not None:
        interval_s = check_positive_number("interval_s", interval_s, unit="seconds")
    base_ns = res.start_ns
    offset = res.unix_offset_ns
    lines = [
        f"#[Histogram log format version {LOG_FORMAT_VERSION}]",
        f"#[Logged with gyreprof {__version__}: steady-state durations in ns, "
        f"Interval_Max in units of {ratio:g} ns]",
    ]
    if base_ns is not None and offset is not None:
        unix_s = (base_ns + offset) / 1e9
        when = _dt.datetime.fromtimestamp(unix_s, tz=_dt.timezone.utc).isoformat()
        lines.append(f"#[StartTime: {unix_s:.3f} (seconds since epoch), {when}]")
        lines.append(f"#[BaseTime: {unix_s:.3f} (seconds since epoch)]")
    body: list[tuple[float, int, str]]
    if interval_s is not None:
        body, note = _interval_lines(res, interval_s, include_step, ratio, base_ns or 0)
        lines.append(f"#[{note}]")
    else:
        steady = res.steady_start_ns
        t0 = (steady - base_ns) / 1e9 if (steady is not None and base_ns is not None) else 0.0
        length = s.elapsed_s  # a merged summary's elapsed_s is already its wall-clock span
        taken: set[str] = set()
        tags = {name: _tag(name, taken) for name in s.phases}
        step_tag = _tag("step", taken)
        body = []
        items = list(s.phases.items())
        if include_step and s.step.count:
            items.append((STEP, s.step))
        for order, (name, st) in enumerate(items):
            hist = st.histogram
            if hist is None:
                continue  # an empty phase of a summary saved without histograms
            b64 = encode_histogram(hist.counts, *hist.layout)
            mx = 0.0 if st.count == 0 else st.max / ratio
            tag = step_tag if name == STEP else tags[name]
            body.append((t0, order, f"Tag={tag},{t0:.6f},{length:.6f},{mx:.6f},{b64}"))
    lines.append(LEGEND)
    body.sort(key=lambda x: (x[0], x[1]))
    lines.extend(line for _, _, line in body)
    text = "\n".join(lines) + "\n"
    return write_text(text, path)


__all__ = [
    "COMPRESSION_COOKIE_BASE",
    "ENCODING_COOKIE_BASE",
    "HdrHistogramData",
    "HdrInterval",
    "HdrLog",
    "decode_histogram",
    "encode_histogram",
    "hdr_log",
    "parse_hdr_log",
    "read_hdr_log",
]
