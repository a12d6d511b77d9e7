"""gymnasium wrappers that time env steps and resets into a Profiler.

Single environments::

    prof = gp.Profiler(["env_step", "env_reset", "fwd"])
    env = ProfiledEnv(gym.make("CartPole-v1"), prof)      # step and reset timed apart

Vector environments: for an ``AsyncVectorEnv`` the step is split into the send
(``step_async``: actions written to the workers' pipes) and the wait
(``step_wait``: until the slowest worker answers), so time lost waiting for
stragglers is visible on its own::

    venv = ProfiledVectorEnv(gym.vector.AsyncVectorEnv([make] * 8), prof)
    # phases: "step_async", "step_wait", "env_reset"

Other vector envs (``SyncVectorEnv``, wrappers) are timed as one ``env_step``
phase. Put ``ProfiledVectorEnv`` directly around the ``AsyncVectorEnv`` (inside
any other vector wrappers) to get the split. ``phase_names(env)`` lists the
phases a wrapper will record, for building the Profiler. Any phase argument may
be ``None`` to leave that call untimed.
"""

from __future__ import annotations

from typing import Any

from gyreprof._support.errors import ArgumentTypeError, MissingExtraError, UnknownPhaseError

try:
    import gymnasium as gym
    from gymnasium.vector import AsyncVectorEnv, VectorEnv, VectorWrapper
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError("gyreprof.integrations.gym", "gymnasium", extra="gym") from exc

from gyreprof.recording.profiler import Profiler

__all__ = ["ProfiledEnv", "ProfiledVectorEnv", "phase_names", "profile_env"]

DEFAULT_STEP_PHASE = "env_step"
DEFAULT_RESET_PHASE = "env_reset"
DEFAULT_SEND_PHASE = "step_async"
DEFAULT_WAIT_PHASE = "step_wait"


def _check_profiler(prof: object) -> Profiler:
    if not isinstance(prof, Profiler):
        raise ArgumentTypeError(f"prof must be a gyreprof Profiler, got {type(prof).__name__}")
    return prof


def _check_phase(prof: Profiler, arg: str, name: str | None) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{arg} must be a phase name or None, got {name!r}")
    if name not in prof.phases:
        raise UnknownPhaseError(
            f"{arg}={name!r} is not a phase of the profiler; known phases: {list(prof.phases)}. "
            f"Add it to the Profiler's phases (phase_names(env) lists what the wrapper records) "
            f"or pass {arg}=None to leave that call untimed."
        )
    return name


class _Timers:
    """Phase timers of one profiler, looked up once (per call with per_thread=True)."""

    __slots__ = ("prof", "cache")

    def __init__(self, prof: Profiler, names: list[str | None]) -> None:
        self.prof = prof
        self.cache: dict[str, Any] = {}
        if not prof.per_thread:
            self.cache = {n: prof.phase(n) for n in names if n is not None}

    def __call__(self, name: str) -> Any:
        timer = self.cache.get(name)
        return timer if timer is not None else self.prof.phase(name)


def _splits(env: object) -> bool:
    return isinstance(env, AsyncVectorEnv)


class ProfiledEnv(gym.Wrapper):  # type: ignore[type-arg]
    """Times ``step`` as ``step_phase`` and ``reset`` as ``reset_phase`` (its own phase).

    The wrapper only times; it does not mark loop steps (``prof.begin()``) so it
    fits into a loop that times its other phases itself.
    """

    def __init__(
        self,
        env: gym.Env,  # type: ignore[type-arg]
        prof: Profiler,
        step_phase: str | None = DEFAULT_STEP_PHASE,
        reset_phase: str | None = DEFAULT_RESET_PHASE,
    ) -> None:
        if isinstance(env, VectorEnv):
            raise ArgumentTypeError(
                "ProfiledEnv wraps a single gymnasium Env; for a vector env use "
                "ProfiledVectorEnv(env, prof) (it splits an AsyncVectorEnv step into send/wait)"
            )
        if not isinstance(env, gym.Env):
            raise ArgumentTypeError(f"env must be a gymnasium Env, got {type(env).__name__}")
        super().__init__(env)
        self.prof = _check_profiler(prof)
        self.step_phase = _check_phase(self.prof, "step_phase", step_phase)
        self.reset_phase = _check_phase(self.prof, "reset_phase", reset_phase)
        self._timer = _Timers(self.prof, [self.step_phase, self.reset_phase])

    def step(self, action: Any) -> Any:
        if self.step_phase is None:
            return self.env.step(action)
        with self._timer(self.step_phase):
            return self.env.step(action)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if self.reset_phase is None:
            return self.env.reset(seed=seed, options=options)
        with self._timer(self.reset_phase):
            return self.env.reset(seed=seed, options=options)


class ProfiledVectorEnv(VectorWrapper):
    """Times a vector env: send and wait apart for an ``AsyncVectorEnv``, else one step phase.

    ``split``: ``None`` (default) splits when ``env`` is an ``AsyncVectorEnv``;
    ``True`` insists (TypeError otherwise); ``False`` times the step as one.
    ``reset`` (send and wait together) is timed as ``reset_phase``.
    """

    def __init__(
        self,
        env: VectorEnv,  # type: ignore[type-arg]
        prof: Profiler,
        step_phase: str | None = DEFAULT_STEP_PHASE,
        reset_phase: str | None = DEFAULT_RESET_PHASE,
        send_phase: str | None = DEFAULT_SEND_PHASE,
        wait_phase: str | None = DEFAULT_WAIT_PHASE,
        *,
        split: bool | None = None,
    ) -> None:
        if not isinstance(env, VectorEnv):
            raise ArgumentTypeError(
                f"ProfiledVectorEnv wraps a gymnasium VectorEnv, got {type(env).__name__}; "
                "for a single env use ProfiledEnv(env, prof)"
            )
        can_split = _splits(env)
        if split is True and not can_split:
            raise ArgumentTypeError(
                f"split=True needs an AsyncVectorEnv (it has step_async/step_wait), got "
                f"{type(env).__name__}; wrap the AsyncVectorEnv itself, inside other wrappers"
            )
        super().__init__(env)
        self.prof = _check_profiler(prof)
        self.split = can_split if split is None else bool(split)
        if self.split:
            self.send_phase = _check_phase(self.prof, "send_phase", send_phase)
            self.wait_phase = _check_phase(self.prof, "wait_phase", wait_phase)
            self.step_phase = None
        else:
            self.send_phase = self.wait_phase = None
            self.step_phase = _check_phase(self.prof, "step_phase", step_phase)
        self.reset_phase = _check_phase(self.prof, "reset_phase", reset_phase)
        self._timer = _Timers(
            self.prof, [self.step_phase, self.send_phase, self.wait_phase, self.reset_phase]
        )

    def step(self, actions: Any) -> Any:
        if self.split:
            self.step_async(actions)
            return self.step_wait()
        if self.step_phase is None:
            return self.env.step(actions)
        with self._timer(self.step_phase):
            return self.env.step(actions)

    def step_async(self, actions: Any) -> None:
        """Send the actions to the workers (timed as ``send_phase``)."""
        if not self.split:
            raise AttributeError(
                f"step_async: {type(self.env).__name__} has no send/wait split; call step()"
            )
        env: Any = self.env
        if self.send_phase is None:
            env.step_async(actions)
            return
        with self._timer(self.send_phase):
            env.step_async(actions)

    def step_wait(self, timeout: float | None = None) -> Any:
        """Wait for every worker's result (timed as ``wait_phase``): the slowest one sets it."""
        if not self.split:
            raise AttributeError(
                f"step_wait: {type(self.env).__name__} has no send/wait split; call step()"
            )
        env: Any = self.env
        if self.wait_phase is None:
            return env.step_wait(timeout=timeout)
        with self._timer(self.wait_phase):
            return env.step_wait(timeout=timeout)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:
        if self.reset_phase is None:
            return self.env.reset(seed=seed, options=options)
        with self._timer(self.reset_phase):
            return self.env.reset(seed=seed, options=options)


def phase_names(
    env: Any,
    *,
    step_phase: str | None = DEFAULT_STEP_PHASE,
    reset_phase: str | None = DEFAULT_RESET_PHASE,
    send_phase: str | None = DEFAULT_SEND_PHASE,
    wait_phase: str | None = DEFAULT_WAIT_PHASE,
) -> tuple[str, ...]:
    """The phases the wrapper for ``env`` records (send/wait for an AsyncVectorEnv)."""
    names = [send_phase, wait_phase] if _splits(env) else [step_phase]
    names.append(reset_phase)
    return tuple(n for n in names if n is not None)


def profile_env(env: Any, prof: Profiler, **phases: Any) -> Any:
    """Wrap ``env`` with ProfiledVectorEnv (vector envs) or ProfiledEnv (single envs)."""
    if isinstance(env, VectorEnv):
        return ProfiledVectorEnv(env, prof, **phases)
    return ProfiledEnv(env, prof, **phases)
