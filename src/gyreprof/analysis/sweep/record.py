"""The one run record of a sweep, and the generic dict codec of the sweep's dataclasses.

:class:`RunResult` is what one run (one value, one repeat) measured. It is
built once, by :func:`gyreprof.analysis.sweep.runner.run_once` (or by the
parent for a run that died or timed out), crosses the process boundary of an
isolated sweep as JSON tagged ``RUN_FORMAT``, and is parsed once, by
:meth:`RunResult.from_json`, which turns bad or foreign data into a
ValueError the sweep reports for that value.

Every dataclass of the sweep serialises through :func:`encode` and
:func:`decode`, which walk ``dataclasses.fields`` and the fields' type hints:
a type lists its fields once. A field's ``metadata`` may carry ``key`` (its
name in the dict) and ``optional_out`` (left out unless asked for).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

RUN_FORMAT = "gyreprof.sweep-run/1"

# Figures every run carries (see ``RunResult.figure``), in the order tables show them.
FIGURE_NAMES = (
    "samples_per_s",
    "call_mean_ns",
    "call_p50_ns",
    "call_p99_ns",
    "call_max_ns",
    "samples_per_call",
    "sample_time_ns",
    "warmup_call_mean_ns",
    "first_call_ns",
    "peak_rss_bytes",
    "baseline_rss_bytes",
    "children_rss_bytes",
    "peak_tree_rss_bytes",
    "peak_gpu_bytes",
)

T = TypeVar("T")


# ------------------------------------------------------------------ the codec


def jsonable(v: Any) -> Any:
    """``v`` as JSON can hold it: numpy scalars through ``.item()``, the rest as ``repr``."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return encode(v)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    item = getattr(v, "item", None)
    if callable(item):
        try:
            return jsonable(item())
        except Exception:  # noqa: BLE001 - not a numpy scalar after all
            pass
    return repr(v)


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def encode(obj: Any, *, optional: bool = False) -> dict[str, Any]:
    """A dataclass instance as a JSON-ready dict (nested dataclasses included).

    Fields marked ``optional_out`` are left out unless ``optional`` is true.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if f.metadata.get("optional_out") and not optional:
            continue
        v = getattr(obj, f.name)
        if f.metadata.get("optional_out") and v is None:
            continue
        out[_key(f)] = _encode_value(v, optional)
    return out


def _encode_value(v: Any, optional: bool) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return encode(v, optional=optional)
    if isinstance(v, (list, tuple)):
        return [_encode_value(x, optional) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _encode_value(x, optional) for k, x in v.items()}
    return jsonable(v)


def decode(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass ``cls`` from ``encode`` output.

    Missing keys take the field's default; unknown keys are ignored (data
    written by a newer version); a value of the wrong kind raises ValueError
    naming where it was (``where`` prefixes the path).
    """
    name = where or cls.__name__
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = _key(f)
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{name}: missing {key!r}")
            continue
        kwargs[f.name] = _coerce(hints[f.name], data[key], f"{name}.{key}")
    return cls(**kwargs)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        module = sys.modules.get(cls.__module__)
        _HINTS[cls] = typing.get_type_hints(cls, vars(module) if module else None)
    return _HINTS[cls]


def _bad(where: str, want: str, v: Any) -> ValueError:
    return ValueError(f"{where}: expected {want}, got {type(v).__name__} {v!r:.60}")


def _coerce(tp: Any, v: Any, where: str) -> Any:  # noqa: C901, PLR0911, PLR0912 - one case per kind
    if tp is Any:
        return v
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        real = [a for a in args if a is not type(None)]
        if set(real) == {int, float} and isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
        errors = []
        for a in real:
            try:
                return _coerce(a, v, where)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0] if len(errors) == 1 else f"{where}: no reading of {v!r:.60}")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return decode(tp, v, where)
    if tp is float:
        if v is None:
            return math.nan
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _bad(where, "a number", v)
        return float(v)
    if tp is int:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _bad(where, "an integer", v)
        return v
    if tp is bool:
        if not isinstance(v, bool):
            raise _bad(where, "true or false", v)
        return v
    if tp is str:
        if not isinstance(v, str):
            raise _bad(where, "text", v)
        return v
    if origin is tuple:
        if not isinstance(v, (list, tuple)):
            raise _bad(where, "a list", v)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], x, f"{where}[{i}]") for i, x in enumerate(v))
        if len(v) != len(args):
            raise _bad(where, f"a list of {len(args)}", v)
        return tuple(_coerce(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(args, v)))  # noqa: B905
    if origin is list:
        if not isinstance(v, (list, tuple)):
            raise _bad(where, "a list", v)
        return [_coerce(args[0], x, f"{where}[{i}]") for i, x in enumerate(v)]
    if origin is dict:
        if not isinstance(v, Mapping):
            raise _bad(where, "an object", v)
        return {str(k): _coerce(args[1], x, f"{where}.{k}") for k, x in v.items()}
    raise TypeError(f"{where}: the codec has no rule for type {tp!r}")  # a bug in a dataclass


# ------------------------------------------------------------------ the run record


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


@dataclass(frozen=True)
class RunResult:
    """What one run measured. Times in ns, memory in bytes.

    ``status`` is ``"ok"``, ``"error"`` (factory or sampler raised), ``"invalid"``
    (no sampler, or a call returned no positive sample count), ``"crash"`` (the
    run's process died), ``"timeout"`` or ``"usage"`` (the factory cannot be
    loaded or called as asked: every value would fail alike); ``stage`` says
    how far it got.

    Memory: ``peak_rss_bytes`` is the measuring process's own high-water mark;
    ``children_rss_bytes`` the largest summed RSS of its descendants (the
    sampler's worker processes) seen while it ran, polled; ``peak_tree_rss_bytes``
    the whole sampler: the measuring process's peak plus its workers' peak, or
    the largest tree RSS the parent saw, whichever is larger (``rss_seen_bytes``,
    isolated runs only). The two peaks need not coincide, so the tree figure
    can overstate the simultaneous total, never understate a polled one.

    ``count_rule`` says how the sampler's return values were read as sample
    counts (see :func:`gyreprof._sample_count.count_samples`).
    """

    status: str
    error: str | None = None
    stage: str = ""
    samples: int = 0
    calls: int = 0
    warmup_calls: int = 0
    sample_time_ns: float = math.nan
    samples_per_s: float = math.nan
    samples_per_call_min: int = 0
    samples_per_call_max: int = 0
    count_rule: str = ""
    call: dict[str, float] = field(default_factory=dict)
    warmup: dict[str, float] = field(default_factory=dict)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    peak_rss_bytes: int | None = None
    baseline_rss_bytes: int | None = None
    children_rss_bytes: int | None = None
    peak_tree_rss_bytes: int | None = None
    peak_gpu_bytes: int | None = None
    rss_seen_bytes: int | None = None
    threads: dict[str, int] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    pid: int | None = None
    exit_code: int | None = None
    wall_s: float = math.nan
    abandoned: bool = False
    output: str = ""
    stacks: str | None = None
    traceback: str | None = None
    summary_data: dict[str, Any] | None = field(
        default=None,
        repr=False,
        compare=False,
        metadata={"key": "summary", "optional_out": True},
    )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def figure(self, name: str) -> float | None:
        """This run's value of figure ``name`` (one of ``FIGURE_NAMES``); None unless ok."""
        if not self.ok:
            return None
        table: dict[str, Any] = {
            "samples_per_s": self.samples_per_s,
            "call_mean_ns": self.call.get("mean_ns"),
            "call_p50_ns": self.call.get("p50_ns"),
            "call_p99_ns": self.call.get("p99_ns"),
            "call_max_ns": self.call.get("max_ns"),
            "samples_per_call": (self.samples / self.calls) if self.calls else None,
            "sample_time_ns": self.sample_time_ns,
            "warmup_call_mean_ns": self.warmup.get("mean_ns"),
            "first_call_ns": self.warmup.get("first_ns"),
            "peak_rss_bytes": self.peak_rss_bytes,
            "baseline_rss_bytes": self.baseline_rss_bytes,
            "children_rss_bytes": self.children_rss_bytes,
            "peak_tree_rss_bytes": self.tree_peak_bytes,
            "peak_gpu_bytes": self.peak_gpu_bytes,
        }
        v = table[name]
        return None if v is None else _num(v)

    @property
    def tree_peak_bytes(self) -> int | None:
        """Peak RSS of the whole sampler (see the class docstring); None when unknown."""
        own = self.peak_rss_bytes
        parts = [
            self.peak_tree_rss_bytes,
            None if own is None else own + (self.children_rss_bytes or 0),
            self.rss_seen_bytes or None,
        ]
        known = [p for p in parts if p is not None]
        return max(known) if known else None

    def replace(self, **changes: Any) -> RunResult:
        return dataclasses.replace(self, **changes)

    # -- the process boundary ------------------------------------------------------

    def to_json(self) -> str:
        """The tagged JSON the worker writes (summary included)."""
        return json.dumps({"format": RUN_FORMAT, **encode(self, optional=True)}, allow_nan=True)

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        """Parse what a worker wrote; ValueError saying what is wrong with it."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the run's result is not JSON ({exc})") from None
        if not isinstance(data, Mapping) or data.get("format") != RUN_FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(
                f"the run's result is not a {RUN_FORMAT} record (format {got!r}); was the "
                "worker started from another gyreprof version?"
            )
        return decode(cls, data, "run result")
