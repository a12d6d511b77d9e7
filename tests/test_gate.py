"""The compiled pass-through of a patched method (``gyreprof._core.gate.Gate``): the
original called directly when its check passes, the wrapper otherwise, with the same
arguments and the same result or exception; bound as a method; marked like a function."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

from gyreprof._core.gate import Gate
from gyreprof.integrations._auto import hooks

VAR: contextvars.ContextVar[Any] = contextvars.ContextVar("t_gate", default=None)


def _make(**check: Any) -> tuple[type, list[str]]:
    calls: list[str] = []

    def original(self: Any, a: Any, *args: Any, b: Any = None, **kw: Any) -> Any:
        calls.append("original")
        if a == "raise":
            raise KeyError("from the original")
        return (self.name, a, args, b, kw)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append("wrapper")
        return original(self, *args, **kwargs)

    class Thing:
        __slots__ = ("name", "mark", "__dict__")

        def __init__(self) -> None:
            self.name = "thing"

    Thing.method = hooks.mark(Gate(original, wrapper, **check), original)  # type: ignore[attr-defined]
    return Thing, calls


def test_a_set_context_variable_passes_through() -> None:
    cls, calls = _make(var=VAR)
    obj = cls()
    assert obj.method(1, 2, 3, b=4, c=5) == ("thing", 1, (2, 3), 4, {"c": 5})
    assert calls == ["wrapper", "original"]  # no owner: the wrapper, then its original
    calls.clear()

    def owned() -> Any:
        VAR.set(object())
        return obj.method(1, b=2)

    assert contextvars.copy_context().run(owned) == ("thing", 1, (), 2, {})
    assert calls == ["original"]  # no wrapper under an owner


def test_an_instance_attribute_decides() -> None:
    cls, calls = _make(attr="mark")
    obj = cls()
    obj.method(1)  # the slot is empty: missing
    assert calls == ["original"]
    obj.mark = None
    obj.method(1)
    assert calls == ["original"] * 2
    obj.mark = "open"
    obj.method(1)
    assert calls == ["original"] * 2 + ["wrapper", "original"]


def test_an_attribute_that_raises_goes_to_the_wrapper() -> None:
    def original(self: Any) -> str:
        return "original"

    def wrapper(self: Any) -> str:
        return "wrapper"

    class Odd:
        @property
        def mark(self) -> Any:
            raise RuntimeError("no")

        method = Gate(original, wrapper, attr="mark")

    assert Odd().method() == "wrapper"
    assert Odd.method(Odd()) == "wrapper"  # read from the class: the gate itself
    with pytest.raises(TypeError):  # no instance argument: the wrapper's own error
        Gate(original, wrapper, attr="mark")()


def test_results_and_exceptions_are_the_originals() -> None:
    cls, _ = _make(var=VAR)

    def owned() -> None:
        VAR.set(1)
        with pytest.raises(KeyError, match="from the original"):
            cls().method("raise")

    contextvars.copy_context().run(owned)
    with pytest.raises(KeyError, match="from the original"):
        cls().method("raise")
    with pytest.raises(TypeError):
        cls().method()  # the original's own signature error


def test_metadata_and_binding() -> None:
    cls, _ = _make(var=VAR)
    gate = cls.__dict__["method"]
    assert hooks.is_wrapped(gate) and gate.__name__ == "original"
    assert gate.__wrapped__ is gate.original
    assert cls.method is gate
    assert cls().method.__self__.name == "thing"


def test_refusals_are_value_errors() -> None:
    with pytest.raises(ValueError, match="callable"):
        Gate(None, print, var=VAR)
    with pytest.raises(ValueError, match="ContextVar"):
        Gate(print, print, var=object())
    with pytest.raises(ValueError, match="attribute name"):
        Gate(print, print, attr=3)
    with pytest.raises(ValueError, match="needs a check"):
        Gate(print, print)


def test_a_caller_without_vectorcall_gets_the_same_choice() -> None:
    """``gate.__call__(...)`` goes through the type's tp_call, not vectorcall: the same
    check picks the same target, with the arguments as given."""
    cls, calls = _make(var=VAR)
    gate, thing = cls.__dict__["method"], cls()

    def owned() -> Any:
        VAR.set(1)
        return gate.__call__(thing, "a", 2, b=3, c=4)

    assert contextvars.copy_context().run(owned) == ("thing", "a", (2,), 3, {"c": 4})
    assert calls == ["original"]
    calls.clear()
    assert gate.__call__(thing, "a") == ("thing", "a", (), None, {})
    assert calls == ["wrapper", "original"]
