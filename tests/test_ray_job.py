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
