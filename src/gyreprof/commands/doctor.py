"""``gyreprof doctor PID``: is the process gone, spinning, blocked, busy, retrying or
progressing -- and why."""

from __future__ import annotations

import argparse
from typing import Any

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text
from gyreprof.commands import _args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help=(
            "why nothing moves: is a process absent, spinning, blocked, busy, retrying or "
            "progressing"
        ),
        description=(
            "Observe process PID over --interval seconds and classify it from evidence: "
            "absent (no such process; with --log, the log's last lines), spinning (CPU busy, "
            "no progress), blocked (CPU idle, no progress; each thread's kernel wait channel, "
            "system call and socket where readable), busy (CPU busy and no progress signal "
            "to tell work from spinning) or progressing (step counter, log or output file "
            "advancing). Progress is a counter that moves: a gyreprof live segment's step "
            "counter, --step-file, gyreprof run's records, or lines added to the --log "
            "file or to files found in /proc (stdout/stderr redirected to a file, files "
            "open for writing) that carry a step, iteration, epoch, sample count or loss "
            "whose value changed, or match --progress. Growth alone, a repeated value or "
            "a heartbeat is never progress; the silence of a found file is not taken as a "
            "stall. CPU time alone never counts as progress. "
            "The last 1 MiB of each log is read: only failure "
            "lines (connection refused, timeouts, HTTP 5xx/4xx, empty results, retries, "
            "tracebacks) and no progress line is retrying, which names the kind, the count, "
            "the last line and the endpoint; endpoints it is stuck on are probed with one TCP "
            "connect (loopback or its own peers only). "
            "Also: thread-count trend, event counters with their rate, "
            "and py-spy stacks when py-spy is found (PATH, beside this Python, or in the "
            "target's virtualenv)."
        ),
        epilog=(
            "exit codes: 0 progressing, 3 absent, 4 blocked, 5 spinning, 6 busy, 7 retrying, "
            "2 bad command line"
        ),
    )
    parser.add_argument("pid", type=_args.pid, metavar="PID", help="the process to examine")
    parser.add_argument(
        "--log", metavar="FILE", default=None, help="a log file the process writes to"
    )
    parser.add_argument(
        "--step-file",
        metavar="FILE",
        default=None,
        help="a file holding the step counter as an integer",
    )
    parser.add_argument(
        "--interval",
        type=_args.seconds(),
        default=2.0,
        metavar="S",
        help="observe for S seconds (default 2.0; longer for a loop that logs rarely)",
    )
    parser.add_argument(
        "--progress",
        metavar="REGEX",
        default=None,
        help="a regular expression for the process's own progress lines: a line it matches "
        "is progress (besides step, iteration, epoch, sample-count and loss lines whose value "
        "moves)",
    )
    parser.add_argument(
        "--probe",
        metavar="URL",
        action="append",
        default=[],
        help="also GET this health URL (loopback or an address the process is connected to); "
        "repeatable",
    )
    parser.add_argument(
        "--quiet-after",
        type=_args.seconds(),
        default=300.0,
        metavar="S",
        help="a busy process whose found output has not changed for S seconds is spinning "
        "(default 300)",
    )
    parser.add_argument(
        "--no-stacks", action="store_true", help="do not run py-spy dump on a stuck process"
    )
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof.diagnostics.doctor import doctor

    try:
        result = doctor(
            args.pid,
            log=args.log,
            interval_s=args.interval,
            step_file=args.step_file,
            stacks=not args.no_stacks,
            progress=args.progress,
            probe=args.probe,
            quiet_after_s=args.quiet_after,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(result.to_json(indent=2) if args.json else safe_text(result), flush=True)
    return result.exit_code
