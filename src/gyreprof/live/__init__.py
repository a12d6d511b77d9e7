"""Live view: read a running Profiler from another process through shared memory.

Writer side: ``gp.Profiler([...], live=True)`` (see ``gyreprof.live.publish``).
Reader side::

    import gyreprof as gp
    gp.live.list()                      # [LiveEntry(pid, name, path, alive, stale, ...)]
    r = gp.live.attach(pid)             # LiveReader (LiveGroupReader: a per_thread profiler,
                                        # every thread merged)
    r.snapshot(); r.summary(); r.progress()
    c = gp.live.collect(root_pid)       # a process tree, or a list of pids
    c.merged, c.per_process, c.missing
    gp.live.clean()                     # remove segments of processes that are gone

Errors: LookupError (no such process or no segment), ValueError (a foreign,
truncated or newer-version segment; ``UntrustedSegmentError`` for one that may
not be believed: wrong owner, open folder, forged identity;
``SegmentReadError`` for one that shrank while read), PermissionError
(another user's segment). Who may write where, and what the same user can
still do to a segment, is in ``gyreprof.live._layout``.
"""

from __future__ import annotations

import builtins

# every name loads on first use: the launcher's end-of-run note (``live._ended``) and a
# Profiler's publishing side import this package without the reader and numpy
_LAZY = {
    "LIVE_VERSION": "gyreprof.live._layout",
    "SegmentReadError": "gyreprof.live._layout",
    "UntrustedSegmentError": "gyreprof.live._layout",
    "segment_dir": "gyreprof.live._layout",
    "LiveCollection": "gyreprof.live.reader",
    "LiveEntry": "gyreprof.live.reader",
    "LiveGroupReader": "gyreprof.live.reader",
    "LiveReader": "gyreprof.live.reader",
    "attach": "gyreprof.live.reader",
    "clean": "gyreprof.live.reader",
    "collect": "gyreprof.live.reader",
    "interval": "gyreprof.live.reader",
    "list": "gyreprof.live.reader",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gyreprof.live._layout import (
        LIVE_VERSION,
        SegmentReadError,
        UntrustedSegmentError,
        segment_dir,
    )
    from gyreprof.live.reader import (
        LiveCollection,
        LiveEntry,
        LiveGroupReader,
        LiveReader,
        attach,
        clean,
        collect,
        interval,
    )
    from gyreprof.live.reader import list_segments as list  # noqa: A001 - the public name


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), "list_segments" if name == "list" else name)
    globals()[name] = value
    return value


def __dir__() -> builtins.list[str]:  # ``list`` is this package's public name
    return sorted([*globals(), *_LAZY])


__all__ = [
    "LIVE_VERSION",
    "LiveCollection",
    "LiveEntry",
    "LiveGroupReader",
    "LiveReader",
    "SegmentReadError",
    "UntrustedSegmentError",
    "attach",
    "clean",
    "collect",
    "interval",
    "list",
    "segment_dir",
]
