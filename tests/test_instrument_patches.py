"""The instrumentors' shared patches (``gyreprof.integrations._instrument.Patches``): what
``wrap`` installs through wrapt is undone to the very object the owner held, for a method
the class defines itself, one it inherits, a classmethod and a module function."""

from __future__ import annotations

import types
from typing import Any

from gyreprof.integrations._instrument import Patches


class Base:
    def greet(self, name: str) -> str:
        return f"hello {name}"

    @classmethod
    def make(cls) -> str:
        return cls.__name__


class Child(Base):
    def own(self) -> int:
        return 1


def _shout(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return str(wrapped(*args, **kwargs)).upper()


def test_a_wrapped_own_method_is_the_original_again_after_undo() -> None:
    before = Child.__dict__["own"]
    p = Patches()
    assert p.wrap(Child, "own", _shout)
    assert Child().own() == "1" and Child.__dict__["own"] is not before
    p.undo()
    assert Child.__dict__["own"] is before and Child().own() == 1


def test_a_wrapped_inherited_method_is_inherited_again_after_undo() -> None:
    p = Patches()
    assert p.wrap(Child, "greet", _shout)
    assert "greet" in Child.__dict__ and Child().greet("a") == "HELLO A"
    assert Base().greet("a") == "hello a"  # the parent is not touched
    p.undo()
    assert "greet" not in Child.__dict__ and Child.greet is Base.greet


def test_a_wrapped_classmethod_and_module_function_come_back_as_they_were() -> None:
    raw = Base.__dict__["make"]
    mod = types.ModuleType("m")

    def f(x: int) -> int:
        return x + 1

    mod.f = f  # type: ignore[attr-defined]
    p = Patches()
    assert p.wrap(Base, "make", _shout) and p.wrap(mod, "f", _shout)
    assert Child.make() == "CHILD" and mod.f(1) == "2"
    p.undo()
    assert Base.__dict__["make"] is raw and Child.make() == "Child"
    assert mod.f is f and mod.f(1) == 2


def test_wrap_tree_reaches_a_subclass_defined_later_and_undo_removes_the_hook() -> None:
    class Root:
        def go(self) -> str:
            return "go"

    p = Patches()
    p.wrap_tree(Root, {"go": _shout})

    class Late(Root):
        def go(self) -> str:
            return "late"

    assert Root().go() == "GO" and Late().go() == "LATE"
    p.undo()
    assert "__init_subclass__" not in Root.__dict__

    class After(Root):
        def go(self) -> str:
            return "after"

    assert Root().go() == "go" and After().go() == "after"
