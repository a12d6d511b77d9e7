"""The one run record of a sweep.

:class:`RunResult` is what one run (one value, one repeat) measured. It is
built once, by :func:`gyreprof.analysis.sweep.runner.run_once` (or by the
parent for a run that died or timed out), crosses the process boundary of an
isolated sweep as JSON tagged ``RUN_FORMAT``, and is parsed once, by
:meth:`RunResult.from_json`, which turns bad or foreign data into a
ValueError the sweep reports for that value.

Every dataclass of the sweep serialises through the project's one codec,
:mod:`gyreprof.model._serial` (a type lists its fields once). Non-finite floats are
written as ``null`` (strict JSON, the NaN rule); files with ``"nan"`` strings or
``NaN`` literals, as older versions wrote them, still read. Fields a newer writer adds are skipped
on reading. The run's gyreprof summary is written under the key ``summary`` and
only when asked for (:func:`drop_summaries`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gyreprof.model._serial import SerialError, encode, loads, serial_format, write_json

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


# ------------------------------------------------------------------ the codec


def as_json_value(v: Any) -> Any:
    """What the sweep writes for a value ``gyreprof.model._serial`` has no rule for: a setting
    the user passed in, or an attribute read off the sampler. A scalar with ``.item()``
    (a torch or jax scalar) is its number; anything else its ``repr``."""
    item = getattr(v, "item", None)
    if callable(item):
        try:
            n = item()
        except Exception:  # noqa: BLE001 - not a scalar after all
            pass
        else:
            if n is None or isinstance(n, (bool, int, float, str)):
                return n
    try:
        return repr(v)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not lose the record
        return object.__repr__(v)


# ------------------------------------------------------------------ the run record


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


@serial_format(RUN_FORMAT)
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
    counts (see :func:`gyreprof._support.sample_count.count_samples`).

    A run of a script sweep (``gyreprof sweep -- COMMAND``, see
    :mod:`gyreprof.analysis.sweep.script`) is the command run under ``gyreprof run``'s
    launcher: a *call* is then one env step, ``samples`` the env steps of every process,
    ``sample_time_ns`` the time the driving process spent in the sampler's phases, and
    ``verdict_bound`` / ``wait_ratio`` the run's verdict (None without one).
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
    # a script sweep's run (``gyreprof sweep -- COMMAND``): its verdict's side and wait ratio
    verdict_bound: str | None = None
    wait_ratio: float | None = None
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
        metadata={"serial_key": "summary"},
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

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """The tagged JSON the worker writes (summary included); written to ``path`` as
        well (atomically) when given."""
        return write_json(encode(self, default=as_json_value), path, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        """Parse what a worker wrote; ValueError (a ``SerialError``) saying what is wrong."""
        try:
            data = json.loads(text)
        except ValueError:
            data = None  # loads() below words it
        if data is not None and (not isinstance(data, Mapping) or data.get("format") != RUN_FORMAT):
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise SerialError(
                f"the run's result is not a {RUN_FORMAT} record (format {got!r}); was the "
                "worker started from another gyreprof version?"
            )
        try:
            return loads(cls, text, ignore_unknown=True)
        except SerialError as exc:
            raise SerialError(f"the run's result: {exc}") from None


def drop_summaries(data: Any) -> Any:
    """``data`` (encoded runs, points or a whole result) without the runs' summaries."""
    if isinstance(data, dict):
        data.pop("summary", None)
        for key in ("points", "runs"):
            for item in data.get(key, ()):
                drop_summaries(item)
    return data
