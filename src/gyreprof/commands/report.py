"""``gyreprof report FILE``: print a saved summary (JSON) or snapshot (bytes); draw it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gyreprof._errors import UsageError
from gyreprof._format import safe_text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="print a saved summary or snapshot; --plot / --html draw it",
        description="Reads a summary saved as JSON (Summary.to_json, autosave=*.json) or a "
        "snapshot saved as bytes (Snapshot.save, autosave=other names) or an events file "
        "(gyreprof.export.save_events) and prints the table, "
        "or JSON with --json. --plot writes a PNG (percentiles, window series, phase shares) "
        "and --html a self-contained HTML report; both need the plot extra "
        "(pip install 'gyreprof[plot]').",
    )
    p.add_argument("file", help="summary JSON, snapshot or events (.npz) file")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--plot", metavar="OUT.png", help="write the pictures to this PNG file")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report")
    p.set_defaults(func=run)


def _load_source(path: str) -> Any:
    """The richest object the file holds: an events file or a Snapshot (windows, times),
    else a Summary."""
    from gyreprof.export._source import load_file

    p = Path(path)
    if not p.exists():
        raise UsageError(f"no such file: {path}")
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a summary or snapshot file")
    try:
        return load_file(p)
    except OSError as exc:  # /proc/self/mem and other files that exist but cannot be read
        why = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot read {path}: {why}") from None


def _check_out(option: str, value: str | None, suffix: str) -> Path | None:
    if value is None:
        return None
    out = Path(value)
    if out.is_dir():
        raise UsageError(f"{option} {value} is a directory; give a file name ending in {suffix}")
    if not out.parent.exists():
        raise UsageError(f"{option} {value}: the folder {out.parent} does not exist")
    return out


def run(args: argparse.Namespace) -> int:
    from gyreprof.commands._args import require_extra

    if args.plot is not None:
        require_extra("--plot", "matplotlib", "plot")
    if args.html is not None:
        require_extra("--html (its pictures)", "matplotlib", "plot")
    plot_out = _check_out("--plot", args.plot, ".png")
    html_out = _check_out("--html", args.html, ".html")
    from gyreprof.source import resolve

    # read once, resolved once: the plot and the HTML page take the same Source
    source = resolve(_load_source(args.file), what="gyreprof report")
    summary = source.summary
    if plot_out is not None or html_out is not None:
        from gyreprof.export import html_report, plot_report

        if plot_out is not None:
            plot_report(source, plot_out)
            print(f"wrote {plot_out}", file=sys.stderr)
        if html_out is not None:
            html_report(source, html_out)
            print(f"wrote {html_out}", file=sys.stderr)
    if args.json:
        json.dump(summary.to_dict(histograms=False), sys.stdout, indent=2)
        print()
    elif args.markdown:
        print(safe_text(summary.to_markdown()))
    else:
        print(safe_text(summary))
    return 0
