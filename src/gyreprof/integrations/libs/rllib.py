"""RLlib's instrumentor (:func:`instrument` / :func:`uninstrument`): name the processes of a
run on Ray by what they do for RLlib.

- An ``EnvRunner`` (``SingleAgentEnvRunner``, ``MultiAgentEnvRunner``, the old
  stack's ``RolloutWorker``) built in a process other than the run's main one is
  an env-runner actor: role ``rllib_env_runner``, the sampler. Its env steps
  are timed by the gymnasium patch as everywhere; the report adds its idle
  share (its wall time minus its env stepping: waiting for the next sample
  request while the learner updates and the weights sync), so runners idling
  are reported as idle, not as time nobody timed.
- A ``Learner`` built outside the main process is a learner actor: role
  ``rllib_learner``, a worker, never the trainer (``WORKER_ROLES``; its
  optimizer steps are counted and named in a note). Built in the main process
  (``num_learners=0``) it updates in the driver, and a note says so.
- The ``Algorithm`` built in the main process makes it the Ray driver (a note
  names it); built elsewhere (a Tune trial actor), role ``rllib_algorithm``.

**The trainer is the driver's training thread**, read from its timeline as
everywhere, with RLlib's calls naming the parts of an iteration
(``Algorithm.step``): its ``synchronous_parallel_sample`` is the wait (the env
runners sampling), ``LearnerGroup.update`` is the update (an update signal at
its start, whether the learner runs in the driver or in learner actors: the
driver's wait for a remote update is compute done remotely), and every other
blocking wait inside the step (the weight sync, the metrics) is muted: part of
the step's compute, as the driver's own clock around ``training_step`` reads.

Each of these processes is listed in the run even when it records nothing of
its own (its profilers are created when it takes its role). Roles are taken
only under ``gyreprof run``; nothing here runs on RLlib's hot path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto import versions
from gyreprof.integrations._instrument import Instrumentor

ENV_RUNNER = "rllib_env_runner"
LEARNER = "rllib_learner"
ALGORITHM = "rllib_algorithm"
#: the roles of RLlib's worker actors: never the run's trainer (collect), whatever their
#: threads record (a learner actor's optimizer steps are the driver's compute, remotely)
WORKER_ROLES = frozenset({ENV_RUNNER, LEARNER})

# the versions whose EnvRunner / Learner / Algorithm classes this module knows
versions.KNOWN.setdefault("ray", ((2, 9), (3, 0)))

_DRIVER_NOTE = (
    "RLlib: the Ray driver is main {pid}: it builds the Algorithm and drives each iteration"
)
_LOCAL_LEARNER = (
    "RLlib: the learner updates in the driver (main {pid}; num_learners=0), between the "
    "env runners' sampling rounds"
)


#: a process holding several (a Tune trial actor builds the Algorithm, its local env
#: runner and learner) takes the highest
_RANK = {ENV_RUNNER: 0, LEARNER: 1, ALGORITHM: 2}
_taken: tuple[int, str] | None = None  # (pid, role) this process took


def _claim(role: str) -> None:
    """This process takes ``role`` unless it holds a higher one (the main process keeps
    ``main`` and gets a note)."""
    global _taken
    if st.run_dir is None:
        return
    pid = os.getpid()
    if pid == st.main_pid:
        if role == ALGORITHM:
            st.note(_DRIVER_NOTE.format(pid=pid))
        elif role == LEARNER:
            st.note(_LOCAL_LEARNER.format(pid=pid))
    else:
        if _taken is not None and _taken[0] == pid and _RANK[_taken[1]] > _RANK[role]:
            role = _taken[1]
        _taken = (pid, role)
        st.registered(role)
    try:  # listed in the run from now on, even if it never times anything itself
        st.tls.t  # noqa: B018 - the thread's profilers, if it has them
    except AttributeError:
        st.new_thread()


def _init(role: str) -> Callable[[Callable[..., Any], str], Callable[..., Any]]:
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            _claim(role)
            original(self, *args, **kwargs)
            # again: the envs it built registered this process as an env_worker
            _claim(role)

        return __init__

    return make


def _patch(module: ModuleType, cls_name: str, role: str) -> None:
    problem = versions.check("ray", _ray_version())
    if problem is not None:
        st.warn_once("ray", problem)
        return
    cls = getattr(module, cls_name, None)
    if isinstance(cls, type):
        _inst.patches.replace_tree(cls, ("__init__",), _init(role))


def _ray_version() -> object:
    import sys

    return getattr(sys.modules.get("ray"), "__version__", None)


class _Driving(threading.local):
    """Per thread: the ``Algorithm.step`` it is inside (0: none) and the waits of the
    thread muted for it (``ThreadState.in_wait`` as it was before)."""

    depth = 0
    muted: st.ThreadState | None = None


_driving = _Driving()


def _step(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``Algorithm.step``: one training iteration, on the thread that drives training
    (the Ray driver's main thread, or a Tune trial actor's). Inside it only the sampling
    (``synchronous_parallel_sample``) is the trainer's wait: every other blocking wait
    of the thread (the ``ray.get`` of a remote learner's update, of the weight sync, of
    the metrics) is muted, part of the iteration's compute, as the driver's own clock
    around ``training_step`` counts it. The thread gets its profilers here (a trial
    actor's thread is no default trainer: it trains from its first learner update)."""

    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        if st.run_dir is None or _driving.depth:  # a subclass's step calling super().step
            return original(self, *args, **kwargs)
        t = st.thread_state()
        if t.framework:
            return original(self, *args, **kwargs)
        _driving.depth, _driving.muted = 1, t
        nested, t.in_wait = t.in_wait, True  # waiting_thread() is None: waits pass through
        try:
            return original(self, *args, **kwargs)
        finally:
            t.in_wait = nested
            _driving.depth, _driving.muted = 0, None

    return step


def _muted_here() -> st.ThreadState | None:
    """The calling thread's state when it is inside ``Algorithm.step`` (waits muted)."""
    return _driving.muted if _driving.depth else None


def _sync_sample(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``synchronous_parallel_sample``: the driver asks its env runners for samples and
    waits for them. Inside ``Algorithm.step`` (see :func:`_step`), and elsewhere on a
    thread whose waits count (``state.waiting_thread``: the one that updates), the call
    is one data wait of kind ``own``: the runners sample only on request, and idle while
    the learner updates, so the loop is synchronous (the ``ray.get`` / ``ray.wait``
    inside it, which alone read as data made elsewhere, are part of it). The algorithms'
    own copies of the name (imported from the module) stay this wrapper after the undo:
    it then calls straight through."""

    def synchronous_parallel_sample(*args: Any, **kwargs: Any) -> Any:
        if not _inst.active:
            return original(*args, **kwargs)
        t = _muted_here() or st.waiting_thread()
        if t is None:
            return original(*args, **kwargs)
        nested, t.in_wait = t.in_wait, True
        start = t.now()
        try:
            return original(*args, **kwargs)
        finally:
            t.in_wait = nested
            st.data_wait(t, start, t.now(), "own")

    return synchronous_parallel_sample


def _learner_update(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``LearnerGroup.update`` on the driver: the learner's update, the trainer's compute
    (an update signal at its start: the sampling before it is the collect block). With
    learner actors (``num_learners>=1``) the driver sends the batch and waits for their
    results: that wait is the update done remotely, compute, never a data wait; with
    ``num_learners=0`` the optimizer steps inside signal as well (changing nothing)."""

    def update(self: Any, *args: Any, **kwargs: Any) -> Any:
        if st.run_dir is None:
            return original(self, *args, **kwargs)
        t = st.thread_state()
        st.update_signal(t, t.now())
        nested, t.in_wait = t.in_wait, True
        try:
            return original(self, *args, **kwargs)
        finally:
            t.in_wait = nested
            st.update_end(t, t.now())

    return update


def _patch_rollout_ops(mod: ModuleType) -> None:
    # patched as the module runs its last line: the algorithms import the name from it
    # afterwards (``from ray.rllib.execution.rollout_ops import synchronous_parallel_sample``)
    _inst.patches.replace(mod, "synchronous_parallel_sample", _sync_sample)


def _patch_env_runner(mod: ModuleType) -> None:
    _patch(mod, "EnvRunner", ENV_RUNNER)


def _patch_learner(mod: ModuleType) -> None:
    _patch(mod, "Learner", LEARNER)


def _patch_algorithm(mod: ModuleType) -> None:
    _patch(mod, "Algorithm", ALGORITHM)
    cls = getattr(mod, "Algorithm", None)
    if isinstance(cls, type) and versions.check("ray", _ray_version()) is None:
        _inst.patches.replace_tree(cls, ("step",), _step)


def _patch_learner_group(mod: ModuleType) -> None:
    cls = getattr(mod, "LearnerGroup", None)
    if isinstance(cls, type) and versions.check("ray", _ray_version()) is None:
        _inst.patches.replace_tree(cls, ("update",), _learner_update)


_inst = Instrumentor(
    "rllib",
    {
        "ray.rllib.execution.rollout_ops": _patch_rollout_ops,
        "ray.rllib.env.env_runner": _patch_env_runner,
        "ray.rllib.core.learner.learner": _patch_learner,
        "ray.rllib.algorithms.algorithm": _patch_algorithm,
        "ray.rllib.core.learner.learner_group": _patch_learner_group,
    },
)


def instrument() -> None:
    """Patch RLlib's classes now (imported) or when each module is imported; undone by
    one :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()


# ------------------------------------------------------------------ the report's lines

_ENV_STEPPING = ("env_step", "env_reset")
OPTIM_STEPS = st.OPTIM_STEPS


def role_notes(entries: Sequence[Any]) -> list[str]:
    """The report's lines on the RLlib actors among ``entries`` (collect's
    ``ProcessEntry``s): the env runners' env stepping and idle shares, and the learner
    actors (workers, not the trainer)."""
    return _runner_notes(entries) + _learner_notes(entries)


def _learner_notes(entries: Sequence[Any]) -> list[str]:
    """The learner actors (``num_learners>=1``): named as workers the driver waits on,
    with the optimizer steps they counted. Empty without one."""
    learners = [e for e in entries if e.role == LEARNER]
    if not learners:
        return []
    steps = 0
    for e in learners:
        if e.trainer is not None:
            steps += int(e.trainer.counters.get(OPTIM_STEPS, 0))
    n = len(learners)
    pids = ", ".join(str(e.pid) for e in learners)
    driver = next((e.pid for e in entries if e.role == "main"), None)
    by = f"the driver (main {driver})" if driver is not None else "the driver"
    who = ("they", "workers") if n != 1 else ("it", "a worker")
    did = f"{who[0]} ran {steps} optimizer steps in" if steps else f"{who[0]} ran"
    return [
        f"RLlib: the learner updates in {n} learner actor{'s' if n != 1 else ''} "
        f"({LEARNER} {pids}; num_learners={n}), {who[1]}, not the trainer: {did} the "
        f"update that {by} waits on in learner_group.update, counted as the driver's "
        "compute (the trainer's wait is its sampling)"
    ]


def _runner_notes(entries: Sequence[Any]) -> list[str]:
    """The line on the env runners: how much of their wall time they stepped envs and
    how much they were idle. Empty when no env runner contributed env steps."""
    runners = []
    for e in entries:
        s = e.sampler_figures()
        if e.role != ENV_RUNNER or not e.contributed or s is None:
            continue
        env_ns = float(sum(s.phases[n].sum_ns for n in _ENV_STEPPING if n in s.phases))
        if env_ns > 0 and s.elapsed_s > 0:
            runners.append((e.pid, env_ns / 1e9, s.elapsed_s))
    if not runners:
        return []
    env_s = sum(r[1] for r in runners)
    wall_s = sum(r[2] for r in runners)
    busy = min(1.0, env_s / wall_s)
    n = len(runners)
    pids = ", ".join(str(r[0]) for r in runners)
    return [
        f"RLlib: the {n} env runner{'s' if n != 1 else ''} ({ENV_RUNNER} {pids}) stepped "
        f"their envs {busy:.1%} of their wall time ({env_s:.3g} s of {wall_s:.3g} s); the "
        f"other {1 - busy:.1%} (wall time minus env stepping) is their policy forward and "
        "connectors, and idling while they wait for the driver's next sample request (the "
        "learner's update, the weight sync)"
    ]


__all__ = [
    "ALGORITHM",
    "ENV_RUNNER",
    "LEARNER",
    "WORKER_ROLES",
    "instrument",
    "role_notes",
    "uninstrument",
]
