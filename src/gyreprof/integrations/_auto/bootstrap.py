"""Started in every Python process of a ``gyreprof run`` (by its ``sitecustomize``).

Cheap when nothing is recognised: it registers post-import hooks and returns;
numpy and the profilers load only when a patched library first records.
"""

from __future__ import annotations

import os

from gyreprof.integrations._auto import (
    patch_gym,
    patch_mp,
    patch_queue,
    patch_sb3,
    patch_torch,
    patch_torchrl,
    state,
)
from gyreprof.integrations._auto import (
    records as rec,
)


def install_all() -> None:
    """Patch every known library now or when it is imported (idempotent)."""
    patch_mp.register()
    patch_gym.register()
    patch_sb3.register()
    patch_torchrl.register()
    from gyreprof.integrations._auto import patch_rllib, patch_transformers

    patch_transformers.register()
    patch_rllib.register()
    from gyreprof.integrations import http  # HTTP rollout clients, each when imported

    http.instrument()
    patch_torch.register()
    patch_queue.register()


def lacking() -> str | None:
    """What this Python lacks to run the profilers, or None: numpy, psutil, wrapt, or the compiled
    core built for it. Looked up, not imported (numpy loads only when a patched library
    first records): a process whose Python has gyreprof from the launcher's folder alone
    must not find out in the middle of the user's first ``queue.get``."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    for name in ("numpy", "psutil", "wrapt"):
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    core = Path(__file__).resolve().parent.parent.parent / "_core"
    if not any((core / f"recorder{s}").is_file() for s in importlib.machinery.EXTENSION_SUFFIXES):
        return f"gyreprof's compiled core built for this Python (in {core})"
    return None


def start() -> bool:
    """Instrument this process if ``$GYREPROF_RUN_DIR`` names a run; True if it does.
    Raises ``ImportError`` (and instruments nothing) when this Python lacks what the
    profilers need (:func:`lacking`)."""
    if not os.environ.get(rec.ENV_RUN_DIR):
        return False
    missing = lacking()
    if missing is not None:
        import sys

        raise ImportError(f"{sys.executable} cannot import {missing}, which gyreprof needs")
    if not state.configure_from_env():
        return False
    if state.run_dir is not None:
        from gyreprof.integrations._auto import trail

        trail.start(state.run_dir)  # before anything else of the user's can run
    install_all()
    if state.run_dir is not None:
        try:  # so the report can tell "no Python process" from "nothing recognised"
            os.close(
                os.open(state.run_dir / f"{os.getpid()}.boot", os.O_CREAT | os.O_WRONLY, 0o600)
            )
        except OSError:
            pass
    return True
