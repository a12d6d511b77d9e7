"""Checks a decoder runs on what it read, before anything is built from it.

- :func:`loads_bounded`: ``json.loads`` of at most ``max_bytes`` bytes whose
  nesting is checked first (at most ``max_depth`` levels of ``[``/``{``), so a
  deeply nested document is a :class:`~gyreprof._support.errors.CorruptDataError`,
  never a RecursionError;
- :func:`check_stat_row` / :func:`check_stat_rows`: a histogram's
  ``(count, sum, min, max)`` against each other (the mean lies in
  ``[min, max]``, sums and counts are not negative), so that ``merge``,
  ``summary()``, ``str()`` and ``percentile()`` of an accepted record work.

Every check raises a ``ValueError`` subclass that says what was wrong and where.
This module imports nothing from gyreprof but the error types.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gyreprof._support.errors import CorruptDataError

__all__ = [
    "JSON_MAX_DEPTH",
    "check_json_depth",
    "check_stat_row",
    "check_stat_rows",
    "json_depth",
    "loads_bounded",
]

#: Nesting any gyreprof JSON record needs is below 10; 64 leaves room and stays far
#: from the interpreter's recursion limit.
JSON_MAX_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # every byte but the brackets


def json_depth(data: bytes | str) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text (strings skipped); linear time."""
    import numpy as np

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    only = _STRING.sub(b"", raw).translate(None, _BRACKETS)
    if not only:
        return 0
    arr = np.frombuffer(only, dtype=np.uint8)
    steps = np.where((arr == 0x5B) | (arr == 0x7B), 1, -1)
    return max(0, int(np.cumsum(steps).max()))


def check_json_depth(data: bytes | str, *, what: str, max_depth: int = JSON_MAX_DEPTH) -> None:
    """CorruptDataError when ``data`` nests deeper than ``max_depth``."""
    depth = json_depth(data)
    if depth > max_depth:
        raise CorruptDataError(
            f"{what}: JSON nested {depth} levels deep (at most {max_depth} are read)"
        )


def loads_bounded(
    data: bytes | str,
    *,
    what: str,
    max_bytes: int | None = None,
    max_depth: int = JSON_MAX_DEPTH,
) -> Any:
    """``json.loads(data)`` after checking its size and nesting; CorruptDataError (a
    ValueError) naming ``what`` for text that is too big, too deep, or not JSON."""
    if max_bytes is not None and len(data) > max_bytes:
        raise CorruptDataError(
            f"{what}: {len(data):,} bytes of JSON, above the {max_bytes:,} read at most"
        )
    check_json_depth(data, what=what, max_depth=max_depth)
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CorruptDataError(f"{what}: unreadable JSON ({exc})") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_stat_row(
    count: Any, total: Any, vmin: Any, vmax: Any, *, what: str, exact_sum: bool = True
) -> None:
    """``(count, sum, min, max)`` of one histogram are possible together; CorruptDataError
    otherwise.

    Rules: all integers; ``count >= 0``; an empty histogram has sum 0; min and max are
    ``-1`` (unknown: a copy caught before they were written) or ``0 <= min <= max``;
    ``sum >= 0``; and, when both extremes are known and ``exact_sum`` (the sum is the
    exact total, not a saturated one), ``count * min <= sum <= count * max`` so the mean
    lies in ``[min, max]``. Python integers: no overflow whatever the values.
    """
    for name, v in (("count", count), ("sum", total), ("min", vmin), ("max", vmax)):
        if not _is_int(v):
            raise CorruptDataError(f"{what}: {name} is {v!r}, not an integer")
    if count < 0:
        raise CorruptDataError(f"{what}: negative count {count}")
    if total < 0:
        raise CorruptDataError(f"{what}: negative sum {total}")
    if vmin < -1 or vmax < -1:
        raise CorruptDataError(f"{what}: min {vmin} / max {vmax} below -1 (the 'unknown' mark)")
    if count == 0:
        if total != 0:
            raise CorruptDataError(f"{what}: no events but a sum of {total}")
        return
    if vmin >= 0 and vmax >= 0:
        if vmin > vmax:
            raise CorruptDataError(f"{what}: min {vmin} above max {vmax}")
        if exact_sum and not count * vmin <= total <= count * vmax:
            mean = total / count
            raise CorruptDataError(
                f"{what}: {count} events summing to {total} have a mean of {mean:.6g}, "
                f"outside [min, max] = [{vmin}, {vmax}]"
            )


def check_stat_rows(rows: Iterable[Iterable[Any]], *, what: str) -> None:
    """:func:`check_stat_row` for each ``(count, sum, min, max)`` row."""
    for i, row in enumerate(rows):
        count, total, vmin, vmax = (int(x) if not isinstance(x, float) else x for x in row)
        if isinstance(total, float) and math.isnan(total):
            continue  # a sum that is missing (could not be exact): nothing to check
        check_stat_row(count, total, vmin, vmax, what=f"{what}, histogram {i}")


# ------------------------------------------------------------------ exact sums

INT64_MAX = (1 << 63) - 1
#: the most values one histogram of a snapshot read in may count: a merge of two still
#: counts within int64
COUNT_CAP = (1 << 62) - 1
#: ``Snapshot.meta`` field: (row, exact sum) pairs for the histograms whose sum passed
#: the int64 range of the stat table (which then holds INT64_MAX for them)
EXACT_SUMS_KEY = "exact_sums"
#: the same for the warm-up sums (``Snapshot.warm``, whose column 1 is the sum too)
EXACT_WARM_SUMS_KEY = "exact_warm_sums"


def _exact_pairs(meta: Any, key: str) -> dict[int, int]:
    """The exact big sums a snapshot's meta holds: a ``Meta`` record's (row, sum) pairs,
    or, in a plain mapping (a summary JSON's meta), ``{"row": sum}`` or the pairs."""
    raw = meta.get(key) if isinstance(meta, Mapping) else getattr(meta, key, None)
    items: Any = raw.items() if isinstance(raw, Mapping) else (raw or ())
    out: dict[int, int] = {}
    for pair in items:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            continue
        row, total = pair
        if isinstance(row, str) and row.isdigit():
            row = int(row)
        if (
            isinstance(row, int)
            and isinstance(total, int)
            and not isinstance(total, bool)
            and total >= 0
        ):
            out[int(row)] = total
    return out


def exact_sums(stat: Any, meta: Any, key: str = EXACT_SUMS_KEY) -> list[int | None]:
    """Each histogram's exact steady sum: the stat table's sum, or the exact value kept
    in the meta's ``exact_sums`` where the table holds INT64_MAX; None where the table
    holds INT64_MAX and nothing exact is known (a sum saturated by a merge or an older
    writer): the figure is missing, not the limit."""
    big = _exact_pairs(meta, key)
    out: list[int | None] = []
    for row, total in enumerate(int(v) for v in stat[:, 1].tolist()):
        e = big.get(row)
        if e is not None:
            out.append(e)
        elif total >= INT64_MAX:
            out.append(None)
        else:
            out.append(total)
    return out


def store_exact_sums(
    stat: Any, meta: dict[str, Any], sums: list[int | None], key: str = EXACT_SUMS_KEY
) -> None:
    """Write ``sums`` into the stat table (held at INT64_MAX above its range, or when
    unknown) and the exact big ones into ``meta[key]`` as (row, sum) pairs (the
    keyword a ``Meta`` record takes)."""
    big: list[tuple[int, int]] = []
    for row, total in enumerate(sums):
        if total is None:
            stat[row, 1] = INT64_MAX
        elif total > INT64_MAX:
            stat[row, 1] = INT64_MAX
            big.append((row, int(total)))
        else:
            stat[row, 1] = total
    if big:
        meta[key] = tuple(big)
    else:
        meta.pop(key, None)


def check_counts(counts: Any, *, what: str) -> int:
    """Histogram bucket counts: none negative, and their total (returned, a Python int)
    within int64, so that sums, merges and percentiles of them cannot wrap;
    CorruptDataError otherwise."""
    import numpy as np

    arr = np.asarray(counts)
    if arr.size == 0:
        return 0
    if int(arr.min()) < 0:
        raise CorruptDataError(f"{what}: a negative bucket count ({int(arr.min())})")
    top = int(arr.max())
    if arr.dtype != object and top * arr.size <= INT64_MAX:
        total = int(arr.sum())  # cannot wrap
    else:
        total = sum(int(x) for x in arr.tolist())
    if total > INT64_MAX:
        raise CorruptDataError(f"{what}: bucket counts add up to {total}, past the int64 range")
    return total


# ------------------------------------------------------------------ summary JSON

_PHASE_FLOATS = ("mean", "min", "max", "p50", "p90", "p99", "p999", "share", "sum_ns")
_ORDER = ("min", "p50", "p90", "p99", "p999", "max")


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: how far above 1 shares may add up (each was rounded on its own, then printed)
SHARE_ROUNDING = 1e-6
#: the figures of a phase with events that are never missing (mean, share and sum are
#: missing when the exact sum is not known)
_REQUIRED_WITH_EVENTS = ("min", "max", "p50", "p90", "p99", "p999")


def share_base(step_total: float, phase_total: float) -> float:
    """What phase shares are fractions of: the step time, or all phase time where that
    is more (no steps marked; durations given to ``record()``, which tile nothing), so
    that shares stay in [0, 1] and add up to at most 1. NaN when either is unknown."""
    if math.isnan(step_total) or math.isnan(phase_total):
        return math.nan
    return max(step_total, phase_total)


def check_shares(shares: Mapping[str, Any], *, what: str) -> None:
    """The phase shares of one source are possible: each a number in [0, 1] (null or
    NaN: missing) and together at most 1 (within rounding); CorruptDataError naming the
    share that is not."""
    total = 0.0
    for name, v in shares.items():
        if v is None:
            continue
        if not _num(v):
            raise CorruptDataError(f"{what}: the share of {name!r} is {v!r}, not a number")
        f = float(v)
        if math.isnan(f):
            continue
        if not 0.0 <= f <= 1.0 + SHARE_ROUNDING:
            raise CorruptDataError(
                f"{what}: the share of {name!r} is {v!r}, outside [0, 1] (a fraction of the time)"
            )
        total += f
    if total > 1.0 + SHARE_ROUNDING * max(1, len(shares)):
        raise CorruptDataError(
            f"{what}: the phase shares add up to {total:.6g}, above 1 (all of the time)"
        )


def check_phase_values(pd: Any, *, what: str, share: bool = True) -> None:
    """One phase of a summary dict (``PhaseStats.to_dict()``) is possible: an integer
    count >= 0, numbers (NaN or null allowed: missing) that are not infinite or negative,
    ``min <= p50 <= p90 <= p99 <= p99.9 <= max`` and ``min <= mean <= max`` when there
    are events, and a total of ``mean * count``; CorruptDataError naming what is wrong."""
    if not hasattr(pd, "get"):
        raise CorruptDataError(f"{what} is not a mapping")
    count = pd.get("count")
    if not _is_int(count) or count < 0:
        raise CorruptDataError(f"{what}: count is {count!r}, not an integer >= 0")
    vals: dict[str, float] = {}
    for k in _PHASE_FLOATS:
        if k not in pd:
            continue
        v = pd[k]
        if v is None or v in ("nan",):  # a missing figure: null (or the older "nan")
            vals[k] = math.nan
            continue
        if not _num(v):
            raise CorruptDataError(f"{what}: {k} is {v!r}, not a number")
        f = float(v)
        if math.isinf(f) or f < 0:
            raise CorruptDataError(f"{what}: {k} is {v!r}, not a finite number >= 0")
        if k in _ORDER and f >= 2.0**63:
            raise CorruptDataError(f"{what}: {k} is {v!r} ns, past the int64 range of a duration")
        vals[k] = f
    fraction = vals.get("share")
    if share and fraction is not None and fraction > 1.0 + SHARE_ROUNDING:
        raise CorruptDataError(f"{what}: share is {pd['share']!r}, above 1 (all of the time)")
    if count == 0:
        return
    for k in _REQUIRED_WITH_EVENTS:
        if k in vals and math.isnan(vals[k]):
            raise CorruptDataError(
                f"{what}: {k} is {pd[k]!r} for {count} events; a number is required"
            )
    known = [(k, vals[k]) for k in _ORDER if k in vals and not math.isnan(vals[k])]
    for (ka, a), (kb, b) in zip(known, known[1:], strict=False):
        if a > b * (1 + 1e-12):
            raise CorruptDataError(f"{what}: {ka} {a:g} is above {kb} {b:g}")
    mean, lo, hi = vals.get("mean"), vals.get("min"), vals.get("max")
    if mean is not None and not math.isnan(mean) and lo is not None and hi is not None:
        if not lo * (1 - 1e-9) <= mean <= hi * (1 + 1e-9):
            raise CorruptDataError(
                f"{what}: mean {mean:g} of {count} events is outside [min, max] = [{lo:g}, {hi:g}]"
            )
        total = vals.get("sum_ns")
        if total is not None and not math.isnan(total) and total > 0:
            if abs(total - mean * count) > 1e-6 * max(total, mean * count):
                raise CorruptDataError(
                    f"{what}: sum {total:g} is not {count} events x mean {mean:g}"
                )


_WINDOW_FIGURES = ("p50", "p90", "p99", "max")


def check_window_values(w: Any, *, what: str, shares: bool = True) -> None:
    """One window of a summary dict (``Window.to_dict()``): each phase's count an
    integer >= 0, its figures numbers >= 0 (a phase with events has all of p50, p90,
    p99 and max), its share in [0, 1] and the shares together at most 1."""
    if not hasattr(w, "get"):
        return  # the decoder says it is not a mapping
    phases = w.get("phases")
    if not hasattr(phases, "items"):
        return
    for name, ws in [*phases.items(), ("(step)", w.get("step"))]:
        if ws is None or not hasattr(ws, "get"):
            continue
        count = ws.get("count")
        if not _is_int(count) or count < 0:
            raise CorruptDataError(f"{what}, {name!r}: count is {count!r}, not an integer >= 0")
        for k in ("mean", *_WINDOW_FIGURES, "share"):
            v = ws.get(k)
            if v is None:
                f = math.nan
            elif _num(v):
                f = float(v)
            else:
                raise CorruptDataError(f"{what}, {name!r}: {k} is {v!r}, not a number")
            if math.isnan(f):
                if count and k in _WINDOW_FIGURES:
                    raise CorruptDataError(
                        f"{what}, {name!r}: {k} is missing for {count} events; a number is required"
                    )
                continue
            if math.isinf(f) or f < 0:
                raise CorruptDataError(f"{what}, {name!r}: {k} is {v!r}, not a finite number >= 0")
    if shares:
        check_shares(
            {n: ws.get("share") for n, ws in phases.items() if hasattr(ws, "get")}, what=what
        )


_SUMMARY_COUNTS = ("steps", "overwritten", "out_of_range", "negative", "nonfinite", "events")


def check_summary_values(d: Any, *, shares: bool = True) -> None:
    """What ``Summary.from_dict`` (or any decoder of summary JSON) should run on the dict
    before building: every phase and the step pass :func:`check_phase_values`, the
    counts are integers >= 0, rates, times and the overhead share are numbers >= 0
    (the share at most 1). ``shares=False`` (a ``/1`` file, whose shares were of the
    step time alone) leaves the phase shares' bounds unchecked. CorruptDataError (a
    ValueError) saying what is wrong."""
    if not hasattr(d, "get"):
        return  # the decoder says it is not a mapping
    phases = d.get("phases")
    if hasattr(phases, "items"):
        for name, pd in phases.items():
            check_phase_values(pd, what=f"phase {name!r}", share=shares)
        if shares:
            check_shares(
                {name: pd.get("share") for name, pd in phases.items()}, what="the phases' shares"
            )
    if d.get("step") is not None:
        check_phase_values(d["step"], what="the step")
    windows = d.get("windows")
    for i, w in enumerate(windows if isinstance(windows, list) else ()):
        check_window_values(w, what=f"window {i}", shares=shares)
    for k in _SUMMARY_COUNTS:
        v = d.get(k, 0)
        if not _is_int(v) or v < 0:
            raise CorruptDataError(f"{k} is {v!r}, not an integer >= 0")
    for k in ("steps_per_s", "elapsed_s", "overhead_share"):
        v = d.get(k, 0.0)
        # never missing in a summary gyreprof writes (computed, finite): null is refused
        if not _num(v) or not math.isfinite(float(v)) or float(v) < 0:
            raise CorruptDataError(f"{k} is {v!r}, not a finite number >= 0")
    share = d.get("overhead_share", 0.0)
    if _num(share) and float(share) > 1:
        raise CorruptDataError(f"overhead share {share!r} is above 1 (all of the time)")
    wrapper = d.get("wrapper_share", 0.0)
    if not _num(wrapper) or not 0.0 <= float(wrapper) <= 1.0:
        raise CorruptDataError(f"wrapper_share is {wrapper!r}, not a number in [0, 1]")
