"""``gyreprof envcheck [FILE...]``: do the installed packages match the declared requirements?"""

from __future__ import annotations

import argparse
from typing import Any

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "envcheck",
        help="compare declared requirements with the installed packages",
        description=(
            "Read requirements*.txt (with -r/-c includes, markers, extras), pyproject.toml "
            "[project] dependencies and a conda environment.yml's pip section, and compare "
            "them with the installed distributions: missing packages, versions outside the "
            "specifier, requested extras not installed, name-normalisation differences; "
            "plus broken requirements among installed packages (what pip check reports). "
            "Pinned requirements are listed first. With no FILE, the current folder is "
            "searched."
        ),
        epilog=(
            "exit codes: 0 everything matches, 1 a mismatch or broken installed requirement, "
            "2 a declaration could not be read (reported with file:line) or a bad command line"
        ),
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="requirements*.txt, pyproject.toml, environment.yml, or a folder holding them",
    )
    parser.add_argument(
        "--extras",
        metavar="NAMES",
        default=None,
        help="comma-separated pyproject optional-dependency groups to check too (e.g. gym,plot)",
    )
    parser.add_argument(
        "--all-extras", action="store_true", help="check every optional-dependency group"
    )
    parser.add_argument(
        "--no-broken",
        action="store_true",
        help="skip the check of installed packages' own requirements (pip check)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof.diagnostics.envcheck import envcheck

    extras = [e.strip() for e in args.extras.split(",") if e.strip()] if args.extras else None
    try:
        report = envcheck(
            args.files or None,
            extras=extras,
            all_extras=args.all_extras,
            broken=not args.no_broken,
        )
    except (ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    print(report.to_json(indent=2) if args.json else safe_text(report), flush=True)
    return report.exit_code
