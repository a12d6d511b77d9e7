"""Process hygiene of ``gyreprof sweep`` and ``gyreprof selfcheck``: real processes, real signals.

Each test starts the command in a fresh interpreter with ``TMPDIR`` pointed at a
private folder. The sampler's factory starts three helper processes that hold the
run's stdout and sleep: one in the run's process group, one in a session of its
own, one that daemonizes (orphaned at once); every process writes its pid file
(``helpers/sweep_samplers/hygiene.py``). When the
command has been signalled, interrupted or killed, no process of the run may be
left and the private ``TMPDIR`` must be empty.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gyreprof.diagnostics.selfcheck import selfcheck

TESTS = Path(__file__).resolve().parent
PROCS = TESTS / "helpers" / "procs"
PID_FILES = ("run.pid", "helper.pid", "escaped.pid", "daemon.pid")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process groups and PR_SET_PDEATHSIG: Linux"
)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper counts as gone)."""
    if not psutil.pid_exists(pid):
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids(pid_dir: Path) -> dict[str, int]:
    return {name: int((pid_dir / name).read_text()) for name in PID_FILES}


def assert_all_gone(pid_dir: Path, tmpdir: Path, grace_s: float = 30.0) -> None:
    """Every pid of the run ends and TMPDIR empties within ``grace_s`` (signal delivery
    and reaping are asynchronous; nothing here waits on the command's own timers)."""
    seen = pids(pid_dir)
    deadline = time.monotonic() + grace_s
    while True:
        left = {name: pid for name, pid in seen.items() if alive(pid)}
        leftover = sorted(p.name for p in tmpdir.iterdir())
        if not left and not leftover:
            return
        if time.monotonic() > deadline:
            for pid in left.values():  # do not leak them into the rest of the test run
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            raise AssertionError(f"left behind: processes {left}, temp entries {leftover}")
        time.sleep(0.05)


def wait_ready(pid_dir: Path, proc: subprocess.Popen[bytes], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (pid_dir / "ready").exists():
        assert proc.poll() is None, f"the command ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "the sampler's helpers never started"
        time.sleep(0.05)
    # no wait for the parent's poll to see the helpers: ChildTree.end polls the tree once
    # more before it kills, and a daemonized helper is re-parented to the run's child


def env_with_tmpdir(tmpdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmpdir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_command(kind: str, pid_dir: Path, tmpdir: Path) -> subprocess.Popen[bytes]:
    """``gyreprof sweep`` or ``gyreprof selfcheck`` on a sampler that hangs."""
    if kind == "sweep":
        argv = [
            "sweep", "helpers.sweep_samplers.hygiene:make_holding", "--param", "batch_size",
            "--values", "1,2", "--fixed", f"pid_dir={pid_dir}", "--steps", "2",
            "--warmup", "0", "--repeats", "1", "--no-progress",
        ]  # fmt: skip
        cwd = TESTS
    else:
        kwargs = json.dumps({"pid_dir": str(pid_dir)})
        argv = ["selfcheck", "sc_factories:make_holds_stdout", "--kwargs", kwargs]
        argv += ["--timeout", "300"]
        cwd = PROCS
    return subprocess.Popen(
        [sys.executable, "-m", "gyreprof", *argv],
        cwd=cwd,
        env=env_with_tmpdir(tmpdir),
        stdout=subprocess.PIPE,  # an orphan holding it would keep communicate() waiting
        stderr=subprocess.PIPE,
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    pid_dir, tmpdir = tmp_path / "pids", tmp_path / "tmp"
    pid_dir.mkdir()
    tmpdir.mkdir()
    return pid_dir, tmpdir


@pytest.mark.parametrize("kind", ["sweep", "selfcheck"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signalled_command_leaves_no_process_and_no_temp_folder(
    kind: str, sig: signal.Signals, dirs: tuple[Path, Path]
) -> None:
    pid_dir, tmpdir = dirs
    proc = start_command(kind, pid_dir, tmpdir)
    wait_ready(pid_dir, proc)
    assert any(tmpdir.iterdir()), "the run's temp folder should exist while it runs"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)  # returns: no orphan holds our pipes
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM, err.decode()  # dies by SIGTERM, as usual
    else:
        assert proc.returncode == 130, err.decode()
    assert_all_gone(pid_dir, tmpdir)


@pytest.mark.parametrize("kind", ["sweep", "selfcheck"])
def test_killed_parent_leaves_no_process_and_no_temp_folder(
    kind: str, dirs: tuple[Path, Path]
) -> None:
    """SIGKILL runs no cleanup in the parent: the run hears of it by its parent-death
    signal, removes its folder and kills its process group and descendants."""
    pid_dir, tmpdir = dirs
    proc = start_command(kind, pid_dir, tmpdir)
    wait_ready(pid_dir, proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert_all_gone(pid_dir, tmpdir)


def test_crash_in_the_parent_leaves_no_process_and_no_temp_folder(
    dirs: tuple[Path, Path],
) -> None:
    """The parent crashes in native code (SIGSEGV from faulthandler's test hook)."""
    pid_dir, tmpdir = dirs
    script = textwrap.dedent(
        f"""
        import faulthandler, os, threading, time
        import gyreprof as gp
        def crash():
            while not os.path.exists({str(pid_dir / "ready")!r}):
                time.sleep(0.05)
            faulthandler._sigsegv()
        threading.Thread(target=crash, daemon=True).start()
        gp.sweep("helpers.sweep_samplers.hygiene:make_holding", "batch_size", [1],
                 fixed={{"pid_dir": {str(pid_dir)!r}}}, steps=2, warmup=0, repeats=1,
                 progress=False)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=TESTS,
        env={**env_with_tmpdir(tmpdir), "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGSEGV, proc.stderr.decode()
    assert_all_gone(pid_dir, tmpdir)


def test_api_sweep_under_sigterm_cleans_up_then_dies_by_sigterm(dirs: tuple[Path, Path]) -> None:
    pid_dir, tmpdir = dirs
    script = textwrap.dedent(
        f"""
        import gyreprof as gp
        try:
            gp.sweep("helpers.sweep_samplers.hygiene:make_holding", "batch_size", [1],
                     fixed={{"pid_dir": {str(pid_dir)!r}}}, steps=2, warmup=0, repeats=1,
                     progress=False)
        finally:
            print("finally ran", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=TESTS,
        env={**env_with_tmpdir(tmpdir), "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_ready(pid_dir, proc)
    proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM, err.decode()
    # the sweep cleans up after itself, then the process dies by SIGTERM exactly as it
    # would have without gyreprof: the caller's own finally does not run either
    assert b"finally ran" not in out
    assert_all_gone(pid_dir, tmpdir)


def test_selfcheck_ends_what_the_factory_started(dirs: tuple[Path, Path]) -> None:
    """A check that passes still ends the factory's helpers, which hold its stdout:
    the command returns at once instead of waiting for them."""
    pid_dir, tmpdir = dirs
    kwargs = json.dumps({"pid_dir": str(pid_dir), "hang": False})
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gyreprof", "selfcheck", "sc_factories:make_holds_stdout"]
        + ["--kwargs", kwargs],
        cwd=PROCS,
        env=env_with_tmpdir(tmpdir),
        capture_output=True,
        text=True,
        timeout=120,  # the helpers sleep 300 s: only ending them returns in time
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "count 3" in proc.stdout
    assert time.monotonic() - t0 < 120
    assert_all_gone(pid_dir, tmpdir)


def test_selfcheck_relayed_output_does_not_wait_for_orphans(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """stdout without a file descriptor is relayed through a pipe the helpers hold."""
    import io

    pid_dir, _ = dirs
    buf = io.StringIO()
    r = selfcheck(
        "sc_factories:make_holds_stdout",
        kwargs={"pid_dir": str(pid_dir), "hang": False},
        cwd=PROCS,
        stdout=buf,
        timeout_s=120,
    )
    assert r.exit_code == 0, str(r)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_all_gone(pid_dir, empty)


def test_selfcheck_child_puts_the_package_first(tmp_path: Path) -> None:
    """A gyreprof/ folder in the current one does not shadow the real package."""
    fake = tmp_path / "gyreprof"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('the shadowing gyreprof/ was imported')")
    (tmp_path / "shadowed_factory.py").write_text(
        textwrap.dedent(
            """
            import gyreprof

            class Sampler:
                endpoint = gyreprof.__file__

                def sample(self):
                    return 4

            def make():
                return Sampler()
            """
        )
    )
    r = selfcheck("shadowed_factory:make", cwd=tmp_path, timeout_s=60)
    assert r.exit_code == 0, str(r)  # the factory in the current folder is still found
    import gyreprof

    assert r.endpoint == gyreprof.__file__


def test_the_package_root_is_the_folder_that_holds_gyreprof() -> None:
    """A child's path entry: the folder whose ``gyreprof/`` is the package imported here
    (the helper moved one floor down once and pointed inside the package)."""
    import gyreprof
    from gyreprof._support.subproc import package_root

    assert (
        Path(package_root(), "gyreprof", "__init__.py").resolve()
        == Path(gyreprof.__file__).resolve()
    )


def test_isolated_sweep_from_a_worker_thread_runs_to_the_end() -> None:
    """The parent-death signal is tied to the thread that started the run; a sweep
    called from a thread keeps that thread alive until its run ends, so the run is not
    cut short (and SIGTERM handling stays with the main thread's owner)."""
    import threading

    import gyreprof as gp

    box: dict[str, object] = {}

    def work() -> None:
        box["result"] = gp.sweep(
            "helpers.sweep_samplers.flat:make_flat",
            "batch_size",
            [2],
            steps=5,
            warmup=1,
            repeats=2,
            progress=False,
        )

    before = signal.getsignal(signal.SIGTERM)
    th = threading.Thread(target=work)
    th.start()
    th.join(180)
    assert not th.is_alive()
    result = box["result"]
    assert [r.status for r in result.points[0].runs] == ["ok", "ok"]  # type: ignore[attr-defined]
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_unwinds_only_where_sigterm_has_its_default_action() -> None:
    from gyreprof._support.subproc import sigterm_unwinds

    saved = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with sigterm_unwinds():
            assert callable(signal.getsignal(signal.SIGTERM))  # ours, for the block
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored

        def users_own(signum: int, frame: object) -> None:
            pass

        signal.signal(signal.SIGTERM, users_own)
        with sigterm_unwinds():
            assert signal.getsignal(signal.SIGTERM) is users_own  # left alone
        assert signal.getsignal(signal.SIGTERM) is users_own
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_a_run_child_ends_the_orphans_it_adopted_when_it_exits(tmp_path: Path) -> None:
    """A daemon the sampler starts is re-parented to the run's child (a subreaper). When
    the child exits normally the daemon dies with it, even where no parent polled the
    tree in time (here nobody polls at all): it would pass to init and hold the pipes."""
    from gyreprof._support.subproc import PARENT_PID_ENV

    pid_file = tmp_path / "daemon.pid"
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        from gyreprof._support.subproc import bind_to_parent
        assert bind_to_parent() is not None
        sys.path.insert(0, {str(TESTS)!r})
        from helpers.sweep_samplers.hygiene import _DAEMONIZE, _HELPER
        subprocess.run([sys.executable, "-c", _DAEMONIZE, _HELPER, {str(pid_file)!r}],
                       check=True)
        while not os.path.exists({str(pid_file)!r}):
            time.sleep(0.02)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), PARENT_PID_ENV: str(os.getpid())}
    with open(tmp_path / "out.txt", "wb") as out:
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, stdout=out, stderr=subprocess.STDOUT,
            timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, (tmp_path / "out.txt").read_text()
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while alive(daemon):
        if time.monotonic() > deadline:
            os.kill(daemon, signal.SIGKILL)
            raise AssertionError("the daemon outlived the run's child")
        time.sleep(0.05)


def test_run_folder_goes_when_a_multithreaded_parent_dies_by_sigkill(
    dirs: tuple[Path, Path],
) -> None:
    """The death signal comes when the parent *thread* that started the child exits.
    Under SIGKILL the parent's other threads may still be alive then, and the child
    still has the parent as its parent. Here that thread (the main one, which leaves
    a zombie leader) ends first on purpose, then the rest of the parent is killed:
    the child must still remove the run folder."""
    import platform

    sys_exit = {"x86_64": 60, "aarch64": 93}.get(platform.machine())
    if sys_exit is None:
        pytest.skip(f"the exit syscall number of {platform.machine()} is not listed here")
    pid_dir, tmpdir = dirs
    child = (  # with a process of its own, which it kills first when its parent dies
        "import os, subprocess, sys, time; from gyreprof._support.subproc import bind_to_parent; "
        "bind_to_parent(sys.argv[1]); "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        "open(sys.argv[2] + '.tmp', 'w').write(f'{os.getpid()} {p.pid}'); "
        "os.replace(sys.argv[2] + '.tmp', sys.argv[2]); time.sleep(300)"
    )  # both sleep until the parent's death ends them: that end is what is tested
    script = textwrap.dedent(
        f"""
        import ctypes, os, sys, tempfile, threading, time
        from pathlib import Path
        from gyreprof._support.subproc import ChildTree
        run_dir = tempfile.mkdtemp(prefix="gyreprof-sweep-")
        pid_file = Path({str(pid_dir / "child.pid")!r})
        threading.Thread(target=time.sleep, args=(300,)).start()  # the process lives on
        ChildTree.start([sys.executable, "-c", {child!r}, run_dir, str(pid_file)])
        while not pid_file.exists():
            time.sleep(0.02)
        # the thread that started the child ends alone (exit(2), not exit_group(2))
        ctypes.CDLL(None).syscall({sys_exit}, 0)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env={**env_with_tmpdir(tmpdir), "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 90
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:  # the leader exited
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the parent's main thread never ended"
        time.sleep(0.02)
    assert any(tmpdir.iterdir())
    child_pid, its_own = map(int, (pid_dir / "child.pid").read_text().split())
    while alive(its_own):  # the child heard the thread's exit and is ending its run
        assert time.monotonic() < deadline, "the child never heard its parent thread exit"
        time.sleep(0.01)
    proc.kill()
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while alive(child_pid) or any(tmpdir.iterdir()):
        if time.monotonic() > deadline:
            if alive(child_pid):
                os.kill(child_pid, signal.SIGKILL)
            raise AssertionError(f"left behind: {sorted(p.name for p in tmpdir.iterdir())}")
        time.sleep(0.05)
