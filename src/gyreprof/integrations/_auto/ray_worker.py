"""A Ray job's worker process, instrumented: Ray's setup hook (the function
:mod:`gyreprof.integrations.ray.job` pickles into the job's runtime env) calls
:func:`setup_worker` in each new worker.

Apart from the job's module because it starts the launcher's bootstrap, which itself
registers the job's patch: here, above both, no import runs back up.
"""

from __future__ import annotations

import os
from pathlib import Path

from gyreprof.integrations._auto import bootstrap
from gyreprof.integrations._auto import records as rec
from gyreprof.integrations.ray import job

__all__ = ["setup_worker"]


def setup_worker() -> None:
    """Instrument this worker process of the job (Ray's setup hook calls it): as the
    launcher's bootstrap does, into a run folder of the node's own, and start the sender.
    A worker that inherited the launcher's run (a cluster the driver started itself)
    is instrumented already and saves into the run folder directly: nothing to do."""
    if os.environ.get(rec.ENV_RUN_DIR):
        return
    run_id = os.environ.get(job.ENV_RAY_RUN)
    inbox = os.environ.get(job.ENV_INBOX)
    if not run_id or not inbox:
        return
    import tempfile

    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id)[:64]
    folder = Path(tempfile.gettempdir()) / f"gyreprof-ray-{safe}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        job.tell_missing_here(inbox, f"cannot make {folder}: {exc}")
        return
    os.environ[rec.ENV_RUN_DIR] = str(folder)
    os.environ[rec.ENV_RUN_ID] = run_id
    os.environ[rec.ENV_MAIN_PID] = "0"  # no process of a worker's node is the run's main
    os.environ[job.ENV_WORKER] = "1"

    try:
        bootstrap.start()
    except ImportError as exc:  # this Python lacks numpy, psutil or the compiled core
        job.tell_missing_here(inbox, str(exc))
        return
    bootstrap.load()
    job.start_sender(inbox)
