"""Started in every Python process of a ``gyreprof run`` (by its ``sitecustomize``).

Before the user's code runs it does only what cannot wait, with modules a bare
interpreter has already loaded: it checks that this Python can record, notes the
run's main process in the environment, starts the start-up trail, marks the process
as booted and puts one small finder on ``sys.meta_path`` (:class:`_Trigger`) that
knows the names of the modules gyreprof patches (:data:`WATCHED`). The first
import of one of them loads the rest (:func:`install_all`): this process's state and
every library's instrumentor (``integrations.libs`` and ``integrations.http``), each
instrumented through its ``instrument()``; the import that fired it goes on through
their post-import hooks. numpy and the compiled core load when a
thread first records. A process that imports none of those modules (``python -c
pass``) loads no patch at all.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

# the names records.py gives them (tests/test_run_light_start.py checks that they agree):
# imported from there, they would load dataclasses, pathlib and typing into every process
ENV_RUN_DIR = "GYREPROF_RUN_DIR"
ENV_MAIN_PID = "GYREPROF_RUN_MAIN_PID"

#: the modules whose import loads the patches: every module an instrumentor's
#: ``instrument()`` waits for (tests/test_run_light_start.py checks it), and
#: ``gyreprof.recording.profiler``, whose Profilers join the run (:func:`_join_user_profilers`)
WATCHED = frozenset(
    {
        "aiohttp",
        "asyncio",
        "concurrent.futures._base",
        "gymnasium",
        "gyreprof.recording.profiler",
        "http.client",
        "httpx",
        "httpx2",
        "multiprocessing.process",
        "multiprocessing.queues",
        "openai",
        "queue",
        "ray",
        "ray.rllib.algorithms.algorithm",
        "ray.rllib.core.learner.learner",
        "ray.rllib.core.learner.learner_group",
        "ray.rllib.env.env_runner",
        "ray.rllib.execution.rollout_ops",
        "requests",
        "stable_baselines3",
        "torch",
        "torchrl",
        "transformers.generation.utils",
        "urllib.request",
    }
)


def _join_user_profilers(profiler_module: Any) -> None:
    """A ``gp.Profiler`` the user creates in this process joins the run's report, and
    every Profiler of the process takes the recording forms' costs the run shares."""
    from gyreprof.integrations._auto import calibration, state
    from gyreprof.integrations._auto.user import join_run

    profiler_module.on_create(join_run)
    profiler_module.set_form_cost_source(calibration.form_cost_source(state.run_dir))


def install_all() -> None:
    """Instrument every known library now or when it is imported (once per process: the
    instrumentors count their ``instrument()`` calls)."""
    from gyreprof.integrations import http, libs
    from gyreprof.integrations._instrument import when_imported

    libs.instrument()  # libs.threads: a feeder that dies is named (issue 38)
    http.instrument()  # HTTP rollout clients, each when imported
    when_imported("gyreprof.recording.profiler", _join_user_profilers)
    from gyreprof.integrations._auto import autoreset  # issue 38: said in the report

    when_imported("gymnasium", autoreset.register)
    from gyreprof.integrations._auto import ray_cluster  # a Ray job: its workers on every node

    ray_cluster.register()  # after the queues' ray.get wrapper: this one goes on top


_loaded = False
_lock = __import__("_thread").RLock()  # _thread: built in, loaded in every interpreter


def load() -> None:
    """Load this process's state and register every patch (once per process)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        _remove_trigger()
        from gyreprof.integrations._auto import state

        if state.configure_from_env():
            install_all()


class _Trigger:
    """First on ``sys.meta_path`` until a watched module is imported: then it loads the
    patches (:func:`load`), leaves, and gives the spec the finders give now (the
    post-import hooks' among them, so the watched module gets its patches)."""

    def __init__(self) -> None:
        self.busy: set[tuple[int, str]] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in WATCHED:
            return None
        key = (_get_ident(), fullname)
        if key in self.busy:
            return None
        self.busy.add(key)
        try:
            load()
            from gyreprof.integrations._auto.trail import spec_from_others

            return spec_from_others(self, fullname, path, target)
        finally:
            self.busy.discard(key)


_get_ident = __import__("_thread").get_ident
_TRIGGER = _Trigger()


def _remove_trigger() -> None:
    try:
        sys.meta_path.remove(_TRIGGER)
    except ValueError:
        pass


def lacking() -> str | None:
    """What this Python lacks to run the profilers, or None: numpy, psutil, wrapt, or the compiled
    core built for it. Looked up, not imported (numpy loads only when a patched library
    first records): a process whose Python has gyreprof from the launcher's folder alone
    must not find out in the middle of the user's first ``queue.get``. Looked up with the
    finders already loaded (no ``importlib.util``)."""
    import _imp

    for name in ("numpy", "psutil", "wrapt"):
        if not _findable(name):
            return name
    core = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_here()))), "_core")
    if not any(
        os.path.isfile(os.path.join(core, f"recorder{s}")) for s in _imp.extension_suffixes()
    ):
        return f"gyreprof's compiled core built for this Python (in {core})"
    return None


def _here() -> str:
    return os.path.realpath(__file__)


def _findable(name: str) -> bool:
    from gyreprof.integrations._auto.trail import spec_from_others

    try:
        return spec_from_others(None, name, None) is not None
    except (ImportError, ValueError):
        return False


def start() -> bool:
    """Instrument this process if ``$GYREPROF_RUN_DIR`` names a run; True if it does.
    Raises ``ImportError`` (and instruments nothing) when this Python lacks what the
    profilers need (:func:`lacking`)."""
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir:
        return False
    missing = lacking()
    if missing is not None:
        raise ImportError(f"{sys.executable} cannot import {missing}, which gyreprof needs")
    if not os.environ.get(ENV_MAIN_PID):
        # the first Python process of the run is its main process; children inherit this
        os.environ[ENV_MAIN_PID] = str(os.getpid())
    from gyreprof.integrations._auto import trail

    trail.start(run_dir)  # before anything else of the user's can run
    if _TRIGGER not in sys.meta_path:
        sys.meta_path.insert(0, _TRIGGER)
    if any(name in sys.modules for name in WATCHED):  # imported before us (a .pth file)
        load()
    try:  # so the report can tell "no Python process" from "nothing recognised"
        path = os.path.join(run_dir, f"{os.getpid()}.boot")
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    except OSError:
        pass
    return True
