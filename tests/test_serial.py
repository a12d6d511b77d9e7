"""gyreprof.model._serial: one encoder/decoder for result dataclasses; round trips and bad data."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gyreprof
from gyreprof._support.errors import CorruptDataError
from gyreprof.model._serial import (
    Record,
    SerialError,
    decode,
    dumps,
    encode,
    format_of,
    from_plain,
    loads,
    plain,
    serial_derived,
    serial_format,
)


class Side(enum.Enum):
    SAMPLER = "sampler"
    TRAINER = "trainer"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass(frozen=True)
class Phase:
    name: str
    count: int
    mean_ns: float
    share: float | None = None


@serial_format("gyreprof.test-report/2")
@dataclass
class Report:
    side: Side
    kind: Literal["bound", "balanced"]
    phases: list[Phase]
    by_pid: dict[int, Phase]
    levels: dict[Level, str]
    best: Phase | None
    shape: tuple[int, int]
    values: tuple[float, ...]
    tags: frozenset[str]
    where: Path
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cache: int = field(default=0, metadata={"serial": False})
    derived: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.shape[0] < 0:
            raise ValueError("shape must not be negative")
        self.derived = len(self.phases)


def _report(**over: Any) -> Report:
    p = Phase("env", 10, 1234.5, 0.25)
    kw: dict[str, Any] = dict(
        side=Side.SAMPLER,
        kind="bound",
        phases=[p, Phase("fwd", 3, 0.0)],
        by_pid={4242: p},
        levels={Level.HIGH: "x"},
        best=p,
        shape=(2, 3),
        values=(1.0, math.inf, math.nan),
        tags=frozenset({"b", "a"}),
        where=Path("/tmp/run.gyre"),
        extra={"k": [1, "two", None]},
    )
    kw.update(over)
    return Report(**kw)


def test_round_trip_through_strict_json() -> None:
    r = _report()
    data = encode(r)
    assert data["format"] == "gyreprof.test-report/2"
    assert data["side"] == "sampler" and data["by_pid"] == {"4242": data["phases"][0]}
    assert data["levels"] == {"2": "x"}
    assert data["values"] == [1.0, None, None]  # the NaN rule: inf and NaN are null
    assert data["tags"] == ["a", "b"]
    assert "cache" not in data and "derived" not in data
    assert "format" not in data["phases"][0]  # only the top level carries the tag
    text = dumps(r)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    back = loads(Report, text)
    assert math.isnan(back.values[2]) and math.isnan(back.values[1])  # missing figures
    assert back.values[0] == r.values[0]
    assert (back.phases, back.by_pid, back.levels, back.best) == (
        r.phases,
        r.by_pid,
        r.levels,
        r.best,
    )
    assert isinstance(back.shape, tuple) and isinstance(back.tags, frozenset)
    assert back.where == r.where and isinstance(back.where, Path)
    assert back.side is Side.SAMPLER and back.derived == 2


def test_numpy_scalars_and_arrays_become_python() -> None:
    r = _report(
        phases=[Phase("env", np.int64(7), np.float32(0.5), np.float64(0.1))],  # type: ignore[arg-type]
        extra={"arr": np.arange(3), "flag": np.bool_(True)},
        shape=(np.int32(1), 2),
    )
    data = encode(r)
    ph = data["phases"][0]
    assert type(ph["count"]) is int and type(ph["mean_ns"]) is float
    assert data["extra"] == {"arr": [0, 1, 2], "flag": True}
    assert type(data["extra"]["flag"]) is bool and type(data["shape"][0]) is int
    back = decode(Report, data)
    assert back.phases[0] == Phase("env", 7, 0.5, 0.1)


def test_decode_accepts_numpy_in_memory_but_not_bool_for_int() -> None:
    data = encode(_report())
    data["phases"][0]["count"] = np.int64(5)
    assert decode(Report, data).phases[0].count == 5
    data["phases"][0]["count"] = True
    with pytest.raises(SerialError, match=r"\.phases\[0\]\.count: expected an integer, got bool"):
        decode(Report, data)


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    data = encode(_report())
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ["format"],
            "gyreprof.test-report/1",
            "version 1 .* an older gyreprof; this one reads version 2",
        ),
        (["format"], "gyreprof.test-report/3", "version 3 .* a newer gyreprof"),
        (["format"], "gyreprof.other/2", "a 'gyreprof.other' record, not 'gyreprof.test-report'"),
        (["format"], _DELETE, "no 'format' tag"),
        (["format"], "garbage", "unreadable 'format' tag"),
        (["side"], "gpu", r"\.side: expected one of \['sampler', 'trainer'\] \(Side\)"),
        (["kind"], "Bound", r"\.kind: expected one of \['bound', 'balanced'\]"),
        (["phases"], {"a": 1}, r"\.phases: expected a list, got dict"),
        (["phases", 1, "name"], 3, r"\.phases\[1\]\.name: expected text, got int 3"),
        (["phases", 1, "count"], 2.0, r"\.phases\[1\]\.count: expected an integer"),
        (["phases", 1, "mean_ns"], "fast", r"\.phases\[1\]\.mean_ns: expected a number"),
        (["phases", 1, "share"], [], r"\.phases\[1\]\.share: expected a number"),
        (["phases", 1, "name"], _DELETE, r"\.phases\[1\]: missing field 'name'"),
        (["phases", 1, "colour"], "red", r"\.phases\[1\]: unknown field\(s\) 'colour' for Phase"),
        (["by_pid", "pid"], {}, r"\.by_pid: expected an integer key, got 'pid'"),
        (["levels", "7"], "x", r"\.levels\['7'\]: expected one of \[1, 2\] \(Level\)"),
        (["best"], "env", r"\.best: expected an object"),
        (["shape"], [1, 2, 3], r"\.shape: expected 2 items, got 3"),
        (["shape"], [-1, 2], "Report refused the data: shape must not be negative"),
        (["values", 0], True, r"\.values\[0\]: expected a number, got bool"),
        (["where"], 5, r"\.where: expected a path"),
        (["tags"], "ab", r"\.tags: expected a list, got str"),
        (["side"], _DELETE, "missing field 'side'"),
        (["cache"], 3, r"unknown field\(s\) 'cache'"),  # not written, so not read either
    ],
)
def test_corrupt_data_raises_one_error_type_naming_the_place(
    path: list[Any], value: Any, message: str
) -> None:
    with pytest.raises(SerialError, match=message) as info:
        decode(Report, _broken(path, value))
    assert isinstance(info.value, ValueError) and isinstance(info.value, CorruptDataError)


@pytest.mark.parametrize("junk", [None, [], "text", 3, b"{}"])
def test_not_an_object(junk: Any) -> None:
    with pytest.raises(SerialError, match="expected an object"):
        decode(Report, junk)


def test_loads_rejects_text_that_is_not_json() -> None:
    with pytest.raises(SerialError, match="not JSON"):
        loads(Report, "{not json")
    with pytest.raises(SerialError, match="not JSON"):
        loads(Report, b"\xff\xfe")


def test_missing_optional_fields_take_their_defaults() -> None:
    data = encode(_report(notes=["a"]))
    del data["notes"], data["extra"]
    back = decode(Report, data)
    assert back.notes == [] and back.extra == {}


def test_the_tag_is_declared_once_and_checked() -> None:
    assert format_of(Report) == "gyreprof.test-report/2"
    with pytest.raises(TypeError, match="has no format tag"):
        format_of(Phase)
    with pytest.raises(TypeError, match="has no format tag"):
        encode(Phase("a", 1, 1.0))
    with pytest.raises(TypeError, match="dataclass instance"):
        encode({"a": 1})
    with pytest.raises(ValueError, match="must look like"):
        serial_format("no-version")
    with pytest.raises(TypeError, match="needs a dataclass"):
        serial_format("x/1")(int)

    @dataclass
    class Sub(Report):
        pass

    with pytest.raises(TypeError, match="Sub has no format tag"):  # not inherited silently
        encode(
            Sub(
                **{
                    f: getattr(_report(), f)
                    for f in (
                        "side",
                        "kind",
                        "phases",
                        "by_pid",
                        "levels",
                        "best",
                        "shape",
                        "values",
                        "tags",
                        "where",
                    )
                }
            )
        )


def test_encode_refuses_what_it_cannot_write() -> None:
    with pytest.raises(TypeError, match=r"\.extra\['f'\]: cannot encode a function"):
        encode(_report(extra={"f": test_encode_refuses_what_it_cannot_write}))
    with pytest.raises(TypeError, match="dict keys must be"):
        encode(_report(extra={(1, 2): 3}))
    with pytest.raises(TypeError, match="both written as '1'"):
        encode(_report(by_pid={1: Phase("a", 1, 1.0), "1": Phase("b", 1, 1.0)}))


@serial_format("gyreprof.test-tree/1")
@dataclass
class Node:
    label: str
    children: list[Node] = field(default_factory=list)


def test_recursive_types_and_too_deep_data() -> None:
    tree = Node("root", [Node("a", [Node("b")]), Node("c")])
    assert decode(Node, encode(tree)) == tree
    data: dict[str, Any] = {"label": "x", "children": []}
    deep = data
    for _ in range(5000):
        child: dict[str, Any] = {"label": "x", "children": []}
        deep["children"].append(child)
        deep = child
    with pytest.raises(SerialError, match="nested too deeply"):
        decode(Node, {"format": "gyreprof.test-tree/1", **data})


# ------------------------------------------------------------------ hypothesis

floats = st.floats(allow_nan=True, allow_infinity=True)
names = st.text(max_size=8)
phases = st.builds(
    Phase,
    name=names,
    count=st.integers(min_value=-(2**63), max_value=2**63),
    mean_ns=floats,
    share=st.none() | floats,
)
reports = st.builds(
    Report,
    side=st.sampled_from(Side),
    kind=st.sampled_from(["bound", "balanced"]),
    phases=st.lists(phases, max_size=4),
    by_pid=st.dictionaries(st.integers(-5, 2**40), phases, max_size=3),
    levels=st.dictionaries(st.sampled_from(Level), names, max_size=2),
    best=st.none() | phases,
    shape=st.tuples(st.integers(0, 100), st.integers()),
    values=st.lists(floats, max_size=4).map(tuple),
    tags=st.frozensets(names, max_size=4),
    where=st.sampled_from([Path("a.gyre"), Path("/tmp/x/y")]),
    extra=st.dictionaries(names, st.none() | st.booleans() | st.integers() | names, max_size=3),
    notes=st.lists(names, max_size=3),
)


def _same(a: Any, b: Any) -> bool:
    # equality where NaN equals NaN
    return json.dumps(encode(a), sort_keys=True) == json.dumps(encode(b), sort_keys=True)


@settings(max_examples=150, deadline=None)
@given(reports)
def test_hypothesis_round_trip(r: Report) -> None:
    back = loads(Report, dumps(r))
    assert _same(back, r)
    if all(math.isfinite(v) for v in r.values) and not _has_nonfinite(r):
        assert back == r


def _has_nonfinite(r: Report) -> bool:
    ps = [*r.phases, *r.by_pid.values(), *([r.best] if r.best else [])]
    return any(
        not math.isfinite(p.mean_ns) or (p.share is not None and not math.isfinite(p.share))
        for p in ps
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_hypothesis_any_corruption_is_a_serial_error_or_a_valid_report(data: st.DataObject) -> None:
    good = encode(data.draw(reports))
    # replace one value somewhere in the tree with arbitrary JSON
    spots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                spots.append((node, k))
                walk(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                spots.append((node, i))
                walk(v)

    walk(good)
    container, key = data.draw(st.sampled_from(spots))
    container[key] = data.draw(json_values)
    try:
        back = decode(Report, good)
    except SerialError:
        return
    assert isinstance(back, Report)  # the corruption happened to be valid data


@serial_derived("total", "names")
@dataclass(frozen=True)
class Part:
    a: int
    b: int

    @property
    def total(self) -> int:
        return self.a + self.b

    def names(self) -> list[str]:
        return [f"a={self.a}", f"b={self.b}"]


@serial_format("gyreprof.test-derived/1", derived=("ok",))
@dataclass(frozen=True)
class WithDerived:
    parts: list[Part]

    @property
    def ok(self) -> bool:
        return all(p.total > 0 for p in self.parts)


def test_derived_values_are_written_and_computed_again_on_decode() -> None:
    r = WithDerived([Part(1, 2), Part(-5, 1)])
    data = encode(r)
    assert data["ok"] is False
    assert data["parts"][0] == {"a": 1, "b": 2, "total": 3, "names": ["a=1", "b=2"]}
    data["ok"] = True  # a stale or edited derived value is not believed
    data["parts"][1]["total"] = 99
    back = decode(WithDerived, data)
    assert back == r and back.ok is False and back.parts[1].total == -4
    del data["parts"][0]["total"]  # and not required either
    assert decode(WithDerived, data) == r
    data["parts"][0]["extra"] = 1
    with pytest.raises(SerialError, match="extra"):
        decode(WithDerived, data)


def test_derived_names_must_be_computed_values_not_fields() -> None:
    with pytest.raises(TypeError, match="not a field"):
        serial_derived("a")(Part)
    with pytest.raises(TypeError, match="property or a method"):
        serial_format("gyreprof.x/1", derived=("missing",))(Part)


# ------------------------------------------------------------------ options for boundary records


@dataclass(frozen=True)
class Inner:
    n: int
    x: float = math.nan


@serial_format("gyreprof.test-options/1")
@dataclass(frozen=True)
class Outer:
    inner: list[Inner]
    settings: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] | None = field(default=None, metadata={"serial_key": "summary"})


class Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


def test_serial_key_writes_and_reads_the_field_under_another_name() -> None:
    obj = Outer([Inner(1, 0.5)], payload={"a": 1})
    data = encode(obj)
    assert "summary" in data and "payload" not in data
    assert decode(Outer, data) == obj
    with pytest.raises(SerialError, match="unknown field"):  # the attribute name is not the key
        decode(Outer, {"format": "gyreprof.test-options/1", "inner": [], "payload": {}})


def test_default_writes_values_without_a_rule_and_its_result_is_encoded() -> None:
    obj = Outer([], settings={"device": Opaque(), "pair": (Opaque(), math.inf)})
    with pytest.raises(TypeError, match="cannot encode a Opaque"):
        encode(obj)
    data = encode(obj, default=repr)
    assert data["settings"] == {"device": "<opaque>", "pair": ["<opaque>", None]}
    assert json.loads(dumps(obj, default=repr))["settings"]["device"] == "<opaque>"
    # a default that returns something without a rule again still ends in a TypeError
    with pytest.raises(TypeError, match="cannot encode"):
        encode(obj, default=lambda v: v)


def test_ignore_unknown_skips_newer_fields_at_every_level() -> None:
    data = encode(Outer([Inner(2, 0.5)]))
    data["added_later"] = 1
    data["inner"][0]["also_new"] = [1, 2]
    with pytest.raises(SerialError, match=r"\.inner\[0\]: unknown field\(s\) 'also_new'"):
        decode(Outer, data)
    assert decode(Outer, data, ignore_unknown=True) == Outer([Inner(2, 0.5)])
    assert loads(Outer, json.dumps(data), ignore_unknown=True).inner[0].n == 2
    # skipping is only for that call: the next strict decode refuses again
    with pytest.raises(SerialError, match="unknown field"):
        decode(Outer, data)
    bad = {**data, "inner": [{"n": "two"}]}  # wrong values are still refused
    with pytest.raises(SerialError, match=r"inner\[0\]\.n: expected an integer"):
        decode(Outer, bad, ignore_unknown=True)


def test_from_plain_reads_back_an_untagged_part() -> None:
    part = Inner(3, math.nan)
    data = plain(part)
    assert data == {"n": 3, "x": None} and "format" not in data
    back = from_plain(Inner, data)
    assert back.n == 3 and math.isnan(back.x)
    assert from_plain(Inner, {"n": 1, "x": 2, "new": 0}, ignore_unknown=True) == Inner(1, 2.0)
    with pytest.raises(SerialError, match=r"^point\.n: expected an integer"):
        from_plain(Inner, {"n": 1.5}, where="point")
    with pytest.raises(SerialError, match="^Inner: expected an object"):
        from_plain(Inner, [1])
    with pytest.raises(TypeError, match="needs a dataclass"):
        from_plain(int, {})  # type: ignore[type-var]


# ------------------------------------------------------------------ the NaN rule


@serial_format("gyreprof.test-nan/2", reads=("gyreprof.test-nan/1",), writer="writer")
@dataclass(frozen=True)
class Figures:
    x: float
    maybe: float | None
    either: int | float
    per: dict[str, float]
    _cache: int = 0  # private: never written


def test_nan_and_inf_are_written_as_null_and_read_back_by_type() -> None:
    f = Figures(math.nan, math.inf, -math.inf, {"a": math.nan, "b": 1.5}, _cache=7)
    data = encode(f)
    assert data == {
        "format": "gyreprof.test-nan/2",
        "writer": gyreprof.__version__,
        "x": None,
        "maybe": None,
        "either": None,
        "per": {"a": None, "b": 1.5},
    }
    text = dumps(f)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    back = loads(Figures, text)
    assert math.isnan(back.x) and back.maybe is None  # float | None: null is None
    assert math.isnan(back.either) and math.isnan(back.per["a"]) and back.per["b"] == 1.5
    assert back._cache == 0


def test_older_versions_read_and_others_are_refused() -> None:
    old = {"format": "gyreprof.test-nan/1", "x": "nan", "maybe": "inf", "either": 2, "per": {}}
    back = decode(Figures, old)  # the strings older writers used still read
    assert math.isnan(back.x) and back.maybe == math.inf and back.either == 2
    with pytest.raises(SerialError, match="version 3"):
        decode(Figures, {**old, "format": "gyreprof.test-nan/3"})
    with pytest.raises(SerialError, match=r"per\['a'\]: expected a number, got str"):
        decode(Figures, {**old, "x": None, "per": {"a": "x"}})
    with pytest.raises(ValueError, match="not an older version"):
        serial_format("gyreprof.test-nan/2", reads=("gyreprof.test-nan/2",))
    with pytest.raises(ValueError, match="not an older version"):
        serial_format("gyreprof.test-nan/2", reads=("gyreprof.other/1",))


@serial_format("gyreprof.test-part/3")
@dataclass(frozen=True)
class Piece:
    n: int


@serial_format("gyreprof.test-holder/1")
@dataclass(frozen=True)
class Holder:
    part: Piece | None = field(metadata={"serial_whole": True})
    inline: Piece | None = None


def test_a_record_nested_whole_keeps_its_own_tag_and_is_checked_by_it() -> None:
    h = Holder(Piece(1), Piece(2))
    data = encode(h)
    assert data["part"] == {"format": "gyreprof.test-part/3", "n": 1}
    assert data["inline"] == {"n": 2}  # nested as fields only: no tag
    assert decode(Holder, data) == h
    assert decode(Holder, {**data, "part": None}).part is None
    with pytest.raises(SerialError, match=r"^gyreprof.test-holder/1\.part: .*version 2"):
        decode(Holder, {**data, "part": {"format": "gyreprof.test-part/2", "n": 1}})
    with pytest.raises(SerialError, match=r"\.part: gyreprof.test-part/3\.n: expected an integer"):
        decode(Holder, {**data, "part": {"format": "gyreprof.test-part/3", "n": "x"}})


# ------------------------------------------------------------------ the Record base


def _positive(v: Any) -> int:
    if type(v) is not int or v <= 0:
        raise ValueError(f"{v!r} is not a positive integer")
    return v


@dataclass(frozen=True)
class Leaf(Record, ignore_unknown=True):
    size: Annotated[int, _positive]
    name: str | None = None


@serial_format("gyreprof.test-tree/1")
@dataclass(frozen=True)
class Tree(Record):
    leaves: list[Leaf]
    ratio: float = math.nan


def test_a_record_writes_reads_and_saves_through_the_codec(tmp_path: Path) -> None:
    tree = Tree([Leaf(3, "a"), Leaf(1)], ratio=0.5)
    data = tree.to_dict()
    assert data == encode(tree) and data["format"] == "gyreprof.test-tree/1"
    assert Tree.from_dict(data) == tree
    assert Leaf(2).to_dict() == {"size": 2, "name": None}  # untagged: its fields only
    assert Leaf.from_dict({"size": 2, "newer": True}) == Leaf(2)  # ignore_unknown=True
    with pytest.raises(SerialError, match="unknown field"):
        Tree.from_dict({**data, "newer": 1})  # the base reads strictly
    text = Tree([Leaf(1)]).to_json(tmp_path / "t.json")
    assert json.loads(text) == {"format": "gyreprof.test-tree/1", "leaves": [
        {"size": 1, "name": None}], "ratio": None}  # fmt: skip
    assert (tmp_path / "t.json").read_text() == text + "\n"


def test_an_annotated_reader_checks_a_field_and_the_error_names_it() -> None:
    data = Tree([Leaf(3)]).to_dict()
    data["leaves"][0]["size"] = -4
    with pytest.raises(SerialError, match=r"\.leaves\[0\]\.size: -4 is not a positive integer"):
        Tree.from_dict(data)
    with pytest.raises(SerialError, match=r"Leaf\.size: 'x' is not a positive integer"):
        Leaf.from_dict({"size": "x"})
