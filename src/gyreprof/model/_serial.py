"""One encoder and one decoder for gyreprof's result objects (dataclasses).

A result class declares its format tag once, ``"<name>/<version>"``::

    @serial_format("gyreprof.verdict/1")
    @dataclass(frozen=True)
    class Verdict:
        side: Literal["sampler", "trainer", "neither"]
        share: float
        notes: list[str] = field(default_factory=list)

    data = encode(verdict)           # {"format": "gyreprof.verdict/1", "side": ..., ...}
    again = decode(Verdict, data)    # validated, the same value

:func:`encode` turns the object into plain JSON types (dict, list, str, int, float,
bool, None): nested dataclasses become dicts, tuples and sets lists, enums their
value, paths text, numpy scalars and arrays Python numbers and lists. Only the
top-level dict carries the ``"format"`` tag.

**The NaN rule (one for every JSON gyreprof writes): strict JSON, ``null`` for a
missing figure.** A NaN float is written as ``null``, and so are ``inf`` and
``-inf``: a figure with no finite value is a missing figure (a ratio over a zero
median, say), never a ``NaN``/``Infinity`` literal, which ``json.loads`` of other
languages refuses. :func:`decode` reads ``null`` back as NaN for a field typed
``float`` (or a union with ``float`` and without ``None``); a field typed
``float | None`` reads it back as ``None``. So an infinite value comes back as NaN:
a field that must keep it should hold it another way. Data written by older
versions, with the strings ``"nan"``, ``"inf"`` and ``"-inf"``, still reads (as
those floats).

:func:`decode` reads that back against the class's type hints and checks every
value on the way: nested dataclasses, ``list``/``tuple``/``set``/``dict``, ``X | None``
and other unions, ``Literal``, enums, ``Any``. Anything wrong -- another format,
another version, a missing or unknown field, a value of the wrong type, a value the
class's ``__post_init__`` refuses -- raises :class:`SerialError` (a ``ValueError``)
that says where (``.phases[2].name``) and what was wrong. Nothing else escapes.
``@serial_format(tag, reads=(older_tag, ...))`` names older versions of the format
that :func:`decode` accepts as well (their layout must read through the same
fields; a class whose older layout differs converts it before decoding).
``@serial_format(tag, writer="gyreprof")`` writes the writing library's version under
that key (ignored on reading).

A field left out of the data takes its default, so a field added with a default
does not need a new version; a field with ``metadata={"serial": False}`` is never
written (it must have a default) and fields with ``init=False`` are left to the
class to compute; a private field (its name starts with an underscore: a cache, the
object a value was computed from) is never written either.
A field typed ``Annotated[T, read]`` is read by ``read(value, where)``, which returns
the value or raises ``ValueError`` saying what is wrong (a record whose values have
a narrower range than their type: a 64-bit integer, a finite float).
``metadata={"serial_sparse": True}`` leaves a field out while it holds its default
(a field most records leave empty). ``metadata={"serial_key": "name"}`` writes and reads a field under another name
than its attribute's. ``metadata={"serial_whole": True}`` nests another
tagged record *whole*, with its own tag and version (through its class's ``to_dict()``
/ ``from_dict()`` when it has them, so a record with parts outside its fields keeps
them), where a nested dataclass is otherwise written as its fields only.

Three options for records that cross boundaries they do not control:
``encode(obj, default=fn)`` (also :func:`plain` and :func:`dumps`) writes a value it
has no rule for as ``fn(value)``, like ``json.dumps``'s ``default`` (for settings a
user passed in, say); ``decode(cls, data, ignore_unknown=True)`` skips fields it
does not know (data from a newer writer) instead of refusing them; and
:func:`from_plain` reads back an untagged part written by :func:`plain`.

A record class inherits :class:`Record` for its ``to_dict`` / ``from_dict`` /
``to_json``, declared once here instead of in each class::

    @serial_format("gyreprof.verdict/1")
    @dataclass(frozen=True)
    class Verdict(Record): ...

    Verdict.from_dict(verdict.to_dict()) == verdict
    verdict.to_json("verdict.json")

A tagged class's ``to_dict`` is :func:`encode`, an untagged one's (a part of other
records) :func:`plain`; ``class Part(Record, ignore_unknown=True)`` declares that
reading skips fields it does not know (data from a newer writer).

Values a class computes from its fields (``ok``, ``exit_code``, a count) can be
written beside them for readers of the JSON: ``@serial_format(tag,
derived=("ok", "exit_code"))`` names properties or methods that take no argument.
:func:`encode` writes each after the fields (in nested records too), and
:func:`decode` accepts those keys and ignores their values: the class computes
them again from its fields.
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
import json
import math
import numbers
import operator
import os
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Any, ClassVar, TypeVar, Union

from gyreprof._support.errors import ArgumentTypeError, CorruptDataError, InvalidValueError
from gyreprof._version import __version__

__all__ = [
    "Record",
    "SerialError",
    "decode",
    "dumps",
    "encode",
    "format_of",
    "from_plain",
    "loads",
    "plain",
    "readable_formats",
    "serial_derived",
    "serial_format",
    "write_json",
]

T = TypeVar("T")

Default = Callable[[Any], Any]

_TAG_ATTR = "__serial_format__"
_READS_ATTR = "__serial_reads__"
_WRITER_ATTR = "__serial_writer__"
_DERIVED_ATTR = "__serial_derived__"


class SerialError(CorruptDataError):
    """Data that does not decode into the class asked for (a ``ValueError``)."""


# ------------------------------------------------------------------ the tag


def serial_format(
    tag: str,
    *,
    derived: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
    writer: str | None = None,
) -> Callable[[type[T]], type[T]]:
    """Class decorator: give a dataclass its format tag, ``"<name>/<version>"``, the
    names of the computed values written beside its fields (``derived``), the older
    tags it still reads (``reads``) and the key under which the writing gyreprof's
    version is written (``writer``)."""
    name, version = _split_tag(tag)
    for old in reads:
        old_name, old_version = _split_tag(old)
        if old_name != name or old_version >= version:
            raise InvalidValueError(
                f"serial_format({tag!r}): {old!r} is not an older version of it"
            )
    mark_derived = serial_derived(*derived)

    def mark(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise ArgumentTypeError(f"serial_format({tag!r}) needs a dataclass, got {cls.__name__}")
        mark_derived(cls)
        setattr(cls, _TAG_ATTR, tag)
        setattr(cls, _READS_ATTR, tuple(reads))
        setattr(cls, _WRITER_ATTR, writer)
        return cls

    return mark


def serial_derived(*names: str) -> Callable[[type[T]], type[T]]:
    """Class decorator for a dataclass written only inside other records (no tag of its
    own): the computed values :func:`encode` writes beside its fields."""

    def mark(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise ArgumentTypeError(f"serial_derived needs a dataclass, got {cls.__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        for name in names:
            if name in fields or not hasattr(cls, name):
                raise ArgumentTypeError(
                    f"{cls.__name__}.{name} must be a property or a method without "
                    "arguments, not a field, to be written as a derived value"
                )
        setattr(cls, _DERIVED_ATTR, tuple(names))
        return cls

    return mark


def _derived(cls: type[Any]) -> tuple[str, ...]:
    names = cls.__dict__.get(_DERIVED_ATTR, ())
    return names if isinstance(names, tuple) else ()


def format_of(cls: type[Any]) -> str:
    """The format tag a class declared (``TypeError`` if it declared none)."""
    tag = cls.__dict__.get(_TAG_ATTR)
    if not isinstance(tag, str):
        raise ArgumentTypeError(
            f"{cls.__name__} has no format tag; decorate it with @serial_format('name/1') "
            f"or set the class variable {_TAG_ATTR} = 'name/1'"
        )
    return tag


def readable_formats(cls: type[Any]) -> tuple[str, ...]:
    """The tags :func:`decode` accepts for ``cls``: its own, then the older ones it reads."""
    reads = cls.__dict__.get(_READS_ATTR, ())
    return (format_of(cls), *(reads if isinstance(reads, tuple) else ()))


def _writer_key(cls: type[Any]) -> str | None:
    key = cls.__dict__.get(_WRITER_ATTR)
    return key if isinstance(key, str) else None


def _split_tag(tag: object) -> tuple[str, int]:
    if isinstance(tag, str) and tag.count("/") == 1:
        name, _, version = tag.partition("/")
        if name and version.isdigit() and version.isascii():
            return name, int(version)
    raise InvalidValueError(f"a format tag must look like 'gyreprof.thing/1', got {tag!r}")


# ------------------------------------------------------------------ the record base

_RecordT = TypeVar("_RecordT", bound="Record")


class Record:
    """The base of a record class (a dataclass): its ``to_dict``, ``from_dict`` and
    ``to_json`` through this codec. A class with a format tag (:func:`serial_format`)
    writes it first; one without is a part of other records, written as its fields.
    ``class X(Record, ignore_unknown=True)``: reading skips fields ``X`` does not know."""

    __slots__ = ()
    __serial_ignore_unknown__: ClassVar[bool] = False

    def __init_subclass__(cls, *, ignore_unknown: bool | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if ignore_unknown is not None:
            cls.__serial_ignore_unknown__ = ignore_unknown

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields (``null`` for a missing figure), after the format
        tag when the class has one."""
        if isinstance(type(self).__dict__.get(_TAG_ATTR), str):
            return encode(self)
        out: dict[str, Any] = plain(self)
        return out

    @classmethod
    def from_dict(cls: type[_RecordT], data: Mapping[str, Any]) -> _RecordT:
        """The record again from :meth:`to_dict`'s output; :class:`SerialError` (a
        ``ValueError``) naming what is wrong and where."""
        ignore = cls.__serial_ignore_unknown__
        if isinstance(cls.__dict__.get(_TAG_ATTR), str):
            return decode(cls, data, ignore_unknown=ignore)
        return from_plain(cls, data, ignore_unknown=ignore)

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """The strict JSON text of :meth:`to_dict`; written to ``path`` as well when given."""
        return write_json(self.to_dict(), path, indent=indent)


def write_json(
    data: Mapping[str, Any] | list[Any],
    path: str | os.PathLike[str] | None = None,
    *,
    indent: int | None = None,
) -> str:
    """``data`` (plain JSON types) as strict JSON text (no NaN or Infinity literals);
    written to ``path`` as well (atomically, with a final newline) when given."""
    out = json.dumps(data, indent=indent, allow_nan=False)
    if path is not None:
        from gyreprof._support import (
            io as _io,  # only when it writes: every process's bootstrap imports this
        )

        _io.write_atomic(Path(path), (out + "\n").encode("utf-8"))
    return out


# ------------------------------------------------------------------ encode


def encode(obj: Any, *, default: Default | None = None) -> dict[str, Any]:
    """``obj`` (an instance of a tagged dataclass) as a JSON-ready dict with its tag.

    ``default``: called on a value there is no rule for; what it returns is written
    instead (without it such a value is a ``TypeError``).
    """
    cls = type(obj)
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise ArgumentTypeError(f"encode needs a dataclass instance, got {cls.__name__}")
    tag = format_of(cls)
    head: dict[str, Any] = {"format": tag}
    writer = _writer_key(cls)
    if writer is not None:
        head[writer] = __version__
    return {**head, **_encode_fields(obj, tag, default)}


def plain(value: Any, *, default: Default | None = None) -> Any:
    """Any value :func:`encode` can write (a dataclass, list, dict, ...) as plain JSON
    types, without a format tag: for the parts of a record."""
    return _encode_value(value, type(value).__name__, default)


def dumps(obj: Any, *, default: Default | None = None, **json_kwargs: Any) -> str:
    """:func:`encode` then ``json.dumps`` (strict JSON: no NaN or Infinity literals)."""
    return json.dumps(encode(obj, default=default), allow_nan=False, **json_kwargs)


def _written(f: dataclasses.Field[Any]) -> bool:
    """Whether :func:`encode` writes field ``f`` (and :func:`decode` reads it)."""
    return f.init and not f.name.startswith("_") and f.metadata.get("serial", True) is not False


def _key_of(f: dataclasses.Field[Any]) -> str:
    key = f.metadata.get("serial_key", f.name)
    if not isinstance(key, str):
        raise ArgumentTypeError(f"field {f.name}: serial_key must be text, got {key!r}")
    return key


class _EncodePlan(typing.NamedTuple):
    """How to write a class: the keys of the fields written, a function that reads their
    values (one C call), and the keys of the fields nested whole."""

    keys: tuple[str, ...]
    values: Callable[[Any], tuple[Any, ...]]
    whole: frozenset[str]
    # key -> default of the fields left out while they hold their default ("serial_sparse")
    sparse: tuple[tuple[str, Any], ...] = ()


_ENCODE_PLANS: dict[type[Any], _EncodePlan] = {}


def _encode_plan(cls: type[Any]) -> _EncodePlan:
    plan = _ENCODE_PLANS.get(cls)
    if plan is None:
        written = [f for f in dataclasses.fields(cls) if _written(f)]
        names = [f.name for f in written]
        values: Callable[[Any], tuple[Any, ...]]
        if len(names) > 1:
            values = operator.attrgetter(*names)
        else:
            values = lambda obj: tuple(getattr(obj, n) for n in names)  # noqa: E731
        plan = _ENCODE_PLANS[cls] = _EncodePlan(
            keys=tuple(_key_of(f) for f in written),
            values=values,
            whole=frozenset(_key_of(f) for f in written if f.metadata.get("serial_whole")),
            sparse=tuple(
                (_key_of(f), f.default) for f in written if f.metadata.get("serial_sparse")
            ),
        )
    return plan


# the types of the values written as they are
_AS_IS = frozenset({int, str, bool, type(None)})


def _encode_fields(obj: Any, where: str, default: Default | None) -> dict[str, Any]:
    plan = _encode_plan(type(obj))
    values = plan.values(obj)
    if _AS_IS.issuperset(map(type, values)):  # every value as it is: no per-field work
        out = dict(zip(plan.keys, values, strict=True))
    else:
        out = _encode_each(plan, values, where, default)
    for key, value in plan.sparse:
        if out.get(key) == value:
            del out[key]
    for name in _derived(type(obj)):
        value = getattr(obj, name)
        if callable(value):
            value = value()
        out[name] = _encode_value(value, f"{where}.{name}", default)
    return out


def _encode_each(
    plan: _EncodePlan, values: tuple[Any, ...], where: str, default: Default | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in zip(plan.keys, values, strict=True):
        kind = type(value)
        if kind is int or kind is str or value is None or kind is bool:
            out[key] = value  # the common case: written as it is, without a path to name
        elif kind is float:
            out[key] = value if math.isfinite(value) else None  # the NaN rule
        elif key in plan.whole:
            out[key] = _encode_whole(value, f"{where}.{key}", default)
        else:
            out[key] = _encode_value(value, f"{where}.{key}", default)
    return out


def _encode_whole(value: Any, where: str, default: Default | None) -> Any:
    """A tagged record nested whole: its own tag and layout (its class's ``to_dict()``
    when it has one, else :func:`encode`)."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _encode_value(to_dict(), where, default)
    return encode(value, default=default)


def _decode_whole(tp: Any, value: Any, where: str) -> Any:
    """Read a record nested whole (see :func:`_encode_whole`) against the tagged class
    in the field's type (``X`` or ``X | None``)."""
    arms = typing.get_args(tp) or (tp,)
    if value is None:
        if type(None) in arms:
            return None
        raise SerialError(f"{where}: expected an object (dict), got null")
    classes = [
        a for a in arms if isinstance(a, type) and isinstance(a.__dict__.get(_TAG_ATTR), str)
    ]
    if len(classes) != 1:
        raise ArgumentTypeError(f"{where}: serial_whole needs one tagged record class, got {tp!r}")
    cls = classes[0]
    from_dict = getattr(cls, "from_dict", None)
    try:
        return from_dict(value) if callable(from_dict) else decode(cls, value)
    except ValueError as exc:
        raise SerialError(f"{where}: {exc}") from None


def _encode_value(value: Any, where: str, default: Default | None = None, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return _encode_value(value.value, where, default)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _encode_float(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encode_fields(value, where, default)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _encode_key(k, where)
            if key in out:
                raise ArgumentTypeError(f"{where}: two keys are both written as {key!r}")
            out[key] = _encode_value(v, f"{where}[{key!r}]", default)
        return out
    if isinstance(value, (list, tuple)):
        return [_encode_value(v, f"{where}[{i}]", default) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [_encode_value(v, f"{where}[]", default) for v in value]
        return sorted(items, key=lambda x: (type(x).__name__, repr(x)))
    if isinstance(value, PurePath):
        return str(value)
    if type(value).__module__ == "numpy":
        if hasattr(value, "tolist"):  # numpy scalar or array -> Python numbers and lists
            return _encode_value(value.tolist(), where, default)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _encode_float(float(value))
    if default is not None and depth < 8:  # what default returns is written in turn
        return _encode_value(default(value), where, default, depth + 1)
    raise ArgumentTypeError(f"{where}: cannot encode a {type(value).__name__}")


def _encode_float(x: float) -> float | None:
    # the NaN rule: a figure without a finite value is a missing figure, null
    return float(x) if math.isfinite(x) else None


def _encode_key(key: Any, where: str) -> str:
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return key
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return str(int(key))
    raise ArgumentTypeError(
        f"{where}: dict keys must be str, int or enums, got {type(key).__name__}"
    )


# ------------------------------------------------------------------ decode


def decode(cls: type[T], data: Any, *, ignore_unknown: bool = False) -> T:
    """Rebuild a ``cls`` from :func:`encode`'s output, checking the tag and every value.

    ``ignore_unknown``: skip fields the classes do not declare (at every level) instead
    of refusing them. Raises :class:`SerialError` (a ``ValueError``) naming what was
    wrong and where.
    """
    tag = format_of(cls)
    if not isinstance(data, Mapping):
        raise SerialError(f"{tag}: expected an object (dict), got {_what(data)}")
    found = data.get("format")
    if found not in readable_formats(cls):
        raise SerialError(_tag_mismatch(tag, found))
    writer = _writer_key(cls)
    skip = ("format",) if writer is None else ("format", writer)
    return _decode_top(cls, data, tag, skip, ignore_unknown)


def from_plain(cls: type[T], data: Any, *, where: str = "", ignore_unknown: bool = False) -> T:
    """Rebuild dataclass ``cls`` (tagged or not) from :func:`plain`'s output: a part of a
    record, with no format tag. ``where`` names it in errors (default: the class name).
    """
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise ArgumentTypeError(f"from_plain needs a dataclass, got {cls!r}")
    name = where or cls.__name__
    if not isinstance(data, Mapping):
        raise SerialError(f"{name}: expected an object (dict), got {_what(data)}")
    return _decode_top(cls, data, name, (), ignore_unknown)


def _decode_top(
    cls: type[T], data: Mapping[Any, Any], where: str, skip: tuple[str, ...], ignore: bool
) -> T:
    token = _IGNORE_UNKNOWN.set(ignore)
    try:
        return _decode_dataclass(cls, data, where, skip=skip)
    except RecursionError:
        raise SerialError(f"{where}: the data is nested too deeply") from None
    finally:
        _IGNORE_UNKNOWN.reset(token)


def loads(cls: type[T], text: str | bytes, *, ignore_unknown: bool = False) -> T:
    """``json.loads`` then :func:`decode`; text that is not JSON is a :class:`SerialError`."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SerialError(f"{format_of(cls)}: not JSON: {exc}") from None
    return decode(cls, data, ignore_unknown=ignore_unknown)


def _tag_mismatch(tag: str, found: Any) -> str:
    name, version = _split_tag(tag)
    if found is None:
        return f"{tag}: the data has no 'format' tag; is it a {name} record?"
    try:
        found_name, found_version = _split_tag(found)
    except ValueError:
        return f"{tag}: unreadable 'format' tag {found!r}"
    if found_name == name:
        newer = "a newer" if found_version > version else "an older"
        return (
            f"{tag}: the data is version {found_version} ({found!r}), written by {newer} "
            f"gyreprof; this one reads version {version}"
        )
    return f"{tag}: the data is a {found_name!r} record, not {name!r}"


_HINTS: dict[type[Any], dict[str, Any]] = {}
# whether the decode in progress skips unknown fields (set by _decode_top)
_IGNORE_UNKNOWN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "gyreprof_serial_ignore_unknown", default=False
)


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        try:
            hints = typing.get_type_hints(
                cls, localns=_ModuleNames(cls.__module__), include_extras=True
            )
        except NameError:  # a field not written (serial=False) may name a TYPE_CHECKING type
            hints = _written_hints(cls)
        _HINTS[cls] = hints
    return hints


class _ModuleNames(Mapping[str, Any]):
    """A module's names looked up as attributes: a name the module imports on first use
    (a module ``__getattr__``, PEP 562) resolves too, so a module can keep the types of
    a record's parts out of its import time."""

    def __init__(self, module: str) -> None:
        self._module = sys.modules.get(module)

    def __getitem__(self, name: str) -> Any:
        if self._module is not None and not name.startswith("__"):
            try:
                return getattr(self._module, name)
            except AttributeError:
                pass
        raise KeyError(name)

    def __iter__(self) -> typing.Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _written_hints(cls: type[Any]) -> dict[str, Any]:
    """The type hints of the fields :func:`encode` writes, one at a time."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        module = sys.modules.get(klass.__module__)
        names = dict(vars(module)) if module is not None else {}
        for name, ann in klass.__dict__.get("__annotations__", {}).items():
            f = klass.__dataclass_fields__.get(name)
            if f is None or not _written(f):
                continue
            out[name] = typing.get_type_hints(
                type("_One", (), {"__annotations__": {name: ann}}), names, include_extras=True
            )[name]
    return out


# per class: how to read it. ``rows`` (attribute, key, type, required, nested whole, own
# reader, null reads as None) of each field read, in field order; ``by_key`` the same
# rows by key; ``required`` the keys that must be present; ``keys`` every key it knows
# (fields and derived values)
_Row = tuple[str, str, Any, bool, bool, Callable[[Any], Any] | None, bool]


class _Plan(typing.NamedTuple):
    rows: tuple[_Row, ...]
    by_key: dict[str, _Row]
    required: frozenset[str]
    keys: frozenset[str]


_PLANS: dict[type[Any], _Plan] = {}


def _plan(cls: type[Any]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = _hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            if not _written(f):
                continue
            required = f.default is dataclasses.MISSING and (
                f.default_factory is dataclasses.MISSING
            )
            whole = bool(f.metadata.get("serial_whole"))
            tp = hints[f.name]
            read, nullable = _own_reader(tp)
            rows.append((f.name, _key_of(f), tp, required, whole, read, nullable))
        plan = _PLANS[cls] = _Plan(
            rows=tuple(rows),
            by_key={r[1]: r for r in rows},
            required=frozenset(r[1] for r in rows if r[3]),
            keys=frozenset(r[1] for r in rows) | frozenset(_derived(cls)),
        )
    return plan


def _own_reader(tp: Any) -> tuple[Callable[[Any], Any] | None, bool]:
    """The reader a field typed ``Annotated[T, read]`` (or that ``| None``) declares, and
    whether null reads as None; (None, False) for any other type."""
    nullable = False
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = typing.get_args(tp)
        arms = [a for a in args if a is not type(None)]
        if len(arms) != 1 or len(arms) == len(args):
            return None, False
        tp, nullable = arms[0], True
    if typing.get_origin(tp) is typing.Annotated:
        reads = [m for m in tp.__metadata__ if callable(m)]
        if len(reads) == 1:
            return reads[0], nullable
    return None, False


def _read_with(read: Callable[[Any], Any], value: Any, where: str) -> Any:
    try:
        return read(value)
    except SerialError:
        raise
    except ValueError as exc:
        raise SerialError(f"{where}: {exc}") from None


def _decode_dataclass(
    cls: type[T], data: Mapping[Any, Any], where: str, skip: tuple[str, ...] = ()
) -> T:
    plan = _plan(cls)
    if plan.required.issubset(data.keys()):
        # the common case, data as written: read the keys present (a record may leave most
        # fields out); on any problem, read again in field order, which names the first
        kwargs: dict[str, Any] = {}
        by_key = plan.by_key
        for key, value in data.items():
            row = by_key.get(key)
            if row is None:
                if key not in plan.keys and key not in skip and not _IGNORE_UNKNOWN.get():
                    break
                continue
            name, key, tp, _, whole, read, nullable = row
            try:
                if read is not None:
                    kwargs[name] = None if value is None and nullable else read(value)
                elif whole:
                    kwargs[name] = _decode_whole(tp, value, where)
                else:
                    kwargs[name] = _decode_value(tp, value, where)
            except (ValueError, TypeError):  # said again, with where, by the reading in order
                break
        else:
            return _construct(cls, kwargs, where)
    return _decode_in_order(cls, plan, data, where, skip)


def _read_field(row: _Row, value: Any, where: str) -> Any:
    _, key, tp, _, whole, read, nullable = row
    if read is not None:
        if value is None and nullable:
            return None
        try:
            return read(value)
        except ValueError as exc:
            raise SerialError(f"{where}.{key}: {exc}") from None
    if whole:
        return _decode_whole(tp, value, f"{where}.{key}")
    return _decode_value(tp, value, f"{where}.{key}")


def _decode_in_order(
    cls: type[T], plan: _Plan, data: Mapping[Any, Any], where: str, skip: tuple[str, ...]
) -> T:
    """Read ``data`` field by field in the class's order: the first problem is named."""
    kwargs: dict[str, Any] = {}
    for row in plan.rows:
        key = row[1]
        if key not in data:
            if row[3]:
                raise SerialError(f"{where}: missing field {key!r}")
            continue
        kwargs[row[0]] = _read_field(row, data[key], where)
    unknown = [k for k in data if k not in plan.keys and k not in skip]
    if unknown and not _IGNORE_UNKNOWN.get():
        shown = ", ".join(repr(k) for k in unknown[:5])
        raise SerialError(f"{where}: unknown field(s) {shown} for {cls.__name__}")
    return _construct(cls, kwargs, where)


def _construct(cls: type[T], kwargs: dict[str, Any], where: str) -> T:
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SerialError(f"{where}: {cls.__name__} refused the data: {exc}") from None


def _what(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _decode_value(tp: Any, value: Any, where: str) -> Any:
    # the common cases first: a plain number or text of the type asked for
    vt = type(value)
    if tp is float and (vt is float or vt is int):
        return float(value)
    if (tp is int or tp is str) and vt is tp:
        return value
    if tp is Any or tp is object:
        return value
    if tp is None or tp is type(None):
        if value is not None:
            raise SerialError(f"{where}: expected null, got {_what(value)}")
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _decode_union(args, value, where)
    if origin is typing.Annotated:
        read, _ = _own_reader(tp)
        if read is not None:
            return _read_with(read, value, where)
        return _decode_value(args[0], value, where)
    if origin is typing.Literal:
        for option in args:
            if value == option and type(value) is type(option):
                return option
        raise SerialError(f"{where}: expected one of {list(args)}, got {_what(value)}")
    if origin in (list, tuple, set, frozenset):
        return _decode_sequence(origin, args, value, where)
    if origin is dict or origin is Mapping:
        return _decode_dict(args, value, where)
    if isinstance(tp, type):
        return _decode_scalar(tp, value, where)
    raise ArgumentTypeError(f"{where}: the type {tp!r} is not supported by gyreprof.model._serial")


def _decode_union(args: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None:
        if type(None) in args:
            return None
        if float in args:  # the NaN rule: null is a missing figure
            return math.nan
        raise SerialError(f"{where}: expected {_names(args)}, got null")
    errors: list[str] = []
    for arm in args:
        if arm is type(None):
            continue
        try:
            return _decode_value(arm, value, where)
        except SerialError as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise SerialError(errors[0])
    raise SerialError(f"{where}: expected {_names(args)}, got {_what(value)}")


def _names(args: tuple[Any, ...]) -> str:
    return " or ".join(
        "null" if a is type(None) else getattr(a, "__name__", None) or repr(a) for a in args
    )


def _decode_sequence(origin: Any, args: tuple[Any, ...], value: Any, where: str) -> Any:
    if not isinstance(value, (list, tuple)):
        raise SerialError(f"{where}: expected a list, got {_what(value)}")
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            raise SerialError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(
            _decode_value(a, v, f"{where}[{i}]")
            for i, (a, v) in enumerate(zip(args, value, strict=True))
        )
    item = args[0] if args else Any
    items = [_decode_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is list:
        return items
    if origin is tuple:
        return tuple(items)
    try:
        return origin(items)
    except TypeError:
        raise SerialError(f"{where}: the items cannot form a set") from None


def _decode_dict(args: tuple[Any, ...], value: Any, where: str) -> dict[Any, Any]:
    if not isinstance(value, Mapping):
        raise SerialError(f"{where}: expected an object (dict), got {_what(value)}")
    key_t, val_t = args if args else (Any, Any)
    out: dict[Any, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise SerialError(f"{where}: keys must be text, got {_what(k)}")
        key = _decode_key(key_t, k, where)
        out[key] = _decode_value(val_t, v, f"{where}[{k!r}]")
    return out


def _decode_key(tp: Any, key: str, where: str) -> Any:
    if tp is Any or tp is str:
        return key
    if tp is int:
        text = key[1:] if key.startswith("-") else key
        if text.isdigit() and text.isascii():
            return int(key)
        raise SerialError(f"{where}: expected an integer key, got {key!r}")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        sample = next(iter(tp)).value if len(tp) else None
        raw: Any = key
        if isinstance(sample, int) and not isinstance(sample, bool):
            raw = _decode_key(int, key, where)
        return _decode_scalar(tp, raw, f"{where}[{key!r}]")
    raise ArgumentTypeError(f"{where}: dict keys of type {tp!r} are not supported")


def _decode_scalar(tp: type[Any], value: Any, where: str) -> Any:
    if tp is bool:
        if isinstance(value, bool) or (type(value).__name__ == "bool_" and _is_numpy(value)):
            return bool(value)
        raise SerialError(f"{where}: expected true or false, got {_what(value)}")
    if tp is int:
        if isinstance(value, numbers.Integral) and not _is_bool(value):
            return int(value)
        raise SerialError(f"{where}: expected an integer, got {_what(value)}")
    if tp is float:
        if isinstance(value, numbers.Real) and not _is_bool(value):
            return float(value)
        if value is None:  # the NaN rule: null is a missing figure
            return math.nan
        if value in ("nan", "inf", "-inf"):  # written by gyreprof before the NaN rule
            return float(value)
        raise SerialError(f"{where}: expected a number, got {_what(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise SerialError(f"{where}: expected text, got {_what(value)}")
    if issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            options = [m.value for m in tp]
            raise SerialError(
                f"{where}: expected one of {options} ({tp.__name__}), got {_what(value)}"
            ) from None
    if issubclass(tp, PurePath):
        if isinstance(value, str):
            return tp(value)
        raise SerialError(f"{where}: expected a path (text), got {_what(value)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise SerialError(f"{where}: expected an object (dict), got {_what(value)}")
        return _decode_dataclass(tp, value, where)
    raise ArgumentTypeError(
        f"{where}: the type {tp.__name__} is not supported by gyreprof.model._serial"
    )


def _is_numpy(value: Any) -> bool:
    return type(value).__module__ == "numpy"


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or (_is_numpy(value) and type(value).__name__ == "bool_")
