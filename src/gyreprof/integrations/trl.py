"""TRL from code: the numbers ``gyreprof run`` gives for a TRL trainer, without the wrapper command.

::

    from gyreprof.integrations import trl as gtrl

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=data)
    with gtrl.profile(trainer) as run:
        trainer.train()
    print(run.report())              # generation, wait ratio, verdict, rollout requests
    run.sampler, run.trainer         # the Profilers (phases below)

The same signals as ``gyreprof run``, in this process: generation is the sampler's
``generate`` phase (every ``model.generate`` of transformers, the outermost of a
thread), the optimizer step and the backward pass are the update (the trainer's
``compute``), and the training thread's ``wait`` is its generation between two
updates: the ``generate`` calls, or the HTTP requests it waits on when generation
runs in a server (TRL's ``vllm_mode="server"``: ``VLLMClient`` over ``requests``),
or the futures of a request pool. The HTTP requests made while the session is open
(any thread) are the report's ``rollouts``: per endpoint requests, outcomes,
latency, tokens, batches and their tail, each endpoint TRL's server protocol knows
named by its role (``generation``, ``weight sync``, ``control``:
``analysis.rollouts.route_role``). A loop is judged as collect-then-train
(``sync``) unless its timeline says otherwise.

Not timed from here: vLLM running inside this process (``vllm_mode="colocate"``),
which is no ``generate`` of transformers (the report says so), and other
processes of a multi-GPU launch (``gyreprof run`` covers those). The patches stay
installed; only the session's span is reported.
"""

from __future__ import annotations

from typing import Any

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, MissingExtraError
from gyreprof.analysis import run as run_result
from gyreprof.integrations._auto.session import Session
from gyreprof.integrations.libs import trl as trl_libs

__all__ = ["TrlSession", "profile"]


class TrlSession(Session):
    """A :class:`~gyreprof.integrations._auto.session.Session` for a TRL trainer that also
    records the HTTP rollout requests of the process (``report().rollouts``)."""

    def __init__(self, what: str, notes: list[str]) -> None:
        from gyreprof.integrations.http import HttpProfile

        self._http = HttpProfile()  # registers the HTTP clients' patches
        super().__init__(what, "sync")
        self._notes = notes

    def _rollouts(self) -> Any:
        return self._http.report()

    def report(self) -> run_result.RunReport:
        report = super().report()
        report.notes += [n for n in self._notes if n not in report.notes]
        return report

    def close(self) -> None:
        super().close()
        self._http.close()


def _trainer_base() -> type:
    try:
        import trl  # noqa: F401  (the trainers' package)
        from transformers import Trainer
    except ImportError as exc:
        raise MissingExtraError("gyreprof.integrations.trl", "trl", extra="stacks") from exc
    base: type = Trainer  # typed where transformers is installed, Any where it is not
    return base


def _is_trl(cls: type) -> bool:
    return any(getattr(c, "__module__", "").split(".")[0] == "trl" for c in cls.__mro__)


def _check(trainer: Any) -> str:
    """The trainer's name for the report; a clear error for anything that is not one."""
    base = _trainer_base()
    if isinstance(trainer, type):
        raise ArgumentTypeError(
            f"trainer must be a TRL trainer instance, got the class {trainer.__name__} itself; "
            f"build it first: gyreprof.integrations.trl.profile({trainer.__name__}(...))"
        )
    cls = type(trainer)
    if not isinstance(trainer, base) or not _is_trl(cls):
        other = ""
        if cls.__module__.split(".")[0] == "stable_baselines3":
            other = "; for stable-baselines3 use gyreprof.integrations.sb3.profile(model)"
        elif isinstance(trainer, base):
            other = (
                "; a plain transformers Trainer generates nothing: time its loop with "
                "gp.Profiler(['wait', 'compute']) instead"
            )
        raise ArgumentTypeError(
            f"trainer must be a TRL trainer (trl.GRPOTrainer, trl.RLOOTrainer, ...), got "
            f"{cls.__name__}{other}"
        )
    if getattr(trainer, "args", None) is None:
        raise InvalidValueError(
            f"trainer {cls.__name__} has no args (a TrainingArguments): is it fully built? "
            "pass the trainer after its constructor returned"
        )
    return cls.__name__


def _notes(trainer: Any) -> list[str]:
    """What the session cannot see of this trainer's set-up, in the report's words."""
    args = trainer.args
    if getattr(args, "use_vllm", False) and getattr(args, "vllm_mode", None) == "colocate":
        return [
            "TRL generates with vLLM inside this process (vllm_mode='colocate'): that is no "
            "transformers generate call, so generation is not timed as a sampler phase; the "
            "trainer's compute then holds it"
        ]
    return []


def profile(trainer: Any) -> TrlSession:
    """Start profiling ``trainer`` (a TRL trainer: ``GRPOTrainer``, ``RLOOTrainer``, ...) in
    this process; use the result as a context manager around ``trainer.train()``."""
    name = _check(trainer)
    trl_libs.instrument()
    return TrlSession(f"TRL {name}", _notes(trainer))
