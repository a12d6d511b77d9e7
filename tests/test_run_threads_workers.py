"""``gyreprof run``: a threaded sampler killed mid-run is seen whole; vector-env workers
register themselves (role ``env_worker``) and are checked from outside while they run."""

from __future__ import annotations

import pytest

from run_scripts.runhelp import check_format, count, gyreprof_run, printed, script


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
