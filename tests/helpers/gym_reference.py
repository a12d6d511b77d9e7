"""The env-call wrappers written in Python: the obviously-correct reference that the C
guard (``gyreprof._core.guard.Guard``, what ``libs.gymnasium`` installs) is compared with.

Each wrapper does what the guard's contract says: the thread's ThreadState (``thread()``),
the nesting flag ``inside`` (only the outermost guarded call is timed), the kind's phase
timer around the call, and one count per call in the thread's sampler counters
(``gyreprof.wrapper.<kind>.timed`` or ``.inner``; no room for the counter: not counted).
Never installed by ``gyreprof run``: tests and ``benchmarks/bench_wrapper.py`` put them in
place themselves.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from gyreprof.integrations.libs import gymnasium as gym_lib
from gyreprof.model.summary import WRAPPER_COUNTER_PREFIX as P

Thread = Callable[[], Any]


def counter_pair(kind: str) -> tuple[str, str]:
    """The (timed, inner) counters of a kind's calls."""
    return f"{P}{kind}.timed", f"{P}{kind}.inner"


def _count(t: Any, name: str) -> None:
    try:
        t.sampler.count(name)
    except ValueError:  # no room for the counter: not counted
        pass


def outermost(original: Callable[..., Any], kind: str, thread: Thread) -> Callable[..., Any]:
    """``original`` timed as the thread's ``kind`` when it is the thread's outermost env
    call (a wrapper's step calling the inner env's step is timed once)."""
    timed, inner = counter_pair(kind)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = thread()
        if t.inside:
            _count(t, inner)
            return original(self, *args, **kwargs)
        t.inside = True
        try:
            with getattr(t, kind):
                _count(t, timed)
                return original(self, *args, **kwargs)
        finally:
            t.inside = False

    return call


def step(original: Callable[..., Any], thread: Thread) -> Callable[..., Any]:
    """``env.step`` timed as ``env_step``; gymnasium's own signature ``(self, action)``
    passes its argument with no tuple or dict built."""
    try:
        params = list(inspect.signature(original).parameters.values())
    except (TypeError, ValueError):
        params = []
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params)
    if not plain or [p.name for p in params] != ["self", "action"]:
        return outermost(original, "env_step", thread)
    timed, inner = counter_pair("env_step")

    def call(self: Any, action: Any) -> Any:
        t = thread()
        if t.inside:
            _count(t, inner)
            return original(self, action)
        t.inside = True
        try:
            with t.env_step:
                _count(t, timed)
                return original(self, action)
        finally:
            t.inside = False

    return call


def vector_call(original: Callable[..., Any], kind: str, thread: Thread) -> Callable[..., Any]:
    """A vector env's ``step_async`` / ``step_wait``: timed every call, no nesting flag."""
    timed = counter_pair(kind)[0]

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = thread()
        with getattr(t, kind):
            _count(t, timed)
            return original(self, *args, **kwargs)

    return call


def wrap(fn: Callable[..., Any], kind: str, guarded: bool, thread: Thread) -> Callable[..., Any]:
    """The reference of ``Guard(fn, kind, guarded)`` reading the thread from ``thread()``."""
    if not guarded:
        return vector_call(fn, kind, thread)
    return step(fn, thread) if kind == "env_step" else outermost(fn, kind, thread)


def env_method(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The reference of what ``libs.gymnasium`` installs for an env's ``step`` / ``reset``."""
    kind = "env_step" if name == "step" else "env_reset"
    return wrap(original, kind, True, gym_lib._thread)


def measure_costs() -> dict[str, float]:
    """ns one call of each reference wrapper adds, calibrated as the C guard's are."""

    def make(fn: Callable[..., Any], kind: str, guarded: bool, state: Any) -> Any:
        return wrap(fn, kind, guarded, lambda: state)

    return gym_lib.measure_costs(make)
