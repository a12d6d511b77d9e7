"""Argument checks for public entry points: one wording, one rule per kind.

Each check takes the argument's name (as the caller wrote it) and its value, and
returns the value in its plain Python form (``int``, ``float``, ``str``, ``Path``)
or raises:

- ``ArgumentTypeError`` (a ``TypeError``) when the value is of the wrong kind (``True`` is not a count, ``2.0``
  is not an int, ``"5"`` is not a number), naming the argument, the expected kind and
  what came instead;
- ``InvalidValueError`` (a ``ValueError``) when the kind is right but the value is not (out of range, NaN,
  empty, a folder where a file is wanted), naming the argument and the fix.

numpy integers pass as ints and numpy floats as numbers; bools never pass as
either, although Python counts ``bool`` as an ``int``.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, MissingFileError

__all__ = [
    "check_fraction",
    "check_int",
    "check_name",
    "check_names",
    "check_non_negative_int",
    "check_number",
    "check_output_path",
    "check_input_path",
    "check_positive_int",
    "check_positive_number",
]


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def check_int(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """An integer (``int`` or numpy integer, not ``bool`` or ``float``) in
    ``minimum..maximum`` (both inclusive, either may be None)."""
    if isinstance(value, (bool, float)) or not hasattr(value, "__index__"):
        raise ArgumentTypeError(f"{name} must be an int, got {_kind(value)}")
    v = operator.index(value)
    if minimum is not None and v < minimum:
        raise InvalidValueError(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise InvalidValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def check_positive_int(name: str, value: object) -> int:
    """An integer >= 1."""
    return check_int(name, value, minimum=1)


def check_non_negative_int(name: str, value: object) -> int:
    """An integer >= 0."""
    return check_int(name, value, minimum=0)


def check_number(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    unit: str = "",
) -> float:
    """A finite real number (int, float or numpy scalar, not ``bool``) in
    ``minimum..maximum`` (inclusive). ``unit`` ("seconds") words the messages."""
    of = f" of {unit}" if unit else ""
    if isinstance(value, bool) or not _is_real(value):
        raise ArgumentTypeError(f"{name} must be a number{of}, got {_kind(value)}")
    v = float(value)  # type: ignore[arg-type]
    if not math.isfinite(v):
        raise InvalidValueError(f"{name} must be a finite number{of}, got {value!r}")
    if minimum is not None and v < minimum:
        raise InvalidValueError(
            f"{name} must be >= {minimum:g}{' ' + unit if unit else ''}, got {v:g}"
        )
    if maximum is not None and v > maximum:
        raise InvalidValueError(
            f"{name} must be <= {maximum:g}{' ' + unit if unit else ''}, got {v:g}"
        )
    return v


def check_positive_number(name: str, value: object, *, unit: str = "") -> float:
    """A finite number > 0 (0 is refused: a period or a limit of zero means nothing)."""
    v = check_number(name, value, unit=unit)
    if not v > 0.0:
        of = f" of {unit}" if unit else ""
        raise InvalidValueError(f"{name} must be a positive number{of}, got {value!r}")
    return v


def check_fraction(name: str, value: object) -> float:
    """A number in 0..1."""
    if isinstance(value, bool) or not _is_real(value):
        raise ArgumentTypeError(f"{name} must be a number in 0..1, got {_kind(value)}")
    v = float(value)  # type: ignore[arg-type]
    if not 0.0 <= v <= 1.0:  # also refuses NaN
        raise InvalidValueError(f"{name} must be in 0..1, got {value!r}")
    return v


def check_name(name: str, value: object) -> str:
    """A non-empty string with something other than blanks in it."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {_kind(value)}")
    if not value.strip():
        raise InvalidValueError(f"{name} must be a non-empty name, got {value!r}")
    return value


def check_names(name: str, values: object) -> tuple[str, ...]:
    """A collection of distinct names (a single string is refused: it would iterate
    as characters)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ArgumentTypeError(f"{name} must be a list of names, got {_kind(values)}")
    out = tuple(check_name(f"{name}[{i}]", v) for i, v in enumerate(values))
    seen: set[str] = set()
    dup = [n for n in out if n in seen or seen.add(n)]  # type: ignore[func-returns-value]
    if dup:
        raise InvalidValueError(f"{name} must not repeat a name; repeated: {sorted(set(dup))}")
    return out


def _path(name: str, value: object) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(f"{name} must be a path (str or os.PathLike), got {_kind(value)}")
    text = os.fspath(value)
    if isinstance(text, bytes):
        raise ArgumentTypeError(f"{name} must be a str path, not bytes, got {value!r}")
    if not text:
        raise InvalidValueError(f"{name} must not be an empty path")
    return Path(text)


def check_output_path(name: str, value: object) -> Path:
    """A file to write: not a directory, and its folder exists."""
    path = _path(name, value)
    if path.is_dir():
        raise InvalidValueError(f"{name} {str(path)!r} is a directory; pass a file path")
    if not path.parent.is_dir():
        raise InvalidValueError(
            f"{name} {str(path)!r}: folder {str(path.parent)!r} does not exist; create it first"
        )
    return path


def check_input_path(name: str, value: object) -> Path:
    """A file to read: it exists and is not a directory (``FileNotFoundError``, an
    ``OSError``, when it is missing)."""
    path = _path(name, value)
    if path.is_dir():
        raise InvalidValueError(f"{name} {str(path)!r} is a directory; pass a file")
    if not path.exists():
        raise MissingFileError(f"{name}: no such file: {str(path)!r}")
    return path


def _is_real(value: object) -> bool:
    # numbers.Real covers int, float, fractions and numpy's scalars (numpy registers them)
    return isinstance(value, numbers.Real)


# -------------------------------------------------------- a Recorder's configuration

#: the largest values the core stores: int64 ns and counts, its ring and window limits
MAX_INT64 = 2**63 - 1
MAX_CAPACITY = 1 << 30  # events in the ring (the core's limit)
MAX_WINDOWS = 1 << 20
MAX_COUNTERS = 4096
MAX_WARMUP_S = 1e9  # ~31 years: keeps warm-up in ns inside int64
CLOCKS = ("monotonic", "tsc", "auto")


def check_recorder_config(
    *,
    capacity: object,
    significant_figures: object,
    lowest_ns: object,
    highest_ns: object,
    warmup_steps: object,
    warmup_s: object,
    window_steps: object,
    max_windows: object,
    max_counters: object,
    clock: object,
) -> dict[str, Any]:
    """A Recorder's whole configuration, checked in one place: the keyword arguments of
    ``Recorder(...)`` (warm-up as ``warmup_steps`` / ``warmup_ns``, 0 for none).

    Every check names its argument; bools are refused as ints; the maxima keep each
    value inside what the core stores (int64 / int), so no OverflowError gets through.
    """
    if warmup_steps is not None and warmup_s is not None:
        raise InvalidValueError("give warmup_steps or warmup_s, not both")
    low = check_int("lowest_ns", lowest_ns, minimum=1, maximum=MAX_INT64)
    high = check_int("highest_ns", highest_ns, minimum=1, maximum=MAX_INT64)
    if high < 2 * low:
        raise InvalidValueError(
            f"highest_ns must be at least 2 * lowest_ns, got lowest_ns={low} and highest_ns={high}"
        )
    wsteps = 0
    if warmup_steps is not None:
        wsteps = check_int("warmup_steps", warmup_steps, minimum=0, maximum=MAX_INT64)
    wns = 0
    if warmup_s is not None:
        ws = check_number("warmup_s", warmup_s, minimum=0.0, maximum=MAX_WARMUP_S, unit="seconds")
        wns = int(ws * 1e9)
    if not isinstance(clock, str):
        raise ArgumentTypeError(
            f"clock must be 'monotonic', 'tsc' or 'auto', got {type(clock).__name__}"
        )
    if clock not in CLOCKS:
        raise InvalidValueError(f"clock must be 'monotonic', 'tsc' or 'auto', got {clock!r}")
    return dict(
        capacity=check_int("capacity", capacity, minimum=1, maximum=MAX_CAPACITY),
        significant_figures=check_int(
            "significant_figures", significant_figures, minimum=1, maximum=5
        ),
        lowest_ns=low,
        highest_ns=high,
        warmup_steps=wsteps,
        warmup_ns=wns,
        window_steps=check_int("window_steps", window_steps, minimum=1, maximum=MAX_INT64),
        max_windows=check_int("max_windows", max_windows, minimum=1, maximum=MAX_WINDOWS),
        max_counters=check_int("max_counters", max_counters, minimum=0, maximum=MAX_COUNTERS),
        clock=clock,
    )


def check_live(value: object) -> bool | str:
    """``live=``: True, False or the name of a shared-memory segment."""
    if value is not True and value is not False and not isinstance(value, str):
        raise ArgumentTypeError(f"live must be True, False or a segment name, got {value!r}")
    return value
