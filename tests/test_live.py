"""Live view: shared-memory segments, readers in other processes, fork safety, ``gyreprof top``.

Every writer here is a real process (tests/live_procs/*.py, the AsyncVectorEnv
example) publishing into a private segment directory (GYREPROF_LIVE_DIR).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gyreprof as gp
from gyreprof._core import Recorder
from gyreprof.cli import main as cli_main
from gyreprof.live import _layout as lay
from gyreprof.live.reader import LiveReader

from helpers.segments import segment_bytes, segment_parts
from helpers.waiting import wait_for

HERE = Path(__file__).resolve().parent
PROCS = HERE / "helpers" / "live_procs"
ROOT = HERE.parent
EXAMPLE = ROOT / "examples" / "live_async_vector_env.py"


@pytest.fixture(autouse=True)
def live_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # world-readable so a reader running as another user reaches the files themselves
    d = Path(tempfile.mkdtemp(prefix="gyreprof-live-test-"))
    d.chmod(0o755)
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _readline(proc: subprocess.Popen[str], timeout_s: float = 30.0) -> str:
    """One line of the child's stdout, or fail (never hang) after ``timeout_s``."""
    out = proc.stdout
    assert out is not None
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(out.readline()), daemon=True)
    t.start()
    t.join(timeout_s)
    if not box or not box[0]:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        pytest.fail(f"no line from {proc.args!r} within {timeout_s} s; stderr: {err[-2000:]}")
    return box[0].strip()


@contextlib.contextmanager
def writer(mode: str, seconds: float = 30.0) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    proc = subprocess.Popen(
        [sys.executable, str(PROCS / "writer.py"), mode, str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        word, pid, path = _readline(proc).split()
        assert word == "ready" and int(pid) == proc.pid
        yield proc, proc.pid, Path(path)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )


def _top_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``gyreprof top ARGS`` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = cli_main(["top", *args])
    except SystemExit as exc:  # argparse rejecting the command line
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _segments(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if lay.parse_filename(n))


def _check_snapshot(snap: gp.Snapshot) -> None:
    """Internal consistency of one snapshot: counts add up, percentiles in order."""
    assert [r.count for r in snap.rows] == snap.counts.sum(axis=1).tolist()
    s = snap.summary()
    rows = [*(s.phases[name] for name in snap.phases), s.step]
    for row, st in enumerate(rows):
        assert st.count == int(snap.counts[row].sum())
        if st.count == 0:
            continue
        seq = [st.min, st.p50, st.p90, st.p99, st.p999, st.max]
        assert all(a <= b for a, b in itertools.pairwise(seq)), (row, seq)


# ------------------------------------------------------------------------- in-process


def test_publish_attach_close_in_process(live_dir: Path) -> None:
    prof = gp.Profiler(["env", "fwd"], live="trainer-0")
    path = prof.live.path
    assert path is not None and path.parent == live_dir and path.exists()
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    env, fwd = prof.ids("env", "fwd")
    for _ in range(500):
        prof.begin()
        prof.lap(env)
        prof.lap(fwd)
    prof.end()
    prof.count("retry", 3)
    prof.count("timeout")

    (entry,) = gp.live.list()
    assert (entry.pid, entry.name, entry.alive, entry.stale) == (
        os.getpid(),
        "trainer-0",
        True,
        False,
    )
    assert entry.phases == ("env", "fwd") and entry.path == path

    with gp.live.attach(os.getpid()) as reader:
        snap = reader.snapshot()
        mine = prof.snapshot()
        assert np.array_equal(snap.counts, mine.counts)
        assert snap.steps == mine.steps == 500
        assert snap.counters == {"retry": 3, "timeout": 1}
        assert reader.summary().phases["env"].count == 500
        prog = reader.progress()
        assert prog.steps_completed == 500 and prog.phase is None
        assert prog.counters == {"retry": 3, "timeout": 1}
        assert prog.now_ns >= prog.last_activity_ns > 0
        assert reader.alive and not reader.closed and not reader.stale

        prof.live.close()
        prof.live.close()  # idempotent
        assert not path.exists() and prof.live.path is None and not prof.live.active
        assert reader.closed and not reader.stale
        assert reader.snapshot().steps == 500  # the last state stays readable
    # the profiler keeps recording in private memory
    prof.begin()
    prof.lap(env)
    prof.end()
    assert prof.summary().steps == 501
    assert gp.live.list() == []
    with pytest.raises(LookupError, match="no gyreprof live segment"):
        gp.live.attach(os.getpid())


def test_header_is_the_documented_layout(live_dir: Path) -> None:
    prof = gp.Profiler(["a", "b", "c"], live=True, label="lbl")
    raw = prof.live.path.read_bytes()
    fields = lay.FIXED.unpack_from(raw, 0)
    magic, version, header_bytes, stats_bytes, pid = fields[:5]
    assert magic == b"GYRELIVE" and version == lay.LIVE_VERSION == gp.live.LIVE_VERSION
    assert pid == os.getpid() and header_bytes % 4096 == 0
    assert len(raw) == header_bytes + stats_bytes
    assert stats_bytes == Recorder.required_bytes(3)
    meta = json.loads(raw[128 : 128 + fields[8]])
    assert meta["phases"] == ["a", "b", "c"] and meta["name"] == "lbl"
    assert meta["clock"] == "monotonic" and meta["lap_cost_ns"] > 0
    assert meta["config"]["offsets"]["words"] * 8 <= stats_bytes
    assert struct.unpack_from("<I", raw, lay.STATE_OFFSET)[0] == lay.STATE_LIVE
    prof.live.close()


def test_unwritable_segment_directory_is_a_clear_oserror(
    live_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_dir = live_dir / "plain-file"
    not_a_dir.write_text("x")
    monkeypatch.setenv(lay.ENV_DIR, str(not_a_dir / "sub"))
    with pytest.raises(OSError, match="cannot create a live segment.*GYREPROF_LIVE_DIR"):
        gp.Profiler(["a"], live=True)


def test_refuses_bad_names() -> None:
    with pytest.raises(ValueError, match="printable"):
        gp.Profiler(["a"], per_thread=True, live="   ")
    with pytest.raises(ValueError, match="printable"):
        gp.Profiler(["a"], live="   ")
    with pytest.raises(TypeError):
        gp.Profiler(["a"], live=3)  # type: ignore[arg-type]


def test_segment_removed_when_profiler_is_collected_and_at_exit(live_dir: Path) -> None:
    prof = gp.Profiler(["a"], live=True)
    path = prof.live.path
    assert path is not None and path.exists()
    del prof
    gc.collect()
    assert not path.exists()
    code = (
        "import gyreprof as gp; p = gp.Profiler(['a'], live=True); p.begin(); p.lap(0); "
        "print(p.live.path)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=True,
    )
    assert Path(out.stdout.strip()).parent == live_dir
    assert _segments(live_dir) == []


def test_interval_is_exact_between_two_snapshots(live_dir: Path) -> None:
    prof = gp.Profiler(["x"], live=True)
    for _ in range(100):
        prof.record("x", 1000)
    reader = gp.live.attach(os.getpid())
    a = reader.snapshot()
    for _ in range(50):
        prof.record("x", 5_000_000)
    b = reader.snapshot()
    w = gp.live.interval(a, b).summary()
    st = w.phases["x"]
    assert st.count == 50
    assert abs(st.p50 - 5e6) / 5e6 < 1e-3 and st.max == 5_000_000 and st.min >= 4.99e6
    assert gp.live.interval(b, b).summary().phases["x"].count == 0
    with pytest.raises(ValueError, match="single-source"):
        gp.live.interval(gp.merge([a, a]), b)
    reader.close()
    prof.live.close()


# --------------------------------------------------------------------- other processes


def test_reader_snapshots_are_consistent_while_writer_runs_full_rate() -> None:
    with writer("fullrate") as (_, pid, _path):
        reader = gp.live.attach(pid)
        assert reader.name == "fullrate" and reader.phases == ("a", "b", "c")
        prev: gp.Snapshot | None = None
        n = 0
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end or n < 100:
            snap = reader.snapshot(windows=n % 20 == 0)
            _check_snapshot(snap)
            for w in snap.windows():
                assert 1 <= w.steps <= 200
            if prev is not None:
                assert (snap.counts >= prev.counts).all()  # buckets only grow
                assert snap.totals.steps_completed >= prev.totals.steps_completed
                assert snap.counters.get("retry", 0) >= prev.counters.get("retry", 0)
                _check_snapshot(gp.live.interval(prev, snap))
            prev = snap
            n += 1
        first_steps = reader.snapshot().steps
        # the writer was never held up: it steps on
        wait_for(lambda: reader.snapshot().steps > first_steps, "the writer's next step")
        assert prev is not None and prev.counters["retry"] > 0
        reader.close()


def test_sigkilled_writer_leaves_a_stale_segment_that_is_detected_and_cleaned(
    live_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with writer("paced") as (proc, pid, path):
        with gp.live.attach(pid) as running:
            wait_for(lambda: running.snapshot().steps > 0, "the writer's first steps")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert path.exists()
    (entry,) = gp.live.list()
    assert entry.pid == pid and entry.stale and not entry.alive and entry.error is None

    with gp.live.attach(pid) as reader:  # post-mortem: the last state is still readable
        assert reader.stale and not reader.alive and not reader.closed
        snap = reader.snapshot()
        assert snap.steps > 0
        _check_snapshot(snap)
    with pytest.raises(LookupError, match="stale"):
        gp.live.collect([pid])
    assert gp.live.collect([pid], include_stale=True).per_process[pid].steps == snap.steps

    rc, out, err = _top_here(capsys, "--once", "--json", "--interval", "0")
    assert rc == 1, err  # nothing live to show: the stale segment is reported, exit 1
    report = json.loads(out)
    assert [e["pid"] for e in report["stale"]] == [pid] and report["processes"] == []

    removed = gp.live.clean()
    assert [e.path for e in removed] == [path] and not path.exists()
    assert gp.live.clean() == []
    with pytest.raises(LookupError, match="no process with pid"):
        gp.live.attach(pid)


def test_reused_pid_is_detected_by_start_time(live_dir: Path) -> None:
    prof = gp.Profiler(["a"], live=True)
    raw = bytearray(prof.live.path.read_bytes())
    ticks = struct.unpack_from("<q", raw, 32)[0]
    ctime = struct.unpack_from("<d", raw, 40)[0]
    struct.pack_into("<q", raw, 32, ticks + 5 if ticks >= 0 else -1)
    struct.pack_into("<d", raw, 40, ctime - 3600.0)
    fake = live_dir / lay.segment_filename(os.getpid(), 999)
    fake.write_bytes(bytes(raw))
    entries = {e.path: e for e in gp.live.list(os.getpid())}
    assert entries[fake].stale and not entries[fake].alive
    assert entries[prof.live.path].alive and not entries[prof.live.path].stale
    assert [e.path for e in gp.live.clean()] == [fake]
    prof.live.close()


def test_bad_targets_and_segments_give_clear_errors(
    live_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = _top_here(capsys, "--once", "--json", "--interval", "0")
    assert rc == 1 and json.loads(out)["processes"] == []
    with pytest.raises(LookupError, match="no process with pid"):
        gp.live.attach(2**22 + 12345)
    with pytest.raises(LookupError, match="has no gyreprof live segment"):
        gp.live.attach(os.getppid())
    with pytest.raises(ValueError, match="positive"):
        gp.live.attach(-4)

    foreign = live_dir / lay.segment_filename(os.getpid(), 50)
    foreign.write_bytes(b"not a segment at all " * 20)
    with pytest.raises(ValueError, match="not a gyreprof live segment"):
        gp.live.attach(foreign)
    with pytest.raises(ValueError, match="not a gyreprof live segment"):
        gp.live.attach(os.getpid())  # its only segment is foreign
    (entry,) = gp.live.list()
    assert entry.error and "not a gyreprof live segment" in entry.error and not entry.stale
    rc, _, err = _top_here(capsys, str(os.getpid()), "--once", "--json")
    assert rc == 2 and "not a gyreprof live segment" in err
    tiny = live_dir / "tiny.seg"
    tiny.write_bytes(b"GYRE")
    with pytest.raises(ValueError, match="truncated"):
        gp.live.attach(tiny)
    empty = live_dir / "empty.seg"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="truncated"):
        gp.live.attach(empty)
    with pytest.raises(LookupError):
        gp.live.attach(live_dir / "absent.seg")
    foreign.unlink()

    prof = gp.Profiler(["a"], live=True)
    raw = prof.live.path.read_bytes()
    half = live_dir / "half.seg"
    half.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="truncated"):
        gp.live.attach(half)
    newer = bytearray(raw)
    struct.pack_into("<I", newer, 8, 99)
    (live_dir / "newer.seg").write_bytes(bytes(newer))
    with pytest.raises(ValueError, match="version 99"):
        gp.live.attach(live_dir / "newer.seg")
    garbled = bytearray(raw)
    garbled[130:140] = b"\xff" * 10
    (live_dir / "garbled.seg").write_bytes(bytes(garbled))
    with pytest.raises(ValueError, match="corrupted"):
        gp.live.attach(live_dir / "garbled.seg")
    prof.live.close()

    rc, _, err = _top_here(capsys, str(os.getppid()), "--once", "--json")
    assert rc == 1 and "no gyreprof live segment" in err
    rc, _, err = _top_here(capsys, "not-a-pid", "--once")
    assert rc == 2 and "PID must be a process id" in err


def _attach_error_as(uid: int, target: Any) -> str:
    """Fork, drop to ``uid``, try to attach; the exception's type and message."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            os.setgid(uid)
            os.setuid(uid)
            try:
                gp.live.attach(target)
                msg = "attached"
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                msg = f"{type(exc).__name__}: {exc}"
            os.write(w, msg.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read().decode()
    os.waitpid(pid, 0)
    return data


def test_permission_denied_is_a_clear_permission_error(live_dir: Path) -> None:
    prof = gp.Profiler(["a"], live=True)
    path = prof.live.path
    try:
        if os.geteuid() == 0:
            for target in (path, os.getpid()):
                msg = _attach_error_as(65534, target)
                assert msg.startswith("PermissionError: permission denied"), msg
                assert "same user" in msg
        else:
            path.chmod(0)
            with pytest.raises(PermissionError, match="permission denied.*same user"):
                gp.live.attach(path)
            with pytest.raises(PermissionError, match="permission denied"):
                gp.live.attach(os.getpid())
    finally:
        path.chmod(0o600)
        prof.live.close()


def test_fork_children_never_write_into_the_parent_segment(live_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(PROCS / "forker.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdin is not None
    try:
        lines = {}
        for _ in range(3):
            word, pid, path, *rest = _readline(proc).split()
            lines[word] = (int(pid), Path(path), rest)
        parent_pid = lines["parent"][0]
        child_pid, child_path, (active_after_fork,) = lines["child"]
        mp_pid, mp_path, _ = lines["mp"]
        assert parent_pid == proc.pid and active_after_fork == "False"
        assert child_path.name.startswith(f"gyreprof-live-{child_pid}-")

        with gp.live.attach(parent_pid) as r:
            assert r.name == "parent" and r.snapshot().steps == 100  # children wrote elsewhere
        with gp.live.attach(child_pid) as r:
            assert r.name == "parent" and r.snapshot().steps == 1100  # inherited 100 + own 1000
        with gp.live.attach(mp_pid) as r:
            assert r.name == "mp" and r.snapshot().steps == 50
        tree = gp.live.collect(parent_pid)
        assert set(tree.per_process) == {parent_pid, child_pid, mp_pid}
        assert tree.merged.step.count == 100 + 1100 + 50 and not tree.missing

        proc.stdin.write("release-mp\n")
        proc.stdin.flush()
        assert _readline(proc) == "mp-joined 0"
        assert not mp_path.exists()  # a multiprocessing child removes its segment on exit
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert _segments(live_dir) == []


def test_async_vector_env_example_sees_four_workers_and_the_merge(live_dir: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "300", "--json"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    workers = report["workers"]
    assert sorted(int(p) for p in workers) == sorted(report["worker_pids"])
    assert len(workers) == 4 and report["missing"] == {}
    assert sorted(w["name"] for w in workers.values()) == [f"env_worker{i}" for i in range(4)]
    counts = [w["env_step_count"] for w in workers.values()]
    assert all(c > 0 for c in counts)
    # every vector step is an env step, or (after an episode ended) an automatic reset
    resets = [w["reset_count"] - 1 for w in workers.values()]
    assert [c + r for c, r in zip(counts, resets, strict=True)] == [300] * 4
    assert report["merged_env_step_count"] == sum(counts)
    assert report["tree_pids"] == sorted([report["parent_pid"], *report["worker_pids"]])
    assert {"env_step", "vec_step", "policy"} <= set(report["tree_phases"])
    assert report["parent_vec_step_count"] == 300
    assert _segments(live_dir) == []


def test_collect_reports_missing_pids() -> None:
    with writer("paced") as (_, pid, _path):
        got = gp.live.collect([pid, os.getppid()])
        assert set(got.per_process) == {pid}
        assert "has no gyreprof live segment" in got.missing[os.getppid()]
        assert got.merged.phases["env"].count > 0
        assert json.loads(json.dumps(got.to_dict(), allow_nan=True))["per_process"]
    with pytest.raises(LookupError):
        gp.live.collect(2**22 + 12345)


# ------------------------------------------------------------------------------ top


def test_top_once_json_against_a_live_process(capsys: pytest.CaptureFixture[str]) -> None:
    with writer("paced") as (_, pid, path), writer("paced") as (_, pid2, _p2):
        out = _cli("top", str(pid), "--once", "--json", "--interval", "0.3")
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["format"] == "gyreprof.top/1" and report["target_pid"] == pid
        (p,) = report["processes"]
        assert (p["pid"], p["name"], p["path"], p["alive"]) == (pid, "paced", str(path), True)
        assert set(p["since_start"]["phases"]) == {"env", "fwd", "xfer"}
        assert p["since_start"]["steps"] > 0 and p["since_start"]["counters"]["steps_seen"] > 0
        env = p["since_start"]["phases"]["env"]
        assert env["p50_ns"] <= env["p99_ns"] <= env["max_ns"] and 0 < env["share"] <= 1
        win = p["last_window"]
        assert win["steps"] > 0 and win["interval_s"] > 0.2 and win["steps_per_s"] > 0
        assert p["open_phase"] in (None, "env", "fwd", "xfer")
        assert report["merged"] is None

        out = _cli("top", "--once", "--json", "--interval", "0.2")  # every segment + merge
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert sorted(p["pid"] for p in report["processes"]) == sorted([pid, pid2])
        merged = report["merged"]["since_start"]
        assert set(merged["phases"]) == {"env", "fwd", "xfer"}
        assert merged["steps"] == sum(p["since_start"]["steps"] for p in report["processes"])

        rc, text, _ = _top_here(capsys, str(pid), "--once", "--interval", "0")
        assert rc == 0 and "env" in text and f"pid {pid}" in text


def test_top_interactive_view_and_missing_rich(capsys: pytest.CaptureFixture[str]) -> None:
    with writer("paced") as (_, pid, _path):
        out = _cli("top", str(pid), "-n", "2", "--interval", "0.2")
        assert out.returncode == 0, out.stderr
        assert f"pid {pid}" in out.stdout and "env" in out.stdout and "p99" in out.stdout

        rc, text, _ = _top_here(capsys, str(pid), "--json", "-n", "2", "--interval", "0.2")
        frames = [json.loads(line) for line in text.splitlines()]
        assert rc == 0 and len(frames) == 2
        assert frames[0]["processes"][0]["last_window"] is None
        assert frames[1]["processes"][0]["last_window"]["steps"] > 0

        no_rich = (
            "import sys; sys.modules['rich'] = None; from gyreprof.cli import main; "
            "sys.exit(main(sys.argv[1:]))"
        )
        run = [sys.executable, "-c", no_rich, "top", str(pid)]
        out = subprocess.run(run, capture_output=True, text=True, env=_env(), timeout=60)
        assert out.returncode == 2 and "pip install 'gyreprof[rich]'" in out.stderr
        out = subprocess.run(
            [*run, "--once", "--json", "--interval", "0"],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["processes"][0]["pid"] == pid


def test_reader_of_a_closed_reader_raises() -> None:
    prof = gp.Profiler(["a"], live=True)
    r = LiveReader(prof.live.path)
    r.close()
    with pytest.raises(ValueError, match="closed"):
        r.snapshot()
    prof.live.close()


def test_top_once_exit_codes_without_live_segments(capsys, live_dir) -> None:
    """No segment at all -> 1; only an unreadable one -> 2."""
    rc, _, _ = _top_here(capsys, "--once", "--json", "--interval", "0")
    assert rc == 1
    (live_dir / "gyreprof-live-99999-1.seg").write_bytes(b"not a segment")
    rc, out, _ = _top_here(capsys, "--once", "--json", "--interval", "0")
    assert rc == 2
    assert json.loads(out)["processes"] == []


def test_clean_skips_things_that_only_look_like_segments(live_dir) -> None:
    (live_dir / "gyreprof-live-77777-1.seg").mkdir()
    assert gp.live.clean() == []
    assert (live_dir / "gyreprof-live-77777-1.seg").is_dir()


# ------------------------------------------------------------------------ trust


def _segment_claiming(pid: int, **meta_changes: Any) -> bytes:
    """A well-formed segment for ``pid`` (its real start time), metadata changed as asked."""
    meta, stats, ident = segment_parts(pid, "claimed")
    meta.update(meta_changes)
    return segment_bytes(pid, meta, stats, ident)


def _plant(live_dir: Path, serial: int, data: bytes, mode: int = 0o600) -> Path:
    path = live_dir / lay.segment_filename(os.getpid(), serial)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_a_well_formed_segment_of_this_process_is_believed(live_dir: Path) -> None:
    path = _plant(live_dir, 70, _segment_claiming(os.getpid()))
    (entry,) = gp.live.list(os.getpid())
    assert entry.path == path and entry.alive and entry.error is None
    with gp.live.attach(os.getpid()) as r:
        assert r.snapshot().steps == 5


def test_the_header_uid_must_be_the_file_owner(live_dir: Path) -> None:
    path = _plant(live_dir, 71, _segment_claiming(os.getpid(), uid=os.geteuid() + 1))
    (entry,) = gp.live.list(os.getpid())
    assert entry.error and "header names uid" in entry.error
    assert not entry.alive and not entry.stale
    with pytest.raises(gp.live.UntrustedSegmentError, match="header names uid"):
        gp.live.attach(path)
    with pytest.raises(ValueError, match="header names uid"):
        gp.live.attach(os.getpid())
    assert gp.live.clean() == []


def test_a_segment_without_an_owner_uid_is_not_believed(live_dir: Path) -> None:
    path = _plant(live_dir, 72, _segment_claiming(os.getpid(), uid=None))
    with pytest.raises(gp.live.UntrustedSegmentError):
        gp.live.attach(path)


def test_a_segment_others_may_write_is_not_believed(live_dir: Path) -> None:
    path = _plant(live_dir, 73, _segment_claiming(os.getpid()), mode=0o666)
    with pytest.raises(gp.live.UntrustedSegmentError, match="writable by other users"):
        gp.live.attach(path)


def test_a_segment_of_an_earlier_boot_is_stale_even_with_a_matching_start_time(
    live_dir: Path,
) -> None:
    if not lay.boot_id():
        pytest.skip("no boot id on this system")
    _plant(live_dir, 74, _segment_claiming(os.getpid(), boot_id="an-earlier-boot"))
    (entry,) = gp.live.list(os.getpid())
    assert entry.error is None and entry.stale and not entry.alive
    with pytest.raises(LookupError, match="stale segment"):
        gp.live.collect([os.getpid()])
    assert [e.path for e in gp.live.clean()] == [entry.path]


def test_a_reader_whose_segment_shrinks_gets_a_value_error(live_dir: Path) -> None:
    path = _plant(live_dir, 75, _segment_claiming(os.getpid()))
    with gp.live.attach(path) as r:
        assert r.progress().steps_completed == 5
        os.truncate(path, 200)
        with pytest.raises(gp.live.SegmentReadError, match="truncated"):
            r.progress()
        with pytest.raises(ValueError, match="truncated"):
            r.snapshot()
        with pytest.raises(ValueError, match="truncated"):
            r.counter_names()


def test_event_counts_are_the_snapshots_counts_read_without_a_snapshot(live_dir: Path) -> None:
    """What gyreprof run's stall watch reads of each segment every second: per phase the
    steady and warm-up events (a snapshot row's count + warm_count) and the steps
    completed, the same numbers as a full snapshot's."""
    from gyreprof.diagnostics._doctor_evidence import _launcher_events

    prof = gp.Profiler(["env", "fwd", "idle"], live="gyreprof-run-x:trainer", warmup_steps=5)
    env, fwd = prof.ids("env", "fwd")
    for i in range(40):
        prof.begin()
        prof.lap(env)
        if i % 3:
            prof.lap(fwd)
    prof.begin()
    prof.lap(env)  # a step begun, not completed
    try:
        with gp.live.attach(prof.live.path) as r:
            counts, steps = r.event_counts()
            snap = r.snapshot(windows=False)
        want = {row.name: row.count + row.warm_count for row in snap.rows[:-1]}
        assert counts == want == {"env": 41, "fwd": 26, "idle": 0}
        assert steps == snap.totals.steps_completed == 40
        # the steady and warm-up parts are both in: 5 of env's events were warm-up
        assert snap.rows[0].warm_count == 5 and snap.rows[0].count == 36
        assert _launcher_events(os.getpid()) == {**want, "(trainer steps)": 40}
    finally:
        prof.live.close()


@pytest.mark.parametrize("damage", ["negative bucket", "negative warm-up", "past int64"])
def test_event_counts_refuse_counts_no_writer_produces(live_dir: Path, damage: str) -> None:
    from gyreprof.diagnostics._doctor_evidence import _launcher_events

    prof = gp.Profiler(["env"], live="gyreprof-run-y:sampler")
    for _ in range(10):
        prof.begin()
        prof.lap(0)
    try:
        with gp.live.attach(prof.live.path) as r:
            stats, taken = r._copy()
            block = r._block(stats)
            if damage == "negative bucket":
                block.counts[0, int(np.flatnonzero(block.counts[0])[0])] = -1
            elif damage == "negative warm-up":
                block.warm[0, 0] = -3
            else:
                block.counts[0, :2] = 2**62
            r._copy = lambda: (stats, taken)  # type: ignore[method-assign]
            with pytest.raises(ValueError, match="is corrupted"):
                r.event_counts()
        assert _launcher_events(os.getpid()) == {"env": 10}  # the real segment reads
    finally:
        prof.live.close()
