"""Exception types shared across layers."""

from __future__ import annotations


class UsageError(Exception):
    """A problem with the command line or its inputs: the CLI prints it without a traceback
    and exits 2."""
