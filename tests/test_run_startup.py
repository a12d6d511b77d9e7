"""``gyreprof run``'s start-up trail, ``--startup-timeout`` and the crash report, on real
subprocesses.

- the "seed-003" hang: a package whose deep import reads an unset environment variable,
  the KeyError caught by a broad ``except`` in another module, then the main thread
  waits forever in ``queue.Queue().get()``. Under ``gyreprof run --startup-timeout 2``
  the launcher names the KeyError, where it was raised and caught, and the wait;
  the doctor of that process names the same KeyError;
- a crash (SIGSEGV): the report names the signal and shows the stack from the trail;
- a healthy CartPole loop that raises and catches inside every step: the trail holds
  the exception raised before the first step and none of those inside the steps
  (tracing is off after the first record).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.waiting import wait_for

SEED_FILES = {
    "toolkit/__init__.py": "",
    "toolkit/utils/__init__.py": "",
    "toolkit/utils/paths.py": (
        "import os\n\n\ndef home():\n    return os.environ['GYRE_HOME']\n\n\nHOME = home()\n"
    ),
    "toolkit/models/__init__.py": "",
    "toolkit/models/loader.py": (
        "try:\n    from toolkit.utils import paths\n    ROOT = paths.HOME\n"
        "except Exception:\n    ROOT = None\n"
    ),
    "toolkit/scheduler.py": (
        "import queue\n\nfrom toolkit.models import loader  # noqa: F401\n\n\n"
        "def wait_for_work():\n    q = queue.Queue()\n    print('ready', flush=True)\n"
        "    return q.get()\n"
    ),
    "main.py": "from toolkit import scheduler\n\nscheduler.wait_for_work()\n",
}


def _seed(tmp: Path) -> Path:
    for name, text in SEED_FILES.items():
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp / "main.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GYRE_HOME", None)
    env.pop("GYREPROF_RUN_DIR", None)
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_seed003_hang_named_by_startup_timeout(tmp_path: Path) -> None:
    main = _seed(tmp_path)
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as errf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gyreprof", "run", "--startup-timeout", "2", "--", str(main)],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=errf,
        )
    try:
        wait_for(lambda: "doctor:" in err.read_text(), "the start-up report", timeout_s=60)
        text = err.read_text()
    finally:
        _stop(proc)
    assert "no step or phase recorded" in text, text
    assert "KeyError('GYRE_HOME')" in text, text
    assert "raised at toolkit/utils/paths.py:5" in text, text
    assert "caught at toolkit/models/loader.py:2" in text, text
    assert "main thread waits in `Queue.get` (toolkit/scheduler.py:9)" in text, text
    assert "BLOCKED" in text, text


def test_seed003_hang_named_by_doctor(tmp_path: Path) -> None:
    from gyreprof.diagnostics.doctor import doctor

    main = _seed(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gyreprof", "run", "--startup-timeout", "0", "--", str(main)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        import psutil

        children = psutil.Process(proc.pid).children()
        assert len(children) == 1
        d = doctor(children[0].pid, interval_s=0.3, samples=2, stacks=False)
    finally:
        _stop(proc)
    words = "\n".join(d.evidence)
    assert "KeyError('GYRE_HOME') raised at toolkit/utils/paths.py:5" in words, words
    assert "caught at toolkit/models/loader.py:2" in words, words
    assert "stuck in start-up" in words, words


CRASH = """
import faulthandler


def inner():
    faulthandler._sigsegv()


def outer():
    inner()


outer()
"""


def test_crash_names_the_signal_and_shows_the_stack(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    proc = subprocess.run(
        [sys.executable, "-m", "gyreprof", "run", "--", str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 128 + signal.SIGSEGV, proc.stderr
    err = proc.stderr
    assert "SIGSEGV" in err, err
    assert "Segmentation fault" in err, err
    assert f'File "{script}", line 6 in inner' in err, err
    assert "line 10 in outer" in err, err
    assert "by hand" not in err, err


HEALTHY = """
import os
import shutil
import sys

import gymnasium as gym

try:
    raise ValueError("before the first step")
except ValueError:
    pass
env = gym.make("CartPole-v1")
env.reset(seed=0)
for i in range(200):
    try:
        raise LookupError("inside a step")
    except LookupError:
        pass
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
trail = os.path.join(os.environ["GYREPROF_RUN_DIR"], f"{os.getpid()}.trail")
shutil.copy(trail, sys.argv[1])
"""


def test_tracing_is_off_after_the_first_step(tmp_path: Path) -> None:
    pytest.importorskip("gymnasium")
    script = tmp_path / "healthy.py"
    script.write_text(HEALTHY)
    out = tmp_path / "copy.trail"
    proc = subprocess.run(
        [sys.executable, "-m", "gyreprof", "run", "--", str(script), str(out)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(t) for t in out.read_text().splitlines() if t.startswith("{")]
    events = [e["ev"] for e in lines]
    assert events[0] == "launch"
    launch = lines[0]
    assert launch["pid"] > 0 and launch["executable"] == sys.executable
    assert "env" in launch and "cwd" in launch
    assert "first-record" in events
    first = events.index("first-record")
    excs = [e for e in lines if e["ev"] == "exc"]
    assert any(e["msg"] == "before the first step" for e in excs), excs
    assert not any("inside a step" in e["msg"] for e in excs), excs
    assert not any(e["ev"].startswith("exc") for e in lines[first + 1 :]), lines[first:]
    assert any(e["ev"] == "imported" and e["name"] == "gymnasium" for e in lines)


FORK = """
import os

pid = os.fork()
if pid == 0:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    print("CHILD_STEPPED", flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("CHILD_STATUS", status, flush=True)
"""


def test_child_forked_during_startup_records_and_ends(tmp_path: Path) -> None:
    """A child forked while its parent's start-up timer is armed inherits the armed
    state without the timer's thread: cancelling it there would wait forever."""
    pytest.importorskip("gymnasium")
    script = tmp_path / "fork.py"
    script.write_text(FORK)
    proc = subprocess.run(
        [sys.executable, "-m", "gyreprof", "run", "--startup-timeout", "30", "--", str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "CHILD_STEPPED" in proc.stdout and "CHILD_STATUS 0" in proc.stdout, proc.stdout
    assert "no step or phase recorded" not in proc.stderr, proc.stderr
