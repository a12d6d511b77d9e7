"""The start-up banner: content, ASCII-only output, flushing, faulthandler."""

from __future__ import annotations

import io
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gyreprof as gp

SRC = Path(gp.__file__).resolve().parent.parent


def _run(code: str, *argv: str, **env_extra: str) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env.pop("PYTHONUNBUFFERED", None)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, timeout=60, env=env
    )


def test_banner_lists_the_facts_and_returns_them(tmp_path: Path) -> None:
    out = io.StringIO()
    log = tmp_path / "run.log"
    text = gp.banner(log=log, stream=out, extra={"rollout server": "http://127.0.0.1:8000"})
    assert out.getvalue() == text
    assert log.read_text() == text
    assert f"{os.getpid()} (parent {os.getppid()})" in text
    assert os.getcwd() in text
    assert platform.python_version() in text
    assert f"numpy                  : {np.__version__}" in text or np.__version__ in text
    assert "gyreprof" in text and gp.__version__ in text
    for var in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        assert var in text
    assert "cpus" in text and "affinity" in text
    assert "memory" in text and "GiB" in text
    assert "rollout server" in text and "http://127.0.0.1:8000" in text
    # a second banner appends to the log
    gp.banner(log=log, stream=io.StringIO())
    assert log.read_text().count("gyreprof start-up banner") == 2


def test_banner_never_imports_torch() -> None:
    res = _run(
        "import sys, io, gyreprof as gp; gp.banner(stream=io.StringIO()); "
        "print('torch' in sys.modules)"
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith(b"False")


def test_ascii_only_on_a_non_utf8_console(tmp_path: Path) -> None:
    weird = tmp_path / "d\u00e9j\u00e0-vu"
    weird.mkdir()
    log = weird / "run.log"
    code = (
        "import os, sys, gyreprof as gp; os.chdir(sys.argv[1]); "
        "gp.banner(log='run.log', extra={'note': 'caf\\u00e9 \\u2603'})"
    )
    res = _run(
        code,
        str(weird),
        "\u00fcber-arg",
        LC_ALL="C",
        LANG="C",
        PYTHONIOENCODING="ascii",
        CUDA_VISIBLE_DEVICES="0,1",
    )
    assert res.returncode == 0, res.stderr.decode("ascii", "replace")
    res.stdout.decode("ascii")  # raises if anything is not ASCII
    assert b"CUDA_VISIBLE_DEVICES   : 0,1" in res.stdout
    assert b"\\xe9" in res.stdout or b"\\udc" in res.stdout  # escaped, not dropped
    assert b"\\u2603" in res.stdout
    logged = log.read_bytes()
    logged.decode("ascii")
    assert logged == res.stdout


def test_banner_is_flushed_before_a_hard_exit() -> None:
    # stdout is a pipe (block-buffered); os._exit skips every flush but the banner's own
    res = _run("import os, gyreprof as gp; gp.banner(); os._exit(7)")
    assert res.returncode == 7
    assert b"gyreprof start-up banner" in res.stdout
    assert b"block-buffered" in res.stdout  # and it warns about the buffering


def test_faulthandler_option_dumps_stacks_on_sigusr1_and_fatal_signals() -> None:
    code = (
        "import os, signal, faulthandler, gyreprof as gp\n"
        "gp.banner(faulthandler=True)\n"
        "def where_am_i():\n"
        "    if hasattr(signal, 'SIGUSR1'):\n"
        "        os.kill(os.getpid(), signal.SIGUSR1)\n"
        "    print('still running', flush=True)\n"
        "    faulthandler._sigsegv()\n"
        "where_am_i()\n"
    )
    res = _run(code)
    assert res.returncode != 0
    assert b"faulthandler" in res.stdout and b"on (fatal signals -> stderr" in res.stdout
    assert b"still running" in res.stdout
    err = res.stderr.decode("utf-8", "replace")
    assert "Fatal Python error" in err
    assert "where_am_i" in err
    if sys.platform != "win32":
        assert err.count("where_am_i") >= 2  # once for SIGUSR1, once for SIGSEGV


def test_bad_log_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="directory"):
        gp.banner(log=tmp_path, stream=io.StringIO())
    with pytest.raises(ValueError, match="does not exist"):
        gp.banner(log=tmp_path / "missing" / "run.log", stream=io.StringIO())


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rollout_client.py"


def test_rollout_client_example_counts_retries_and_prints_banner_and_summary(
    tmp_path: Path,
) -> None:
    log = tmp_path / "client.log"
    res = _run(
        "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
        str(EXAMPLE),
        "--requests",
        "120",
        "--fault-rate",
        "0.1",
        "--seed",
        "3",
        "--log",
        str(log),
    )
    out = res.stdout.decode("ascii")
    assert res.returncode == 0, res.stderr.decode("utf-8", "replace")
    # the banner names the target, the timeout and the retry settings
    assert "rollout target" in out and "http://127.0.0.1:" in out
    assert "request timeout" in out and "retries" in out
    assert "rollout target" in log.read_text()
    # the summary shows the request phase and the counters with their rate
    assert "request" in out and "decode" in out
    counters = next(line for line in out.splitlines() if line.startswith("counters:"))
    assert "retry" in counters and "/s" in counters
    last = out.strip().splitlines()[-1]
    retries = int(last.split("; ")[1].split(" retries")[0])
    assert retries > 0
    assert "stalled" not in res.stderr.decode("utf-8", "replace")


def test_torch_cuda_build_is_read_without_importing_torch(tmp_path: Path) -> None:
    # A stand-in torch installation on disk whose import would fail loudly: the banner
    # must read the version from metadata and the CUDA build from torch/version.py.
    site = tmp_path / "site"
    pkg = site / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the banner imported torch')\n")
    (pkg / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.1.0'\ncuda: Optional[str] = '12.1'\n"
    )
    info = site / "torch-2.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.1.0\n")
    code = (
        "import sys, gyreprof as gp; sys.path.insert(0, sys.argv[1]); gp.banner(); "
        "assert 'torch' not in sys.modules"
    )
    res = _run(code, str(site))
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.decode().splitlines() if x.startswith("torch "))
    assert "2.1.0 (CUDA build: 12.1)" in line
    assert "not queried" in line
