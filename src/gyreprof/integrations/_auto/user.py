"""The user's own Profilers under ``gyreprof run``: they join the run's report.

A ``gp.Profiler(...)`` created in a process of the run calls :func:`join_run` (the
bootstrap adds it to ``gyreprof.recording.profiler.on_create`` when ``gyreprof.recording.profiler`` is
imported; the Profiler itself knows nothing of runs), which registers one more
autosave for it: the snapshot goes to ``<run dir>/<pid>.user-<n>.snap`` (``n``: the
profiler's number in its process) through the autosave's own handlers, so it is written at normal exit,
when the profiler is collected, on SIGTERM and at a multiprocessing child's exit,
atomically (see gyreprof.recording._autosave). A forked child writes under its own pid, and
only if it recorded after the fork. ``collect.read_user_profiles`` reads them back:
a profiler with ``wait`` and ``compute`` phases becomes its process's trainer when
the run's automatic trainer recorded nothing; the others are shown as tables of
their own.

Creating one also ends the process's start-up tracing (the loop is about to
start, and tracing would slow it) and leaves ``<pid>.user.json``, which tells the
launcher's start-up watch that this process got to its loop.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from gyreprof.integrations._auto import records as rec

#: the automatic profilers' labels start so (state.new_thread's "gyreprof-run", and any
#: integration's own): they are never the user's
AUTO_LABEL = "gyreprof"
USER_MARK = ".user.json"

_numbers = itertools.count()


def join_run(prof: Any) -> Path | None:
    """Save ``prof`` into the run folder at exit (see the module doc); the path template,
    or None outside a run or for the launcher's own profilers."""
    run_dir = os.environ.get(rec.ENV_RUN_DIR)
    if not run_dir or (prof.label or "").startswith(AUTO_LABEL):
        return None
    from gyreprof.recording import _autosave

    n = next(_numbers)
    folder = run_dir.replace("{", "{{").replace("}", "}}")
    template = os.path.join(folder, f"{{pid}}.user-{n}.snap")
    state = _autosave.AutosaveState(template, templated=True, recordings=prof._recs)
    _autosave.register(prof, state)
    _started(Path(run_dir))
    return Path(template)


def _started(run_dir: Path) -> None:
    """The first user profiler of this process: end the start-up tracing, mark it."""
    from gyreprof.integrations._auto import trail

    trail.first_record()
    mark = run_dir / f"{os.getpid()}{USER_MARK}"
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError:
        pass
