"""Shared by the ``gyreprof run`` tests: run a command under ``gyreprof run`` and read its JSON."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

import gyreprof as gp

SCRIPTS = Path(__file__).resolve().parent
RUN_KEYS = {
    "format",
    "verdict",
    "wait",
    "sampler",
    "trainer",
    "processes",
    "exit_code",
    "notes",
    "rollouts",  # the HTTP rollout requests (gyreprof.rollouts/1), null when none
    "start_up",  # the trainer's first step told apart as start-up, null when not
}


def _argv_env(
    out: Path, command: tuple[str, ...], options: tuple[str, ...], env: dict[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    argv = [sys.executable, "-m", "gyreprof", "run", "--json", str(out), *options, "--", *command]
    return argv, {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}


def gyreprof_run(
    tmp_path: Path,
    *command: str,
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``gyreprof run --json FILE OPTIONS -- COMMAND``; the completed process and the JSON."""
    out = tmp_path / "run.json"
    argv, full_env = _argv_env(out, command, options, env)
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=tmp_path
    )
    data = json.loads(out.read_text()) if out.exists() else None
    return proc, data


def gyreprof_popen(
    tmp_path: Path, *command: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], Path]:
    """``gyreprof run --json FILE -- COMMAND`` started, not waited for (stdin from
    /dev/null, stdout and stderr piped, text); the process and where its JSON will be."""
    out = tmp_path / "run.json"
    argv, full_env = _argv_env(out, command, (), env)
    proc = subprocess.Popen(
        argv,
        # no terminal on stdin, whatever runs the tests: the command then has a process
        # group of its own, and a signal to the launcher reaches it the same way each time
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    return proc, out


def signal_when_ready(
    tmp_path: Path,
    *command: str,
    sig: int,
    child: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """``gyreprof run`` of ``command`` (which prints READY once it runs), sent ``sig``
    after READY: to the launcher, or to its child process whose command line holds
    ``child``. Asserts the run ends by that signal; its JSON record and its stderr."""
    proc, out = gyreprof_popen(tmp_path, *command, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        if child is None:
            proc.send_signal(sig)
        else:
            (target,) = [
                c
                for c in psutil.Process(proc.pid).children(recursive=True)
                if child in " ".join(c.cmdline())
            ]
            target.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err[-3000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data, err


def sigterm_when_ready(
    tmp_path: Path, *command: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """:func:`signal_when_ready` with SIGTERM to the launcher; the JSON record."""
    return signal_when_ready(tmp_path, *command, sig=signal.SIGTERM, env=env)[0]


def stop_loop(proc: subprocess.Popen[str], stop: Path) -> None:
    """Stop a helper loop that runs until the file ``stop`` exists: create it and wait;
    after 60 s kill the process and its children."""
    stop.touch()
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
        proc.kill()
        proc.communicate()


def script(name: str) -> str:
    return str(SCRIPTS / name)


def printed(stdout: str, key: str) -> int:
    """The number after ``key`` in a script's output (e.g. TIMESTEPS_TAKEN 2048)."""
    for line in stdout.splitlines():
        if line.startswith(key + " "):
            return int(line.split()[1])
    raise AssertionError(f"{key} not printed; stdout was:\n{stdout}")


def clock(stdout: str) -> dict[str, Any]:
    """The script's own clock: the JSON after ``CLOCK `` on the one line that has it."""
    lines = [x for x in stdout.splitlines() if x.startswith("CLOCK ")]
    assert len(lines) == 1, f"not one CLOCK line; stdout was:\n{stdout}"
    out: dict[str, Any] = json.loads(lines[0][len("CLOCK ") :])
    return out


def check_format(data: dict[str, Any]) -> None:
    """The ``gyreprof.run/1`` keys and their types."""
    assert set(data) == RUN_KEYS, sorted(data)
    assert data["format"] == "gyreprof.run/1"
    for p in data["processes"]:
        assert {"pid", "role", "contributed"} <= set(p)
        assert isinstance(p["pid"], int) and isinstance(p["contributed"], bool)
    if data["sampler"] is not None:
        assert set(data["sampler"]["phases"]) == {
            "env_step",
            "env_reset",
            "step_async",
            "step_wait",
            "fwd",
            "generate",
        }
    if data["trainer"] is not None:
        assert set(data["trainer"]["phases"]) == {"wait", "compute"}
    if data["verdict"] is not None:
        assert data["verdict"]["bound"] in ("trainer", "sampler", "balanced", "unknown")
    if data["wait"] is not None:
        assert 0.0 <= data["wait"]["ratio"] <= 1.0
    if data["rollouts"] is not None:
        assert data["rollouts"]["format"] == "gyreprof.rollouts/1"


def count(data: dict[str, Any], side: str, phase: str) -> int:
    return int(data[side]["phases"][phase]["count"])


def worker_counts(save_dir: Path, phase: str = "env_step") -> dict[int, int]:
    """env-step count per env_worker process, from ``--save DIR``'s raw snapshots."""
    out = {}
    for path in save_dir.glob("env_worker-*.sampler.snap"):
        pid = int(path.name.split("-")[1].split(".")[0])
        snap = gp.Snapshot.from_bytes(path.read_bytes())
        out[pid] = snap.summary().phases[phase].count
    return out
