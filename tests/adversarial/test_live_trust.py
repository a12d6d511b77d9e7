"""Live segments under attack: forged as another uid, squatted names, truncation, fuzzing.

The attacking side runs as uid 65534 in a forked child that drops its
privileges (``os.setuid``); those tests need root and skip cleanly otherwise.
The readers are this (root) process, which can read every file: only the
checks of ``gyreprof.live._layout.check_trust`` keep it from believing them.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gyreprof as gp
from gyreprof._core import recorder as _rec
from gyreprof.live import _layout as lay

from helpers.crossuser import (
    NOBODY,
    as_user,
    needs_root,
    plant,
    shared_dir_fixture,  # noqa: F401 - the fixture shared_dir
    victim,
)
from helpers.fuzzing import deep
from helpers.waiting import wait_for


def forged_bytes(victim_pid: int, *, meta_uid: int, steps: int = 50_000) -> tuple[bytes, list[int]]:
    """A well-formed segment claiming ``victim_pid`` with its copied start time, and the
    byte offsets of the words that count its steps (to make it look alive)."""
    prof = gp.Profiler(["env"])
    for _ in range(steps):
        prof.begin()
        prof.lap(0)
    prof.end()
    rec = prof.recorder
    cfg = rec.config()
    stats = rec.stats_array()
    ident = lay.process_identity(victim_pid)
    assert ident is not None and ident.start_ticks >= 0  # copied from /proc/PID/stat
    meta = {
        "name": "victim",
        "label": None,
        "phases": ["env"],
        "clock": str(cfg["clock"]),
        "config": cfg,
        "lap_cost_ns": 50.0,
        "start_unix_s": time.time(),
        "start_mono_ns": 0,
        "gyreprof": "0",
        "host": "h",
        "argv": [],
        "uid": meta_uid,
        "boot_id": lay.boot_id(),
    }
    head, header_bytes, _ = lay.build_header(
        pid=victim_pid,
        identity=ident,
        stats_bytes=8 * len(stats),
        max_counters=int(cfg["max_counters"]),
        meta=meta,
    )
    off = cfg["offsets"]
    L = int(cfg["counts_len"])
    step_row = int(off["counts"]) + 1 * L
    bucket = step_row + int(np.flatnonzero(stats[step_row : step_row + L])[0])
    words = [_rec.H_STEP, _rec.H_STEPS_DONE, bucket]
    return head + stats.tobytes(), [header_bytes + 8 * w for w in words]


@needs_root
@pytest.mark.parametrize("meta_uid", [NOBODY, 0])
def test_a_segment_planted_by_another_uid_is_never_believed(
    shared_dir: Path, meta_uid: int
) -> None:
    with victim(live=True) as (pid, genuine):
        data, _ = forged_bytes(pid, meta_uid=meta_uid)
        own = shared_dir / f"gyreprof-{NOBODY}" / lay.segment_filename(pid, 7)
        loose = shared_dir / lay.segment_filename(pid, 1)
        for target in (own, loose):
            _, res = as_user(NOBODY, plant(target, data))
            assert res == "'planted'", res
            assert target.stat().st_uid == NOBODY
        assert Path(genuine).parent == shared_dir / "gyreprof-0"

        entries = {e.path: e for e in gp.live.list(pid)}
        assert entries[Path(genuine)].alive and entries[Path(genuine)].error is None
        everyone = {e.path: e for e in gp.live.list()}  # root scans every user's folder
        for target in (own, loose):
            for e in (entries.get(target), everyone[target]):
                if e is None:
                    continue
                assert e.error and not e.alive and not e.stale, e
        assert "forged" in everyone[own].error or "header names uid 0" in everyone[own].error
        assert "other users can" in everyone[loose].error

        with gp.live.attach(pid) as r:
            assert r.path == Path(genuine) and r.snapshot().steps == 10
        assert gp.live.collect([pid]).merged.steps == 10
        for target in (own, loose):
            with pytest.raises(ValueError):
                gp.live.attach(target)
        assert all(e.path not in (own, loose) for e in gp.live.clean())


@needs_root
def test_doctor_is_not_fooled_by_a_forged_segment_that_moves(shared_dir: Path) -> None:
    with victim(live=False) as (pid, _):
        data, offsets = forged_bytes(pid, meta_uid=NOBODY)
        target = shared_dir / f"gyreprof-{NOBODY}" / lay.segment_filename(pid, 1)

        def plant_and_tick() -> object:
            plant(target, data)()
            fd = os.open(target, os.O_RDWR)
            end = time.monotonic() + 20
            n = 50_000
            while time.monotonic() < end:  # a hung job whose "step counter" moves
                n += 1
                for off in offsets:
                    os.pwrite(fd, n.to_bytes(8, "little", signed=True), off)
                time.sleep(0.02)
            return "done"

        attacker, _ = as_user(NOBODY, plant_and_tick, wait=False)
        try:
            deadline = time.monotonic() + 10
            while not target.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert target.exists()
            d = gp.doctor(pid, interval_s=1.5, samples=3, stacks=False)
            assert d.state != "progressing", (d.state, d.evidence)
            assert d.state == "blocked", (d.state, d.evidence)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(attacker, signal.SIGKILL)
            os.waitpid(attacker, 0)


@needs_root
@pytest.mark.parametrize("how", ["folder", "symlink", "file"])
def test_squatted_names_cannot_block_live(shared_dir: Path, how: str) -> None:
    mine = shared_dir / "gyreprof-0"

    def squat() -> object:
        if how == "folder":
            os.mkdir(mine, 0o777)
            os.chmod(mine, 0o777)
        elif how == "symlink":
            os.mkdir(shared_dir / "trap", 0o777)
            os.symlink(shared_dir / "trap", mine)
        else:
            mine.write_text("squatted")
        nxt = os.getpid()
        for k in range(1, 200):  # the names the next pids would use
            (shared_dir / lay.segment_filename(nxt + k, 1)).write_text("x")
        return "squatted"

    _, res = as_user(NOBODY, squat)
    assert res == "'squatted'", res
    with victim(live=True) as (pid, path):
        seg = Path(path)
        assert seg.parent == Path(os.environ["HOME"]) / ".cache" / "gyreprof-live", seg
        assert seg.stat().st_uid == 0 and (seg.stat().st_mode & 0o777) == 0o600
        with gp.live.attach(pid) as r:
            assert r.snapshot().steps == 10
    if how == "symlink":
        assert list((shared_dir / "trap").iterdir()) == []


WRITER = """
import sys
import gyreprof as gp
prof = gp.Profiler(["env", "fwd"], live=True)
print(prof.live.path, flush=True)
while True:
    prof.begin(); prof.lap(0); prof.lap(1)
"""


@needs_root
def test_truncation_kills_neither_the_writer_nor_its_readers(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", WRITER], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        path = Path(p.stdout.readline().strip())
        full = path.stat().st_size
        readers = [gp.live.attach(p.pid) for _ in range(3)]
        assert all(r.snapshot().steps >= 0 for r in readers)

        # another user cannot even open it: the writer is safe from them
        _, res = as_user(NOBODY, lambda: os.truncate(path, 0))
        assert res.startswith("PermissionError"), res
        _, res = as_user(NOBODY, lambda: open(path, "r+b"))
        assert res.startswith("PermissionError"), res
        assert p.poll() is None and path.stat().st_size == full

        # the same user can shrink it; readers get a ValueError, not SIGBUS. (The writer
        # is stopped meanwhile: a running writer would fault on the missing pages,
        # which the owner of a process can always do to it; see gyreprof.live._layout.)
        os.kill(p.pid, signal.SIGSTOP)
        try:
            os.truncate(path, 4096 + 64)
            for r in readers:
                with pytest.raises(ValueError, match="truncated"):
                    r.snapshot()
                with pytest.raises(ValueError, match="truncated"):
                    r.progress()
            with pytest.raises(ValueError, match="truncated"):
                gp.live.attach(p.pid)
            os.truncate(path, 0)
            for r in readers:
                with pytest.raises(ValueError):
                    r.snapshot()
                with pytest.raises(ValueError):
                    _ = r.closed
            os.truncate(path, full)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        # the writer runs on (waited for, not slept on). Its counters were zeroed under
        # it, so what it writes now mixes zeroed and carried-on words: a reader may
        # refuse a copy as corrupted (a ValueError), and must never fail otherwise
        seen: list[int] = []

        def steps_grew() -> bool:
            for r in readers:
                with contextlib.suppress(ValueError):
                    seen.append(r.snapshot().steps)
            return len(seen) >= 2 and max(seen) > min(seen)

        wait_for(steps_grew, "the writer's next steps")
        assert p.poll() is None
        for r in readers:
            r.close()
    finally:
        p.terminate()
        rc = p.wait(timeout=30)
    assert rc == -signal.SIGTERM  # not -SIGBUS


@pytest.fixture(scope="module")
def genuine_segment() -> Iterator[bytes]:
    prof = gp.Profiler(["env", "fwd"], live=True)
    for _ in range(500):
        prof.begin()
        prof.lap(0)
        prof.lap(1)
    prof.count("retry", 3)
    prof.end()
    data = prof.live.path.read_bytes()
    prof.live.close()
    yield data


_SEGMENT_FUZZ = settings(
    max_examples=120,
    deadline=2000,
    derandomize=True,  # the same inputs on every run
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_SEGMENT_EDITS: dict[str, st.SearchStrategy[Any]] = {
    "cut": st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 20)),
    "flips": st.lists(
        st.tuples(st.integers(min_value=0, max_value=8191), st.integers(0, 255)), max_size=8
    ),
}


@_SEGMENT_FUZZ
@given(**_SEGMENT_EDITS)
def test_fuzzed_segments_give_value_errors_only(
    genuine_segment: bytes, cut: int | None, flips: list[tuple[int, int]]
) -> None:
    d = Path(os.environ[lay.ENV_DIR])
    data = bytearray(genuine_segment)
    for pos, val in flips:
        if pos < len(data):
            data[pos] = val
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    path = d / "fuzz.seg"
    path.write_bytes(bytes(data))
    path.chmod(0o600)
    try:
        with gp.live.attach(path) as r:
            r.counter_names()
            r.progress()
            s = r.snapshot().summary()
    except (ValueError, LookupError):
        return
    finally:
        path.unlink()
    shares = [p.share for p in s.phases.values() if not math.isnan(p.share)]
    assert all(0.0 <= x <= 1.0 for x in shares) and sum(shares) <= 1.0 + 1e-6, shares


@pytest.mark.slow
@deep(_SEGMENT_FUZZ)
@given(**_SEGMENT_EDITS)
def test_fuzzed_segments_give_value_errors_only_deep(
    genuine_segment: bytes, cut: int | None, flips: list[tuple[int, int]]
) -> None:
    test_fuzzed_segments_give_value_errors_only.hypothesis.inner_test(genuine_segment, cut, flips)


def test_a_symlinked_segment_is_not_followed(tmp_path: Path) -> None:
    d = Path(os.environ[lay.ENV_DIR])
    prof = gp.Profiler(["env"], live=True)
    try:
        link = d / lay.segment_filename(os.getpid(), 999)
        link.symlink_to(prof.live.path)
        with pytest.raises(ValueError, match="symbolic link"):
            gp.live.attach(link)
        entry = next(e for e in gp.live.list(os.getpid()) if e.path == link)
        assert entry.error and not entry.alive
        link.unlink()
    finally:
        prof.live.close()


def test_a_fifo_named_like_a_segment_does_not_hang_the_reader() -> None:
    d = Path(os.environ[lay.ENV_DIR])
    fifo = d / lay.segment_filename(os.getpid(), 998)
    os.mkfifo(fifo, 0o600)
    try:
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="not a regular file"):
            gp.live.attach(fifo)
        entry = next(e for e in gp.live.list(os.getpid()) if e.path == fifo)
        assert entry.error and time.monotonic() - t0 < 30
    finally:
        fifo.unlink()


def test_a_segment_in_an_open_folder_is_not_believed(tmp_path: Path) -> None:
    """Copied into a world-writable folder, even a genuine segment is not evidence."""
    prof = gp.Profiler(["env"], live=True)
    try:
        open_dir = tmp_path / "open"
        open_dir.mkdir()
        open_dir.chmod(0o777)
        copy = open_dir / prof.live.path.name
        shutil.copyfile(prof.live.path, copy)
        copy.chmod(0o600)
        with pytest.raises(ValueError, match="other users can"):
            gp.live.attach(copy)
        (entry,) = gp.live.list(directory=open_dir)
        assert entry.error and not entry.alive
    finally:
        prof.live.close()


def test_the_writer_folder_is_private(shared_dir: Path) -> None:
    prof = gp.Profiler(["env"], live=True)
    try:
        seg = prof.live.path
        folder = seg.parent
        st_dir = folder.lstat()
        assert folder == shared_dir / f"gyreprof-{os.geteuid()}"
        assert not folder.is_symlink() and (st_dir.st_mode & 0o777) == 0o700
        assert (seg.stat().st_mode & 0o777) == 0o600
        with gp.live.attach(os.getpid()) as r:
            assert r.path == seg
    finally:
        prof.live.close()


def test_segment_dir_reports_where_a_reader_looks(shared_dir: Path) -> None:
    assert lay.segment_dir() == shared_dir / f"gyreprof-{os.geteuid()}"


def test_a_torn_copy_is_settled_and_a_still_one_refused(tmp_path: Path) -> None:
    # a copy taken while the writer runs reads the step counters some words apart: with
    # no quiet copy in the reader's tries it may hold more steps completed than begun (a
    # loaded run refused a writer running flat out: "1126000 steps completed of 1125999
    # begun"). That is a torn read, settled; in a quiet copy the same numbers are damage
    prof = gp.Profiler(["env", "fwd"], live=True)
    try:
        for _ in range(10):
            prof.begin()
            prof.lap(0)
            prof.lap(1)
        with gp.live.attach(prof.live.path) as r:
            stats, _ = r._copy()
            block = r._block(stats)
            begun = block.steps_begun
            # what a torn copy can hold: two more steps completed than it read begun
            stats_torn = stats.copy()
            torn = r._block(stats_torn)
            torn._a[_rec.H_STEPS_DONE] = begun + 1
            torn.settle_torn_steps()
            assert torn.steps_begun == torn.steps_completed == begun + 1
            # the same numbers in a quiet copy are damage: refused
            stats_bad = stats.copy()
            r._block(stats_bad)._a[_rec.H_STEPS_DONE] = begun + 1
            with pytest.raises(ValueError, match="steps completed of"):
                r._check_copy(stats_bad)
    finally:
        prof.live.close()
