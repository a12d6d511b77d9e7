"""``gyreprof census PID``: the processes and threads under a pid, grouped by worker role."""

from __future__ import annotations

import argparse
from typing import Any

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text
from gyreprof.commands import _args


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
    parser.add_argument("pid", type=_args.pid, metavar="PID", help="root of the process tree")
    parser.add_argument(
        "--interval",
        type=_args.seconds(allow_zero=True),
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
    print(result.to_json(indent=2) if args.json else safe_text(result))
    return 0
