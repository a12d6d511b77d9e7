"""One meaning of a sampler's return value: how many samples one call produced.

``gyreprof sweep`` and ``gyreprof selfcheck`` both read a sampler call's
return value through :func:`count_samples`, and both say which rule they used.
The rules, tried in this order:

==========================  ============================================  =================
the call returned           counts as                                     rule name
==========================  ============================================  =================
``None``                    0 samples                                     ``none``
an int (or numpy integer)   that many samples                             ``int``
an array (has ``.shape``)   its first dimension                           ``first dimension``
a dict                      the common length of its values               ``common length``
any other sized container   ``len()``                                     ``length``
==========================  ============================================  =================

Refused, with the reason (:class:`NotACount`): a bool, a negative int, text
or bytes, a 0-d non-integer array, a dict whose values differ in length or
have none, an iterator or generator (counting it would consume it), and any
other object (a float, a single record): return the batch, or ``len(batch)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gyreprof._support.errors import GyreprofError


class NotACount(GyreprofError, ValueError):
    """The value says nothing about how many samples a call produced."""


@dataclass(frozen=True)
class SampleCount:
    """``n`` samples, read by ``rule``; ``detail`` says it in words ('length of a list')."""

    n: int
    rule: str
    detail: str


def _type_name(obj: Any) -> str:
    return type(obj).__name__


def _first_dim(value: Any) -> int | None:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and shape:
        try:
            return int(shape[0])
        except (TypeError, ValueError):
            return None
    if hasattr(value, "__len__") and not isinstance(value, (str, bytes, bytearray)):
        try:
            return len(value)
        except TypeError:
            return None
    return None


def count_samples(value: Any) -> SampleCount:  # noqa: PLR0911 - one return per rule
    """How many samples ``value`` (one sampler call's return) stands for; see the module doc.

    Raises :class:`NotACount` (a ValueError) naming what was returned and what to return.
    """
    if value is None:
        return SampleCount(0, "none", "None: no samples")
    if isinstance(value, bool):
        raise NotACount(f"a bool ({value}) is not a count; return the number of samples")
    index = getattr(value, "__index__", None)
    if callable(index):
        try:
            n = int(index())
        except TypeError:
            n = None  # a non-integer 0-d array: falls through
        if n is not None:
            if n < 0:
                raise NotACount(f"a negative count ({n}); return the number of samples")
            return SampleCount(n, "int", "an int: the number of samples")
    if isinstance(value, (str, bytes, bytearray)):
        raise NotACount(
            f"{_type_name(value)} is text, not a batch; return the batch or the number of samples"
        )
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        if not shape:
            raise NotACount(
                f"a 0-d {_type_name(value)} of a non-integer type is not a count; return an int"
            )
        dims = tuple(int(s) for s in shape)
        return SampleCount(dims[0], "first dimension", f"first dimension of shape {dims}")
    if isinstance(value, Mapping):
        lengths = {_first_dim(v) for v in value.values()}
        if len(lengths) == 1 and None not in lengths:
            n = lengths.pop()
            assert n is not None
            return SampleCount(
                n, "common length", f"common length of the {len(value)} values of a dict"
            )
        raise NotACount(
            f"a dict of {len(value)} values that are not all batches of one length; return "
            "a dict of equal-length arrays, the batch, or the number of samples"
        )
    if hasattr(value, "__len__"):
        return SampleCount(len(value), "length", f"length of a {_type_name(value)}")
    if isinstance(value, Iterator):
        raise NotACount(
            f"an iterator ({_type_name(value)}): counting it would consume it; return a "
            "list or the number of samples"
        )
    raise NotACount(
        f"a {_type_name(value)} is neither a count nor a batch; return the number of "
        "samples (an int) or the batch (a list, an array, a dict of arrays)"
    )
