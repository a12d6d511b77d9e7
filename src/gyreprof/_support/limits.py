"""Memory caps: what a Profiler may ask for, and what a decoder may allocate.

One number, the *memory budget*, bounds both:

- ``Profiler(...)`` refuses settings whose stats block plus event ring would
  need more than the budget, and says how much they need;
- decoders (snapshot bytes, Summary JSON, HdrHistogram logs) check every
  declared size against the budget and against the payload actually present
  *before* allocating. Dense histogram arrays may take at most the budget; the
  inflated (decompressed) body of a snapshot or histogram at most a quarter of
  it. So the memory a decoder uses is bounded by its input size plus the budget.

The default budget is :data:`DEFAULT_MEMORY_BUDGET` (1 GiB); set
``GYREPROF_MEMORY_BUDGET`` (bytes, ``K``/``M``/``G`` suffixes allowed, e.g.
``GYREPROF_MEMORY_BUDGET=16G``) to raise or lower it.

Decoded snapshots are also checked for what a later ``summary()`` needs
(:func:`check_snapshot`), so that bad input fails when it is read, not later.
"""

from __future__ import annotations

import math
import os
import struct
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from gyreprof._support.errors import CorruptDataError, GyreprofError, InvalidValueError
from gyreprof._support.io import fmt_size, parse_size

__all__ = [
    "BudgetError",
    "DEFAULT_MEMORY_BUDGET",
    "DECODE_ERRORS",
    "ENV_MEMORY_BUDGET",
    "check_dense",
    "check_profiler_budget",
    "check_snapshot",
    "check_summary_dict",
    "decode_errors",
    "inflate",
    "inflate_cap",
    "memory_budget",
]

ENV_MEMORY_BUDGET = "GYREPROF_MEMORY_BUDGET"
DEFAULT_MEMORY_BUDGET = 1 << 30

#: Exceptions that malformed input can raise inside a decoder; all become ValueError.
DECODE_ERRORS: tuple[type[BaseException], ...] = (
    KeyError,
    TypeError,
    IndexError,
    AttributeError,
    OverflowError,
    ZeroDivisionError,
    RecursionError,
    UnicodeDecodeError,
    EOFError,
    zlib.error,
    struct.error,
)

_T = TypeVar("_T")


class BudgetError(GyreprofError, ValueError):
    """Input (or settings) that would need more memory than the budget allows.

    A ValueError, like :class:`~gyreprof._support.errors.CorruptDataError`, but not one:
    the input may be valid, and raising the budget reads it.
    """


def memory_budget() -> int:
    """The memory budget in bytes (``GYREPROF_MEMORY_BUDGET`` or the default)."""
    env = os.environ.get(ENV_MEMORY_BUDGET)
    return parse_size(env, ENV_MEMORY_BUDGET) if env else DEFAULT_MEMORY_BUDGET


def inflate_cap() -> int:
    """Most bytes a compressed snapshot or histogram may inflate to."""
    return memory_budget() // 4


def _sizes(need: int, budget: int) -> tuple[str, str]:
    """Both sizes, in bytes where rounding would make them read the same."""
    a, b = fmt_size(need), fmt_size(budget)
    return (a, b) if a != b else (f"{need:,} bytes", f"{budget:,} bytes")


def _raise_hint() -> str:
    return f"set {ENV_MEMORY_BUDGET} (e.g. {ENV_MEMORY_BUDGET}=16G) to allow more"


# ------------------------------------------------------------------ profilers


def check_profiler_budget(
    n_phases: int,
    *,
    capacity: int,
    significant_figures: int,
    lowest_ns: int,
    highest_ns: int,
    max_windows: int,
    max_counters: int,
    **_other: Any,
) -> int:
    """Bytes one Recorder with these settings needs; ValueError above the budget.

    Settings the Recorder itself refuses (out-of-range counts, impossible
    layouts) are left for it to report; this only weighs valid ones.
    """
    from gyreprof._core import EVENT_DTYPE, Recorder

    if not (1 <= n_phases <= 255 and 1 <= capacity <= (1 << 30)):
        return 0
    if not (1 <= max_windows <= (1 << 20) and 0 <= max_counters <= 4096):
        return 0
    try:
        stats = int(
            Recorder.required_bytes(
                n_phases,
                significant_figures=significant_figures,
                lowest_ns=lowest_ns,
                highest_ns=highest_ns,
                max_windows=max_windows,
                max_counters=max_counters,
            )
        )
    except (ValueError, OverflowError, TypeError):
        return 0  # the Recorder says what is wrong
    ring_len = 1 << max(0, int(capacity) - 1).bit_length()
    ring = ring_len * EVENT_DTYPE.itemsize
    need = stats + ring
    budget = memory_budget()
    if need > budget:
        need_s, budget_s = _sizes(need, budget)
        s = "s" if n_phases != 1 else ""
        raise BudgetError(
            f"{n_phases} phase{s} at {significant_figures} significant figures need "
            f"{need_s} per recorder (stats block {fmt_size(stats)} with "
            f"max_windows={max_windows}, event ring {fmt_size(ring)} for capacity={capacity}), "
            f"above the memory budget of {budget_s}; lower significant_figures, "
            f"phases, max_windows or capacity, or {_raise_hint()}"
        )
    return need


# ------------------------------------------------------------------- decoders


def check_dense(rows: int, length: int, *, what: str, already: int = 0) -> int:
    """Refuse a dense int64 array of ``rows x length`` (on top of ``already`` bytes)
    above the budget; returns the running total of bytes."""
    if rows < 0 or length < 0:
        raise InvalidValueError(f"{what}: negative size {rows} x {length}")
    need = already + 8 * rows * length
    budget = memory_budget()
    if need > budget:
        need_s, budget_s = _sizes(need, budget)
        said = (
            f"{rows} more histogram(s) of {length} buckets bring its counts to {need_s}"
            if already
            else f"{rows} histogram(s) of {length} buckets need {need_s} of counts"
        )
        raise BudgetError(f"{what}: {said}, above the memory budget of {budget_s}; {_raise_hint()}")
    return need


def inflate(
    data: bytes, *, what: str, wbits: int = zlib.MAX_WBITS, cap: int | None = None
) -> bytes:
    """zlib-inflate ``data`` to at most ``cap`` (default :func:`inflate_cap`) bytes."""
    limit = inflate_cap() if cap is None else cap
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as exc:
        raise CorruptDataError(f"corrupted or truncated {what}: zlib says {exc}") from None
    if len(out) > limit:
        if cap is not None:
            raise CorruptDataError(f"corrupted {what}: it inflates past its declared {limit} bytes")
        raise BudgetError(
            f"{what} inflates to more than {fmt_size(limit)}, the cap for this input; "
            f"{_raise_hint()}"
        )
    if not d.eof:
        raise CorruptDataError(f"corrupted or truncated {what}: the compressed data ends early")
    return out


def inflate_lzma(data: bytes, *, what: str) -> bytes:
    """xz-inflate ``data`` to at most :func:`inflate_cap` bytes."""
    import lzma

    limit = inflate_cap()
    d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        out = d.decompress(data, limit + 1)
    except lzma.LZMAError as exc:
        raise CorruptDataError(f"corrupted or truncated {what}: lzma says {exc}") from None
    if len(out) > limit:
        raise BudgetError(
            f"{what} inflates to more than {fmt_size(limit)}, the cap for this input; "
            f"{_raise_hint()}"
        )
    if not d.eof:
        raise CorruptDataError(f"corrupted or truncated {what}: the compressed data ends early")
    return out


@contextmanager
def decode_errors(what: str) -> Iterator[None]:
    """Turn the exceptions malformed input raises (:data:`DECODE_ERRORS`) into
    :class:`~gyreprof._support.errors.CorruptDataError` (a ValueError)."""
    try:
        yield
    except ValueError:
        raise
    except DECODE_ERRORS as exc:
        raise CorruptDataError(f"{what}: {type(exc).__name__}: {exc}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ints(d: Any, keys: Any, what: str, *, required: bool = False) -> None:
    if not isinstance(d, Mapping):
        raise InvalidValueError(f"{what} is not a mapping")
    for k in keys:
        if k not in d:
            if required:
                raise InvalidValueError(f"{what} lacks {k!r}")
            continue
        if not _is_int(d[k]) or not -(2**63) <= d[k] < 2**63:
            raise InvalidValueError(f"{what}[{k!r}] is {d[k]!r}, not a 64-bit integer")


def _numbers(d: Mapping[str, Any], keys: Any, what: str) -> None:
    for k in keys:
        if k in d and (not _is_num(d[k]) or not math.isfinite(float(d[k])) or d[k] < 0):
            raise InvalidValueError(f"{what}[{k!r}] is {d[k]!r}, not a finite number >= 0")


def check_snapshot(snap: _T) -> _T:
    """``snap`` if a ``summary()`` of it can be computed and printed; ValueError otherwise.

    The Snapshot's records check their own fields and how its sums, extremes and
    counts agree (``gyreprof.model.snapshot``); this adds what depends on the budget and
    on the rolling-window layout: the windows' width and how many were closed; and
    the count cap of a snapshot that was read in (a file, a live segment): at most
    2^62 - 1 values per histogram, so that a merge of two accepted snapshots still
    counts within int64 (a merge may hold up to the int64 limit itself).
    """
    from gyreprof._support.block import window_stride
    from gyreprof._support.checks import COUNT_CAP

    s: Any = snap
    nh = len(s.phases) + 1
    for row in s.rows:
        if row.count > COUNT_CAP or row.warm_count > COUNT_CAP:
            raise InvalidValueError(
                f"histogram {row.name!r} counts more than the 2^62 - 1 values a snapshot holds"
            )
    closed = s.meta.windows_closed
    if closed is not None and s.rolling is not None and closed < len(s.rolling):
        raise InvalidValueError("meta['windows_closed'] is below the number of windows kept")
    rolling = s.rolling
    if rolling is not None and rolling.size:
        width = window_stride(nh - 1)
        if rolling.ndim != 2 or rolling.shape[1] != width:
            raise InvalidValueError(
                f"rolling windows have {rolling.shape[-1]} columns; {nh} histograms need {width}"
            )
    return snap


def check_summary_dict(d: Any) -> None:
    """Before a Summary is rebuilt from ``d``: its histograms fit the budget."""
    if not isinstance(d, Mapping):
        return  # from_dict says what is wrong
    hist = d.get("histograms")
    if not isinstance(hist, Mapping):
        return
    from gyreprof._core import layout_info

    total = 0
    for name, h in hist.items():
        if not isinstance(h, Mapping):
            raise InvalidValueError(f"histogram {name!r} is not a mapping")
        lay = h.get("layout")
        if not isinstance(lay, list) or len(lay) != 3 or not all(_is_int(x) for x in lay):
            raise InvalidValueError(f"histogram {name!r}: layout is not three integers")
        if not all(-(2**63) <= x < 2**63 for x in lay):
            raise InvalidValueError(f"histogram {name!r}: layout {lay} is out of range")
        if not -(2**31) <= lay[2] < 2**31:
            raise InvalidValueError(
                f"histogram {name!r}: significant figures {lay[2]} out of range"
            )
        length = int(layout_info(*lay)["counts_len"])
        total = check_dense(1, length, what="summary", already=total)
