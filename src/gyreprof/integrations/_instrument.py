"""The shared machinery of the instrumentors: patches that can be undone, and callbacks
run when a library is imported, both through wrapt.

A library's instrumentor keeps one :class:`Patches`. ``patches.wrap(owner, name,
wrapper)`` replaces ``owner.name`` (a class, or a module) with a ``wrapt.FunctionWrapper``
calling ``wrapper(wrapped, instance, args, kwargs)`` (wrapt's wrapper signature: a method
reached through an instance gets ``wrapped`` bound and ``instance`` set), and remembers
what ``owner`` itself held there. ``patches.undo()`` puts that back (or removes the
wrapper where the attribute was inherited), newest first, so each patched attribute is
the very object it was before (identity, not a copy).

wrapt is pinned below 2 (pyproject): wrapt 2 imports asyncio when it is imported (172
modules, ~150 ms in every process that loads a patch), and a post-import hook that loads
it while ``concurrent.futures`` is half imported breaks the user's import. ``patches.set(owner, name, value)`` sets a plain
attribute (a class default the wrappers read) and ``undo`` puts back what was there, or
removes it. A wrapper installed twice on the same attribute by the same ``Patches`` is
installed once.

``when_imported(name, callback)`` runs ``callback(module)`` once module ``name`` has
finished importing (at once when it already has), through wrapt's post-import hooks.
A callback never raises into the importing code: a failure is a warning on stderr and
the library runs uninstrumented. wrapt's hooks cannot be removed: an instrumentor that
was undone makes its callback do nothing (see ``gyreprof.integrations.http``).

wrapt is imported on first use, not with this module: the launcher's bootstrap imports
this module in every process before it checks that the process's Python has what the
profilers need, and says what it lacks rather than failing on the import.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import FunctionType, ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]
Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

__all__ = ["Callback", "Patches", "Wrapper", "class_tree", "subclass_hook", "warn", "when_imported"]


def warn(text: str) -> None:
    print(f"gyreprof run: {text}", file=sys.stderr, flush=True)


def _initializing(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def when_imported(name: str, callback: Callback) -> None:
    """``callback(module)`` once module ``name`` is imported (now, if it already is).
    A module found half-imported (its own import is still running: the callback would
    patch a module not yet defined) is left alone, as a module that was never imported
    would be."""

    def hook(module: ModuleType) -> None:
        try:
            callback(module)
        except Exception as exc:  # noqa: BLE001 - never break the user's import
            warn(f"instrumenting {name} failed ({exc!r}); it runs uninstrumented")

    module = sys.modules.get(name)
    if module is not None and _initializing(module):
        return
    _wrapt().register_post_import_hook(hook, name)


def _wrapt() -> Any:
    import wrapt

    return wrapt


_MISSING = object()  # an attribute the owner did not define itself


def _hot(original: FunctionType, wrapper: Wrapper) -> Callable[..., Any]:
    """A plain function standing for method ``original``: ``wrapper(original bound to the
    instance, instance, args, kwargs)``, with the original's name, doc and
    ``__wrapped__``."""
    bind = original.__get__

    def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        return wrapper(bind(self), self, args, kwargs)

    functools.update_wrapper(method, original)
    return method


def _defines(cls: type, name: str) -> bool:
    fn = cls.__dict__.get(name)
    return callable(fn) and not getattr(fn, "__isabstractmethod__", False)


def class_tree(cls: type) -> list[type]:
    """``cls`` and its subclasses, each once."""
    out: list[type] = []
    todo = [cls]
    seen: set[int] = set()
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        try:
            todo.extend(c.__subclasses__())
        except TypeError:  # type.__subclasses__ needs an argument
            pass
    return out


def subclass_hook(cls: type, each: Callable[[type], None]) -> classmethod[Any, Any, None]:
    """An ``__init_subclass__`` for ``cls`` that runs the one ``cls`` had (or its parent's),
    then ``each(sub)`` for every subclass defined from now on; a failure of ``each`` is a
    warning, never an error of the user's class definition."""
    previous = cls.__dict__.get("__init_subclass__")
    owner: Any = cls

    def __init_subclass__(sub: Any, /, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, sub)(**kwargs)
        else:
            super(owner, sub).__init_subclass__(**kwargs)
        try:
            each(sub)
        except Exception as exc:  # noqa: BLE001 - never break a class definition
            warn(f"instrumenting {sub.__qualname__} failed ({exc!r})")

    return classmethod(__init_subclass__)


class Patches:
    """The patches one instrumentor installed, each undone by :meth:`undo` (see the
    module doc). Not thread-safe: an instrumentor installs and undoes under its lock."""

    __slots__ = ("_done", "_keys")

    def __init__(self) -> None:
        self._done: list[tuple[Any, str, Any, bool]] = []  # owner, name, old, wrapped
        self._keys: set[tuple[int, str]] = set()

    def __len__(self) -> int:
        return len(self._done)

    def wrap(self, owner: Any, name: str, wrapper: Wrapper, *, hot: bool = False) -> bool:
        """Wrap ``owner.name`` with ``wrapper`` (once); False when ``owner`` has no such
        callable attribute or refuses the patch (a C type), which leaves it alone.

        ``hot``: a method run on every request or step. When ``owner`` (a class) defines
        it as a plain function, the wrapper goes in as a plain function too (``wrapped``
        the original bound to the instance), not as wrapt's proxy, whose binding makes a
        ``BoundFunctionWrapper`` on every call: a pass-through costs about half as much
        (``benchmarks/bench_http.py --wrap``: 0.3 µs over the bare call against 0.7 µs).
        Undone the same way: the attribute is the original function again."""
        key = (id(owner), name)
        if key in self._keys:
            return False
        fn = getattr(owner, name, None)
        if fn is None or not callable(fn):
            return False
        own = getattr(owner, "__dict__", {}).get(name)
        if hot and isinstance(owner, type) and isinstance(own, FunctionType):
            return self.set(owner, name, _hot(own, wrapper))
        before = getattr(owner, "__dict__", {}).get(name, _MISSING)
        try:
            _wrapt().wrap_function_wrapper(owner, name, wrapper)
        except (AttributeError, TypeError):
            return False
        self._keys.add(key)
        # undone by putting back what ``owner`` itself held (the raw descriptor), or by
        # removing the wrapper where the attribute was inherited: the same on every wrapt
        self._done.append((owner, name, before, True))
        return True

    def wrap_tree(self, cls: type, wrappers: dict[str, Wrapper], *, hot: bool = False) -> None:
        """Wrap each method ``name`` of ``wrappers`` wherever ``cls`` or a subclass defines
        it itself: now, and in every subclass defined later (a ``__init_subclass__`` on
        ``cls``, itself undone by :meth:`undo`); ``hot`` as :meth:`wrap`'s."""

        def each(sub: type) -> None:
            for name, wrapper in wrappers.items():
                if _defines(sub, name):
                    self.wrap(sub, name, wrapper, hot=hot)

        for sub in class_tree(cls):
            each(sub)
        self.set(cls, "__init_subclass__", subclass_hook(cls, each))

    def set(self, owner: Any, name: str, value: Any) -> bool:
        """Set the plain attribute ``owner.name`` to ``value``; undone by :meth:`undo`."""
        key = (id(owner), name)
        if key in self._keys:
            return False
        d = getattr(owner, "__dict__", {})
        old = d.get(name, _MISSING)
        try:
            setattr(owner, name, value)
        except (AttributeError, TypeError):
            return False
        self._keys.add(key)
        self._done.append((owner, name, old, False))
        return True

    def undo(self) -> None:
        """Remove every patch, newest first: each attribute is its original again."""
        while self._done:
            owner, name, what, wrapped = self._done.pop()
            self._keys.discard((id(owner), name))
            try:
                if what is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, what)
            except Exception as exc:  # noqa: BLE001 - a third party replaced it: say so
                warn(f"could not restore {getattr(owner, '__name__', owner)}.{name} ({exc!r})")
