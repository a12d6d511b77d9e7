"""check_parallelism judges threads by what ran, not by pool sizes; gyreprof's own threads and
the main process running envs inline are told apart. Real vector envs, real threads.

The programs come from tests/helpers/vec_threads.py (plain, or under ``gyreprof run``).
Each test waits until the workers are registered and the loop has stepped, then
observes the threads for ``OBSERVE_S`` (the measurement itself, not a wait).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gyreprof as gp
from gyreprof.analysis.parallelism import ParallelismReport
from gyreprof.cli import main as cli_main

pytest.importorskip("gymnasium")
pytest.importorskip("threadpoolctl")

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "helpers" / "vec_threads.py"
SRC = Path(gp.__file__).resolve().parent.parent
OBSERVE_S = 1.0
START_TIMEOUT_S = 180.0

sys.path.insert(0, str(HERE / "helpers" / "run_scripts"))
from runhelp import gyreprof_popen, stop_loop  # noqa: E402

# real processes for seconds each: run by .ci/run's second step
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }


def _ready(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The program's READY line (read line by line: a wait on the event, no sleep)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("READY "):
            info: dict[str, Any] = json.loads(line[len("READY ") :])
            return info
    _, err = proc.communicate(timeout=60)
    raise AssertionError(f"the program ended before it was ready (rc {proc.returncode}):\n{err}")


def _wait_registered(pid: int, envs: dict[str, int], workers: int) -> None:
    """Until the census sees ``workers`` env_worker processes and ``envs`` main envs."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        c = gp.census(pid, interval_s=0)
        if c.roles().get("env_worker", 0) == workers and c.main_envs() == envs:
            return
        assert time.monotonic() < deadline, str(c)
        time.sleep(0.05)


@contextlib.contextmanager
def program(
    tmp_path: Path, *args: str, under_run: bool = False
) -> Iterator[tuple[dict[str, Any], subprocess.Popen[str]]]:
    """Start vec_threads.py (under ``gyreprof run`` when asked); stop it on the way out."""
    stop = tmp_path / f"stop-{time.monotonic_ns()}"
    command = (sys.executable, str(PROGRAM), str(stop), *args)
    if under_run:
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = _env()["PYTHONPATH"]
        try:
            proc, _ = gyreprof_popen(tmp_path, *command)
        finally:
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old
    else:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )
    try:
        yield _ready(proc), proc
    finally:
        stop_loop(proc, stop)


def _check(info: dict[str, Any], workers: int = 4, main_envs: int = 1) -> ParallelismReport:
    envs = {"env_worker": main_envs} if main_envs else {}
    _wait_registered(info["pid"], envs, workers)
    return gp.check_parallelism(info["pid"], expected={"env_worker": workers}, sample_s=OBSERVE_S)


def _answer(r: ParallelismReport) -> tuple[Any, ...]:
    """What must not change when the same program runs under ``gyreprof run``."""
    return (
        r.ok,
        r.observed,
        r.main_envs,
        r.kinds(),
        r.warning_kinds(),
        [n.split(" (pids")[0] for n in r.notes if n.startswith("idle thread pool")],
    )


def test_idle_blas_pools_are_mentioned_not_counted(tmp_path: Path) -> None:
    # naive rule: 4 workers x pool size 2 (or more) > 2 cores -> "oversubscribed", exit 1
    with program(tmp_path, "--num-envs", "4", "--cpus", "2") as (info, _):
        report = _check(info)
    assert report.ok and report.exit_code == 0, str(report)
    assert "oversubscription" not in report.warning_kinds(), str(report)
    for w in report.threads_per_worker.values():
        assert w.source == "busy threads" and w.threads == 0, str(report)
        assert w.pool is not None and w.pool >= 2  # numpy's pool is loaded, sized > 1
        assert w.ran is not None and w.ran <= 1  # only the worker's main thread ran
    [idle] = [n for n in report.notes if n.startswith("idle thread pool")]
    assert "4 env_worker processes" in idle and "not counted" in idle
    assert "oversubscribed" not in str(report)


def test_busy_threads_are_oversubscription_as_a_warning(tmp_path: Path) -> None:
    with program(tmp_path, "--num-envs", "4", "--busy", "2", "--cpus", "2") as (info, _):
        report = _check(info)
        code = cli_main(
            ["check", str(info["pid"]), "--expect", "env_worker=4", "--sample", str(OBSERVE_S)]
        )
    # the parallelism took effect: 4 workers run; oversubscription is a warning beside it
    assert report.ok and report.exit_code == 0 and code == 0, str(report)
    [over] = [w for w in report.warnings if w.kind == "oversubscription"]
    assert over.data["threads_total"] == 8, str(report)
    assert "4 env_worker processes × 2 threads (busy threads) = 8 threads" in over.message
    assert "warning: oversubscribed" in str(report)
    assert all(w.threads == 2 for w in report.threads_per_worker.values()), str(report)


def test_declared_num_threads(tmp_path: Path) -> None:
    args = ("--num-envs", "2", "--cpus", "2", "--declare", "1")
    with program(tmp_path, *args) as (info, _):
        quiet = _check(info, workers=2)
    assert quiet.ok and not quiet.warnings, str(quiet)
    assert {w.declared for w in quiet.threads_per_worker.values()} == {1}
    with program(tmp_path, *args, "--busy", "2") as (info, _):
        busy = _check(info, workers=2)
    [declared] = [w for w in busy.warnings if w.kind == "declared"]
    assert "declared num_threads=1 but ran up to 2 busy threads" in declared.message
    assert sorted(declared.data["pids"]) == sorted(info["workers"])


def test_same_answer_under_gyreprof_run(tmp_path: Path) -> None:
    # under the launcher each worker holds gyreprof's signal thread and gyreprof registers
    # the envs itself: neither may change the answer
    args = ("--num-envs", "4", "--cpus", "2", "--declare", "1")
    with program(tmp_path, *args) as (info, _):
        plain = _check(info)
    with program(tmp_path, *args, under_run=True) as (info, _):
        launched = _check(info)
        threads = gp.census(info["pid"], interval_s=0).workers("env_worker")[0].threads
    assert threads is not None and any(t.own for t in threads)  # the launcher's thread is there
    assert plain.ok, str(plain)
    assert _answer(launched) == _answer(plain), f"{plain}\n---\n{launched}"
    assert any(n.startswith("gyreprof's own threads") for n in launched.notes), str(launched)
    for w in launched.threads_per_worker.values():
        assert w.own is not None and w.own >= 1


@pytest.mark.parametrize("register", [True, False])
def test_main_process_stepping_a_sync_vector_env_inline(tmp_path: Path, register: bool) -> None:
    # register: the user's factories register 2 envs and gyreprof run registers them too
    # (naive: 4 envs); not: gyreprof run's one registration of a 1-env SyncVectorEnv
    # (naive: "1 env_worker process", the main program taken for a worker)
    envs = 2 if register else 1
    args = ["--vector", "sync", "--num-envs", str(envs)] + ([] if register else ["--no-register"])
    with program(tmp_path, *args, under_run=True) as (info, _):
        _wait_registered(info["pid"], {"env_worker": envs}, 0)
        report = gp.check_parallelism(info["pid"], expected={"env_worker": envs}, sample_s=0.2)
    assert report.observed == {"env_worker": 0} and report.main_envs == {"env_worker": envs}
    assert not report.ok and "count" in report.kinds()
    assert f"main process, envs inline: {envs} env" in report.describe("env_worker")
    root = report.census.root
    assert root is not None and root.role is None and root.main_envs is not None
    assert "main process, envs inline" in str(report.census)


def test_gyreprof_runs_own_registration_counts_the_same_envs(tmp_path: Path) -> None:
    """gyreprof run registers the envs the user's factory registers too: in a worker it
    registers first (at worker start), in the main process after the vector env's
    ``__init__``. Neither order may double the envs, replace the user's role or config,
    or make torch's pool size (which the run records as num_threads) a declaration."""
    from gyreprof.analysis.parallelism import unregister_worker

    reg = tmp_path / "reg"
    run = {"vector_env": "gymnasium.AsyncVectorEnv", "registered_by": "gyreprof run"}
    try:
        first = gp.register_worker("env_worker", registry=reg, num_threads=8, **run)
        assert first.registrations == 1 and first.declared_threads() is None
        user = gp.register_worker("env_worker", registry=reg, num_threads=1)
        assert user.registrations == 1 and user.declared_threads() == 1
        assert "registered_by" not in user.config
        unregister_worker(reg)
        mine = gp.register_worker("sampler", registry=reg, num_threads=2)
        again = gp.register_worker("env_worker", registry=reg, num_threads=8, **run)
        assert (again.role, again.config, again.registrations) == ("sampler", mine.config, 1)
        assert again.declared_threads() == 2
        for _ in range(3):  # a SyncVectorEnv of 4: the user's 4 factories, then the run's 4
            gp.register_worker("sampler", registry=reg, num_threads=2)
        for _ in range(3):
            last = gp.register_worker("env_worker", registry=reg, **run)
        assert last.registrations == 4 and last.role == "sampler"
    finally:
        unregister_worker(reg)
