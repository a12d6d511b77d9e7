"""The ``gyreprof`` command.

Each subcommand lives in its own module under ``gyreprof.commands``; a module
there provides ``register(subparsers)``, which adds its parser and sets
``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an
exit code). Modules are found at start-up, so adding a command is adding a file.
Heavy imports belong inside ``func``, not at module level.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from gyreprof._support.errors import MissingExtraError, UsageError
from gyreprof._support.format import safe_text
from gyreprof._version import __version__

# Display order in --help; commands not listed follow alphabetically.
_ORDER = [
    "run",
    "demo",
    "report",
    "top",
    "doctor",
    "sweep",
    "envcheck",
    "selfcheck",
    "export",
    "census",
    "check",
]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``gyreprof`` parser with every command, or with command ``only`` alone (what
    :func:`main` builds when the command line names one: importing each command's module
    would cost the launcher of ``gyreprof run`` its start-up)."""
    parser = argparse.ArgumentParser(
        prog="gyreprof",
        description="Profile RL sampler loops: where a step goes, whether the trainer waits, "
        "which batch size, whether parallelism took effect, why nothing moves.",
    )
    parser.add_argument("--version", action="version", version=f"gyreprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only is not None:
        importlib.import_module(f"gyreprof.commands.{only}").register(sub)
        return parser
    import pkgutil

    import gyreprof.commands as commands

    names = [m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    for name in names:
        module = importlib.import_module(f"gyreprof.commands.{name}")
        module.register(sub)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command the command line names first, when it is one of ours; else None (then
    the parser has them all: for --help, a misspelt command, options before it)."""
    if not argv:
        return None
    name = argv[0]
    if not name.isidentifier() or name.startswith("_") or not name.islower():
        return None
    try:
        importlib.import_module(f"gyreprof.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"gyreprof.commands.{name}":
            return None
        raise
    return name


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # this process is the command (not a caller of main): it ends after it
        _no_final_collection()
    args_in = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_named_command(args_in))
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, MissingExtraError) as exc:
        print(f"gyreprof {args.command}: {safe_text(exc)}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        print(f"gyreprof {args.command}: error: {safe_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _no_final_collection() -> None:
    """At exit, move every object to the collector's permanent generation (``gc.freeze``),
    so that the interpreter's last collection does not walk everything the command loaded:
    ~20 M instructions, 6% of what ``gyreprof run -- python -c pass`` adds. Its memory goes
    back with the process; nothing of gyreprof's leaves a cycle to finalise at exit."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``gyreprof report x | head``): stop quietly
    like other command-line tools, with the shell's status for SIGPIPE. Standard output
    is pointed at /dev/null so the interpreter's final flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 141


# UsageError lives in gyreprof._support.errors; it stays importable from here for old callers.
__all__ = ["UsageError", "build_parser", "main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
