"""``gyreprof selfcheck module:factory``: build the sampler alone, call it once, report."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text
from gyreprof.commands import _args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "selfcheck",
        help="build a sampler alone, call it once, report type, count and time",
        description=(
            "Import MODULE, build the sampler with FACTORY(**KWARGS) in a fresh Python "
            "process started in the current folder, print its endpoint if it has one, call "
            "its METHOD once and print the result's type, its sample count and the rule that "
            "counted it (the reading gyreprof sweep uses: an int is the number of samples, "
            "an array its first dimension, a list its length), and the elapsed time; the "
            "exceptions raised and swallowed inside the call (type, message, where raised, "
            "where caught); for an empty result, the returned object's top-level keys or "
            "fields with their sizes (the server answered under another key). A call "
            "that does not return within --timeout is abandoned (every thread's stack is "
            "printed), so the command never hangs."
        ),
        epilog=(
            "exit codes: 0 non-empty result, 1 exception (full traceback printed) or a "
            "result that is no sample count, "
            "2 empty result (also: bad command line), 3 timed out"
        ),
    )
    parser.add_argument("target", metavar="MODULE:FACTORY", help="e.g. mypkg.rollout:make_sampler")
    parser.add_argument(
        "--method",
        default="sample",
        help="the method to call on the sampler (default: sample; '' calls the sampler itself)",
    )
    parser.add_argument(
        "--kwargs",
        metavar="JSON",
        default="{}",
        help="keyword arguments for the factory as a JSON object, e.g. '{\"batch_size\": 8}'",
    )
    parser.add_argument(
        "--timeout",
        type=_args.seconds(),
        default=60.0,
        metavar="S",
        help="abandon the check after S seconds, build included (default 60)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof.diagnostics.selfcheck import parse_target, selfcheck

    try:
        kwargs = json.loads(args.kwargs)
    except ValueError as exc:
        raise UsageError(f"--kwargs must be a JSON object: {exc}") from None
    if not isinstance(kwargs, dict):
        raise UsageError(f"--kwargs must be a JSON object, got {type(kwargs).__name__}")
    try:
        parse_target(args.target)
        sys.stdout.flush()
        result = selfcheck(
            args.target,
            method=args.method,
            kwargs=kwargs,
            timeout_s=args.timeout,
            stdout=sys.stderr if args.json else None,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(result.to_json(indent=2) if args.json else safe_text(result), flush=True)
    return result.exit_code
