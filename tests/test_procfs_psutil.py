"""What the doctor and the sweep read of a process through psutil (threads, CPU time,
the main thread's wakeups, open files, descendants) still says what it said from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from gyreprof.analysis.sweep.probe import children_rss_bytes
from gyreprof.diagnostics import _procfs

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")


@linux_only
def test_thread_samples_name_each_thread_and_its_cpu() -> None:
    stop = threading.Event()
    ready = threading.Event()
    tid: list[int] = []

    def burn() -> None:
        tid.append(threading.get_native_id())
        ready.set()
        deadline = time.thread_time() + 0.05  # 50 ms of this thread's own CPU
        while time.thread_time() < deadline:
            pass
        stop.wait(30)

    t = threading.Thread(target=burn, name="burner")
    t.start()
    try:
        assert ready.wait(30)
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end:  # until its CPU time shows (ticks)
            got = {s.tid: s for s in _procfs.thread_samples(os.getpid())}
            if got[tid[0]].cpu_s > 0.0:
                break
            time.sleep(0.01)
        main = got[threading.get_native_id()]
        assert main.state in _procfs.STATE_WORDS and main.name
        # the main thread first, then tid order (tids wrap: the main one need not be smallest)
        assert next(iter(got)) == os.getpid()
        rest = list(got)[1:]
        assert rest == sorted(rest)
        assert got[tid[0]].cpu_s > 0.0
        assert {th.id for th in psutil.Process().threads()} >= set(got)
    finally:
        stop.set()
        t.join()
    assert _procfs.thread_samples(2**22 + 12345) == []  # no such process: nothing


@linux_only
def test_wakeups_count_the_main_thread_only() -> None:
    napped, release = threading.Event(), threading.Event()

    def nap() -> None:
        for _ in range(60):
            time.sleep(0.001)
        napped.set()
        release.wait(10)  # alive while the count is read: its wakeups are there to add

    before = _procfs.main_thread_wakeups(os.getpid())
    assert before is not None
    t = threading.Thread(target=nap)
    t.start()
    napped.wait(10)  # the main thread waits once (a few wakeups at most)
    after_worker = _procfs.main_thread_wakeups(os.getpid())
    release.set()
    t.join()
    assert after_worker is not None and after_worker - before < 30
    for _ in range(40):
        time.sleep(0.001)
    after_main = _procfs.main_thread_wakeups(os.getpid())
    assert after_main is not None and after_main - after_worker >= 40
    assert _procfs.main_thread_wakeups(2**22 + 12345) is None


@linux_only
def test_written_files_are_the_ones_open_for_writing(tmp_path: Path) -> None:
    read_only, written, renamed = tmp_path / "r.txt", tmp_path / "w.log", tmp_path / "x.log"
    read_only.write_text("hello")
    with open(read_only) as r, open(written, "a") as w, open(renamed, "w") as x:
        w.write("12345")
        w.flush()
        x.write("abc")
        x.flush()
        moved = tmp_path / "moved.log"
        renamed.rename(moved)
        found = {f.path: f for f in _procfs.written_files(os.getpid())}
        assert str(read_only) not in found and r.readable()
        assert found[str(written)].size == 5 and found[str(written)].role == "open for writing"
        assert found[str(moved)].size == 3 and found[str(moved)].fd == x.fileno()
    assert _procfs.written_files(2**22 + 12345) == []


@linux_only
def test_a_redirected_stdout_is_found_with_its_role(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('x', flush=True); sys.stdin.readline()"],
            stdin=subprocess.PIPE,
            stdout=fh,
            stderr=fh,
            text=True,
        )
    try:
        t_end = time.monotonic() + 30
        while out.stat().st_size == 0 and time.monotonic() < t_end:
            time.sleep(0.01)
        found = _procfs.written_files(proc.pid)
        assert [(f.path, f.role) for f in found] == [(str(out), "stdout and stderr")]
        assert found[0].size == 2
    finally:
        proc.communicate("\n", timeout=30)


def test_children_rss_counts_a_live_child() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE
    )
    try:
        t_end = time.monotonic() + 30
        rss = children_rss_bytes()
        while rss < 1_000_000 and time.monotonic() < t_end:  # a Python child: megabytes
            time.sleep(0.01)
            rss = children_rss_bytes()
        assert rss >= 1_000_000
    finally:
        proc.communicate(b"\n", timeout=30)
