"""Patch a library when it is imported, and patch methods on a class and its subclasses.

``when_imported(name, callback)`` runs ``callback(module)`` right after module
``name`` has finished executing, or at once if it is already imported: wrapt's
post-import hooks (``gyreprof.integrations._instrument.when_imported``).
Callbacks never raise into the importing code: a failure becomes a warning and
the library stays uninstrumented.

``patch_methods(cls, names, make)`` replaces each method in ``names`` that a
class defines itself with ``make(original, name)``, for ``cls``, all its
current subclasses and (through ``__init_subclass__``) every subclass defined
later. Each wrapper is marked, so patching twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gyreprof.integrations._instrument import (
    Callback,
    class_tree,
    subclass_hook,
    warn,
    when_imported,
)

MARK = "__gyreprof_wrapped__"


def is_wrapped(fn: object) -> bool:
    return bool(getattr(fn, MARK, False))


def mark(wrapper: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``wrapper`` look like ``original`` (name, doc, signature) and mark it as ours."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(wrapper, MARK, True)
    return wrapper


Make = Callable[[Callable[..., Any], str], Callable[..., Any]]


def _patch_one(cls: type, names: Sequence[str], make: Make) -> None:
    for name in names:
        fn = cls.__dict__.get(name)
        if fn is None or not callable(fn) or is_wrapped(fn):
            continue
        if getattr(fn, "__isabstractmethod__", False):
            continue
        try:
            setattr(cls, name, mark(make(fn, name), fn))
        except (AttributeError, TypeError):  # a C type or a frozen class: leave it
            pass


def patch_methods(
    cls: type, names: Sequence[str], make: Make, *, skip: Sequence[type] = ()
) -> None:
    """Wrap ``names`` wherever ``cls`` or a subclass (now or later) defines them."""
    for c in class_tree(cls):
        if c not in skip:
            _patch_one(c, names, make)
    key = f"__gyreprof_subclass_hook_{'_'.join(names)}__"
    if cls.__dict__.get(key):
        return
    hook = subclass_hook(cls, lambda sub: _patch_one(sub, names, make))
    setattr(cls, "__init_subclass__", hook)  # noqa: B010
    setattr(cls, key, True)


__all__ = [
    "MARK",
    "Callback",
    "is_wrapped",
    "mark",
    "patch_methods",
    "warn",
    "when_imported",
]
