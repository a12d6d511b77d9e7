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


def install_all() -> None:
    """Patch every known library now or when it is imported (idempotent)."""
    patch_mp.register()
    patch_gym.register()
    patch_sb3.register()
    patch_torchrl.register()
    from gyreprof.integrations._auto import patch_rllib, patch_transformers

    patch_transformers.register()
    patch_rllib.register()
    from gyreprof.integrations._auto import http_hooks  # HTTP rollout clients (issue 23)

    http_hooks.register()
    patch_torch.register()
    patch_queue.register()


def start() -> bool:
    """Instrument this process if ``$GYREPROF_RUN_DIR`` names a run; True if it does."""
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
