"""gymnasium's instrumentor: ``step``/``reset`` of the outermost env called, vector-env
send/wait (:func:`instrument` / :func:`uninstrument`).

Every ``gymnasium.Env`` subclass that defines ``step`` or ``reset`` gets a
wrapper; the thread's nesting guard makes only the outermost call count, so a
stack of wrappers (TimeLimit, OrderEnforcing, Monitor, ...) around CartPole is
one ``env_step``. Envs stepped by a ``SyncVectorEnv`` (or SB3's ``DummyVecEnv``,
TorchRL's ``GymEnv``/``SerialEnv``) are timed one by one in the calling
process; envs in ``AsyncVectorEnv`` workers are timed in the worker process,
and the parent times ``step_async`` (the send) and ``step_wait`` (until the
slowest worker answers).

The wrappers are C objects (:class:`gyreprof._core.guard.Guard`: no Python frame,
no argument tuple, no bound method per call); there is no Python fallback (the tests
keep a Python reference of what they do, ``tests/helpers/gym_reference.py``). Every
call of a wrapper is counted per kind in the thread's sampler counters
(``gyreprof.wrapper.<kind>.timed`` / ``.inner``), and :func:`wrapper_costs`
calibrates what one call of each kind adds, once per process: ``overhead_share``
prices the calls with it (:func:`gyreprof.model.snapshot.wrapper_overhead`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import calibration, versions, workers
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import Instrumentor

#: ``make(fn, kind, guarded, state)``: a wrapper of ``fn`` bound to ``state`` (calibration)
Make = Callable[[Callable[..., Any], str, bool, Any], Any]


def _thread() -> Any:
    try:
        return st.tls.t
    except AttributeError:
        return st.new_thread()


def _vector_call(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A vector env's ``step_async`` / ``step_wait``, timed under its own name (once per
    vector step, around inter-process calls), with no nesting guard."""
    return _guard().Guard(original, name, False)  # type: ignore[no-any-return]


def _make_env_method(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """An env's ``step`` / ``reset``: timed as ``env_step`` / ``env_reset`` when it is the
    outermost env call of the thread."""
    kind = "env_step" if name == "step" else "env_reset"
    return _guard().Guard(original, kind, True)  # type: ignore[no-any-return]


# ------------------------------------------------------------------ the C guard

_guard_mod: Any = None


def _guard() -> Any:
    """The C guard module, configured for this process's ThreadState (a core built
    without it: ImportError, with ``gyreprof._core``'s words on how to build it)."""
    global _guard_mod
    if _guard_mod is None:
        from gyreprof._core import PhaseTimer, guard

        guard.configure(st.ThreadState, PhaseTimer, _thread, _bind_counters)
        _guard_mod = guard
    return _guard_mod


def counter_names() -> tuple[str, ...]:
    """The sampler counters of the wrappers' calls: (timed, inner) per kind, in the
    guard's order (``guard.KINDS``)."""
    from gyreprof.model.summary import WRAPPER_COUNTER_PREFIX as P

    return tuple(f"{P}{k}.{w}" for k in _KINDS for w in ("timed", "inner"))


_KINDS = ("env_step", "env_reset", "step_async", "step_wait")  # guard.KINDS
_GUARDED = {"env_step": True, "env_reset": True, "step_async": False, "step_wait": False}


def _bind_counters(t: Any) -> tuple[Any, tuple[int, ...]] | None:
    """Where the C guard counts thread ``t``'s calls: its sampler's Recorder and the
    counter slots (-1: a counter the profiler has no room for: not counted). The
    wrappers' calibrated costs join the sampler's form costs here, so its snapshots
    price the calls (``gyreprof.model.snapshot.wrapper_overhead``)."""
    prof = t.sampler
    slots = []
    for name in counter_names():
        try:
            slots.append(prof._counter_slot(name))
        except ValueError:
            slots.append(-1)
    prof.form_cost_ns.update(wrapper_costs())
    return prof.recorder, tuple(slots)


# ------------------------------------------- what one wrapper call costs (calibrated)

_COSTS: dict[str, float] = {}


def _plain(self: Any, action: Any) -> None:
    return None


def _bottom(self: Any, action: Any) -> Any:
    """The innermost env of a calibration stack: its step does env-like work (the pad:
    a real stack's return path through each wrapper runs after the env's work)."""
    return _env_like_pad(_PAD_A, _PAD_B)


def _mid(self: Any, action: Any) -> Any:
    return self.bottom(action)


def _top(self: Any, action: Any) -> Any:
    return self.mid(action)


def _top0(self: Any, action: Any) -> Any:
    return self.top(action)


def _time_calls(plain: Any, wrapped: Any, n: int, pad: Any, a: Any, b: Any) -> tuple[float, float]:
    """ns for ``n`` calls of ``plain.top0`` and of ``wrapped.top0``, each after
    ``pad(a, b)``; written out (a call per call that is not the method's own would be
    measured too)."""
    rng = range(n)
    pc = time.thread_time_ns  # the thread's CPU time: a preemption is not in it
    t0 = pc()
    for _ in rng:
        pad(a, b)
        plain.top0(0)
    t1 = pc()
    for _ in rng:
        pad(a, b)
        wrapped.top0(0)
    t2 = pc()
    return float(t1 - t0), float(t2 - t1)


def _no_pad(a: Any, b: Any) -> None:
    return None


_PAD_STATE = [0.01, 0.02, 0.03, 0.04]
_PAD_A: Any = None  # the bottom layer's pad arrays (set by _measure)
_PAD_B: Any = None


def _env_like_pad(a: Any, b: Any) -> Any:
    """What a real loop runs between two env calls, in miniature: 32 KB of data traffic
    (``a`` copied from ``b``) and a CartPole-like step in Python (arithmetic, math
    calls, a small array, a dict), which also evicts the interpreter's code and branch
    history that a copy leaves warm."""
    import math

    import numpy as np

    np.copyto(a, b)
    s = _PAD_STATE
    x, xd, th, thd = s
    c, sn = math.cos(th), math.sin(th)
    tmp = (1.0 + 0.05 * thd * thd * sn) / 1.1
    acc = (9.8 * sn - c * tmp) / (0.5 * (4.0 / 3.0 - 0.1 * c * c / 1.1))
    s[0], s[1], s[2], s[3] = x + 0.02 * xd, xd + 0.02 * tmp, th + 0.02 * thd, thd + 0.02 * acc
    done = {"done": bool(abs(x) > 2.4 or abs(th) > 0.2)}
    return np.array(s, dtype=np.float32), done.get("done"), min(s)


def _measure(
    state: Any,
    kind: str,
    inner: bool,
    n: int = 10,
    rounds: int = 61,
    pad_words: int = 4096,
    make: Make | None = None,
) -> float:
    """ns the wrappers of a ``kind`` add to a call, as a real loop pays them. A guarded
    kind is measured on a stack of four env layers (``gym.make``'s depth: TimeLimit,
    OrderEnforcing, PassiveEnvChecker, the env), each calling the next (``top0`` ->
    ``top`` -> ``mid`` -> ``bottom``, as wrappers around an env do), all wrapped: one
    timed and three passed-through calls, or four passed through when ``inner`` (the
    thread is inside an env call already); the bottom layer does env-like work
    (:func:`_env_like_pad`), so the way back through each wrapper runs after it, as in
    a real stack. A vector call on one layer (a no-op).
    The wrapper is the C guard this process installs (or what ``make(fn, kind, guarded,
    state)`` returns: another wrapper to price, e.g. the tests' Python reference), bound to
    ``state`` (a ThreadState of its own: its timer records into a throwaway profiler, its
    calls are counted in that profiler's counters, as a thread's are). Like the recording forms
    (``gyreprof.recording.profiler._measure_form_costs``), each call between copies of 32 KB (the
    cache traffic of a real loop), here with a little Python work as well
    (:func:`_env_like_pad`: a wrapper call is mostly interpreter code, which a real
    step's Python evicts). Timed on the thread's CPU time (a loaded machine's preemptions
    are not in it), the median of ``rounds`` short runs (10 calls each: on a loaded
    machine the noise moves over milliseconds, so short runs side by side differ by
    the wrapper, not by the neighbours' load), never below the tight-loop cost (the
    same stack with no work in it)."""
    import numpy as np

    state.inside = inner
    if make is None:
        guard = _guard()
        sampler = state.sampler
        slots = tuple(sampler._counter_slot(x) for x in counter_names())
        slot = guard.CalibrationSlot(state, sampler.recorder, slots)

        def wrap(fn: Callable[..., Any]) -> Any:
            return guard.Guard(fn, kind, _GUARDED[kind], slot)

    else:
        maker = make

        def wrap(fn: Callable[..., Any]) -> Any:
            return maker(fn, kind, _GUARDED[kind], state)

    global _PAD_A, _PAD_B
    if _GUARDED[kind]:
        layers = {"top0": _top0, "top": _top, "mid": _mid, "bottom": _bottom}
        wrapped_layers = {k: wrap(v) for k, v in layers.items()}
    else:
        layers = {"top0": _plain}
        wrapped_layers = {"top0": wrap(_plain)}
    plain = type("_Plain", (), {**layers, "__slots__": ()})()
    wrapped = type("_Wrapped", (), {**wrapped_layers, "__slots__": ()})()
    a, b = np.zeros(pad_words), np.ones(pad_words)
    _PAD_A, _PAD_B = np.zeros(pad_words), np.ones(pad_words)
    _time_calls(plain, wrapped, n, _env_like_pad, a, b)  # warm up
    diffs = []
    for _ in range(rounds):
        p, w = _time_calls(plain, wrapped, n, _env_like_pad, a, b)
        diffs.append((w - p) / n)
    if _GUARDED[kind]:  # the tight loop: the same stack, no work in its bottom layer
        layers["bottom"], wrapped_layers["bottom"] = _plain, wrap(_plain)
        plain = type("_Plain", (), {**layers, "__slots__": ()})()
        wrapped = type("_Wrapped", (), {**wrapped_layers, "__slots__": ()})()
    tight = min(
        (w - p) / 200
        for p, w in (_time_calls(plain, wrapped, 200, _no_pad, None, None) for _ in range(3))
    )
    state.inside = False
    return max(float(np.median(diffs)), tight, 1.0)


def _calibration_state() -> Any:
    """A ThreadState that records into throwaway profilers (registered nowhere)."""
    from gyreprof.integrations._auto import records as rec
    from gyreprof.recording.profiler import Profiler

    sampler = Profiler(rec.SAMPLER_PHASES, capacity=1 << 10, label="gyreprof-calibration")
    trainer = Profiler(
        rec.TRAINER_PHASES, capacity=1 << 10, window_steps=1, label="gyreprof-calibration"
    )
    return st.ThreadState(sampler, trainer)


def wrapper_costs() -> dict[str, float]:
    """ns one call of each wrapper kind adds (``gyreprof.wrapper.<kind>.timed`` for an
    outermost, timed call, ``.inner`` for one the nesting guard passes through),
    measured once per process, or under ``gyreprof run`` once per run for each Python
    (~15-25 ms of CPU; ``env_reset`` is the same wrapper as
    ``env_step``, ``step_wait`` as ``step_async``): the costs ``overhead_share``
    prices the counted calls with."""
    if not _COSTS:
        try:
            # measured once per run for each Python (integrations._auto.calibration)
            costs = calibration.shared(st.run_dir, "wrappers", counter_names(), measure_costs)
            _COSTS.update(costs)
        except Exception as exc:  # noqa: BLE001 - the patch works uncalibrated too
            st.note(f"the env wrappers' cost could not be measured ({exc!r}): not priced")
            _COSTS.update(dict.fromkeys(counter_names(), 0.0))
        from gyreprof.recording.profiler import add_form_costs

        add_form_costs(_COSTS)  # the thread profilers made from now on carry them
    return dict(_COSTS)


def measure_costs(make: Make | None = None) -> dict[str, float]:
    """ns one call of each wrapper kind adds, measured now for the C guard (or for the
    wrappers ``make(fn, kind, guarded, state)`` returns: see :func:`_measure`)."""
    kw = [(k, w) for k in _KINDS for w in ("timed", "inner")]
    names = dict(zip(counter_names(), kw, strict=True))
    got: dict[tuple[str, bool], float] = {}
    state = _calibration_state()
    # four layers: one timed and three passed through, or four passed through
    outer4 = _measure(state, "env_step", False, make=make)
    inner4 = _measure(state, "env_step", True, make=make)
    inner = inner4 / 4
    got[("env_step", True)] = inner
    got[("env_step", False)] = max(outer4 - 3 * inner, inner)
    got[("step_async", False)] = _measure(state, "step_async", False, make=make)
    out = {}
    for name, (kind, which) in names.items():
        rep = "env_step" if _GUARDED[kind] else "step_async"
        out[name] = got.get((rep, which == "inner"), 0.0)
    return out


def install(gym: ModuleType) -> None:
    """Patch gymnasium (once); a version it does not know: a warning, no patch."""
    problem = versions.check("gymnasium", getattr(gym, "__version__", None))
    if problem is not None:
        st.warn_once("gymnasium", problem)
        return
    _guard()
    _inst.patches.replace_tree(gym.Env, ("step", "reset"), _make_env_method, skip=(gym.Env,))
    _inst.when_imported("gymnasium.vector.async_vector_env", _install_async)
    _inst.when_imported("gymnasium.vector.sync_vector_env", _install_sync)
    st.preload()
    wrapper_costs()  # here, once: not inside the loop's first step


def _install_async(module: ModuleType) -> None:
    cls = getattr(module, "AsyncVectorEnv", None)
    if cls is not None:
        _inst.patches.replace_tree(cls, ("step_async", "step_wait"), _vector_call)
    workers.install_gym_async(_inst.patches, module)


def _install_sync(module: ModuleType) -> None:
    workers.install_gym_sync(_inst.patches, module)


_inst = Instrumentor("gymnasium", {"gymnasium": install})


def instrument() -> None:
    """Patch gymnasium now (imported) or when it is imported; undone by one
    :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
