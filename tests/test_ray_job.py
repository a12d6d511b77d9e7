"""The parts of a Ray job under ``gyreprof run`` that need no cluster (issue 36): the
runtime env merged with the user's, the setup hook sent by value (a node without
gyreprof runs it and goes on), and the workers' records written into the run folder
and read back with their nodes. The cluster itself: tests/test_ray_cluster.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install gyreprof[ray])")

import gyreprof as gp  # noqa: E402
from gyreprof.integrations._auto import collect  # noqa: E402
from gyreprof.integrations._auto import records as rec  # noqa: E402
from gyreprof.integrations.ray import job  # noqa: E402

HOOK_VAR = job._ray_hook_env()


def test_runtime_env_merged_never_replaced() -> None:
    user = {"env_vars": {"MINE": "1", job.ENV_RAY_RUN: "theirs"}, "pip": ["x"]}
    before = json.dumps(user, sort_keys=True)
    out = job.merge_runtime_env(user, {job.ENV_RAY_RUN: "r1", job.ENV_INBOX: "box"}, "box")
    assert json.dumps(user, sort_keys=True) == before  # the user's dict is left as it was
    assert out["pip"] == ["x"]
    # the user's value wins on a name both set; gyreprof's are added
    assert out["env_vars"] == {"MINE": "1", job.ENV_RAY_RUN: "theirs", job.ENV_INBOX: "box"}
    hook = out["worker_process_setup_hook"]
    assert callable(hook) and hook.__defaults__ == (None, "box", job.NAMESPACE)


def test_runtime_env_object_and_none() -> None:
    from ray.runtime_env import RuntimeEnv

    out = job.merge_runtime_env(RuntimeEnv(env_vars={"A": "b"}), {"G": "1"}, "box")
    assert out["env_vars"] == {"A": "b", "G": "1"}
    out = job.merge_runtime_env(None, {"G": "1"}, "box")
    assert out["env_vars"] == {"G": "1"} and callable(out["worker_process_setup_hook"])


def test_users_own_hook_runs_first_and_a_set_hook_variable_is_kept() -> None:
    out = job.merge_runtime_env({"worker_process_setup_hook": "mod.fn"}, {}, "box")
    assert out["worker_process_setup_hook"].__defaults__[0] == "mod.fn"
    # a runtime env that sets Ray's hook variable itself keeps it: no hook is added
    mine = {"env_vars": {HOOK_VAR: "mod.fn"}}
    out = job.merge_runtime_env(mine, {"G": "1"}, "box")
    assert "worker_process_setup_hook" not in out
    assert out["env_vars"] == {HOOK_VAR: "mod.fn", "G": "1"}


@pytest.mark.parametrize(
    ("bad", "field"), [("pip", "runtime_env"), ({"env_vars": ["A=1"]}, "env_vars")]
)
def test_bad_runtime_env_raises_naming_the_field(bad: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        job.merge_runtime_env(bad, {}, "box")


def test_hook_runs_where_gyreprof_is_not_importable(tmp_path: Path) -> None:
    """The hook travels by value: unpickled and run in a Python where ``import gyreprof``
    fails, it runs the user's own hook and returns (the worker goes on)."""
    from ray import cloudpickle

    shadow = tmp_path / "shadow"
    (shadow / "gyreprof").mkdir(parents=True)
    (shadow / "gyreprof" / "__init__.py").write_text("raise ImportError('not on this node')\n")
    (shadow / "userhook.py").write_text(
        "import os\n\ndef mark():\n    open(os.environ['MARK'], 'w').write('ran')\n"
    )
    out = job.merge_runtime_env({"worker_process_setup_hook": "userhook.mark"}, {}, "box")
    pickled = tmp_path / "hook.pkl"
    pickled.write_bytes(cloudpickle.dumps(out["worker_process_setup_hook"]))
    code = (
        "import pickle, sys\n"
        f"fn = pickle.loads(open({str(pickled)!r}, 'rb').read())\n"
        "fn()\n"
        "import gyreprof\n"
    )
    env = {**os.environ, "PYTHONPATH": str(shadow), "MARK": str(tmp_path / "mark")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    # the hook returned; the script's own `import gyreprof` afterwards is what failed
    assert "not on this node" in proc.stderr and "fn()" not in proc.stderr, proc.stderr
    assert (tmp_path / "mark").read_text() == "ran"


def _snap(phases: tuple[str, ...], steps: int, ns: int) -> bytes:
    prof = gp.Profiler(list(phases), capacity=1 << 10)
    for _ in range(steps):
        prof.begin()
        prof.record(phases[0], ns)
    prof.end()
    return bytes(prof.snapshot().to_bytes())


def payload(pid: int, node: str, steps: int, final: bool = True, trains: bool = True) -> dict:
    record = rec.ProcessRecord(
        pid=pid,
        role="Runner",
        ppid=1,
        how="ray" if final else "ray-periodic",
        node_id=node,
        node_ip=f"10.0.0.{len(node)}",
    )
    return {
        "pid": pid,
        "final": final,
        "node_id": node,
        "record": record.to_json(),
        "sampler": _snap(rec.SAMPLER_PHASES, steps, 1000),
        "trainer": _snap(rec.TRAINER_PHASES, 0, 1000) if trains else None,
    }


def test_records_written_and_read_back_with_their_nodes(tmp_path: Path) -> None:
    got = [
        payload(900001, "aaaa", 30),
        payload(900002, "bbbbbb", 40, final=False, trains=False),
    ]
    missing = [("cccc", "10.0.0.9", "gpu-7", 5, "ImportError: no gyreprof")] * 2
    n = job.write_records(
        tmp_path, got, missing, {"pid": 77, "node_id": "aaaa", "node_ip": "10.0.0.4"}
    )
    assert n == 2
    report = collect.collect_run(tmp_path, "r", ["job"], 0)
    by_pid = {e.pid: e for e in report.processes}
    assert by_pid[900001].node_id == "aaaa" and by_pid[900001].role == "Runner"
    assert by_pid[900002].source == "ray-periodic" and by_pid[900002].node_ip == "10.0.0.6"
    assert report.sampler.summary().phases["env_step"].count == 70
    notes = "\n".join(report.notes)
    assert "2 worker process(es) of the job sent their records through Ray from 2 node" in notes
    assert "1 ended before the job" in notes
    # the node without gyreprof: one line, its workers named
    line = next(x for x in report.notes if "not importable on node gpu-7" in x)
    assert "2 worker process(es)" in line
    record = report.record().to_dict()
    assert {p["pid"]: p.get("node_id") for p in record["processes"]} == {
        900001: "aaaa",
        900002: "bbbbbb",
    }
    text = str(report)
    assert "per node (sampler time totals of its processes):" in text


def test_a_bad_ray_job_file_is_skipped_with_a_note(tmp_path: Path) -> None:
    job.write_records(tmp_path, [payload(900003, "aaaa", 5)], [])
    (tmp_path / job.RAY_JOB_FILE).write_text("[1, 2]")
    report = collect.collect_run(tmp_path, "r", ["job"], 0)
    assert any(f"skipped {job.RAY_JOB_FILE}" in n for n in report.notes), report.notes
    assert report.sampler.summary().phases["env_step"].count == 5


def test_a_record_is_never_written_over_a_process_of_the_folder(tmp_path: Path) -> None:
    job.write_records(tmp_path, [payload(900004, "aaaa", 5)], [])
    job.write_records(tmp_path, [payload(900004, "bbbb", 9)], [])
    report = collect.collect_run(tmp_path, "r", ["job"], 0)
    assert report.sampler.summary().phases["env_step"].count == 5
    assert any("has the pid of a process already in the run folder" in n for n in report.notes)


def _node_payloads() -> list[dict]:
    """Six sampling workers on two nodes (one a straggler: 5x the others' env step), and
    one worker that trained (its files stay its own)."""
    got = []
    for i, (node, steps, ns) in enumerate(
        [("aaaa", 30, 1000), ("aaaa", 40, 1000), ("aaaa", 50, 5000), ("bbbbbb", 20, 1000)]
        + [("bbbbbb", 25, 1200), ("bbbbbb", 35, 900)]
    ):
        p = payload(910001 + i, node, steps, trains=False)
        p["sampler"] = _snap(rec.SAMPLER_PHASES, steps, ns)
        got.append(p)
    return [*got, payload(910100, "aaaa", 10)]


def _alone(folder: Path, got: list[dict], job_file: Path) -> None:
    """The same payloads as one folder of each process's own files (the layout before
    groups), with the job's file copied."""
    for p in got:
        record = rec.ProcessRecord.from_json(p["record"])
        for side in ("sampler", "trainer"):
            if p[side] is not None:
                rec.snap_path(folder, record.pid, side).write_bytes(p[side])
        rec.done_path(folder, record.pid).write_text(record.to_json())
    (folder / job.RAY_JOB_FILE).write_bytes(job_file.read_bytes())


def test_workers_of_a_node_and_role_are_merged_with_their_own_figures_kept(
    tmp_path: Path,
) -> None:
    from gyreprof.render import text

    got = _node_payloads()
    merged_dir, alone_dir = tmp_path / "merged", tmp_path / "alone"
    merged_dir.mkdir()
    alone_dir.mkdir()
    assert job.write_records(merged_dir, got, []) == 7
    # one group a node (its snapshot and its record), the trainer's own files, the job's
    names = sorted(p.name for p in merged_dir.iterdir())
    assert names == [
        "910100.done.json",
        "910100.sampler.snap",
        "910100.trainer.snap",
        "group-0.json",
        "group-0.sampler.snap",
        "group-1.json",
        "group-1.sampler.snap",
        "ray-job.json",
    ]
    _alone(alone_dir, got, merged_dir / job.RAY_JOB_FILE)
    report = collect.collect_run(merged_dir, "r", ["job"], 0)
    before = collect.collect_run(alone_dir, "r", ["job"], 0)
    by_pid = {e.pid: e for e in report.processes}
    # each worker's own figures are its own snapshot's; its node's group holds their sum
    for e in before.processes:
        mine = by_pid[e.pid].sampler_figures()
        own = e.sampler.summary()
        assert mine.events == own.events and mine.elapsed_s == own.elapsed_s
        for name, st in own.phases.items():
            assert (mine.phases[name].count, mine.phases[name].sum_ns) == (st.count, st.sum_ns)
    group = by_pid[910001].group
    assert by_pid[910001].sampler is None and group is by_pid[910002].group
    assert group.summary().phases["env_step"].count == 30 + 40 + 50
    assert by_pid[910100].sampler is not None and by_pid[910100].group is None
    # the report reads as it did from each process's files (the mean lap cost, averaged
    # over the sources in another grouping, may differ in its last bit)
    assert _rounded(report.to_dict()) == _rounded(before.to_dict())
    assert text.nodes(report) == text.nodes(before)
    assert any("straggler: Runner 910003 on node 10.0.0.4" in x for x in text.nodes(report))
    assert str(report) == str(before)


def test_a_group_with_a_snapshot_whose_buckets_are_bad_keeps_its_processes_files(
    tmp_path: Path,
) -> None:
    """The group's snapshots are read with their buckets still encoded; one whose buckets
    do not add up to its record stops its group's merge when they are decoded: nothing of
    the group is written, each of its processes keeps its own files (and the report says
    what is wrong with the bad one), the other node is merged."""
    from helpers.crafted import join_snapshot, split_snapshot

    got = _node_payloads()
    prefix, header, rows = split_snapshot(got[1]["sampler"])
    header["stat"][0][0] -= 1  # env_step's record: one value fewer than its buckets hold
    header["stat"][0][1] -= 1000
    got[1]["sampler"] = join_snapshot(prefix, header, rows)
    assert job.write_records(tmp_path, got, []) == 7
    names = sorted(p.name for p in tmp_path.glob("*.sampler.snap"))
    assert names == [f"{pid}.sampler.snap" for pid in (910001, 910002, 910003, 910100)] + [
        "group-0.sampler.snap"
    ]
    report = collect.collect_run(tmp_path, "r", ["job"], 0)
    assert any("910002" in n and "do not add up" in n for n in report.notes), report.notes
    assert report.sampler.summary().phases["env_step"].count == 30 + 50 + 20 + 25 + 35 + 10


def _rounded(value: Any) -> Any:
    """``value`` with its floats to 12 significant figures."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_a_saved_folder_keeps_the_merged_groups(tmp_path: Path) -> None:
    from gyreprof.commands import report as report_cmd
    from gyreprof.commands import run as run_cmd
    from gyreprof.render import text

    job.write_records(tmp_path / "run", _node_payloads(), [])
    report = collect.collect_run(tmp_path / "run", "r", ["job"], 0)
    run_cmd._save_raw(report, tmp_path / "save")
    again = report_cmd.saved_run(tmp_path / "save")
    assert sorted(p.name for p in (tmp_path / "save").glob("group-*")) == [
        "group-0.sampler.snap",
        "group-1.sampler.snap",
    ]
    assert text.nodes(again) == text.nodes(report)
    assert text.run_processes(again) == text.run_processes(report)
    assert _rounded(again.sampler.summary().to_dict()) == _rounded(
        report.sampler.summary().to_dict()
    )


def test_a_second_job_in_the_folder_keeps_the_first_jobs_groups(tmp_path: Path) -> None:
    got = _node_payloads()[:3]
    job.write_records(tmp_path, got, [])
    job.write_records(tmp_path, got[:2] + [payload(920001, "aaaa", 7, trains=False)] * 2, [])
    report = collect.collect_run(tmp_path, "r", ["job"], 0)
    assert report.sampler.summary().phases["env_step"].count == 30 + 40 + 50 + 7
    assert sum(n.count("already in the run folder") for n in report.notes) == 3


# ------------------------------------------------------------ the inbox's long poll


@pytest.fixture
def inbox(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The inbox's class in this process (no Ray): its flag on this process put back.
    (``setenv`` first: ``delenv`` of an unset name records nothing to undo, and the flag
    the inbox sets would outlive the test, silencing the senders of every later job.)"""
    monkeypatch.setenv(job.ENV_INBOX_HERE, "")
    monkeypatch.delenv(job.ENV_INBOX_HERE)
    return job.Inbox()


def test_the_long_poll_lengthens_with_the_fleet(inbox: Any) -> None:
    """Receiving a send costs the inbox ~3 ms (BENCHMARKS.md, "records streaming in"):
    a fleet's polls last as long as keeps it within 1% of a core, the period at least."""
    for open_polls, wait_s in [(0, 2.0), (1, 2.0), (6, 2.0), (64, 19.2), (1024, 307.2)]:
        inbox.polling = open_polls
        assert inbox.wait_s(2.0) == pytest.approx(wait_s)
        assert open_polls * inbox.SEND_CPU_S / inbox.wait_s(2.0) <= inbox.SHARE + 1e-12
    assert inbox.wait_s(400.0) == 400.0  # a period set longer stays the worker's own
    inbox.polling = 100_000
    assert inbox.wait_s(2.0) == job.MAX_POLL_S == 600.0  # the longest period a worker takes


def test_a_long_poll_of_a_large_fleet_answers_a_refresh_and_the_flush_at_once(
    inbox: Any,
) -> None:
    import asyncio

    async def answer(ask: Any) -> str:
        poll = asyncio.ensure_future(inbox.wait_flush(2.0, "actor-a"))
        for _ in range(1000):  # until the poll is open (its wait: the 600 s cap)
            if inbox.polling == 5001:
                break
            await asyncio.sleep(0)
        assert inbox.wait_s(2.0) == job.MAX_POLL_S
        await ask()
        got: str = await asyncio.wait_for(poll, timeout=60)
        assert inbox.polling == 5000
        return got

    async def main() -> tuple[str, str]:
        inbox.polling = 5000  # the rest of the fleet's polls
        refreshed = await answer(lambda: inbox.refresh("actor-a"))
        flushed = await answer(inbox.flush)
        return refreshed, flushed

    assert asyncio.run(main()) == ("refresh", "final")


def test_the_inbox_fixture_leaves_no_flag_behind() -> None:
    """Runs after the tests above: the inbox's flag, which keeps a process's sender quiet,
    is not left on the test process (every later Ray job's workers inherit it)."""
    assert job.ENV_INBOX_HERE not in os.environ
