"""JSON: the one ``to_json(path=None, *, indent=None)`` of every result type.

The record is the result's ``to_dict()`` (the generic codec, :mod:`gyreprof.model._serial`);
this writes it as strict JSON (``null`` for a missing figure, never a ``NaN`` or
``Infinity`` literal) and, given a path, writes the file atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from gyreprof._support import forms as _forms
from gyreprof.model._serial import write_json

__all__ = ["text", "write"]


def text(data: Mapping[str, Any] | list[Any], *, indent: int | None = None) -> str:
    """``data`` (plain JSON types, as ``to_dict()`` returns) as strict JSON text."""
    return json.dumps(data, indent=indent, allow_nan=False)


def write(
    data: Mapping[str, Any] | list[Any],
    path: str | os.PathLike[str] | None = None,
    *,
    indent: int | None = None,
) -> str:
    """The strict JSON text of ``data``; written to ``path`` as well (atomically, with a
    final newline) when given: the one writer, ``_serial.write_json``."""
    return write_json(data, path, indent=indent)


# the result classes find these by name (gyreprof._support.forms): they sit below this floor
_forms.register("json", write)
