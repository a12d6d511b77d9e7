"""``gyreprof run`` of a Ray job on a cluster it did not start (issue 36): a two-node
``ray.cluster_utils.Cluster`` (two raylets on this machine, one CPU each, a custom
resource naming each node), started by the test apart from the launcher, so its
workers never see the launcher's environment. The job (``helpers/ray_cluster_job.py``)
joins with ``ray.init(address=...)`` and pins one CartPole runner actor to each node.

Checked against the script's own figures: the job's env steps, every actor listed with
its node, the loop's shape (synchronous, or a pipeline read as overlapped), the wait
ratio within 5 points of the script's clock, a runner killed mid-run keeping its last
periodic record, and a node where gyreprof is not importable named, the job's exit
code unchanged; and a verl-style job (rollout-worker actors returning token batches,
no env): its wait, loop and side. Select with ``pytest -m ray``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install gyreprof[ray])")
pytest.importorskip("gymnasium")
pytest.importorskip("torch")

from ray.cluster_utils import Cluster  # noqa: E402

from helpers.run_scripts.runhelp import check_format, gyreprof_run  # noqa: E402

pytestmark = pytest.mark.ray

HERE = Path(__file__).resolve().parent
JOB = HERE / "helpers" / "ray_cluster_job.py"
ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "GYREPROF_RAY_PERIOD_S": "1",
}
ITERS = 6
STEPS = 200


@pytest.fixture(scope="module", autouse=True)
def _ray_env() -> Iterator[None]:
    """The raylets (and so their workers) start with these; put back after the module."""
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two raylets (node_a the head, node_b), started before any job and apart from the
    launcher; shut down after the module."""
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"node_a": 1}},
    )
    try:
        c.add_node(num_cpus=1, resources={"node_b": 1})
        c.wait_for_nodes(timeout=120)
        yield c
    finally:
        c.shutdown()


class Job:
    def __init__(self, tmp: Path, cluster: Cluster, mode: str, env: dict[str, str] | None = None):
        self.save = tmp / "raw"
        self.proc, data = gyreprof_run(
            tmp,
            sys.executable,
            str(JOB),
            cluster.address,
            mode,
            str(ITERS),
            str(STEPS),
            options=("--save", str(self.save)),
            env={**ENV, **(env or {})},
            timeout=400,
        )
        (tmp / "script.stderr").write_text(self.proc.stderr)
        assert self.proc.returncode == 0, self.proc.stderr[-4000:]
        assert data is not None, self.proc.stderr[-4000:]
        check_format(data)
        self.data: dict[str, Any] = data
        line = next(ln for ln in self.proc.stdout.splitlines() if ln.startswith("STACK_JSON "))
        self.own: dict[str, Any] = json.loads(line[len("STACK_JSON ") :])

    def by_pid(self) -> dict[int, dict[str, Any]]:
        return {int(p["pid"]): p for p in self.data["processes"]}

    def env_steps(self) -> int:
        return int(self.data["sampler"]["phases"]["env_step"]["count"])


@pytest.fixture(scope="module")
def sync_job(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Job:
    return Job(tmp_path_factory.mktemp("ray_sync"), cluster, "sync")


def test_env_steps_equal_the_script_count(sync_job: Job) -> None:
    assert sync_job.env_steps() == sync_job.own["asked_steps"] == ITERS * STEPS * 2


def test_every_actor_listed_with_its_node(sync_job: Job) -> None:
    procs = sync_job.by_pid()
    for name, where in sync_job.own["runners"].items():
        entry = procs.get(int(where["pid"]))
        assert entry is not None, (name, sync_job.data["processes"])
        assert entry["contributed"] and entry["role"] == "Runner", entry
        assert entry["node_id"] == where["node_id"], entry
        assert entry["node_ip"], entry
    nodes = {w["node_id"] for w in sync_job.own["runners"].values()}
    assert len(nodes) == 2  # one runner on each node
    driver = procs[sync_job.own["driver_pid"]]
    assert driver["role"] == "main" and driver["node_id"], driver
    notes = "\n".join(sync_job.data["notes"])
    assert "sent their records through Ray from 2 node(s)" in notes, notes


def _node_table(text: str) -> list[str]:
    lines = text.splitlines()
    at = lines.index("per node (sampler time totals of its processes):")
    return lines[at + 1 : at + 4]


def test_report_has_a_per_node_table(sync_job: Job) -> None:
    """In the run's report and in ``gyreprof report DIR`` of its --save folder: a row per
    node with its env steps (each runner's STEPS x ITERS)."""
    import subprocess

    again = subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", str(sync_job.save)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    for text in (sync_job.proc.stderr, again.stdout):
        header, *rows = _node_table(text)
        assert header.split()[:4] == ["node", "processes", "env", "steps"], header
        for where in sync_job.own["runners"].values():
            row = next(r for r in rows if where["node_id"][:8] in r)
            assert str(ITERS * STEPS) in row.split(), row


def test_loop_synchronous_and_wait_on_the_script_clock(sync_job: Job) -> None:
    verdict = sync_job.data["verdict"]
    assert verdict is not None, sync_job.data["notes"]
    assert verdict["loop"] == "sync", verdict
    got, own = sync_job.data["wait"]["ratio"], sync_job.own["wait_ratio"]
    assert abs(got - own) <= 0.05, (got, own)


def test_pipelined_driver_read_as_overlapped(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    job = Job(tmp_path_factory.mktemp("ray_pipeline"), cluster, "pipeline")
    assert job.env_steps() == job.own["asked_steps"]
    assert job.data["verdict"]["loop"] == "overlapped", job.data["verdict"]


def test_killed_worker_keeps_its_last_periodic_record(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    job = Job(tmp_path_factory.mktemp("ray_kill"), cluster, "kill")
    killed = job.own["runners"]["node_b"]
    entry = job.by_pid()[int(killed["pid"])]
    assert entry["contributed"] and entry["source"] == "ray-periodic", entry
    # every step it made before it was killed, from the record it sent last
    assert job.env_steps() == job.own["asked_steps"]
    notes = "\n".join(job.data["notes"])
    assert "their last periodic record is kept" in notes, notes


def test_node_without_gyreprof_is_named_and_the_job_runs_on(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A cluster whose node_b cannot import gyreprof (a package of that name that fails to
    import comes first on its workers' path): named in the notes, the job's exit code 0,
    node_a's runner still counted."""
    shadow = tmp_path_factory.mktemp("no_gyreprof")
    (shadow / "gyreprof").mkdir()
    (shadow / "gyreprof" / "__init__.py").write_text(
        "raise ImportError('gyreprof is not installed on this node')\n"
    )
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"node_a": 1}},
    )
    try:
        path = os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])
        c.add_node(num_cpus=1, resources={"node_b": 1}, env_vars={"PYTHONPATH": path})
        c.wait_for_nodes(timeout=120)
        job = Job(tmp_path_factory.mktemp("ray_missing"), c, "sync")
    finally:
        c.shutdown()
    assert job.data["exit_code"] == 0
    notes = "\n".join(job.data["notes"])
    assert "gyreprof is not importable on node" in notes, notes
    a = job.by_pid()[int(job.own["runners"]["node_a"]["pid"])]
    assert a["contributed"] and a["node_id"] == job.own["runners"]["node_a"]["node_id"]
    assert job.env_steps() == ITERS * STEPS  # node_a's runner only
    assert int(job.own["runners"]["node_b"]["pid"]) not in job.by_pid()


@pytest.mark.slow
def test_rllib_ppo_on_two_nodes(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> None:
    """RLlib PPO joining the cluster: its two env runners (one CPU each) land one on each
    node; every env step is counted once, as RLlib counts them, and each runner is listed
    as RLlib's env runner with its node."""
    pytest.importorskip("ray.rllib")
    tmp = tmp_path_factory.mktemp("ray_rllib")
    proc, data = gyreprof_run(
        tmp,
        sys.executable,
        str(HERE / "stacks" / "rllib_ppo.py"),
        "env",
        "3",
        "0.001",
        env={**ENV, "RLLIB_PPO_ADDRESS": cluster.address},
        timeout=500,
    )
    (tmp / "script.stderr").write_text(proc.stderr)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("STACK_JSON "))
    own = json.loads(line[len("STACK_JSON ") :])
    assert own["env_steps"] == 3 * 200
    assert int(data["sampler"]["phases"]["env_step"]["count"]) == own["env_steps"]
    by_pid = {int(p["pid"]): p for p in data["processes"]}
    runners = [by_pid[int(r["pid"])] for r in own["runners"]]
    assert {r["role"] for r in runners} == {"rllib_env_runner"}, runners
    assert len({r["node_id"] for r in runners}) == 2, runners
    # RLlib's stop kills its runners (ray.kill) before ray.shutdown: each sent a fresh
    # record first, never only its last periodic one
    assert {r["source"] for r in runners} == {"ray-kill"}, runners


OTHER_JOB = """
import json, os, sys
import ray
ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0)
def look():
    return {"run": os.environ.get("GYREPROF_RAY_RUN"), "hooked": "gyreprof" in sys.modules,
            "pid": os.getpid()}

print("OTHER " + json.dumps(ray.get([look.options(resources={n: 0.01}).remote()
                                    for n in ("node_a", "node_b")])))
ray.shutdown()
"""


def test_other_jobs_are_never_touched(sync_job: Job, cluster: Cluster) -> None:
    """A job of the same cluster started without gyreprof (after the instrumented one):
    its workers on both nodes get neither the run's variables nor gyreprof."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", OTHER_JOB, cluster.address],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("OTHER "))
    seen = json.loads(line[len("OTHER ") :])
    assert [s["run"] for s in seen] == [None, None], seen
    assert [s["hooked"] for s in seen] == [False, False], seen


def test_a_verl_style_token_job(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> None:
    """verl-style: one rollout-worker actor a node returns token batches (a tiny torch
    language model sampling under ``no_grad``, no env) to a driver that submits, waits
    and trains on them. The driver's wait is within 5 points of its own clock, its loop
    is synchronous (it asked for the refs it waits on), and the run is sampler-bound.
    Each worker records no phase at all (no env, no forward followed by an env step):
    each call of its method is one of its batches, so it is listed with its node and
    class, and its time is named down to the method that spent it, first in the advice
    (with no batches, the workers went unlisted and the answer stopped at "sampler")."""
    job = Job(tmp_path_factory.mktemp("ray_tokens"), cluster, "tokens")
    verdict = job.data["verdict"]
    assert verdict is not None, job.data["notes"]
    assert verdict["loop"] == "sync" and verdict["bound"] == "sampler", verdict
    got, own = job.data["wait"]["ratio"], job.own["wait_ratio"]
    assert abs(got - own) <= 0.05, (got, own)
    procs = job.by_pid()
    for where in job.own["runners"].values():
        entry = procs[int(where["pid"])]
        assert entry["role"] == "RolloutWorker" and entry["node_id"] == where["node_id"], entry
    # ITERS generate calls each, and the one call that asked where it runs
    line = next(r for r in verdict["reasons"] if r.startswith("sampler: in the 2 collector"))
    assert f"({2 * (ITERS + 1)} batches in all" in line, line
    top = verdict["sampler_sites"][0]
    assert top["function"] == "RolloutWorker.generate" and top["share"] > 0.5, verdict
    assert verdict["advice"][0].startswith("look first at RolloutWorker.generate"), verdict
