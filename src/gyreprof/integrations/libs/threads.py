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


def install(module: ModuleType) -> None:
    if not deaths.installed():
        deaths.install()
        _inst.patches.on_undo(deaths.uninstall)


#: the modules through which a thread or process feeds a trainer: the first import of one
#: chains the hooks (``threading`` itself is imported too early and too widely to wait for)
FEEDS = ("queue", "multiprocessing.queues", "multiprocessing.process", "concurrent.futures._base")

_inst = Instrumentor("threads", dict.fromkeys(FEEDS, install))


def instrument() -> None:
    """Chain the exception hooks now (a module of :data:`FEEDS` imported) or once one is;
    undone by one :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, the hooks are the ones set before."""
    _inst.uninstrument()
