"""What to do next, worded for where the reader is: every "next" line names an action
that can be taken from there.

- ``"code"``: the Python API (``gp.diagnose`` on the user's own profilers): API calls.
- ``"run"``: the report of ``gyreprof run`` (and ``gyreprof report DIR`` of its
  ``--save`` folder): a launcher option, a command, or a line of the user's own
  script that works under the launcher (a ``gp.Profiler`` created in the script
  joins the run's report).
- ``"report"``: ``gyreprof report FILE [FILE]`` on saved profiles: an option of that
  command, another file to give it, or a line of the script that saved them.

The reader's place is set for a stretch of code with :func:`advice_for` (a context
variable: it belongs to the caller's thread or task, never to a process) and read
with :func:`where`. This module imports only the standard library, so any layer may
use it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

WHERE = ("code", "run", "report")

_WHERE: contextvars.ContextVar[str] = contextvars.ContextVar("gyreprof_advice_for", default="code")


@contextlib.contextmanager
def advice_for(place: str) -> Iterator[None]:
    """Word the advice given inside the ``with`` block for ``place`` (one of :data:`WHERE`)."""
    if place not in WHERE:
        from gyreprof._support.errors import InvalidValueError

        raise InvalidValueError(f"advice is worded for one of {list(WHERE)}, got {place!r}")
    token = _WHERE.set(place)
    try:
        yield
    finally:
        _WHERE.reset(token)


def where() -> str:
    """Where the advice given now is read: ``"code"``, ``"run"`` or ``"report"``."""
    return _WHERE.get()


# ------------------------------------------------------------------------ the words


def warmup(steps_marked: bool = True, side: str | None = None) -> str:
    """How to exclude the warm-up of a profile. ``steps_marked``: it marks steps (a warm-up
    counted in steps can end). ``side``: ``"sampler"`` or ``"trainer"`` when known. Under
    the launcher, a profile without marked steps is its sampler's (the automatic trainer
    marks its steps), unless ``side`` says it is a trainer: then a Profiler of the user's."""
    place = where()
    own = (
        "pass Profiler(warmup_steps=...) or warmup_s=..."
        if steps_marked
        else "pass Profiler(warmup_s=...) (it marks no steps; with prof.begin() at each step, "
        "warmup_steps=... works too)"
    )
    if place == "run":
        if not steps_marked and side != "trainer":
            return (
                "rerun with gyreprof run --warmup-s S (the sampler marks no steps, so "
                "--warmup-steps does not reach it)"
            )
        if not steps_marked:
            return f"in your script, {own}"
        return (
            "rerun with gyreprof run --warmup-steps N (the trainer's first N collect-and-"
            "update steps) or --warmup-s S; a Profiler of your own takes "
            "Profiler(warmup_steps=...)"
        )
    if place == "report":
        return f"in the script that saved it, {own}"
    return own


def warmup_both() -> str:
    """How to exclude the warm-up of a trainer that marks steps and a sampler that does
    not, in one sentence (a report that says the warm-up once)."""
    if where() == "run":
        return (
            "rerun with gyreprof run --warmup-s S (both sides) or --warmup-steps N (the "
            "trainer's first N collect-and-update steps; the sampler marks no steps, so it "
            "keeps its warm-up)"
        )
    return warmup(True)


def shorter_warmup() -> str:
    """A warm-up that took the whole run."""
    if where() == "run":
        return "rerun with a shorter --warmup-s (or run longer)"
    return "give a shorter warm-up (or run longer)"


def warmup_counts_steps() -> str:
    """A warm-up counted in steps that never ends: the profile marks no steps."""
    if where() == "run":
        return "warm-up counts steps, which this profile does not mark: use --warmup-s"
    return "warm-up counts steps: mark them with prof.begin(), or use warmup_s="


def loop_sync() -> str:
    """How to declare a collect-then-train loop."""
    place = where()
    if place == "run":
        return "rerun with gyreprof run --loop sync (or gyreprof report DIR --loop sync on its --save folder)"
    if place == "report":
        return "give gyreprof report --loop sync"
    return "pass loop='sync'"


def check_parallelism() -> str:
    """How to check that the env workers really run in parallel."""
    if where() == "code":
        return "gp.check_parallelism(pid, expected={'env_worker': N})"
    return (
        "gyreprof check PID --expect env_worker=N on the training process while it runs "
        "(gyreprof census PID lists its processes)"
    )


def sweep() -> str:
    """How to sweep batch size and parallelism."""
    if where() == "code":
        return "gp.sweep(make_sampler, 'batch_size', [8, 16, 32, 64], ...)"
    return (
        "gyreprof sweep yourpkg.rollout:make_sampler --param batch_size --values 8,16,32,64 "
        "(a function of yours that builds the sampler and returns it)"
    )


def time_untimed() -> str:
    """How to time the untimed part of the sampler step."""
    text = (
        "time the rest of the sampler step before tuning it: wrap the policy forward, "
        "the buffer writes and the observation handling in phases"
    )
    if where() == "run":
        return (
            f"{text}, in your script: prof = gp.Profiler(['fwd', 'buffer']) and "
            "with prof.phase('fwd'): action = policy(obs); under gyreprof run its phases "
            "join the report"
        )
    return f"{text} (prof.phase('fwd'), ...)"


def profile_trainer() -> str:
    """How to add the trainer's side to a verdict that has only the sampler's."""
    place = where()
    if place == "run":
        return (
            "mark the trainer's waits and updates in your script: tp = "
            "gp.Profiler(['wait', 'compute']), then with tp.phase('wait'): batch = "
            "next(batches) and with tp.phase('compute'): update(batch); under gyreprof run "
            "it joins the report"
        )
    if place == "report":
        return (
            "profile the trainer as well (phases 'wait' and 'compute') and give both files: "
            "gyreprof report sampler.snap trainer.snap"
        )
    return "profile the trainer as well and call diagnose(sampler=..., trainer=...)"


def profile_sampler() -> str:
    """How to add the sampler's side to a verdict that has only the trainer's."""
    place = where()
    if place == "run":
        return (
            "time the sampler loop in your script with a Profiler of its phases (e.g. "
            "gp.Profiler(['env', 'fwd', 'xfer'], autosave='sampler.snap')): under gyreprof "
            "run its table joins the report, and gyreprof report sampler.snap trainer.snap "
            "judges the two together"
        )
    if place == "report":
        return (
            "time the sampler loop with phases such as 'env', 'fwd', 'xfer', save it and give "
            "both files: gyreprof report sampler.snap trainer.snap"
        )
    return "time the sampler loop with phases such as 'env', 'fwd', 'xfer' and pass it as sampler="


def gpu_sync() -> str:
    """How to time GPU work so that each phase holds its own GPU time."""
    if where() == "run":
        return (
            "for a profiling run, set CUDA_LAUNCH_BLOCKING=1 (gyreprof run -- env "
            "CUDA_LAUNCH_BLOCKING=1 python train.py) so each phase holds its own GPU time "
            "(slower, but the shares are right), or time them in your script with "
            "gyreprof.integrations.torch.cuda_phase(prof, name)"
        )
    return "time them with gyreprof.integrations.torch.cuda_phase(prof, name) or synchronized(prof)"


def overhead() -> str:
    """What to do about a profiler overhead above the limit."""
    if where() == "run":
        return (
            "the launcher times every recognised library call; shares of very short calls are "
            "inflated by about that much"
        )
    return "time fewer, coarser phases or use prof.lap() instead of context managers"


def rolling_windows() -> str:
    """How to get per-window wait ratios from a saved profile that closed no windows."""
    if where() == "code":
        return "pass the Profiler for exact windows"
    return (
        "in your script, mark each step with tp.begin() and give the Profiler a window_steps= "
        "small enough to close windows in a run this long (e.g. window_steps=10)"
    )


def more_windows() -> str:
    """How to get more windows than a handful."""
    if where() == "run":
        return "run longer (the launcher's trainer closes a window every step)"
    return "run longer or pass a smaller window_steps="


def ring_capacity() -> str:
    """How to keep more of the ring's events."""
    if where() == "run":
        return "the launcher's profilers keep the latest 4096 events per thread"
    return "a larger Profiler(capacity=...) keeps more"
