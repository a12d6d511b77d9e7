"""Autosave: templates, function-local profilers, forks, several processes, failures.

Every case runs a real interpreter (autosave acts at process exit). Fault
injection (os._exit children, SIGTERM in native code, planted links, a full
disk) lives in tests/adversarial/test_autosave_faults.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import gyreprof as gp


def run_py(
    tmp_path: Path, body: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"script_{abs(hash(body)) % 10**8}.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )


def load(path: Path) -> gp.Summary:
    if path.suffix == ".json":
        return gp.Summary.from_json(path)
    return gp.Snapshot.from_bytes(path.read_bytes()).summary()


def steps_in(path: Path) -> int:
    return load(path).steps


def test_function_local_profiler_is_saved(tmp_path: Path) -> None:
    out = tmp_path / "local.snap"
    r = run_py(
        tmp_path,
        """
        import sys, gc
        import gyreprof as gp

        def work(path):
            prof = gp.Profiler(["env"], autosave=path)
            for _ in range(120):
                prof.begin(); prof.lap(0)
            prof.end()

        work(sys.argv[1])
        gc.collect()
        print("returned")
        """,
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert steps_in(out) == 120


def test_a_profiler_alive_at_exit_is_saved_once_with_all_its_steps(tmp_path: Path) -> None:
    out = tmp_path / "kept.json"
    r = run_py(
        tmp_path,
        """
        import sys
        import gyreprof as gp
        prof = gp.Profiler(["env", "fwd"], autosave=sys.argv[1])
        for _ in range(300):
            prof.begin(); prof.lap(0); prof.lap(1)
        prof.end()
        """,
        str(out),
    )
    assert r.returncode == 0, r.stderr
    s = load(out)
    assert s.steps == 300 and s.phases["fwd"].count == 300
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_pid_and_host_templates(tmp_path: Path) -> None:
    r = run_py(
        tmp_path,
        """
        import os, sys
        import gyreprof as gp
        prof = gp.Profiler(["env"], autosave=sys.argv[1] + "/{host}-{pid}.snap")
        prof.begin(); prof.lap(0); prof.end()
        print(os.getpid(), prof.autosave)
        """,
        str(tmp_path / "runs"),
    )
    assert r.returncode == 0, r.stderr
    pid, announced = r.stdout.split()
    expect = tmp_path / "runs" / f"{socket.gethostname()}-{pid}.snap"
    assert Path(announced) == expect
    assert steps_in(expect) == 1


@pytest.mark.parametrize(
    "template", ["run-{user}.snap", "run-{pid:05d}.snap", "run-{0}.snap", "run-{pid.x}.snap", "a{"]
)
def test_unknown_template_fields_are_refused(tmp_path: Path, template: str) -> None:
    with pytest.raises(ValueError, match=r"autosave="):
        gp.Profiler(["env"], autosave=str(tmp_path / template))


def test_literal_braces_and_empty_paths(tmp_path: Path) -> None:
    prof = gp.Profiler(["env"], autosave=str(tmp_path / "x{{1}}-{pid}.snap"))
    assert prof.autosave == tmp_path / f"x{{1}}-{os.getpid()}.snap"
    with pytest.raises(ValueError, match="autosave must be a file path"):
        gp.Profiler(["env"], autosave="  ")
    with pytest.raises(TypeError, match="autosave"):
        gp.Profiler(["env"], autosave=5)  # type: ignore[arg-type]


def test_eight_processes_on_one_templated_path(tmp_path: Path) -> None:
    body = textwrap.dedent(
        """
        import sys
        import gyreprof as gp
        n = int(sys.argv[2])
        prof = gp.Profiler(["env"], autosave=sys.argv[1])
        for _ in range(n):
            prof.begin(); prof.lap(0)
        prof.end()
        """
    )
    script = tmp_path / "worker.py"
    script.write_text(body)
    template = str(tmp_path / "out" / "w-{pid}.snap")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), template, str(100 + i)], stderr=subprocess.PIPE
        )
        for i in range(8)
    ]
    pids = {}
    for i, p in enumerate(procs):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        pids[p.pid] = 100 + i
    files = sorted((tmp_path / "out").iterdir())
    assert len(files) == 8, files
    for pid, n in pids.items():
        assert steps_in(tmp_path / "out" / f"w-{pid}.snap") == n


def test_forked_child_never_writes_an_untemplated_parent_path(tmp_path: Path) -> None:
    out = tmp_path / "parent.snap"
    r = run_py(
        tmp_path,
        """
        import os, sys
        import gyreprof as gp
        path = sys.argv[1]
        prof = gp.Profiler(["env"], autosave=path)
        for _ in range(10):
            prof.begin(); prof.lap(0)
        pid = os.fork()
        if pid == 0:
            for _ in range(1000):
                prof.begin(); prof.lap(0)
            prof.end()
            assert prof.autosave is None
            sys.exit(0)          # a normal exit: atexit runs in the child
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        prof.end()
        print("child wrote" if os.path.exists(path) else "nothing yet")
        """,
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "nothing yet"
    assert steps_in(out) == 10  # the parent's own count


def test_forked_child_writes_its_own_templated_file_only_when_it_recorded(tmp_path: Path) -> None:
    r = run_py(
        tmp_path,
        """
        import os, sys
        import gyreprof as gp
        prof = gp.Profiler(["env"], autosave=sys.argv[1] + "/p-{pid}.snap")
        for _ in range(10):
            prof.begin(); prof.lap(0)
        kids = []
        for record in (True, False):
            pid = os.fork()
            if pid == 0:
                if record:
                    for _ in range(5):
                        prof.begin(); prof.lap(0)
                    prof.end()
                sys.exit(0)
            kids.append(pid)
        for k in kids:
            os.waitpid(k, 0)
        prof.end()
        print(os.getpid(), *kids)
        """,
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    parent, active, idle = (int(x) for x in r.stdout.split())
    assert steps_in(tmp_path / f"p-{parent}.snap") == 10
    assert steps_in(tmp_path / f"p-{active}.snap") == 15  # its inherited 10 and its own 5
    assert not (tmp_path / f"p-{idle}.snap").exists()


def test_a_failed_save_is_reported_on_stderr(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    r = run_py(
        tmp_path,
        """
        import sys
        import gyreprof as gp
        prof = gp.Profiler(["env"], autosave=sys.argv[1])
        prof.begin(); prof.lap(0); prof.end()
        print("done")
        """,
        str(blocker / "out.snap"),
    )
    assert r.stdout.strip() == "done"
    assert "gyreprof: autosave to" in r.stderr and "failed" in r.stderr, r.stderr


def test_save_autosave_returns_the_path_and_overwrites_atomically(tmp_path: Path) -> None:
    prof = gp.Profiler(["env"], autosave=str(tmp_path / "now-{pid}.snap"))
    prof.begin()
    prof.lap(0)
    path = prof.save_autosave()
    assert path == tmp_path / f"now-{os.getpid()}.snap"
    first = path.read_bytes()
    for _ in range(9):
        prof.begin()
        prof.lap(0)
    assert prof.save_autosave() == path
    assert path.read_bytes() != first
    assert steps_in(path) == 9  # the 10th step is still open
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert gp.Profiler(["env"]).save_autosave() is None


def test_eight_processes_autosaving_to_one_path_lose_nothing(tmp_path: Path) -> None:
    """8 processes (not forked from one profiler) autosave to the same path at once: the
    first writes it, the others write a file of their own and say so; 8 x 450 events."""
    target = tmp_path / "shared.snap"
    go = tmp_path / "go"
    body = f"""
        import os, sys, time
        import gyreprof as gp
        prof = gp.Profiler(["x"], autosave={str(target)!r})
        for _ in range(450):
            prof.record("x", 1000)
        open(sys.argv[1], "w").close()
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
    """
    script = tmp_path / "many.py"
    script.write_text(textwrap.dedent(body))
    ready = [tmp_path / f"ready{i}" for i in range(8)]
    procs = [
        subprocess.Popen([sys.executable, str(script), str(r)], stderr=subprocess.PIPE, text=True)
        for r in ready
    ]
    try:
        import time

        deadline = time.monotonic() + 120
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            time.sleep(0.01)
        go.touch()  # all exit (and save) together
        errs = [p.communicate(timeout=120)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), errs
    files = sorted(tmp_path.glob("shared*.snap"))
    total = sum(load(f).phases["x"].count for f in files)
    assert total == 8 * 450, [f.name for f in files]
    assert sum("was written by another process" in e for e in errs) == 7


def test_a_program_closing_its_fds_never_gets_gyreprofs_bytes_in_its_files(
    tmp_path: Path,
) -> None:
    """A daemonising ``os.closerange(3, 256)`` then files of its own: a signal writes no
    wake-up byte into them, and a forked child's inherited files are left alone."""
    proc = run_py(
        tmp_path,
        f"""
        import os, signal
        import gyreprof as gp
        prof = gp.Profiler(["x"], autosave={str(tmp_path / "a.snap")!r})
        prof.record("x", 1000)
        os.closerange(3, 256)
        files = [open({str(tmp_path)!r} + f"/data{{i}}", "wb", buffering=0) for i in range(12)]
        got = []
        signal.signal(signal.SIGINT, lambda s, f: got.append(s))
        os.kill(os.getpid(), signal.SIGINT)
        while not got:
            pass
        pid = os.fork()
        if pid == 0:
            for f in files:
                os.write(f.fileno(), b"child\\n")
            os._exit(0)
        os.waitpid(pid, 0)
        for f in files:
            f.write(b"parent\\n")
            f.close()
        """,
    )
    assert proc.returncode == 0, proc.stderr
    for i in range(12):
        assert (tmp_path / f"data{i}").read_bytes() == b"child\nparent\n", i
    assert (tmp_path / "a.snap").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names are Linux's")
def test_the_helper_thread_names_itself_without_opening_a_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The helper names its thread as it starts, while the program may be closing every
    fd and opening files of its own: a file opened for the name (``/proc/thread-self/
    comm``) could then be closed under the program's number (its data file, in 1 run of
    10 of the test above)."""
    import builtins
    import threading

    from gyreprof._support import threadname as _threadname

    _threadname.prepare()  # as _start_helper does, in the starting thread
    opened: list[object] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(*a: object, **k: object) -> object:
        opened.append(a[0])
        return real_open(*a, **k)  # type: ignore[call-overload]

    def spy_os_open(*a: object, **k: object) -> int:
        opened.append(a[0])
        return real_os_open(*a, **k)  # type: ignore[arg-type]

    comm: list[str] = []

    def helper() -> None:
        monkeypatch.setattr(builtins, "open", spy_open)
        monkeypatch.setattr(os, "open", spy_os_open)
        try:
            _threadname.name_os_thread("gyreprof-test-name")
        finally:
            monkeypatch.undo()
        with open("/proc/thread-self/comm") as f:
            comm.append(f.read().strip())

    t = threading.Thread(target=helper)
    t.start()
    t.join(30)
    assert opened == []
    assert comm == ["gyreprof-test-n"]  # the kernel keeps 15 bytes


def test_gyreprof_notices_its_wakeup_pipe_closed_and_stops_using_it(tmp_path: Path) -> None:
    """Every fd closed (the helper's high-numbered pipe too): the helper thread sees the
    pipe gone, the interpreter's wake-up fd is dropped, and later files get no bytes."""
    proc = run_py(
        tmp_path,
        f"""
        import os, signal, time
        import gyreprof as gp
        from gyreprof.recording import _autosave
        prof = gp.Profiler(["x"], autosave={str(tmp_path / "a.snap")!r})
        prof.record("x", 1000)
        assert _autosave._HELPER["pid"] == os.getpid()
        os.closerange(3, 1 << 16)
        deadline = time.monotonic() + 30
        while not _autosave._HELPER.get("dropped") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _autosave._HELPER["pid"] == -1
        assert signal.set_wakeup_fd(-1) == -1  # the interpreter writes to no fd
        """,
    )
    assert proc.returncode == 0, proc.stderr


def test_eight_spawned_workers_on_one_path_keep_every_writers_data(tmp_path: Path) -> None:
    """8 ``spawn`` workers autosave to one path; 7 of them create their Profiler only
    after the first one has saved (a short job beside slow imports). Each keeps its
    data: the first writes the path, each other one its own ``<stem>.<pid>`` file, with
    a note (those 7 took the first one's file for a previous run's and replaced it)."""
    target = tmp_path / "shared.snap"
    body = f"""
        import multiprocessing as mp, os, sys, time
        import gyreprof as gp

        TARGET, TMP = {str(target)!r}, {str(tmp_path)!r}

        def wait_for(path):
            while not os.path.exists(path):
                time.sleep(0.005)

        def work(i):
            open(os.path.join(TMP, f"started{{i}}"), "w").close()
            if i > 0:
                wait_for(TARGET)  # the first worker has saved
            prof = gp.Profiler(["x"], autosave=TARGET)
            for _ in range(100 * (i + 1)):
                prof.record("x", 1000)
            if i == 0:
                for j in range(8):
                    wait_for(os.path.join(TMP, f"started{{j}}"))

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            ps = [ctx.Process(target=work, args=(i,)) for i in range(8)]
            for p in ps:
                p.start()
            for p in ps:
                p.join()
            sys.exit(max(abs(p.exitcode) for p in ps))
    """
    proc = run_py(tmp_path, body, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = sorted(tmp_path.glob("shared*.snap"))
    assert len(files) == 8, [f.name for f in files]
    assert sum(load(f).phases["x"].count for f in files) == sum(100 * (i + 1) for i in range(8))
    assert proc.stderr.count("was written by another process") == 7, proc.stderr[-3000:]


def test_a_previous_runs_file_is_replaced_without_a_note(tmp_path: Path) -> None:
    """A file written before the process started is a previous run's: replaced, as a
    rerun replaces it, and no note; so is this process's own earlier save (a second
    function-local Profiler of the same path)."""
    target = tmp_path / "again.snap"
    target.write_bytes(b"a previous run")
    os.utime(target, (time.time() - 60, time.time() - 60))  # a minute ago
    proc = run_py(
        tmp_path,
        f"""
        import gyreprof as gp
        def one(n):
            prof = gp.Profiler(["x"], autosave={str(target)!r})
            for _ in range(n):
                prof.record("x", 1000)
        one(3)
        one(5)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "written by another process" not in proc.stderr
    assert sorted(p.name for p in tmp_path.glob("again*")) == ["again.snap"]
    assert load(target).phases["x"].count == 5
