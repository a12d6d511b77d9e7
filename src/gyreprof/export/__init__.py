"""Feed a run to the tools people already use, and draw its pictures.

::

    gp.export.chrome_trace(prof, "trace.json")      # Perfetto / chrome://tracing
    gp.export.windows_trace([("main 12", 12, "sampler", snap)], "t.json")  # a snapshot's
    gp.export.openmetrics(prof) -> str               # OpenMetrics 1.0 text
    gp.export.hdr_log(prof, "run.hlog")              # HdrHistogram V2 interval log
    gp.export.read_hdr_log("run.hlog")               # ... and back
    gp.export.metrics(prof, prefix="gyreprof/")      # flat dict for any logger
    gp.export.save_events(prof, "run.npz")           # the raw ring, for a trace later
    gp.export.plot_percentiles(prof, "p.png")        # pictures: the ``plot`` extra
    gp.export.html_report(prof, "report.html")       # one self-contained page

Inputs are a Profiler, a Snapshot, a Summary or the path of a saved one
(a Chrome trace needs raw events: a Profiler or a ``save_events`` file).
Bad input -- an unknown format, nothing recorded, a file of the wrong kind --
raises ValueError saying what is wrong and what to do.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import IO, Any

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof.export._source import write_text
from gyreprof.export.chrome import chrome_trace, windows_trace
from gyreprof.export.hdrlog import (
    HdrHistogramData,
    HdrInterval,
    HdrLog,
    decode_histogram,
    encode_histogram,
    hdr_log,
    parse_hdr_log,
    read_hdr_log,
)
from gyreprof.export.html import html_report
from gyreprof.export.plots import (
    figure_png,
    plot_percentiles,
    plot_report,
    plot_shares,
    plot_windows,
)
from gyreprof.export.prometheus import (
    CONTENT_TYPE as OPENMETRICS_CONTENT_TYPE,
)
from gyreprof.export.prometheus import (
    GyreprofCollector,
    bucket_counts,
    default_buckets_s,
    openmetrics,
)
from gyreprof.recording.events import EventsFile, load_events, save_events

FORMATS = ("chrome", "openmetrics", "hdrlog", "metrics")


def metrics(source: Any, prefix: str = "gyreprof/") -> dict[str, float]:
    """Flat ``{name: number}`` of a run (``Summary.to_metrics``) for ``logger.log(dict)``."""
    from gyreprof.export._source import resolve

    return resolve(source, what="a metric dict").summary.to_metrics(prefix=prefix)


def _metrics_json(source: Any, prefix: str) -> str:
    m = metrics(source, prefix=prefix)
    clean = {k: (v if math.isfinite(v) else None) for k, v in m.items()}
    return json.dumps(clean, indent=2) + "\n"


def write(
    source: Any,
    path: str | os.PathLike[str] | IO[str] | None,
    format: str,
    **options: Any,
) -> Path | str | None:
    """Export ``source`` in ``format`` (one of ``FORMATS``) to ``path``.

    ``path`` may be a file name, an open text stream, or None to get the text.
    ``options`` go to the exporter (``buckets_s=``, ``interval_s=``, ``prefix=``...).
    """
    if format not in FORMATS:
        raise InvalidValueError(f"unknown export format {format!r}; choose one of {list(FORMATS)}")
    text: str | None = None
    if format == "chrome":
        return chrome_trace(source, path, **options)
    if format == "hdrlog":
        return hdr_log(source, path, **options)
    if format == "openmetrics":
        text = openmetrics(source, **options)
    else:
        text = _metrics_json(source, options.pop("prefix", "gyreprof/"))
        if options:
            raise ArgumentTypeError(f"unexpected options for metrics: {sorted(options)}")
    return write_text(text, path)


__all__ = [
    "FORMATS",
    "OPENMETRICS_CONTENT_TYPE",
    "EventsFile",
    "GyreprofCollector",
    "HdrHistogramData",
    "HdrInterval",
    "HdrLog",
    "bucket_counts",
    "chrome_trace",
    "decode_histogram",
    "default_buckets_s",
    "encode_histogram",
    "figure_png",
    "hdr_log",
    "html_report",
    "load_events",
    "metrics",
    "openmetrics",
    "parse_hdr_log",
    "plot_percentiles",
    "plot_report",
    "plot_shares",
    "plot_windows",
    "read_hdr_log",
    "save_events",
    "windows_trace",
    "write",
]
