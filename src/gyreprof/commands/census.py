"""``gyreprof census PID``: the processes and threads under a pid, grouped by worker role."""

from __future__ import annotations

import argparse
from typing import Any

from gyreprof.cli import UsageError


def pid_arg(text: str) -> int:
    """argparse type for a process id: a positive integer."""
    try:
        pid = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"PID must be a process id (an integer), got {text!r}"
        ) from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"PID must be a positive process id, got {pid}")
    return pid


def seconds_arg(text: str) -> float:
    """argparse type for a duration in seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "census",
        help="processes and threads under a pid, grouped by worker role",
        description=(
            "List the process tree under PID: per process name, command line, state, CPU %%, "
            "RSS, thread count and, for processes that called gyreprof.register_worker(), "
            "their role and config; grouped so '4 × env_worker' reads at a glance. "
            "Exit code 0, or 2 when PID does not exist."
        ),
    )
    parser.add_argument("pid", type=pid_arg, metavar="PID", help="root of the process tree")
    parser.add_argument(
        "--interval",
        type=seconds_arg,
        default=0.5,
        metavar="S",
        help="sample CPU use over S seconds (0: lifetime average, instant; default 0.5)",
    )
    parser.add_argument(
        "--registry",
        metavar="DIR",
        default=None,
        help="worker registry directory (default: $GYREPROF_REGISTRY_DIR or a per-user temp dir)",
    )
    parser.add_argument("--json", action="store_true", help="print the census as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof.analysis.parallelism import census

    try:
        result = census(args.pid, interval_s=args.interval, registry=args.registry)
    except ProcessLookupError as exc:
        raise UsageError(str(exc)) from None
    print(result.to_json() if args.json else result)
    return 0
