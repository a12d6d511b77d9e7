"""The pass-through of the layers under a client that owns its request
(``http.client``'s ``request`` / ``getresponse``, ``gyreprof.integrations.http.urllib``):
the original called directly when a layer above owns the request or the connection has no
request of this layer open, the instrumented path otherwise, with the same arguments and
the same result or exception; bound as a method; undone to the very original."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.integrations._instrument import Patches
from gyreprof.integrations.http import _common
from gyreprof.integrations.http import urllib as layer


class _Answer:
    status = 200

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return b"{}"


def _make() -> tuple[type, list[str], Patches]:
    """A connection class (host, port) whose ``request`` and ``getresponse`` are wrapped
    as ``http.client``'s are, and the list of the originals' calls."""
    calls: list[str] = []

    class Conn:
        host = "mock"
        port = 80

        def request(self, method: Any, url: Any, *args: Any, body: Any = None, **kw: Any) -> Any:
            calls.append("request")
            if method == "raise":
                raise KeyError("from the original")
            return (method, url, args, body, kw)

        def getresponse(self) -> Any:
            calls.append("getresponse")
            return _Answer()

    patches = Patches()
    patches.wrap_tree(
        Conn, {"request": layer._conn_request, "getresponse": layer._conn_getresponse}
    )
    patches.set(Conn, layer.OPEN, None)
    return Conn, calls, patches


def _spans() -> list[Any]:
    return [rl.as_row(s) for s in rl.thread_log().spans]


def test_an_owner_above_passes_through() -> None:
    cls, calls, patches = _make()
    conn = cls()
    before = len(_spans())

    def owned() -> Any:
        _common.active.set(object())  # type: ignore[arg-type]
        out = conn.request("POST", "/v1/x", 3, body=4, c=5)
        conn.getresponse()
        return out

    assert contextvars.copy_context().run(owned) == ("POST", "/v1/x", (3,), 4, {"c": 5})
    assert calls == ["request", "getresponse"] and len(_spans()) == before  # no span
    assert getattr(conn, layer.OPEN) is None
    patches.undo()


def test_a_request_of_its_own_is_recorded_between_request_and_getresponse() -> None:
    cls, calls, patches = _make()
    conn = cls()
    before = len(_spans())
    conn.getresponse()  # nothing open on the connection: the original only
    assert calls == ["getresponse"] and len(_spans()) == before
    assert conn.request("GET", "/v1/models") == ("GET", "/v1/models", (), None, {})
    assert isinstance(getattr(conn, layer.OPEN), rl.Request)  # open on the instance
    resp = conn.getresponse()
    assert getattr(conn, layer.OPEN) is None and resp.read() == b"{}"
    rows = _spans()[before:]
    assert len(rows) == 1 and rows[0][rl.R_ENDPOINT] == "http://mock:80/v1/models"
    assert rows[0][rl.R_CLIENT] == "http.client" and rows[0][rl.R_OUTCOME] == "ok"
    patches.undo()


def test_an_attribute_that_raises_is_no_request_of_ours() -> None:
    cls, calls, patches = _make()

    class Odd(cls):  # type: ignore[valid-type, misc]
        @property
        def _gyreprof_request(self) -> Any:
            raise RuntimeError("no")

    assert isinstance(Odd().getresponse(), _Answer)
    assert calls == ["getresponse"]
    patches.undo()


def test_results_and_exceptions_are_the_originals() -> None:
    cls, _, patches = _make()

    def owned() -> None:
        _common.active.set(1)  # type: ignore[arg-type]
        with pytest.raises(KeyError, match="from the original"):
            cls().request("raise", "/")

    contextvars.copy_context().run(owned)
    with pytest.raises(KeyError, match="from the original"):
        cls().request("raise", "/")
    assert rl.as_row(rl.thread_log().spans[-1])[rl.R_OUTCOME] == "error"  # its own: recorded
    with pytest.raises(TypeError):
        cls().request()  # the original's own signature error
    patches.undo()


def test_metadata_binding_and_undo() -> None:
    cls, _, patches = _make()
    originals = {name: cls.__dict__[name].__wrapped__ for name in ("request", "getresponse")}
    assert cls.request.__name__ == "request" and cls.request.__wrapped__ is originals["request"]
    conn = cls()
    assert conn.request.__self__ is conn
    assert cls.__dict__[layer.OPEN] is None
    patches.undo()
    assert all(cls.__dict__[n] is fn for n, fn in originals.items())  # the very originals
    assert layer.OPEN not in cls.__dict__ and "__init_subclass__" not in cls.__dict__


def test_a_call_through_the_class_gets_the_same_choice() -> None:
    """``Conn.request(conn, ...)`` (unbound, through the class) takes the same path."""
    cls, calls, patches = _make()
    conn = cls()

    def owned() -> Any:
        _common.active.set(1)  # type: ignore[arg-type]
        return cls.request(conn, "a", 2, body=3, c=4)

    assert contextvars.copy_context().run(owned) == ("a", 2, (), 3, {"c": 4})
    assert getattr(conn, layer.OPEN) is None
    assert cls.request(conn, "a", "/b") == ("a", "/b", (), None, {})
    assert isinstance(getattr(conn, layer.OPEN), rl.Request)
    patches.undo()


def test_a_subclass_defined_later_is_wrapped_and_undone() -> None:
    cls, calls, patches = _make()

    class Later(cls):  # type: ignore[valid-type, misc]
        def getresponse(self) -> Any:
            calls.append("later")
            return super().getresponse()

    wrapper = Later.__dict__["getresponse"]  # wrapped as the class was made
    own = wrapper.__wrapped__
    assert wrapper is not own and own.__qualname__.endswith("Later.getresponse")
    conn = Later()
    conn.request("GET", "/later")
    conn.getresponse()  # the subclass's wrapper records; its super() call passes through
    assert calls == ["request", "later", "getresponse"]
    patches.undo()
    assert Later.__dict__["getresponse"] is own
