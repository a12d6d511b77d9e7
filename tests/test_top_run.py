"""``gyreprof top`` on a real ``gyreprof run``: panels only for the roles a process has,
rates from what the launcher records, unused phases hidden, 80x24 with the slowest worker
named, and ``q`` quits the interactive view (driven through a pseudo-terminal)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gyreprof as gp

pytest.importorskip("gymnasium")

HERE = Path(__file__).resolve().parent
LOOP = HERE / "helpers" / "top_loop.py"
SRC = Path(gp.__file__).resolve().parent.parent

sys.path.insert(0, str(HERE / "helpers" / "run_scripts"))
from runhelp import gyreprof_popen, stop_loop  # noqa: E402

# real processes for seconds each: run by .ci/run's second step
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }


@contextlib.contextmanager
def launched(tmp_path: Path, *args: str) -> Iterator[dict[str, Any]]:
    """``gyreprof run`` of top_loop.py; its READY line; stopped on the way out."""
    stop = tmp_path / "stop"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = _env()["PYTHONPATH"]
    try:
        proc, _ = gyreprof_popen(tmp_path, sys.executable, str(LOOP), str(stop), *args)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    try:
        assert proc.stdout is not None
        info: dict[str, Any] | None = None
        for line in proc.stdout:
            if line.startswith("READY "):
                info = json.loads(line[len("READY ") :])
                break
        if info is None:
            _, err = proc.communicate(timeout=60)
            raise AssertionError(f"the loop ended before it was ready:\n{err}")
        yield info
    finally:
        stop_loop(proc, stop)


def _top(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", "top", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )


def test_top_once_under_the_launcher(tmp_path: Path) -> None:
    with launched(tmp_path) as info:
        out = _top(str(info["pid"]), "--once", "--interval", "0.5")
        data = json.loads(_top(str(info["pid"]), "--once", "--interval", "0", "--json").stdout)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    heads = [ln for ln in text.splitlines() if ln.startswith("pid ")]
    # one panel: the sampler; the trainer segment gyreprof run made recorded nothing
    assert len(heads) == 1 and ":sampler" in heads[0], text
    assert "not shown, nothing recorded: 1 trainer segment(s)" in text, text
    assert "warming up" not in text and "step 0 " not in text, text
    # rated by the env steps the launcher records, not by step marks it never makes
    m = re.search(r"env steps (\d+) \| ([\d.]+)(k?)/s last", heads[0])
    assert m is not None, heads[0]
    assert int(m.group(1)) >= 200 and float(m.group(2)) > 0, heads[0]
    # unused phases hidden; no (step) row for a loop that marks none
    rows = {ln.split()[0] for ln in text.splitlines() if ln[:1].isalpha()}
    assert "env_step" in rows and not rows & {"fwd", "step_async", "step_wait", "(step)"}, text
    assert "(step)" not in text
    # the JSON record keeps every segment and phase (data, not rendering)
    assert len(data["processes"]) == 2


def test_merged_view_fits_80x24_and_names_the_slowest_worker(tmp_path: Path) -> None:
    with launched(tmp_path, "--async", "4") as info:
        out = _top(str(info["pid"]), "--once", "--interval", "0.5", "--size", "80x24")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.rstrip("\n").splitlines()
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines), out.stdout
    assert lines[0].startswith("merged: 5 segments | env steps"), out.stdout
    m = re.search(r"slowest worker: pid (\d+) at ", out.stdout)
    assert m is not None and int(m.group(1)) in info["workers"], out.stdout
    assert ":trainer" not in out.stdout  # no panel, no line for an empty trainer segment
    assert "not shown, nothing recorded: 5 trainer segment(s)" in out.stdout


def test_q_quits_the_interactive_view(tmp_path: Path) -> None:
    pytest.importorskip("rich")
    with launched(tmp_path) as info:
        master, slave = os.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gyreprof", "top", str(info["pid"]), "--interval", "0.3"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**_env(), "TERM": "xterm", "COLUMNS": "80", "LINES": "24"},
            close_fds=True,
        )
        os.close(slave)
        try:
            seen = b""
            deadline = time.monotonic() + 120
            while b"gyreprof-run-" not in seen:  # the view is up
                assert time.monotonic() < deadline and proc.poll() is None, seen[-2000:]
                ready, _, _ = select.select([master], [], [], 1.0)
                if ready:
                    seen += os.read(master, 65536)
            os.write(master, b"q")
            deadline = time.monotonic() + 30
            while proc.poll() is None:  # keep the pty drained until it exits
                assert time.monotonic() < deadline, "q did not quit gyreprof top"
                ready, _, _ = select.select([master], [], [], 0.2)
                if ready:
                    with contextlib.suppress(OSError):
                        os.read(master, 65536)
            assert proc.returncode == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
