"""The libraries ``gyreprof run`` instruments besides the HTTP clients: one instrumentor each.

Each module here has ``instrument()`` and ``uninstrument()`` (an
:class:`~gyreprof.integrations._instrument.Instrumentor`): ``instrument()`` patches the
library now if it is imported, or when it is, through wrapt's post-import hooks;
``uninstrument()`` undoes one ``instrument()``, and at the last every attribute it
patched is its original object again. Calls nest (a count per library).

- :mod:`.gymnasium`: env ``step`` / ``reset`` (the compiled guard), vector-env send/wait,
  vector-env workers' roles;
- :mod:`.sb3`: stable-baselines3's collect / train / policy forward, ``SubprocVecEnv``;
- :mod:`.torchrl`: the wait for a collector's next batch;
- :mod:`.rllib`: RLlib's actors' roles and the driver's iteration;
- :mod:`.trl`: TRL's trainers, through the libraries they drive (transformers, torch,
  queues);
- :mod:`.transformers`: ``generate``;
- :mod:`.torch`: the update signals (optimizer step, backward) and no-grad forwards;
- :mod:`.queues`: blocking waits for data (``queue``, ``multiprocessing`` queues,
  futures, ``ray.get`` / ``ray.wait``) and a sampler's blocking put;
- :mod:`.asyncio`: the event loop's idle wait on rollouts, and batches of requests;
- :mod:`.multiprocessing`: a child saves its records before ``os._exit``, with the
  exception its ``run`` died of;
- :mod:`.threads`: the exceptions threads (and the main thread) die of.

:func:`instrument` / :func:`uninstrument` drive all of them (``gyreprof run``'s
bootstrap, once per process, with :func:`gyreprof.integrations.http.instrument`).
"""

from __future__ import annotations

import importlib
from typing import Any

from gyreprof._support.errors import InvalidValueError

__all__ = ["LIBRARIES", "instrument", "instrumentor", "uninstrument"]

#: the instrumentors :func:`instrument` drives, in the order they are installed (TRL has
#: no patch of its own: it is instrumented through transformers, torch and queues)
LIBRARIES: tuple[str, ...] = (
    "multiprocessing",
    "threads",
    "gymnasium",
    "sb3",
    "torchrl",
    "transformers",
    "rllib",
    "torch",
    "queues",
    "asyncio",
)


def instrumentor(name: str) -> Any:
    """The instrumentor module of library ``name`` (one of :data:`LIBRARIES`, or ``trl``)."""
    if name not in (*LIBRARIES, "trl"):
        raise InvalidValueError(f"library: {name!r} is none of {[*LIBRARIES, 'trl']}")
    return importlib.import_module(f"gyreprof.integrations.libs.{name}")


def instrument() -> None:
    """Instrument every library of :data:`LIBRARIES` (now or when it is imported)."""
    for name in LIBRARIES:
        instrumentor(name).instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`, the libraries in the reverse order."""
    for name in reversed(LIBRARIES):
        instrumentor(name).uninstrument()
