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


def _twice(original: Any, name: str) -> Any:
    def method(self: Any) -> Any:
        return original(self) * 2

    return method


def _plus_one(original: Any, name: str) -> Any:
    def method(self: Any) -> Any:
        return original(self) + 1

    return method


def test_replace_tree_twice_on_one_class_reaches_later_subclasses_with_both() -> None:
    """Two trees on one class (stable-baselines3's ``collect_rollouts`` and ``train``, the
    queue's ``get`` and ``put``) share one ``__init_subclass__``: a subclass defined later
    gets both; the undo removes both and the hook, and the methods are the originals."""

    class Root:
        def a(self) -> int:
            return 1

        def b(self) -> int:
            return 10

    raw_a, raw_b = Root.__dict__["a"], Root.__dict__["b"]
    p = Patches()
    p.replace_tree(Root, ("a",), _twice)
    p.replace_tree(Root, ("b",), _plus_one, skip=(Root,))
    assert Root().a() == 2 and Root().b() == 10  # b: Root itself skipped
    assert Root.__dict__["a"].__wrapped__ is raw_a

    class Late(Root):
        def a(self) -> int:
            return 3

        def b(self) -> int:
            return 30

    assert Late().a() == 6 and Late().b() == 31
    assert not p.replace(Late, "a", _twice)  # a wrapper already: not wrapped again
    p.undo()
    assert Root.__dict__["a"] is raw_a and Root.__dict__["b"] is raw_b
    assert "__init_subclass__" not in Root.__dict__
    assert Late().a() == 3 and Late().b() == 30


def test_on_undo_runs_with_the_patches() -> None:
    ran: list[str] = []
    p = Patches()
    p.on_undo(lambda: ran.append("first"))
    assert p.replace(Child, "own", _plus_one)
    p.on_undo(lambda: ran.append("second"))
    assert Child().own() == 2
    p.undo()
    assert ran == ["second", "first"] and Child().own() == 1 and len(p) == 0
