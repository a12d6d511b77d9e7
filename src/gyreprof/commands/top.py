"""``gyreprof top [PID]``: live per-phase percentiles of running profilers."""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import sys
import time
from typing import Any

from gyreprof._support.format import safe_text
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
            "view when there are several processes. Segments with nothing recorded get no "
            "panel while others hold something (under gyreprof run each process has a sampler "
            "and a trainer segment), unused phases are hidden, and a loop that marks no steps "
            "is rated by what it records (env steps, vector-env steps). A view too big for the "
            "terminal (or --size) is shown compact: the merged view, one line per process, the "
            "slowest worker named. Press q to quit the interactive view. "
            "--once prints one report (measuring one "
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
    parser.add_argument(
        "--size",
        type=_size,
        default=None,
        metavar="COLSxROWS",
        help="fit the text into this many columns and rows, e.g. 80x24 (default: the "
        "terminal's size when printing to one, else no limit)",
    )
    parser.set_defaults(func=run)


def _size(text: str) -> tuple[int, int]:
    cols, sep, rows = text.lower().partition("x")
    try:
        size = (int(cols), int(rows))
    except ValueError:
        size = (0, 0)
    if not sep or size[0] < 20 or size[1] < 5:
        raise argparse.ArgumentTypeError(
            f"expected COLSxROWS with at least 20 columns and 5 rows, got {text!r} (e.g. 80x24)"
        )
    return size


def _fit(args: argparse.Namespace) -> tuple[int | None, int | None]:
    if args.size is not None:
        cols, rows = args.size
        return int(cols), int(rows)
    if sys.stdout.isatty():
        term = shutil.get_terminal_size()
        return term.columns, term.lines
    return None, None


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
        sys.stdout.write(safe_text(render_text(frame, *_fit(args))))
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
    from rich.text import Text

    from gyreprof.live._top import render_text

    console = Console()
    interval = args.interval if args.interval > 0 else 1.0

    def view(frame: Any) -> Text:
        cols, rows = args.size or (console.width, console.height)
        return Text(safe_text(render_text(frame, cols, rows)), no_wrap=True, overflow="crop")

    n = 0
    frame = model.refresh()
    with (
        _Keys() as keys,
        Live(
            view(frame),
            console=console,
            auto_refresh=False,
            screen=console.is_terminal and args.iterations is None,
        ) as live,
    ):
        while True:
            n += 1
            if args.iterations is not None and n >= args.iterations:
                break
            if keys.quit_within(interval):
                break
            frame = model.refresh()
            live.update(view(frame), refresh=True)
    return 0


class _Keys:
    """Reads the keyboard without blocking while the view waits: ``q`` quits. The
    terminal is put in cbreak mode (keys arrive one by one, unechoed) and restored."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._saved: Any = None

    def __enter__(self) -> _Keys:
        try:
            import termios
            import tty

            fd = sys.stdin.fileno()
            if os.isatty(fd):
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
                self._fd = fd
        except (ImportError, OSError, ValueError):  # no terminal (a pipe, Windows)
            self._fd = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None and self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def quit_within(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; True as soon as q (or Q) is pressed."""
        if self._fd is None:
            time.sleep(timeout_s)
            return False
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready:
                key = os.read(self._fd, 1)
                if not key:  # the terminal closed
                    return True
                if key in (b"q", b"Q"):
                    return True
