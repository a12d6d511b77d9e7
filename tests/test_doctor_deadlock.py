"""gyreprof doctor names deadlocks: two threads each waiting for the lock the other
holds are a "lock-order deadlock" with both lines where Python stacks are read (py-spy);
without them, "possible deadlock: N threads wait on locks, none runs".
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof.diagnostics import _deadlock
from gyreprof.diagnostics.doctor import doctor

PROCS = Path(__file__).parent / "helpers" / "procs"
SCRIPT = PROCS / "two_locks.py"
SRC = Path(gp.__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the doctor's evidence reads /proc"
)


def _line_of(text: str, nth: int = 1) -> int:
    """The line of two_locks.py that is ``text``, its ``nth`` occurrence."""
    lines = SCRIPT.read_text().splitlines()
    return [i for i, line in enumerate(lines, 1) if line.strip() == text][nth - 1]


def _dump(pid: int) -> str:
    """What py-spy dump prints for two_locks.py once it deadlocked."""
    s = str(SCRIPT)
    return (
        f"Process {pid}: python {s}\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        f'Thread {pid} (idle): "MainThread"\n'
        "    _wait_for_tstate_lock (threading.py:1132)\n    join (threading.py:1112)\n"
        f"    <module> ({s}:{_line_of('t.join()')})\n"
        f'Thread {pid + 1} (idle): "first"\n'
        f"    first ({s}:{_line_of('with lock_b:')})\n    run (threading.py:975)\n"
        f'Thread {pid + 2} (idle): "second"\n'
        f"    second ({s}:{_line_of('with lock_a:', 2)})\n    run (threading.py:975)\n"
    )


@contextmanager
def deadlocked(python: str = sys.executable) -> Iterator[subprocess.Popen[str]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [python, str(SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=PROCS,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("named", [False, True], ids=["plain", "log"])
def test_without_stacks_a_two_lock_deadlock_is_a_possible_deadlock(
    tmp_path: Path, named: bool
) -> None:
    log = tmp_path / "out.log"
    log.write_text("")
    with deadlocked() as proc:
        d = doctor(proc.pid, log=log if named else None, interval_s=0.5, stacks=False)
    assert d.state == "blocked", str(d)
    assert d.evidence[0].startswith("possible deadlock: 3 threads wait on locks, none runs"), str(d)


def test_with_stacks_a_two_lock_deadlock_is_named_with_both_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py-spy stands in for itself here (a script printing its dump of this process):
    the lines and the locks come from reading the source the stacks point at."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    dump = tmp_path / "dump.txt"
    spy = bin_dir / "py-spy"
    spy.write_text(f"#!{sys.executable}\nprint(open({str(dump)!r}).read())\n")
    spy.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "elsewhere" / "python"))
    with deadlocked(str(python)) as proc:
        dump.write_text(_dump(proc.pid))
        d = doctor(proc.pid, interval_s=0.5)
    assert d.state == "blocked", str(d)
    first = d.evidence[0]
    s = "two_locks.py"  # shown relative to the process's folder (PROCS)
    assert first.startswith("lock-order deadlock: thread `first` holds `lock_a`"), first
    assert f"holds `lock_a` ({s}:{_line_of('with lock_a:')})" in first, first
    assert f"waits for `lock_b` ({s}:{_line_of('with lock_b:')})" in first, first
    assert f"thread `second` holds `lock_b` ({s}:{_line_of('with lock_b:', 2)})" in first, first
    assert f"waits for `lock_a` ({s}:{_line_of('with lock_a:', 2)})" in first, first


def test_no_cycle_is_no_deadlock() -> None:
    s = str(SCRIPT)
    one_thread = f'Thread 1 (idle): "first"\n    first ({s}:{_line_of("with lock_b:")})\n'
    assert _deadlock.lock_order_deadlock(one_thread) is None
    assert _deadlock.possible_deadlock([], 1) is None


def test_a_chain_of_waits_is_no_cycle(tmp_path: Path) -> None:
    """A waits for what B holds, B waits for a third lock nobody here holds: no
    lock-order deadlock (B may get its lock and let A go)."""
    src = tmp_path / "chain.py"
    src.write_text(
        "def a():\n    with x:\n        with y:\n            pass\n\n\n"
        "def b():\n    with y:\n        with z:\n            pass\n"
    )
    dump = f'Thread 1 (idle): "a"\n    a ({src}:3)\nThread 2 (idle): "b"\n    b ({src}:9)\n'
    assert _deadlock.lock_order_deadlock(dump) is None
    cycle = dump.replace("with z:", "with x:")
    src.write_text(src.read_text().replace("with z:", "with x:"))
    assert (_deadlock.lock_order_deadlock(cycle) or "").startswith("lock-order deadlock")


def test_a_possible_deadlock_needs_every_thread_asleep_on_a_lock() -> None:
    from gyreprof.diagnostics.doctor import ThreadWait

    def wait(tid: int, syscall: str, cpu_s: float = 0.0) -> ThreadWait:
        return ThreadWait(tid, "python", "S", cpu_s, None, syscall, None)

    assert _deadlock.possible_deadlock([wait(1, "futex"), wait(2, "futex")], 1) is not None
    assert _deadlock.possible_deadlock([wait(1, "clock_nanosleep"), wait(2, "futex")], 1) is None
    assert _deadlock.possible_deadlock([wait(1, "futex"), wait(2, "futex", 0.2)], 1) is None


def test_with_the_real_py_spy_a_two_lock_deadlock_is_named() -> None:
    """Where py-spy is installed and may read the process (ptrace)."""
    from gyreprof.diagnostics._doctor_evidence import _find_py_spy, _py_spy

    with deadlocked() as proc:
        if _find_py_spy(proc.pid) is None or _py_spy(proc.pid)[0] is None:
            pytest.skip("py-spy is missing or may not read the process here")
        d = doctor(proc.pid, interval_s=0.5)
    first = d.evidence[0]
    assert first.startswith("lock-order deadlock: thread `"), str(d)
    assert f"two_locks.py:{_line_of('with lock_b:')}" in first, first
    assert f"two_locks.py:{_line_of('with lock_a:', 2)}" in first, first
