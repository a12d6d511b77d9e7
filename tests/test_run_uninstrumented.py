"""A command whose Python lacks what the profilers need (numpy, psutil) runs untouched.

``gyreprof run`` gives a Python that cannot import gyreprof a folder holding gyreprof
alone. Such a Python may import gyreprof and still lack numpy or psutil: the profilers
are made lazily, at the first recorded call, so the missing import used to surface in
the middle of the user's first ``queue.get`` (a ``ModuleNotFoundError`` raised into the
user's code, the command ending with exit code 1). Now the process is left alone, says
so on stderr and in the run's folder, and the report names the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.run_scripts.runhelp import gyreprof_run, script


def _bare_python(tmp_path: Path) -> str:
    """A virtual environment with nothing installed: no numpy, no psutil, no gyreprof."""
    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    probe = subprocess.run(
        [str(python), "-c", "import numpy"], capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0  # the point of the test: this Python has no numpy
    return str(python)


def test_a_python_without_numpy_runs_its_loop_untouched_and_the_report_says_why(
    tmp_path: Path,
) -> None:
    python = _bare_python(tmp_path)
    proc, data = gyreprof_run(tmp_path, python, script("startup_queue.py"), "0.05", "5", "0.01")
    assert proc.returncode == 0, proc.stderr[-3000:]  # the command's own exit code
    assert "CLOCK " in proc.stdout and '"items": 5' in proc.stdout  # its loop ran to its end
    assert "ModuleNotFoundError" not in proc.stderr, proc.stderr[-3000:]
    assert "is not instrumented:" in proc.stderr and "cannot import numpy" in proc.stderr
    assert data is not None
    assert data["verdict"] is None and data["trainer"] is None
    (first,) = [n for n in data["notes"] if n.startswith("nothing recorded")]
    assert "could not be instrumented" in first and "cannot import numpy" in first
    assert "Mark the phases by hand" not in first  # the hand-marking hint leads nowhere here


def test_the_bootstrap_loads_neither_numpy_nor_the_core_until_a_thread_records(
    tmp_path: Path,
) -> None:
    """What lets :func:`bootstrap.lacking` run first, and keeps a process that records
    nothing cheap: importing the bootstrap and installing every hook imports no numpy and
    no compiled core (``state.ThreadState``, whose base class is compiled, loads on first
    use); the first recorded wait loads them."""
    code = (
        "import sys\n"
        "from gyreprof.integrations._auto import bootstrap, state\n"
        "bootstrap.install_all()\n"
        "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('gyreprof._core')))\n"
        "t = state.thread_state()\n"
        "print(type(t) is state.ThreadState, 'numpy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.splitlines()
    assert out == ["[]", "True True"], out
