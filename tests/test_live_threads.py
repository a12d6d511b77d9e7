"""Live view of ``per_thread=True`` profilers: a segment per thread, one retired segment
for the finished (folded) threads, read back as one profiler by attach/collect/top.

Real threads, real shared-memory files, and a real writer process killed with SIGKILL
(tests/helpers/live_procs/thread_writer.py).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof.cli import main as cli_main
from gyreprof.live import _layout as lay
from gyreprof.recording._recorders import FOLD_AFTER as _FOLD_AFTER

HERE = Path(__file__).resolve().parent
WRITER = HERE / "helpers" / "live_procs" / "thread_writer.py"


@pytest.fixture(autouse=True)
def live_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-live-threads-"))
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _steps(prof: gp.Profiler, n: int) -> None:
    for _ in range(n):
        prof.begin()
        prof.lap(0)
        prof.lap(1)
        prof.end()


def _run_threads(prof: gp.Profiler, n_threads: int, n: int, *, one_by_one: bool = False) -> None:
    ts = [threading.Thread(target=_steps, args=(prof, n)) for _ in range(n_threads)]
    for t in ts:
        t.start()
        if one_by_one:
            t.join()
    for t in ts:
        t.join()
    gc.collect()  # a finished thread's local storage goes: its recorder is queued to fold


def _count(snap: gp.Snapshot, phase: str = "a") -> int:
    return int(snap.summary().phases[phase].count)


def test_every_thread_gets_a_segment_and_attach_merges_them(live_dir: Path) -> None:
    prof = gp.Profiler(["a", "b"], per_thread=True, live="threaded")
    assert isinstance(prof.live, gp.live.publish.LiveThreadGroup)
    assert prof.live.paths == []  # no thread recorded yet
    _run_threads(prof, 3, 50)
    entries = gp.live.list(os.getpid())
    assert len(entries) == 3 and len({e.group for e in entries}) == 1
    assert all(e.name == "threaded" and e.alive and not e.retired for e in entries)
    with gp.live.attach(os.getpid()) as reader:
        assert isinstance(reader, gp.live.LiveGroupReader)
        assert _count(reader.snapshot()) == 150
        assert reader.progress().steps_completed == 150
        _steps(prof, 7)  # this thread too: a fourth segment, seen at the next read
        assert _count(reader.snapshot()) == 157
        assert len(reader.members) == 4
    col = gp.live.collect(os.getpid())
    assert col.merged.phases["a"].count == 157
    assert col.merged.step.count == 157
    prof.live.close()
    assert gp.live.list(os.getpid()) == []
    _steps(prof, 1)  # still records after close
    assert _count(prof.snapshot()) == 158


def test_finished_threads_stay_in_the_live_view_after_they_are_folded(live_dir: Path) -> None:
    prof = gp.Profiler(["a", "b"], per_thread=True, live=True)
    reader_seen = []
    n_finished = _FOLD_AFTER + 3
    _run_threads(prof, n_finished, 20, one_by_one=True)
    prof.count("items", 5)
    # the profiler folded the first finished threads (their recorders are freed)
    assert prof._recs.retired_threads >= _FOLD_AFTER
    retired = [e for e in gp.live.list(os.getpid()) if e.retired]
    assert len(retired) == 1 and len(retired[0].folded) == prof._recs.retired_threads
    assert retired[0].path.name.endswith(".ret")
    with gp.live.attach(os.getpid()) as reader:
        reader_seen.append(_count(reader.snapshot()))
        # one more fold (everything pending): the retired segment is rewritten
        prof._recs.fold()
        reader_seen.append(_count(reader.snapshot()))
        assert reader.progress().steps_completed == n_finished * 20
        assert reader.snapshot().counters["items"] == 5
    assert reader_seen == [n_finished * 20] * 2 == [_count(prof.snapshot())] * 2
    assert gp.live.collect(os.getpid()).merged.phases["a"].count == n_finished * 20
    path = prof.live.paths[-1]
    prof.live.close()
    assert not path.exists() and gp.live.list(os.getpid()) == []


def test_a_thread_segment_still_there_after_its_fold_is_counted_once(live_dir: Path) -> None:
    # the moment between rewriting the retired segment and closing the folded threads'
    # segments, made to last: a folded thread's file is put back by hand (a hard link)
    prof = gp.Profiler(["a", "b"], per_thread=True, live=True)
    _run_threads(prof, 2, 30, one_by_one=True)
    seg = [e.path for e in gp.live.list(os.getpid())]
    keep = [live_dir / f"keep{i}" for i in range(len(seg))]
    for a, b in zip(seg, keep, strict=True):
        os.link(a, b)
    prof._recs.fold()
    for a, b in zip(seg, keep, strict=True):
        assert not a.exists()
        os.link(b, a)
        os.unlink(b)
    entries = gp.live.list(os.getpid())
    assert sum(e.retired for e in entries) == 1 and len(entries) == 3
    with gp.live.attach(os.getpid()) as reader:
        assert _count(reader.snapshot()) == 60  # not 120
    assert gp.live.collect(os.getpid()).merged.phases["a"].count == 60
    prof.live.close()


def test_top_shows_the_threads_merged(live_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prof = gp.Profiler(["a", "b"], per_thread=True, live="topped")
    _run_threads(prof, _FOLD_AFTER + 2, 10, one_by_one=True)
    _run_threads(prof, 2, 10)
    capsys.readouterr()
    rc = cli_main(["top", str(os.getpid()), "--once", "--json", "--interval", "0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    assert data["merged"]["since_start"]["steps"] == (_FOLD_AFTER + 4) * 10
    assert data["merged"]["since_start"]["phases"]["a"]["count"] == (_FOLD_AFTER + 4) * 10
    names = {p["name"] for p in data["processes"]} if "name" in data["processes"][0] else set()
    assert names in ({"topped"}, set())
    prof.live.close()


def test_forked_child_does_not_write_into_the_parents_thread_segments(live_dir: Path) -> None:
    prof = gp.Profiler(["a", "b"], per_thread=True, live=True)
    _steps(prof, 5)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ok = not prof.live.active
            _steps(prof, 100)
            paths = prof.live.reopen()
            ok = ok and len(paths) == 1 and all(str(os.getpid()) in p.name for p in paths)
            os.write(w, b"ok" if ok else b"no")
            prof.live.close()
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 2)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"ok"
    assert _count(gp.live.attach(os.getpid()).snapshot()) == 5
    prof.live.close()


def test_killed_writer_process_is_read_whole(live_dir: Path) -> None:
    n_threads, steps, finished = 3, 40, _FOLD_AFTER + 1
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(n_threads), str(steps), str(finished)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:1] == ["ready"], proc.stderr.read() if proc.stderr else ""
        pid = int(line[1])
        want_steps = (n_threads + finished) * steps
        want_a = want_steps + n_threads  # each held thread opened one more step
        with gp.live.attach(pid) as reader:
            live_snap = reader.snapshot()
            assert _count(live_snap) == want_a
            assert live_snap.summary().step.count == want_steps
            assert live_snap.counters["items"] == n_threads + finished
            prog = reader.progress()
            assert prog.phase == "b" and prog.step == want_steps + n_threads
        assert any(e.retired for e in gp.live.list(pid))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        # dead: its segments are stale, and read whole on request
        entries = gp.live.list(pid)
        assert entries and all(e.stale for e in entries)
        with pytest.raises(LookupError):
            gp.live.collect([pid])
        col = gp.live.collect([pid], include_stale=True)
        assert col.merged.phases["a"].count == want_a
        assert col.merged.step.count == want_steps
        with gp.live.attach(pid) as reader:
            assert _count(reader.snapshot()) == want_a  # falls back to the last state
        removed = gp.live.clean()
        assert {e.path for e in removed} == {e.path for e in entries}
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
