"""``gyreprof top [PID]``: live per-phase percentiles of running profilers."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gyreprof._format import safe_text
from gyreprof.commands import _args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "top",
        help="live per-phase percentiles of running profilers (Profiler(..., live=True))",
        description=(
            "Show the live segments of PID and its child processes (all segments on this "
            "machine without PID), refreshing every --interval seconds: steps/s, per-phase "
            "count, p50, p99, max and share for the last interval and since start, the phase "
            "executing now and for how long, overwritten and out-of-range counts, and a merged "
            "view when there are several processes. --once prints one report (measuring one "
            "interval) and exits; --json prints JSON (one object per refresh). Exit code 0; "
            "1 when there is no live segment (of PID's tree, or at all); 2 for bad input or an "
            "unreadable segment. "
            "The interactive view needs rich (pip install 'gyreprof[rich]')."
        ),
    )
    parser.add_argument(
        "pid",
        nargs="?",
        type=_args.pid,
        metavar="PID",
        help="root of the process tree to show (default: every segment)",
    )
    parser.add_argument("--once", action="store_true", help="print one report and exit")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--interval",
        type=_args.seconds(allow_zero=True, maximum=3600),
        default=1.0,
        metavar="S",
        help="seconds between refreshes; with --once, the length of the "
        "'last window' (0: since start only; default 1)",
    )
    parser.add_argument(
        "-n",
        "--iterations",
        type=_args.count(1),
        default=None,
        metavar="N",
        help="stop after N refreshes (default: until Ctrl-C)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof.live._top import TopModel

    if not args.once and not args.json:
        _args.require_extra(
            "the interactive view", "rich.live", "rich", "rich", "(or use --once, or --json)"
        )
    model = TopModel(args.pid)
    try:
        if args.once:
            return _once(model, args)
        if args.json:
            return _stream_json(model, args)
        return _interactive(model, args)
    except LookupError as exc:
        print(f"gyreprof top: {safe_text(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        model.close()


def _once(model: Any, args: argparse.Namespace) -> int:
    from gyreprof.live._top import render_text

    frame = model.refresh()
    if args.interval > 0 and frame.processes:
        time.sleep(args.interval)
        frame = model.refresh()
    if args.json:
        print(json.dumps(frame.to_dict(), indent=2))
    else:
        sys.stdout.write(safe_text(render_text(frame)))
    return 0 if frame.processes else (2 if frame.errors else 1)


def _stream_json(model: Any, args: argparse.Namespace) -> int:
    n = 0
    while True:
        frame = model.refresh()
        print(json.dumps(frame.to_dict()), flush=True)
        n += 1
        if args.iterations is not None and n >= args.iterations:
            return 0
        time.sleep(args.interval)


def _interactive(model: Any, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live

    from gyreprof.live._top import render_rich

    console = Console()
    interval = args.interval if args.interval > 0 else 1.0
    n = 0
    frame = model.refresh()
    with Live(
        render_rich(frame),
        console=console,
        auto_refresh=False,
        screen=console.is_terminal and args.iterations is None,
    ) as live:
        while True:
            n += 1
            if args.iterations is not None and n >= args.iterations:
                break
            time.sleep(interval)
            frame = model.refresh()
            live.update(render_rich(frame), refresh=True)
    return 0
