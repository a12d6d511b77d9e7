"""TRL's instrumentor (:func:`instrument` / :func:`uninstrument`): a TRL trainer is timed
through the libraries it drives, so instrumenting TRL instruments them.

- generation: ``transformers``' ``generate`` (:mod:`.transformers`);
- the update: the optimizer step and the backward pass (:mod:`.torch`);
- the trainer's wait on a server's generations or on a request pool: the blocking waits
  (:mod:`.queues`; the HTTP requests themselves are :mod:`gyreprof.integrations.http`'s).

TRL's own classes are not patched. Each call instruments the three once more and
:func:`uninstrument` undoes that (their counts nest with ``gyreprof run``'s).
"""

from __future__ import annotations

from gyreprof.integrations.libs import queues, torch, transformers

__all__ = ["LIBRARIES", "instrument", "uninstrument"]

#: what instrumenting TRL instruments, in order
LIBRARIES = (transformers, torch, queues)


def instrument() -> None:
    """Instrument transformers, torch and the queues (now or when each is imported)."""
    for lib in LIBRARIES:
        lib.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`."""
    for lib in reversed(LIBRARIES):
        lib.uninstrument()
