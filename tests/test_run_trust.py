"""``gyreprof run`` against planted files, malformed records, signals and data loss (issue 25).

Each test is one defect of the second trust probe and fails on the code before it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.run_scripts.runhelp import gyreprof_popen, gyreprof_run, script, sigterm_when_ready

NOBODY = 65534
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="plants another user's link (root)"
)


def _py(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------- 1: links planted by others


@as_root
def test_json_is_not_written_through_another_users_link_in_a_shared_folder(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = shared / "run.json"
    link.symlink_to(victim)
    os.lchown(link, NOBODY, NOBODY)  # planted by another user
    proc, _ = gyreprof_run(tmp_path, sys.executable, "-c", "pass", options=("--json", str(link)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert victim.read_text() == "precious\n"
    assert link.is_symlink()  # another user's link is not replaced either
    assert f"--json {link}" in proc.stderr and "owned by uid 65534" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_save_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    save = tmp_path / "save"
    save.mkdir()
    (save / "processes.json").symlink_to(victim)
    proc, _ = gyreprof_run(tmp_path, script("gym_loop.py"), "50", options=("--save", str(save)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert victim.read_text() == "precious\n"
    index = save / "processes.json"
    assert not index.is_symlink() and json.loads(index.read_text())[0]["role"] == "main"


def test_json_is_never_left_partial_under_a_file_size_limit(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    out.write_text('{"old": true}\n')
    # the limit is gyreprof run's (soft 1 KB); the command lifts it for itself
    cmd = _py(
        tmp_path,
        "lifted.py",
        "import resource, runpy, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)\n"
        f"sys.argv = [{script('gym_loop.py')!r}, '50']\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n",
    )
    launcher = (
        "import resource, runpy, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n"
        f"sys.argv = ['gyreprof', 'run', '--json', {str(out)!r}, '--', {cmd!r}]\n"
        "runpy.run_module('gyreprof', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", launcher], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "env_step" in proc.stderr  # the command was profiled: the report is over 4 KB
    assert out.read_text() == '{"old": true}\n'  # the old file, whole: not 4 KB of the new
    assert f"--json {out}" in proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.json")]


def test_chrome_trace_export_never_writes_through_a_planted_temp_link(tmp_path: Path) -> None:
    import gyreprof as gp
    from gyreprof.export import chrome_trace

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "trace.json"
    (tmp_path / "trace.json.tmp").symlink_to(victim)  # the old fixed temp name
    prof = gp.Profiler(["env"])
    (env,) = prof.ids()
    for _ in range(5):
        prof.begin()
        prof.lap(env)
    prof.end()
    chrome_trace(prof, out)
    assert victim.read_text() == "precious\n"
    assert json.loads(out.read_text())["traceEvents"]


# ------------------------------------------------------------- 8: malformed records


def test_malformed_records_are_skipped_with_a_note_and_the_exit_code_is_the_commands(
    tmp_path: Path,
) -> None:
    proc, data = gyreprof_run(tmp_path, script("plant_records.py"))
    assert "PLANTED" in proc.stdout, proc.stderr[-3000:]
    assert proc.returncode == 7, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for name in (
        "1000001.start.json",
        "1000002.start.json",
        "1000003.trainer.snap",
        "1000003.sampler.snap",
    ):
        assert f"skipped {name}" in proc.stderr, name
    assert data is not None and data["exit_code"] == 7
    assert data["sampler"]["phases"]["env_step"]["count"] == 50  # the real process's


# ------------------------------------------------------------- 3, 9: signals


def _read_until(fd: int, token: bytes, buf: bytearray, timeout: float = 60) -> bool:
    import select
    import time

    end = time.monotonic() + timeout
    while token not in buf and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal's other side closed
                break
            if not chunk:
                break
            buf += chunk
    return token in buf


def test_one_ctrl_c_on_a_terminal_is_one_sigint_for_the_command(tmp_path: Path) -> None:
    import fcntl
    import termios

    master, slave = os.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    argv = [sys.executable, "-m", "gyreprof", "run", "--", script("count_sigint.py")]
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=controlling_terminal,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=tmp_path,
    )
    os.close(slave)
    buf = bytearray()
    try:
        assert _read_until(master, b"READY", buf), buf.decode(errors="replace")
        os.write(master, b"\x03")  # the terminal's ^C: SIGINT to its foreground group
        assert _read_until(master, b"wall time", buf), buf.decode(errors="replace")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    out = buf.decode(errors="replace")
    assert "SIGINTS 1" in out, out
    assert "from the terminal" in out


def _proc_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, timeout: float = 30) -> bool:
    import time

    end = time.monotonic() + timeout
    while not _proc_gone(pid) and time.monotonic() < end:
        time.sleep(0.02)
    return _proc_gone(pid)


def _start_forever(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, Path, int]:
    """forever.py under gyreprof run, with the run folder in tmp_path/tmp: (launcher, its
    JSON, the run folder, the command's pid), once the command has recorded."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    proc, out = gyreprof_popen(tmp_path, script("forever.py"), env={"TMPDIR": str(tmpdir)})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    (run_dir,) = tmpdir.glob("gyreprof-run-*")
    (start,) = run_dir.glob("*.start.json")
    return proc, out, run_dir, int(start.name.split(".")[0])


def test_sighup_to_the_launcher_is_passed_on_and_the_report_printed(tmp_path: Path) -> None:
    proc, out, run_dir, child = _start_forever(tmp_path)
    try:
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if not _proc_gone(child):
            os.kill(child, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGHUP, err[-3000:]
    assert "received SIGHUP and passed it to the command" in err
    assert json.loads(out.read_text())["processes"][0]["contributed"]
    assert not run_dir.exists()


def test_a_killed_launcher_takes_the_command_with_it_and_its_folder_goes_next_run(
    tmp_path: Path,
) -> None:
    proc, _, run_dir, child = _start_forever(tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=30)
        assert _wait_gone(child), "the command outlived the killed launcher"
    finally:
        if not _proc_gone(child):
            os.kill(child, signal.SIGKILL)
    assert run_dir.exists()
    nxt = subprocess.run(
        [sys.executable, "-m", "gyreprof", "run", "--", sys.executable, "-c", "pass"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(run_dir.parent)},
    )
    assert nxt.returncode == 0, nxt.stderr[-3000:]
    assert not run_dir.exists()
    assert not list(run_dir.parent.glob("gyreprof-run-*"))


def test_sigterm_to_the_launcher_keeps_every_async_vector_env_workers_data(
    tmp_path: Path,
) -> None:
    data = sigterm_when_ready(tmp_path, script("async_forever.py"))
    roles = [p["role"] for p in data["processes"]]
    assert roles.count("env_worker") == 4, data["processes"]
    assert all(p["contributed"] for p in data["processes"]), data["processes"]


# ------------------------------------------------------------- 6: no silent data loss


def test_each_image_of_an_exec_chain_has_its_own_record(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, script("exec_chain.py"), "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("IMAGE") == 3
    assert data is not None
    assert data["sampler"]["phases"]["env_step"]["count"] == 1500
    sources = sorted(p["source"] for p in data["processes"])
    assert sources == ["before exec", "before exec", "exit"], data["processes"]


def test_a_forked_child_leaving_by_os_exit_saves(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, script("fork_exit.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert data["sampler"]["phases"]["env_step"]["count"] == 500, data["processes"]
    # saved by the child itself (not recovered from a live segment it happened to leave)
    assert sorted(p["source"] for p in data["processes"]) == ["exit", "os-exit"]


@as_root
def test_a_failed_save_keeps_the_live_segment_and_says_where(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {mounted.stderr.decode(errors='replace')}")
    try:
        proc, data = gyreprof_run(tmp_path, script("fill_disk.py"), env={"TMPDIR": str(small)})
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    assert "FULL" in proc.stdout, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "could not save its profile" in proc.stderr
    assert "stay in its live segment" in proc.stderr
    assert data is not None
    (main,) = data["processes"]
    assert main["contributed"] and main["source"] == "live segment", main
    assert data["sampler"]["phases"]["env_step"]["count"] == 200


# ------------------------------------------------------------- 13: another interpreter


def test_another_interpreter_gets_gyreprof_alone_not_its_site_packages(tmp_path: Path) -> None:
    """gyreprof installed in a site-packages that also holds ``only_in_that_site``; the
    command is another Python, which cannot import that module without the launcher, and
    must not be able to under it either."""
    import shutil

    site = tmp_path / "site-packages"
    src = Path(__import__("gyreprof").__file__).resolve().parent
    shutil.copytree(src, site / "gyreprof", ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    (site / "only_in_that_site.py").write_text("")
    other = getattr(sys, "_base_executable", sys.executable)
    probe = [other, "-c", "import only_in_that_site"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert subprocess.run(probe, env=env, capture_output=True).returncode == 1
    launcher = (
        f"import runpy, sys; sys.path.insert(0, {str(site)!r}); "
        f"sys.argv = ['gyreprof', 'run', '--', *{probe!r}]; "
        "runpy.run_module('gyreprof', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", launcher],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert "No module named 'only_in_that_site'" in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1
