"""``gyreprof run``: a threaded sampler killed mid-run is seen whole; vector-env workers
register themselves (role ``env_worker``) and are checked from outside while they run."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import pytest

import gyreprof as gp

from helpers.run_scripts.runhelp import (
    check_format,
    count,
    gyreprof_popen,
    gyreprof_run,
    printed,
    script,
)
from helpers.waiting import wait_for

pytestmark = pytest.mark.slow  # real SB3/TorchRL workers under `gyreprof run`: .ci/run's 2nd step


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_killed_threaded_sampler_is_seen_whole(tmp_path, method: str) -> None:
    n = 120
    proc, data = gyreprof_run(tmp_path, script("threads_killed.py"), str(n), method)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    check_format(data)
    killed = printed(proc.stdout, "KILLED")
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[killed]["contributed"] and by_pid[killed]["source"] == "live segment"
    assert by_pid[killed]["role"] == "env_worker"
    # three threads, each its own profiler and segment: all of them, none twice
    assert count(data, "sampler", "env_step") == 3 * n


def _kinds(report: Any) -> set[str]:
    return {f.kind for f in report.details}


def _run_until_checked(tmp_path, kind: str) -> tuple[Any, dict[str, Any], int]:
    """``gyreprof run`` the unmodified vec_wait.py; check its tree from outside while it
    waits; then let it finish. (the check report, the run's JSON, the script's pid)"""
    go = tmp_path / "go"
    proc, out = gyreprof_popen(tmp_path, sys.executable, script("vec_wait.py"), kind, str(go))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:1] == ["READY"], proc.stderr.read() if proc.stderr else ""
        pid = int(line[1])
        expected = {"env_worker": 4}
        report = gp.check_parallelism(pid, expected=expected)

        def registered() -> bool:  # a worker's registration may land just after READY
            nonlocal report
            report = gp.check_parallelism(pid, expected=expected)
            return not _kinds(report) & {"count", "registry"}

        if kind != "sync":
            with contextlib.suppress(AssertionError):  # the caller asserts on the report
                wait_for(registered, "the workers' registrations", timeout_s=30)
        go.touch()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    data = json.loads(out.read_text())
    check_format(data)
    return report, data, pid


@pytest.mark.parametrize("kind", ["async", "sb3"])
def test_vector_env_workers_register_themselves(tmp_path, kind: str) -> None:
    report, data, pid = _run_until_checked(tmp_path, kind)
    # the worker count is right (on a small machine an oversubscription finding may stand)
    assert not _kinds(report) & {"count", "inline", "registry"}, str(report)
    assert report.observed["env_worker"] == 4
    text = str(report)
    assert "4 env_worker processes (pids" in text, text
    roles = [p["role"] for p in data["processes"]]
    assert roles.count("env_worker") == 4, data["processes"]
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[pid]["role"] == "main"
    if kind == "async":  # the env built in the parent to read the spaces: not a worker
        assert "and 1 env built in the main process" in text, text
        assert report.main_envs == {"env_worker": 1}
    else:  # SubprocVecEnv builds no env in the parent
        assert not report.main_envs


def test_sync_vector_env_is_flagged_no_worker_processes(tmp_path) -> None:
    report, data, pid = _run_until_checked(tmp_path, "sync")
    assert not report.ok and "count" in _kinds(report)
    assert report.main_envs == {"env_worker": 4}
    assert report.observed.get("env_worker", 0) == 0
    text = str(report)
    assert "no worker processes" in text, text
    assert "4 envs built in the main process" in text, text
    assert [p["role"] for p in data["processes"]] == ["main"]


def test_torchrl_parallel_env_workers_register_themselves(tmp_path) -> None:
    proc, data = gyreprof_run(tmp_path, script("torchrl_parallel_check.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert printed(proc.stdout, "OBSERVED") == 2
    findings = next(ln for ln in proc.stdout.splitlines() if ln.startswith("FINDINGS "))
    assert "count" not in findings and "registry" not in findings, findings
    assert [p["role"] for p in data["processes"]].count("env_worker") == 2
