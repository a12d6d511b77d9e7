"""The exception types gyreprof raises on purpose: one type per kind of problem.

Every type derives from :class:`GyreprofError`, and also from the built-in
exception that callers already catch for that kind (``ValueError`` for bad input
and corrupt files, ``KeyError`` for a missing phase, ``ImportError`` for a missing
optional extra), so ``except ValueError`` and the like keep working.

This module imports nothing from gyreprof: any layer may raise these, and the
CLI catches them without the commands importing the CLI.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "CorruptDataError",
    "GyreprofError",
    "InvalidValueError",
    "MissingExtraError",
    "MissingFileError",
    "MissingKeyError",
    "UnknownPhaseError",
    "UsageError",
]


class GyreprofError(Exception):
    """Base of the errors gyreprof raises on purpose (not of bugs)."""


class UsageError(GyreprofError):
    """A problem with the command line or its inputs: the CLI prints it without a traceback
    and exits 2."""


class InvalidValueError(GyreprofError, ValueError):
    """An argument of the right kind whose value is wrong: out of range, NaN or
    infinite, empty, a folder where a file is wanted, two options that exclude each
    other. The message names the argument and the fix."""


class ArgumentTypeError(GyreprofError, TypeError):
    """An argument of the wrong kind (``True`` where a count is wanted, ``"5"`` where a
    number is, a list where a Profiler is). The message names the argument, the kind
    wanted and what came instead."""


class MissingFileError(GyreprofError, FileNotFoundError):
    """A file to read that does not exist."""


class MissingKeyError(GyreprofError, KeyError):
    """A key that a result does not hold (a pid not in a census, a value not swept); the
    message lists the keys it does hold."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownPhaseError(GyreprofError, KeyError, ValueError):
    """A phase name that the profiler, snapshot or summary does not have.

    A ``KeyError`` (a mapping lookup missed) and a ``ValueError`` (the argument is
    wrong), so code that catches either keeps working. The message lists the known
    phases.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CorruptDataError(GyreprofError, ValueError):
    """A file or record that cannot be decoded: truncated, the wrong format or version,
    or a field of the wrong type. The message says what was wrong and where."""


class MissingExtraError(GyreprofError, ImportError):
    """An optional dependency is not installed; the message names the ``pip install`` that
    adds it."""

    def __init__(
        self, feature: str, package: str, extra: str | None = None, note: str = ""
    ) -> None:
        hint = f"'gyreprof[{extra}]'" if extra else package
        text = f"{feature} needs {package}, which is not installed: pip install {hint}"
        super().__init__(f"{text} {note}" if note else text)
        self.feature = feature
        self.package = package
        self.extra = extra
        self.name = package
