"""The compiled core: clock, log-linear histogram, ring buffer, Recorder, codec.

Everything the Python layer needs from native code is imported from here.
There is deliberately no pure-Python fallback: a missing extension means the
package was not built, and measuring with a slow stand-in would change what is
measured.
"""

from __future__ import annotations

try:
    from gyreprof._core.codec import decode_counts, decode_counts_into, encode_counts
    from gyreprof._core.histogram import (
        DEFAULT_HIGHEST_NS,
        DEFAULT_LOWEST_NS,
        Histogram,
        bucket_edges,
        index_of,
        layout_info,
        percentiles_from_counts,
    )
    from gyreprof._core.recorder import (
        EVENT_DTYPE,
        LAYOUT_VERSION,
        PhaseTimer,
        Recorder,
        TimedFunction,
        calibrate_tsc,
        kernel_clocksource,
        monotonic_ns,
        stats_layout,
        tsc_invariant,
        tsc_trusted,
    )
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "gyreprof's compiled core (gyreprof._core) is not built or does not match this "
        f"Python ({exc}). Build it with `pip install .` (or `pip install -e .` in a "
        "checkout; needs a C compiler, Cython and numpy), then import gyreprof again."
    ) from exc

__all__ = [
    "DEFAULT_HIGHEST_NS",
    "DEFAULT_LOWEST_NS",
    "EVENT_DTYPE",
    "LAYOUT_VERSION",
    "Histogram",
    "PhaseTimer",
    "Recorder",
    "TimedFunction",
    "bucket_edges",
    "calibrate_tsc",
    "decode_counts",
    "decode_counts_into",
    "encode_counts",
    "index_of",
    "kernel_clocksource",
    "layout_info",
    "monotonic_ns",
    "percentiles_from_counts",
    "stats_layout",
    "tsc_invariant",
    "tsc_trusted",
]
