"""A process killed before it saves keeps its rollout requests: under ``gyreprof run``
each recording process flushes its rollout record while it runs
(``rollout_record``'s flusher), and the report reads the flushed record of a process
that left no whole one, saying it was killed. Real ``gyreprof run`` subprocesses, a real
httpx / requests client and SIGKILL, against the local server."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("requests")

pytestmark = pytest.mark.stacks  # the HTTP clients come with the `stacks` extra

from gyreprof.integrations._auto import rollout_record  # noqa: E402

from helpers.llm_server import LLMServer  # noqa: E402
from helpers.run_scripts.runhelp import (  # noqa: E402
    check_format,
    gyreprof_popen,
    gyreprof_run,
    printed,
    script,
)

FIRST = 20


def _flushed_requests(path: Path) -> int:
    """The requests in a flushed record, or -1 while there is none (or half a one)."""
    try:
        record = rollout_record.read(path)
    except (OSError, ValueError):
        return -1
    return len(record.spans) + sum(t.requests for t in record.folded.values())


def test_sigkilled_client_keeps_its_flushed_requests(tmp_path: Path) -> None:
    env = {rollout_record.ENV_FLUSH_S: "0.2"}
    with LLMServer() as srv:
        proc, out = gyreprof_popen(tmp_path, script("http_killed.py"), srv.url, str(FIRST), env=env)
        try:
            assert proc.stdout is not None
            ready = proc.stdout.readline().split()
            assert ready[:1] == ["READY"], proc.stderr.read() if proc.stderr else ""
            pid, run_dir = int(ready[1]), Path(ready[2])
            part = rollout_record.part_path(run_dir, pid)
            # wait (on the condition, generously) for a flush that holds the first requests
            deadline = time.monotonic() + 120
            while _flushed_requests(part) < FIRST:
                assert time.monotonic() < deadline, "no flush of the first requests"
                time.sleep(0.05)
            seen = _flushed_requests(part)
            os.kill(pid, signal.SIGKILL)  # mid-run: it is sending more requests
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        answered = len(srv.settled_log())
    assert proc.returncode == 128 + signal.SIGKILL, err[-3000:]
    data = json.loads(out.read_text())
    check_format(data)
    roll = data["rollouts"]
    assert roll is not None, err[-3000:]
    [ep] = roll["endpoints"]
    # at least what the flush we saw held, at most what the server answered
    assert seen <= ep["requests"] <= answered
    assert ep["outcomes"]["ok"] == ep["requests"]
    notes = data["notes"]
    assert any("killed by SIGKILL" in n for n in notes), notes
    assert any(n.startswith(f"pid {pid} was killed before it saved") for n in notes), notes


def test_fork_child_leaving_by_os_exit_keeps_all_its_requests(tmp_path: Path) -> None:
    n = 7
    with LLMServer() as srv:
        proc, data = gyreprof_run(tmp_path, script("http_fork_exit.py"), srv.url, str(n))
        log = srv.wait_logged(n)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    child = printed(proc.stdout, "CHILD")
    [ep] = data["rollouts"]["endpoints"]
    assert ep["requests"] == len(log) == n and ep["clients"] == ["requests"]
    # it saved (the patched os._exit): its whole record, no note of a kill
    assert not any(f"pid {child} was killed" in x for x in data["notes"])
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[child]["contributed"]


def _record(pid: int, requests: int) -> rollout_record.RolloutRecord:
    from gyreprof.analysis import rollouts as ar

    row = ["http://127.0.0.1:9/v1/x", 1, 2, "ok", -1, -1, -1, 0, 1, [], 0, 0, False, None, 0, 1]
    return rollout_record.RolloutRecord(
        pid=pid,
        fields=list(ar.SPAN_FIELDS),
        spans=[[*row, "httpx"] for _ in range(requests)],
    )


def _ended_pid() -> int:
    """The pid of a process that has ended (a fixed small pid may be alive: on a machine
    just booted, pid 11 is a kernel thread, and the record is then one that still runs)."""
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_flushed_record_is_read_only_without_a_whole_one(tmp_path: Path) -> None:
    from gyreprof.integrations._auto import records as rec

    killed, saved = _ended_pid(), _ended_pid()
    part = rollout_record.PART_SUFFIX
    (tmp_path / f"{killed}{part}").write_text(_record(killed, 3).to_json())
    (tmp_path / f"{saved}{part}").write_text(_record(saved, 2).to_json())
    rec.rollouts_path(tmp_path, saved).write_text(_record(saved, 5).to_json())  # it saved
    (tmp_path / f"13{part}").write_text('{"format": "nope"}')
    (tmp_path / f"x{part}").write_text(_record(14, 1).to_json())
    notes: list[str] = []
    got = rollout_record.flushed(tmp_path, notes)
    assert [r.pid for r in got] == [killed]
    assert any(
        n.startswith(f"pid {killed} was killed before it saved") and "3 rollout" in n for n in notes
    )
    assert any(n.startswith(f"skipped 13{part}") for n in notes)
    assert not any(f"pid {saved}" in n for n in notes)


def test_flush_stops_once_the_process_saved_or_the_run_is_over(tmp_path: Path) -> None:
    from gyreprof.integrations._auto import rollout_log as rl

    written: list[Path] = []

    def write(path: Path, data: bytes) -> None:
        written.append(path)

    _log_rows(rl.thread_log(), 0, 3)  # this thread's log: something to flush
    assert rollout_record.flush(tmp_path, 5, lambda: False, write) is not None
    assert written == [rollout_record.part_path(tmp_path, 5)]
    assert rollout_record.flush(tmp_path, 5, lambda: True, write) is None
    gone = tmp_path / "removed-run"  # the launcher removed the run's folder
    assert rollout_record.flush(gone, 5, lambda: False, write) is None
    assert not gone.exists() and len(written) == 1


def test_flushed_record_of_a_live_process_says_it_still_runs(tmp_path: Path) -> None:
    me = os.getpid()
    (tmp_path / f"{me}{rollout_record.PART_SUFFIX}").write_text(_record(me, 2).to_json())
    notes: list[str] = []
    assert len(rollout_record.flushed(tmp_path, notes)) == 1
    assert notes == [
        f"pid {me} had not saved when the run was collected (it still runs): its 2 rollout "
        f"request(s) are those of its last flush (every {rollout_record.flush_interval():g} s "
        "or so), not the ones after it"
    ]


@pytest.mark.parametrize(
    ("raw", "want"),
    [("", rollout_record.FLUSH_S), ("0.5", 0.5), ("0", 0.0), ("x", rollout_record.FLUSH_S)],
)
def test_flush_interval_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, want: float
) -> None:
    monkeypatch.setenv(rollout_record.ENV_FLUSH_S, raw)
    assert rollout_record.flush_interval() == want
    monkeypatch.setenv(rollout_record.ENV_FLUSH_S, "nan")
    assert rollout_record.flush_interval() == rollout_record.FLUSH_S


@pytest.mark.parametrize(
    "n", [0, 1, rollout_record.ROWS_PER_BLOCK, rollout_record.ROWS_PER_BLOCK + 1]
)
def test_record_json_is_the_serial_layout(n: int) -> None:
    # the block writer gives what the generic one does, at and across a block's edge,
    # and reads back row for row
    import json

    from gyreprof.model._serial import dumps

    r = _record(3, n)
    r.gauges.append({"in_flight": float("nan"), "max_in_flight": 2.0})
    assert json.loads(r.to_json()) == json.loads(dumps(r))
    again = rollout_record.RolloutRecord.from_json(r.to_json())
    assert again.rows() == r.rows() and again.gauges[0]["max_in_flight"] == 2.0
    assert json.loads(r.to_json())["gauges"][0]["in_flight"] is None  # strict JSON


def _log_rows(log: Any, start: int, n: int) -> None:
    for i in range(start, start + n):
        ep = f"http://127.0.0.1:9/v1/{'a' if i % 3 else 'b'}"
        log.add((ep, i, i + 5, "ok", 1, 2, -1, 0, 1, (), 10, 3, False, None, 0, 1, "httpx"))


def _comparable(text: str) -> dict[str, object]:
    data = json.loads(text)
    data.pop("gauges", None)  # a flush leaves the core's gauges out (read on their thread)
    return data


def test_flush_reuses_its_blocks_and_stays_exact_across_a_fold() -> None:
    # the naive cache (by position) would repeat or lose rows once the log drops its
    # oldest half; the flushed record must equal the whole record at every point
    from gyreprof.integrations._auto import rollout_log as rl

    log = rl.ThreadLog()
    block = rollout_record.ROWS_PER_BLOCK
    _log_rows(log, 0, 3 * block + 7)
    text, cache = rollout_record.encode_flush([log], 42, {})
    whole = rollout_record.from_logs([log], 42)
    assert whole is not None and _comparable(text) == _comparable(whole.to_json())
    assert len(cache) == 3
    _log_rows(log, 3 * block + 7, block)
    text2, cache2 = rollout_record.encode_flush([log], 42, cache)
    assert (
        sum(1 for k, v in cache2.items() if cache.get(k) is not None and cache[k][2] is v[2]) == 3
    )
    whole = rollout_record.from_logs([log], 42)
    assert whole is not None and _comparable(text2) == _comparable(whole.to_json())
    # past the cap: the oldest half is folded into totals, the rest kept whole
    _log_rows(log, 4 * block + 7, rl.SPAN_CAP)
    assert log.dropped > 0
    text3, _ = rollout_record.encode_flush([log], 42, cache2)
    whole = rollout_record.from_logs([log], 42)
    assert whole is not None and _comparable(text3) == _comparable(whole.to_json())
    record = rollout_record.RolloutRecord.from_json(text3)
    total = len(record.rows()) + sum(t.requests for t in record.folded.values())
    assert total == 4 * block + 7 + rl.SPAN_CAP
    assert rollout_record.encode_flush([rl.ThreadLog()], 42, {})[0] == ""


def test_sigkilled_child_client_keeps_its_flushed_requests(tmp_path: Path) -> None:
    # the command itself ends well: only its child, the rollout client, was killed
    env = {rollout_record.ENV_FLUSH_S: "0.2"}
    with LLMServer() as srv:
        proc, data = gyreprof_run(
            tmp_path, script("http_child_killed.py"), srv.url, str(FIRST), env=env
        )
        answered = len(srv.settled_log())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("KILLED "))
    pid, seen = (int(x) for x in line.split()[1:3])
    [ep] = data["rollouts"]["endpoints"]
    assert FIRST <= seen <= ep["requests"] <= answered
    assert any(n.startswith(f"pid {pid} was killed before it saved") for n in data["notes"])
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[pid]["contributed"] and by_pid[pid]["source"] == "live segment"


def test_a_zombie_is_not_said_to_run() -> None:
    # killed and not yet reaped: kill(pid, 0) still finds it, /proc says it is a zombie
    import subprocess
    import sys

    # a child that runs until killed below
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert rollout_record._alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while rollout_record._alive(child.pid):  # until the kernel has made it a zombie
            assert time.monotonic() < deadline, "a SIGKILLed child still runs"
            time.sleep(0.01)
        assert child.poll() is not None or not rollout_record._alive(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not rollout_record._alive(child.pid)
