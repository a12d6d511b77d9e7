"""``gyreprof export FILE --format chrome|openmetrics|hdrlog|metrics [-o OUT]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gyreprof._errors import UsageError
from gyreprof.commands import _args

_FORMATS = ("chrome", "openmetrics", "hdrlog", "metrics")


def _buckets(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--buckets takes seconds separated by commas, e.g. 0.001,0.01,0.1; got {text!r}"
        ) from None
    if not vals:
        raise argparse.ArgumentTypeError("--buckets needs at least one bound in seconds")
    return vals


def register(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="convert a saved run to Chrome trace, OpenMetrics, HdrHistogram log or metrics",
        description=(
            "Convert a saved run into another tool's format. FILE is a snapshot (bytes), a "
            "summary saved as JSON (with histograms), or an events file from "
            "gyreprof.export.save_events (the only input a Chrome trace can use, since "
            "only it holds raw events). Formats: chrome (Perfetto / chrome://tracing JSON), "
            "openmetrics (OpenMetrics 1.0 text), hdrlog (HdrHistogram V2 interval log), "
            "metrics (flat JSON dict, as Summary.to_metrics)."
        ),
    )
    p.add_argument("file", help="snapshot, summary JSON or events .npz file")
    p.add_argument("--format", "-f", required=True, choices=_FORMATS, help="output format")
    p.add_argument("-o", "--output", default="-", help="output file ('-': stdout, the default)")
    p.add_argument(
        "--buckets",
        type=_buckets,
        default=None,
        help="openmetrics: histogram bounds in seconds, comma-separated "
        "(default: a 1-2-5 series spanning the data)",
    )
    p.add_argument("--namespace", default="gyreprof", help="openmetrics: metric name prefix")
    p.add_argument("--prefix", default="gyreprof/", help="metrics: key prefix")
    p.add_argument(
        "--max-unit-ns",
        type=_args.positive_number,
        default=1e6,
        help="hdrlog: Interval_Max is written as max ns / this (default 1e6: milliseconds)",
    )
    p.add_argument(
        "--interval-s",
        type=_args.positive_number,
        default=None,
        help="hdrlog from an events file: cut the raw events into intervals of this many "
        "seconds (default: one interval holding the whole run)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="with -o FILE: print what was written as JSON (format, output, bytes)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof import export

    src = Path(args.file)
    if not src.exists():
        raise UsageError(f"no such file: {args.file}")
    if src.is_dir():
        raise UsageError(f"{args.file} is a directory; give a snapshot, summary or events file")
    fmt = args.format
    options: dict[str, Any] = {}
    if fmt == "openmetrics":
        options = {"buckets_s": args.buckets, "namespace": args.namespace}
    elif fmt == "metrics":
        options = {"prefix": args.prefix}
    elif fmt == "hdrlog":
        options = {"max_value_unit_ratio": args.max_unit_ns, "interval_s": args.interval_s}
    if args.buckets is not None and fmt != "openmetrics":
        raise UsageError("--buckets applies to --format openmetrics only")
    if args.interval_s is not None and fmt != "hdrlog":
        raise UsageError("--interval-s applies to --format hdrlog only")
    to_stdout = args.output == "-"
    if to_stdout:
        export.write(src, sys.stdout, fmt, **options)
        return 0
    out = Path(args.output)
    if out.is_dir():
        raise UsageError(f"-o {args.output} is a directory; give a file name")
    export.write(src, out, fmt, **options)
    if args.json:
        json.dump(
            {"format": fmt, "input": str(src), "output": str(out), "bytes": out.stat().st_size},
            sys.stdout,
        )
        print()
    else:
        print(f"wrote {fmt} to {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0
