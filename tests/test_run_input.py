"""``gyreprof run``: bad input, crashes, signals, multiprocessing children that leave through
``os._exit`` or are killed, gymnasium vector envs, nothing recognised, unknown versions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.run_scripts.runhelp import (
    check_format,
    count,
    gyreprof_popen,
    gyreprof_run,
    printed,
    script,
    sigterm_when_ready,
    worker_counts,
)


def _env_with_path(*dirs: Path) -> dict[str, str]:
    old = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join([*(str(d) for d in dirs), old])}


# ------------------------------------------------------------------ the command itself


def test_command_not_found_exits_127(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, "no-such-command-gyreprof-test", "--flag")
    assert proc.returncode == 127
    assert "no-such-command-gyreprof-test: command not found" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert data is None


def test_missing_script_exits_127(tmp_path: Path) -> None:
    proc, _ = gyreprof_run(tmp_path, str(tmp_path / "missing.py"))
    assert proc.returncode == 127
    assert "missing.py: no such script" in proc.stderr


def test_no_command_is_a_usage_error(tmp_path: Path) -> None:
    proc, _ = gyreprof_run(tmp_path)
    assert proc.returncode == 2
    assert "give the command to profile after --" in proc.stderr


@pytest.mark.parametrize("option", ["--json", "--html"])
def test_unwritable_output_fails_before_the_command_starts(tmp_path: Path, option: str) -> None:
    marker = tmp_path / "ran"
    bad = tmp_path / "no" / "such" / "dir" / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gyreprof", "run", option, str(bad), "--", sys.executable]
        + ["-c", f"open({str(marker)!r}, 'w').close()"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{option} {bad}: cannot write there (no such directory); nothing was run" in (
        proc.stderr
    )
    assert not marker.exists()


def test_crash_keeps_traceback_and_exit_code_with_partial_report(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, script("crash.py"), "300", "raise")
    assert proc.returncode == 1
    assert "RuntimeError: boom from the training script" in proc.stderr
    assert proc.stderr.index("Traceback") < proc.stderr.index("gyreprof run:")
    assert data is not None
    check_format(data)
    assert data["exit_code"] == 1
    assert count(data, "sampler", "env_step") == 300


def test_exit_code_passes_through(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, script("crash.py"), "50", "exit3")
    assert proc.returncode == 3
    assert data is not None and data["exit_code"] == 3
    assert count(data, "sampler", "env_step") == 50


def test_python_m_alias_runs_a_script_with_this_interpreter(tmp_path: Path) -> None:
    # a first argument ending in .py runs with sys.executable, no "python" needed
    proc, data = gyreprof_run(tmp_path, script("gym_loop.py"), "400")
    assert proc.returncode == 0, proc.stderr
    assert data is not None
    check_format(data)
    assert count(data, "sampler", "env_step") == 400
    assert data["trainer"] is None and data["wait"] is None
    assert data["verdict"]["bound"] == "unknown"  # no trainer loop to judge the wait from
    assert [p["role"] for p in data["processes"]] == ["main"]


# ------------------------------------------------------------------ nothing recognised


def test_nothing_recognised_says_so_and_shows_how_to_mark_by_hand(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, sys.executable, "-c", "print('plain python')")
    assert proc.returncode == 0
    assert "plain python" in proc.stdout
    assert "nothing recognised: 1 Python process(es) ran" in proc.stderr
    assert 'with tp.phase("wait")' in proc.stderr
    assert data is not None
    check_format(data)
    assert data["verdict"] is None and data["sampler"] is None and data["trainer"] is None
    assert any("nothing recognised" in n for n in data["notes"])


def test_non_python_command_is_explained(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, "true")
    assert proc.returncode == 0
    assert "no Python process of this command was instrumented" in proc.stderr
    assert data is not None and data["processes"] == []


# ------------------------------------------------------------------ versions, sitecustomize


def test_unknown_library_version_warns_and_the_run_goes_on(tmp_path: Path) -> None:
    # a stand-in torchrl whose version the instrumentation does not know
    fake = tmp_path / "fake"
    (fake / "torchrl").mkdir(parents=True)
    (fake / "torchrl" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    user = tmp_path / "train.py"
    user.write_text(f"import torchrl\nexec(open({script('gym_loop.py')!r}).read())\n")
    proc, data = gyreprof_run(tmp_path, str(user), env=_env_with_path(fake))
    assert proc.returncode == 0, proc.stderr
    msg = "torchrl 0.0.1 is not a version this instrumentation knows"
    assert msg in proc.stderr
    assert data is not None
    assert any(msg in n for n in data["notes"])
    assert count(data, "sampler", "env_step") == 500  # gymnasium is still instrumented


def test_an_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    marker = tmp_path / "sitecustomize-ran"
    (site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc, data = gyreprof_run(tmp_path, script("gym_loop.py"), "100", env=_env_with_path(site))
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
    assert data is not None and count(data, "sampler", "env_step") == 100


# ------------------------------------------------------------------ every process contributes


@pytest.mark.slow  # three real multiprocessing runs under `gyreprof run`
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_children_contribute_however_they_leave(
    tmp_path: Path, method: str
) -> None:
    save = tmp_path / "raw"
    proc, data = gyreprof_run(
        tmp_path, script("mp_children.py"), method, options=("--save", str(save))
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    check_format(data)
    pids = {line.split()[1]: int(line.split()[2]) for line in proc.stdout.splitlines()}
    by_pid = {p["pid"]: p for p in data["processes"]}
    source = {name: by_pid[pid]["source"] for name, pid in pids.items() if pid in by_pid}
    assert source["returns"] == "mp-exit"  # saved before multiprocessing's os._exit
    assert source["os_exit"] == "os-exit"  # os._exit in the target: it saves first
    assert source["killed"] == "live segment"  # SIGKILL: read from its segment
    assert by_pid[pids["erased"]]["contributed"] is False
    assert f"did not contribute: child {pids['erased']}" in proc.stderr
    counts = worker_counts(save)
    assert counts[pids["returns"]] == 200
    assert counts[pids["os_exit"]] == 150
    assert counts[pids["killed"]] == 100
    assert count(data, "sampler", "env_step") == 450
    assert "3 of 4 processes contributed" in proc.stderr


def test_async_vector_env_send_wait_and_worker_steps(tmp_path: Path) -> None:
    save = tmp_path / "raw"
    n = 100
    proc, data = gyreprof_run(
        tmp_path, script("async_vec.py"), str(n), options=("--save", str(save))
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    check_format(data)
    assert printed(proc.stdout, "VECTOR_STEPS") == n
    # the parent sends and waits once per vector step
    assert count(data, "sampler", "step_async") == n
    assert count(data, "sampler", "step_wait") == n
    workers = worker_counts(save)
    assert len(workers) == 3
    resets = {pid: c for pid, c in worker_counts(save, "env_reset").items() if pid in workers}
    # gymnasium 1.x autoresets on the step after an episode ends (a reset, not a step):
    # each worker's steps plus its resets after the first make exactly n
    for pid, steps in workers.items():
        assert steps + resets[pid] - 1 == n
    assert [p["role"] for p in data["processes"]].count("env_worker") == 3
    assert all(p["contributed"] for p in data["processes"])


# ------------------------------------------------------------------ signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_gyreprof_run_reaches_the_command_and_the_report_is_printed(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, out = gyreprof_popen(tmp_path, script("forever.py"))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig
    assert f"received {sig.name}" in err
    data = json.loads(out.read_text())
    check_format(data)
    assert count(data, "sampler", "env_step") >= 200
    assert data["processes"][0]["contributed"]


def test_sigterm_saves_the_run_when_the_program_has_its_own_autosave(tmp_path: Path) -> None:
    """The program's Profiler(autosave=...) takes SIGTERM first: both it and the run save
    (the run's record says it was saved on SIGTERM, not read back from a live segment)."""
    own = tmp_path / "own.snap"
    data = sigterm_when_ready(tmp_path, script("forever.py"), "autosave", str(own))
    main = data["processes"][0]
    assert main["contributed"] and main["source"] == "sigterm", main
    assert count(data, "sampler", "env_step") >= 200
    assert own.exists()


def test_threads_each_record_and_are_merged(tmp_path: Path) -> None:
    # one Profiler has one writer thread: each thread gets its own, merged at exit
    proc, data = gyreprof_run(tmp_path, script("threads.py"), "300")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert count(data, "sampler", "env_step") == 600
    assert "Error" not in proc.stderr


def test_html_and_save(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    html = tmp_path / "run.html"
    save = tmp_path / "raw"
    proc, data = gyreprof_run(
        tmp_path, script("gym_loop.py"), "200", options=("--html", str(html), "--save", str(save))
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    assert "env_step" in html.read_text()
    index = json.loads((save / "processes.json").read_text())
    assert [p["role"] for p in index] == ["main"]
    assert sorted(p.name for p in save.glob("*.snap")) == [
        f"main-{index[0]['pid']}.sampler.snap",
        f"main-{index[0]['pid']}.trainer.snap",
    ]
