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
installed once. ``patches.replace(owner, name, make)`` puts ``make(original, name)`` in
place of ``owner.name`` as it is (a plain function, or a C object: no wrapt proxy
between a hot call and its wrapper), marked as gyreprof's (:func:`mark`);
``patches.replace_tree(cls, names, make)`` does so wherever ``cls`` or a subclass (now
or later) defines a method of ``names``; ``patches.on_undo(fn)`` runs ``fn`` at the
undo (a hook handle to remove).

One library's instrumentor is an :class:`Instrumentor`: its ``Patches``, the modules
whose import installs them, and a count of ``instrument()`` calls not yet undone.

``when_imported(name, callback)`` runs ``callback(module)`` once module ``name`` has
finished importing (at once when it already has), through wrapt's post-import hooks.
A callback never raises into the importing code: a failure is a warning on stderr and
the library runs uninstrumented. wrapt's hooks cannot be removed: an instrumentor that
was undone makes its callback do nothing (:class:`Instrumentor`, and
``gyreprof.integrations.http``).

wrapt is imported on first use, not with this module: the launcher's bootstrap imports
this module in every process before it checks that the process's Python has what the
profilers need, and says what it lacks rather than failing on the import.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from types import FunctionType, ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]
Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]
#: ``make(original, name)``: the function (or C object) that stands for ``original``
Make = Callable[[Callable[..., Any], str], Callable[..., Any]]

__all__ = [
    "MARK",
    "Callback",
    "Instrumentor",
    "Make",
    "Patches",
    "Wrapper",
    "class_tree",
    "is_wrapped",
    "mark",
    "subclass_hook",
    "warn",
    "when_imported",
]

MARK = "__gyreprof_wrapped__"


def is_wrapped(fn: object) -> bool:
    """``fn`` is a wrapper gyreprof put in place (:func:`mark`)."""
    return bool(getattr(fn, MARK, False))


def mark(wrapper: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``wrapper`` look like ``original`` (name, doc, ``__wrapped__``) and mark it
    as gyreprof's."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(wrapper, MARK, True)
    return wrapper


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
_CALL = object()  # an entry of Patches._done that is a function to run at the undo


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

    __slots__ = ("_done", "_keys", "_trees")

    def __init__(self) -> None:
        self._done: list[tuple[Any, str, Any, bool]] = []  # owner, name, old, wrapped
        self._keys: set[tuple[int, str]] = set()
        self._trees: dict[int, list[Callable[[type], None]]] = {}  # id(cls) -> each(sub)

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
        self._subclasses(cls, each)

    def _subclasses(self, cls: type, each: Callable[[type], None]) -> None:
        """Run ``each(sub)`` for every subclass of ``cls`` defined from now on: one
        ``__init_subclass__`` on ``cls`` per ``Patches``, running every ``each`` given."""
        todo = self._trees.get(id(cls))
        if todo is not None:
            todo.append(each)
            return
        todo = [each]

        def every(sub: type) -> None:
            for fn in list(todo):
                fn(sub)

        if self.set(cls, "__init_subclass__", subclass_hook(cls, every)):
            self._trees[id(cls)] = todo

    def replace(self, owner: Any, name: str, make: Make) -> bool:
        """Put ``make(original, name)`` (marked: :func:`mark`) in place of ``owner.name``:
        the attribute ``owner`` defines itself (a class) or holds (a module); False when
        there is none, it is abstract, or it is a wrapper of gyreprof's already."""
        if (id(owner), name) in self._keys:
            return False
        if isinstance(owner, type):
            fn = owner.__dict__.get(name)
        else:
            fn = getattr(owner, name, None)
        if fn is None or not callable(fn) or is_wrapped(fn):
            return False
        if getattr(fn, "__isabstractmethod__", False):
            return False
        return self.set(owner, name, mark(make(fn, name), fn))

    def replace_tree(
        self, cls: type, names: Sequence[str], make: Make, *, skip: Sequence[type] = ()
    ) -> None:
        """:meth:`replace` each method of ``names`` wherever ``cls`` or a subclass defines
        it, now and in every subclass defined later; the classes of ``skip`` are left
        alone."""

        def each(sub: type) -> None:
            for name in names:
                self.replace(sub, name, make)

        for sub in class_tree(cls):
            if sub not in skip:
                each(sub)
        self._subclasses(cls, each)

    def on_undo(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at the undo, in turn with the patches (newest first)."""
        self._done.append((_CALL, "", fn, False))

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
        self._trees.clear()
        while self._done:
            owner, name, what, wrapped = self._done.pop()
            if owner is _CALL:
                try:
                    what()
                except Exception as exc:  # noqa: BLE001 - the other patches still go
                    warn(f"undoing a patch failed ({exc!r})")
                continue
            self._keys.discard((id(owner), name))
            try:
                if what is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, what)
            except Exception as exc:  # noqa: BLE001 - a third party replaced it: say so
                warn(f"could not restore {getattr(owner, '__name__', owner)}.{name} ({exc!r})")


class Instrumentor:
    """One library's instrumentation: its :class:`Patches` (``patches``), the modules whose
    import installs them (``hooks``: module name -> ``install(module)``), and how many
    :meth:`instrument` calls are not yet undone.

    :meth:`instrument` installs each hook's patches now (a module already imported) or
    when its module is imported; :meth:`uninstrument` undoes one call, and at the last
    every patched attribute is its original object again. wrapt's post-import hooks
    cannot be removed: each is registered once, and does nothing while the library is
    not instrumented. An install that fails is a warning: the library runs
    uninstrumented, the importing code goes on."""

    def __init__(self, name: str, hooks: dict[str, Callback]) -> None:
        import threading

        self.name = name
        self.hooks = hooks
        self.patches = Patches()
        self.lock = threading.RLock()  # re-entrant: an install may import what it hooks
        self.depth = 0
        self._registered: set[tuple[str, Callback]] = set()
        # a child forked while another thread held the lock would never get it
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        import threading

        self.lock = threading.RLock()

    @property
    def active(self) -> bool:
        """Instrumented (an :meth:`instrument` not yet undone)."""
        return self.depth > 0

    def _run(self, name: str, callback: Callback, module: ModuleType) -> None:
        with self.lock:
            if self.depth == 0:
                return
            try:
                callback(module)
            except Exception as exc:  # noqa: BLE001 - never break the user's import
                warn(f"instrumenting {name} failed ({exc!r}); it runs uninstrumented")

    def when_imported(self, name: str, callback: Callback) -> None:
        """``callback(module)`` now (module ``name`` imported) or once ``name`` is
        imported, while instrumented; what it patches goes into ``patches``."""
        key = (name, callback)
        if key not in self._registered:
            self._registered.add(key)
            when_imported(name, functools.partial(self._run, name, callback))
            return
        module = sys.modules.get(name)  # registered before: wrapt runs it only on import
        if module is not None and not _initializing(module):
            self._run(name, callback, module)

    def instrument(self) -> None:
        """Patch the library now (imported) or when it is imported. Each call is undone
        by one :meth:`uninstrument`; the patches stay until the last one."""
        with self.lock:
            self.depth += 1
            if self.depth == 1:
                for name, callback in self.hooks.items():
                    self.when_imported(name, callback)

    def uninstrument(self) -> None:
        """Undo one :meth:`instrument`; at the last, every patched attribute is its
        original object again."""
        with self.lock:
            if self.depth == 0:
                return
            self.depth -= 1
            if self.depth == 0:
                self.patches.undo()
