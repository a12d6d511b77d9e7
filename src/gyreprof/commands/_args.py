"""argparse ``type=`` converters shared by the subcommands: clear messages, no tracebacks."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def pid(text: str) -> int:
    """A process id: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"PID must be a process id (an integer), got {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"PID must be a positive process id, got {value}")
    return value


def count(minimum: int) -> Callable[[str], int]:
    """A whole number >= ``minimum``."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
        return value

    return convert


def seconds(*, allow_zero: bool = False, maximum: float | None = None) -> Callable[[str], float]:
    """A finite duration in seconds: > 0 (or >= 0 with ``allow_zero``), at most ``maximum``."""
    low = "0" if allow_zero else "a positive number of"
    wanted = f"{low} seconds" + (f" up to {maximum:g}" if maximum is not None else "")

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number of seconds, got {text!r}"
            ) from None
        ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
        if not ok or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    return convert


def positive_number(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """``--verbose`` / ``-v``: a run's report in full (every table row, the first calls and
    warm-up means, the profiler overhead, the per-window wait detail, every caveat)
    instead of the compact one that opens with the answer."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print the run's report in full: rows of phases that did not run, first calls "
        "and warm-up means, the profiler overhead, the per-window wait detail and every "
        "caveat (the default report leaves out what does not change the answer)",
    )


def require_extra(
    feature: str, module: str, extra: str, package: str | None = None, note: str = ""
) -> None:
    """Refuse to start (``MissingExtraError``: exit 2 with the install hint, before any
    output) when the optional ``module`` that ``feature`` needs cannot be imported."""
    import importlib

    from gyreprof._support.errors import MissingExtraError

    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(feature, package or module, extra, note) from None
