"""``gyreprof export FILE --format chrome|openmetrics|hdrlog|metrics [-o OUT]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gyreprof._support.errors import UsageError
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
            "summary saved as JSON (with histograms), an events file from "
            "gyreprof.export.save_events, or a gyreprof run --save folder. A Chrome trace of "
            "every call needs raw events (an events file); from snapshots (--windows, and "
            "always for a --save folder: one track per process and side) it shows what they "
            "hold: each profile's span, phase totals and closed windows. The other formats "
            "take a folder's merged sampler (its trainer when it has no sampler). "
            "Formats: chrome (Perfetto / chrome://tracing JSON), "
            "openmetrics (OpenMetrics 1.0 text), hdrlog (HdrHistogram V2 interval log), "
            "metrics (flat JSON dict, as Summary.to_metrics)."
        ),
    )
    p.add_argument(
        "file", help="snapshot, summary JSON or events .npz file, or a gyreprof run --save folder"
    )
    p.add_argument(
        "--windows",
        action="store_true",
        help="chrome from a snapshot: a trace of its span, phase totals and windows (a "
        "snapshot holds no raw events)",
    )
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

    src: Any = Path(args.file)
    if not src.exists():
        raise UsageError(f"no such file: {args.file}")
    fmt = args.format
    if args.windows and fmt != "chrome":
        raise UsageError("--windows applies to --format chrome only")
    tracks = None
    if src.is_dir():
        tracks = _folder_tracks(src)
        if fmt != "chrome":
            sides = [s for s in tracks if s[2] == "sampler"] or tracks
            src = _merged([s[3] for s in sides], src)
    elif args.windows:
        tracks = [_file_track(src)]
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
    out = Path(args.output)
    if not to_stdout and out.is_dir():
        raise UsageError(f"-o {args.output} is a directory; give a file name")
    if tracks is not None and fmt == "chrome":
        from gyreprof.export.chrome import windows_trace

        windows_trace(tracks, sys.stdout if to_stdout else out)
    else:
        export.write(src, sys.stdout if to_stdout else out, fmt, **options)
    if to_stdout:
        return 0
    if args.json:
        json.dump(
            {"format": fmt, "input": args.file, "output": str(out), "bytes": out.stat().st_size},
            sys.stdout,
        )
        print()
    else:
        print(f"wrote {fmt} to {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0


def _folder_tracks(folder: Path) -> list[tuple[str, int, str, Any]]:
    """The snapshots of a ``gyreprof run --save`` folder, as (process, pid, side, Snapshot),
    in the order of its index."""
    from gyreprof.commands.report import PROCESSES_JSON, _saved_entries

    if not (folder / PROCESSES_JSON).exists():
        raise UsageError(
            f"{folder} is a directory, not a gyreprof run --save folder (no {PROCESSES_JSON}); "
            "give a snapshot, summary or events file"
        )
    notes: list[str] = []
    tracks = []
    for e in _saved_entries(folder, notes):
        for side in ("sampler", "trainer"):
            snap = getattr(e, side)
            if snap is not None and snap.summary().events + snap.summary().steps > 0:
                tracks.append((f"{e.role} {e.pid}", e.pid, side, snap))
    for n in notes:
        print(f"gyreprof export: {n}", file=sys.stderr)
    if not tracks:
        raise UsageError(f"{folder}: no process of the run saved a snapshot with anything in it")
    return tracks


def _file_track(path: Path) -> tuple[str, int, str, Any]:
    """One snapshot file as a track; its side and pid from a --save name when it has one."""
    import gyreprof as gp

    try:
        snap = gp.Snapshot.load(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--windows takes a snapshot file: {path}: {exc}") from None
    stem = path.name.split(".")
    side = stem[1] if len(stem) > 2 and stem[1] in ("sampler", "trainer") else "profile"
    pid = int(snap.meta.pid or 0)
    return (f"{path.name}", pid, side, snap)


def _merged(snaps: list[Any], folder: Path) -> Any:
    import gyreprof as gp

    try:
        return gp.merge(snaps) if len(snaps) > 1 else snaps[0]
    except ValueError as exc:
        raise UsageError(f"{folder}: its snapshots do not merge ({exc})") from None
