"""threading's instrumentor (:func:`instrument` / :func:`uninstrument`): a thread's or a
process's main thread's uncaught exception is kept (``_auto.deaths``), so a trainer whose
feeder died can be told apart from one fed slowly.

``threading.excepthook`` and ``sys.excepthook`` are chained: the hook set before runs
after ours, so the traceback is printed as before. At the last :func:`uninstrument` each
hook that is still ours is given back.
"""

from __future__ import annotations

from types import ModuleType

from gyreprof.integrations._auto import deaths
from gyreprof.integrations._instrument import Instrumentor


def install(threading: ModuleType) -> None:
    deaths.install()
    _inst.patches.on_undo(deaths.uninstall)


_inst = Instrumentor("threads", {"threading": install})


def instrument() -> None:
    """Chain the exception hooks now (``threading`` is always imported by then); undone
    by one :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, the hooks are the ones set before."""
    _inst.uninstrument()
