"""Did the parallelism take effect? Registration, census, checks — against real processes.

The process trees come from tests/helpers/workers_parallel.py: a real gymnasium vector
env of CartPole-v1 whose envs call ``register_worker`` when they are built.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import gyreprof as gp
from gyreprof._support.errors import CorruptDataError
from gyreprof.analysis.parallelism import (
    Census,
    ParallelismReport,
    ThroughputComparison,
    unregister_worker,
)
from gyreprof.analysis.parallelism import registry as registry_mod
from gyreprof.analysis.parallelism.cpu import cgroup_quota_cores, cpu_limits, parse_cpu_max
from gyreprof.cli import main as cli_main

HERE = Path(__file__).resolve().parent
HELPER = HERE / "helpers" / "workers_parallel.py"
# the folder holding the gyreprof these tests imported (src/ in a checkout, the
# environment's site-packages when installed): child processes import the same one
SRC = Path(gp.__file__).resolve().parent.parent
CPUS = len(os.sched_getaffinity(0))


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker-registry")


@pytest.fixture(autouse=True)
def _registry_env(registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GYREPROF_REGISTRY_DIR", str(registry))


@contextlib.contextmanager
def sampler(
    registry: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[dict[str, Any]]:
    """Run workers_parallel.py; yield its JSON line; always shut it down."""
    child_env = {
        **os.environ,
        "GYREPROF_REGISTRY_DIR": str(registry),
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    log = registry.parent / f"sampler-{time.monotonic_ns()}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(HELPER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=child_env,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            proc.wait(timeout=10)
            raise AssertionError(f"sampler did not start:\n{log.read_text()}")
        yield json.loads(line)
    finally:
        try:
            assert proc.stdin is not None
            proc.stdin.write("quit\n")
            proc.stdin.close()
            proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def async_oversubscribed(registry: Path) -> Iterator[dict[str, Any]]:
    """AsyncVectorEnv, 4 workers × 4 BLAS threads on (at most) 2 CPUs, OMP_NUM_THREADS=4."""
    with sampler(
        registry,
        *("--vector", "async", "--num-envs", "4", "--blas-threads", "4", "--cpus", "2"),
        *("--config", "num_threads=4", "--config", "env_id=CartPole-v1"),
        env={"OMP_NUM_THREADS": "4"},
    ) as info:
        yield info


@pytest.fixture(scope="module")
def async_clean(registry: Path) -> Iterator[dict[str, Any]]:
    """AsyncVectorEnv, 2 single-threaded workers on 2 CPUs, settings as intended."""
    with sampler(
        registry,
        *("--vector", "async", "--num-envs", "2", "--blas-threads", "1", "--cpus", "2"),
        *("--config", "num_threads=1"),
        env={"OMP_NUM_THREADS": "1"},
    ) as info:
        yield info


@pytest.fixture(scope="module")
def sync4(registry: Path) -> Iterator[dict[str, Any]]:
    """The same 4-env config through SyncVectorEnv: everything inline in one process."""
    with sampler(registry, "--vector", "sync", "--num-envs", "4") as info:
        yield info


# --------------------------------------------------------------------------- census / check


def test_async_vector_env_found_as_four_workers(async_oversubscribed: dict[str, Any]) -> None:
    info = async_oversubscribed
    c = gp.census(info["pid"], interval_s=0.05)
    assert isinstance(c, Census)
    assert c.roles() == {"env_worker": 4}
    assert sorted(p.pid for p in c.workers("env_worker")) == sorted(info["workers"])
    root = c.root
    # The env AsyncVectorEnv builds in the parent to read the spaces: not a fifth worker.
    assert root is not None and root.role is None and root.worker is None
    assert root.main_envs is not None and root.main_envs.registrations == 1
    assert c.main_envs() == {"env_worker": 1}
    group = next(g for g in c.groups() if g.role == "env_worker")
    assert group.count == 4
    assert group.process_name == "Worker<AsyncVectorEnv>"
    for p in c.workers():
        assert p.ppid == info["pid"]
        assert p.num_threads is not None and p.num_threads >= 1
        assert p.rss_bytes is not None and p.rss_bytes > 0
        assert p.worker is not None and p.worker.config["env_id"] == "CartPole-v1"
    text = str(c)
    assert "4 ×" in text and "env_worker (Worker<AsyncVectorEnv>)" in text
    json.loads(c.to_json())

    report = gp.check_parallelism(info["pid"], expected={"env_worker": 4})
    assert isinstance(report, ParallelismReport)
    assert report.observed["env_worker"] == 4
    assert report.main_envs == {"env_worker": 1}
    assert "count" not in report.kinds() and "inline" not in report.kinds()
    pids = ", ".join(str(p) for p in sorted(info["workers"]))
    assert report.describe("env_worker") == (
        f"4 env_worker processes (pids {pids}), and 1 env built in the main process "
        f"(pid {info['pid']})"
    )
    assert "4 env_worker processes (pids" in str(report)


def test_sync_vector_env_flagged_as_no_worker_processes(sync4: dict[str, Any]) -> None:
    # register_worker ran 4 times in one process (once per env): no error, 4 envs counted.
    c = gp.census(sync4["pid"], interval_s=0)
    assert c.roles() == {} and c.main_envs() == {"env_worker": 4}
    report = gp.check_parallelism(sync4["pid"], expected={"env_worker": 4}, census_result=c)
    assert not report.ok and report.exit_code == 1
    assert report.observed == {"env_worker": 0} and report.main_envs == {"env_worker": 4}
    [count] = [f for f in report.details if f.kind == "count"]
    assert "no worker processes where 4 were expected" in count.message
    assert f"4 envs built in the main process (pid {sync4['pid']})" in count.message
    assert count.data["observed"] == 0 and count.data["main_envs"] == 4
    assert report.describe("env_worker") == (
        f"no env_worker worker processes; main process, envs inline: 4 envs built in the main "
        f"process (pid {sync4['pid']})"
    )
    # Flagged without being told what to expect, too.
    unasked = gp.check_parallelism(sync4["pid"], census_result=c)
    [inline] = unasked.details
    assert inline.kind == "inline" and "env_worker: no worker processes" in inline.message


def test_thread_settings_different_from_intended_flagged(
    async_oversubscribed: dict[str, Any],
) -> None:
    intended = {"OMP_NUM_THREADS": 1, "num_threads": 1, "torch_seed": 0, "env_id": "CartPole-v1"}
    report = gp.check_parallelism(
        async_oversubscribed["pid"], expected={"env_worker": 4}, config=intended
    )
    config = {f.data["key"]: f for f in report.details if f.kind == "config"}
    assert set(config) == {"OMP_NUM_THREADS", "num_threads", "torch_seed"}
    assert config["OMP_NUM_THREADS"].data["actual"] == "4"
    assert sorted(config["OMP_NUM_THREADS"].data["pids"]) == sorted(async_oversubscribed["workers"])
    assert "intended 1" in config["num_threads"].message
    assert "run with 4" in config["num_threads"].message
    assert config["torch_seed"].data["actual"] is None
    assert "never read it" in config["torch_seed"].message
    # "4" in the environment, 4 registered: intended values as strings compare equal.
    same = gp.check_parallelism(
        async_oversubscribed["pid"],
        expected={"env_worker": 4},
        config={"OMP_NUM_THREADS": "4", "num_threads": "4", "blas_num_threads": 4},
    )
    assert "config" not in same.kinds()


def test_idle_pools_and_declared_threads_are_not_oversubscription(
    async_oversubscribed: dict[str, Any],
) -> None:
    # 4 workers x pools of 4 BLAS threads, num_threads=4 declared, on 2 CPUs; but the
    # workers wait on stdin and none of those threads runs (tests/test_parallelism_threads.py
    # has workers whose threads really run)
    report = gp.check_parallelism(
        async_oversubscribed["pid"], expected={"env_worker": 4}, sample_s=0.3
    )
    assert report.cores_available <= 2
    assert len(report.threads_per_worker) == 4
    for w in report.threads_per_worker.values():
        assert (w.threads, w.source) == (0, "busy threads")
        assert w.pool == 4 and w.declared == 4
    assert report.threads_total == 0
    assert not report.warnings and "oversubscription" not in report.kinds()
    assert any(n.startswith("idle thread pool") and "of 4 threads" in n for n in report.notes)


@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs for 2 single-threaded workers")
def test_clean_setup_is_ok(async_clean: dict[str, Any]) -> None:
    report = gp.check_parallelism(
        async_clean["pid"],
        expected={"env_worker": 2},
        config={"num_threads": 1, "OMP_NUM_THREADS": 1},
    )
    assert report.ok, str(report)
    assert report.exit_code == 0 and report.findings == []
    assert report.threads_total is not None and report.threads_total <= 2
    assert "ok" in str(report)


def test_unregistered_children_are_counted_by_label(registry: Path) -> None:
    with sampler(registry, "--no-env", "--sleepers", "2") as info:
        report = gp.check_parallelism(info["pid"], expected={"env_worker": 2})
        [count] = [f for f in report.details if f.kind == "count"]
        assert "gp.register_worker('env_worker')" in count.message
        assert "2 × sleep" in count.message
        by_label = gp.check_parallelism(info["pid"], expected={"sleep": 2})
        assert by_label.observed == {"sleep": 2}
        assert "count" not in by_label.kinds()
        no_registry = gp.check_parallelism(info["pid"], config={"num_threads": 1})
        assert "registry" in no_registry.kinds()


def test_idle_workers_reported_when_sampled(registry: Path) -> None:
    with sampler(registry, "--no-env", "--sleepers", "2") as info:
        report = gp.check_parallelism(info["pid"], expected={"sleep": 2}, sample_s=0.3)
        [idle] = [f for f in report.details if f.kind == "idle"]
        assert sorted(idle.data["pids"]) == sorted(info["sleepers"])
        assert "used no CPU in 0.3 s" in idle.message


def test_worker_exiting_mid_census(registry: Path) -> None:
    with sampler(registry, "--no-env", "--sleepers", "3") as info:
        sleepers = set(info["sleepers"])

        def kill() -> None:
            for pid in sleepers:
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()

        timer = threading.Timer(0.4, kill)
        timer.start()
        try:
            c = gp.census(info["pid"], interval_s=2.0)
        finally:
            timer.cancel()
        assert sleepers <= set(c.vanished)
        assert not sleepers & {p.pid for p in c.processes}
        assert c.root is not None
        assert "exited during the census" in str(c)
        report = gp.check_parallelism(info["pid"], expected={"sleep": 3}, census_result=c)
        assert report.observed == {"sleep": 0}
        assert any("exited during the check" in n for n in report.notes)


def test_zombie_child_is_not_a_worker() -> None:
    child = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        c = gp.census(os.getpid(), interval_s=0)
        zombie = c.process(child.pid)
        assert zombie.status == psutil.STATUS_ZOMBIE and zombie.error is not None
        report = gp.check_parallelism(os.getpid(), expected={"true": 1}, census_result=c)
        assert report.observed["true"] == 0
        assert any(f"pid {child.pid}" in n and "not yet reaped" in n for n in report.notes)
    finally:
        child.wait()


def test_census_survives_children_coming_and_going(registry: Path) -> None:
    with sampler(registry, "--no-env", "--churn") as info:
        for _ in range(15):
            c = gp.census(info["pid"], interval_s=0)
            assert c.root is not None
            for p in c.processes:
                assert p.pid > 0 and p.name
            gp.check_parallelism(info["pid"], expected={"env_worker": 0}, census_result=c)


def test_nonexistent_pid_is_a_clear_error() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError, match=f"no process with pid {child.pid}"):
        gp.census(child.pid)
    with pytest.raises(ProcessLookupError):
        gp.check_parallelism(child.pid, expected={"env_worker": 1})
    for bad in (0, -5, "123", True, 1.5):
        with pytest.raises(ValueError, match="pid must be a positive integer"):
            gp.census(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="interval_s"):
        gp.census(os.getpid(), interval_s=-1)


def test_bad_check_arguments() -> None:
    pid = os.getpid()
    with pytest.raises(ValueError, match=r"expected\['env_worker'\]"):
        gp.check_parallelism(pid, expected={"env_worker": -1})
    with pytest.raises(ValueError, match=r"expected\['env_worker'\]"):
        gp.check_parallelism(pid, expected={"env_worker": "8"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="config keys"):
        gp.check_parallelism(pid, config={1: 2})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="max_threads_per_core"):
        gp.check_parallelism(pid, max_threads_per_core=0)


# --------------------------------------------------------------------------- registration


def test_register_again_counts_one_more_env(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    try:
        first = gp.register_worker("learner", registry=reg, lr=3e-4, layers=[64, 64])
        assert first.pid == os.getpid() and first.registrations == 1
        assert json.loads((reg / f"{os.getpid()}.json").read_text())["role"] == "learner"
        c = gp.census(os.getpid(), interval_s=0, registry=reg)
        assert c.roles() == {"learner": 1}  # registered once, alone: a process with that role
        again = gp.register_worker("learner", registry=reg, lr=1e-3)  # never an error
        assert again.registrations == 2 and again.config == {"lr": 1e-3}
        c = gp.census(os.getpid(), interval_s=0, registry=reg)
        assert c.roles() == {} and c.main_envs() == {"learner": 2}  # two built inline
        old_style = gp.register_worker("learner", registry=reg, replace=True)
        assert old_style.registrations == 3
        other = gp.register_worker("actor", registry=reg)
        assert other.registrations == 1
        c = gp.census(os.getpid(), interval_s=0, registry=reg)
        assert c.roles() == {"actor": 1}
    finally:
        unregister_worker(reg)
    assert not (reg / f"{os.getpid()}.json").exists()
    assert unregister_worker(reg) is False


def _registering_factory(role: str) -> Any:
    """The env factory a user writes: register_worker inside it, nothing else."""
    import gymnasium

    def make() -> Any:
        gp.register_worker(role, env_id="CartPole-v1")
        return gymnasium.make("CartPole-v1")

    return make


def test_real_async_vector_env_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AsyncVectorEnv(4): the naive count is 5 (the parent builds one env to read the spaces)."""
    gymnasium = pytest.importorskip("gymnasium")
    reg = tmp_path / "reg"
    monkeypatch.setenv("GYREPROF_REGISTRY_DIR", str(reg))  # the forked workers inherit it
    env = gymnasium.vector.AsyncVectorEnv([_registering_factory("env_worker")] * 4, context="fork")
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        workers = sorted(p.pid for p in env.processes)
        report = gp.check_parallelism(os.getpid(), expected={"env_worker": 4})
        assert report.observed["env_worker"] == 4, str(report)
        assert report.main_envs == {"env_worker": 1}
        assert "count" not in report.kinds() and "inline" not in report.kinds()
        assert sorted(p.pid for p in report.census.workers("env_worker")) == workers
        assert report.describe("env_worker") == (
            f"4 env_worker processes (pids {', '.join(map(str, workers))}), and 1 env built "
            f"in the main process (pid {os.getpid()})"
        )
        # Expecting 5 (the naive count) is reported as one too many expected.
        five = gp.check_parallelism(os.getpid(), expected={"env_worker": 5})
        assert five.observed["env_worker"] == 4 and "count" in five.kinds()
    finally:
        env.close()
        unregister_worker(reg)


def test_real_sync_vector_env_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SyncVectorEnv(4): four calls in one process, no exception, no worker processes."""
    gymnasium = pytest.importorskip("gymnasium")
    reg = tmp_path / "reg"
    monkeypatch.setenv("GYREPROF_REGISTRY_DIR", str(reg))
    env = gymnasium.vector.SyncVectorEnv([_registering_factory("env_worker")] * 4)
    try:
        env.reset(seed=0)
        report = gp.check_parallelism(os.getpid(), expected={"env_worker": 4})
        assert report.observed["env_worker"] == 0 and report.main_envs == {"env_worker": 4}
        again = ParallelismReport.from_dict(json.loads(report.to_json()))
        assert again == report and str(again) == str(report)
        assert again.census.main_envs() == {"env_worker": 4}
        root = again.census.root
        assert root is not None and root.main_envs is not None
        assert root.main_envs.config["env_id"] == "CartPole-v1"
        [count] = [f for f in report.details if f.kind == "count"]
        assert "env_worker: no worker processes where 4 were expected" in count.message
        assert "4 envs built in the main process" in count.message
        # With no worker process, the config the envs read in the main process is compared.
        same = gp.check_parallelism(os.getpid(), config={"env_id": "CartPole-v1"})
        assert "config" not in same.kinds() and "registry" not in same.kinds()
        other = gp.check_parallelism(os.getpid(), config={"env_id": "Pendulum-v1"})
        [config] = [f for f in other.details if f.kind == "config"]
        assert config.data["pids"] == [os.getpid()] and config.data["actual"] == "CartPole-v1"
    finally:
        env.close()
        unregister_worker(reg)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"callback": print}, "config['callback']"),
        ({"sizes": [1, object()]}, "config['sizes'][1]"),
        ({"nested": {1: "x"}}, "config['nested']"),
        ({"deep": {"a": {"b": {1, 2}}}}, "config['deep']['a']['b']"),
        ({"lr": math.nan}, "config['lr']"),
    ],
)
def test_malformed_config_names_the_key(tmp_path: Path, config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError) as info:
        gp.register_worker("w", registry=tmp_path, **config)
    assert key in str(info.value)
    assert not any(tmp_path.iterdir())


def test_bad_roles(tmp_path: Path) -> None:
    for role in ("", "  ", None, 3, "two\nlines"):
        with pytest.raises(ValueError, match="role"):
            gp.register_worker(role, registry=tmp_path)  # type: ignore[arg-type]


def test_numpy_scalars_and_thread_settings_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np = pytest.importorskip("numpy")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    try:
        rec = gp.register_worker(
            "w", registry=tmp_path, n=np.int64(7), f=np.float32(0.5), b=np.bool_(True)
        )
    finally:
        unregister_worker(tmp_path)
    assert rec.config == {"n": 7, "f": 0.5, "b": True}
    assert rec.thread_env["OMP_NUM_THREADS"] == "3"
    assert "MKL_NUM_THREADS" not in rec.thread_env
    assert rec.os_threads is not None and rec.os_threads >= 1
    if importlib.util.find_spec("threadpoolctl") is not None:
        assert rec.threadpools is not None
        assert any(p["user_api"] == "blas" for p in rec.threadpools)  # numpy is loaded
    if "torch" not in sys.modules:
        assert rec.torch_threads is None  # registering never imports torch
    assert "torch" not in sys.modules or rec.torch_threads is not None


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_threads_recorded_when_torch_imported(tmp_path: Path) -> None:
    code = (
        "import torch, json, gyreprof as gp\n"
        "torch.set_num_threads(3)\n"
        f"r = gp.register_worker('w', registry={str(tmp_path)!r})\n"
        "print(json.dumps([r.torch_threads, r.torch_interop_threads]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
    )
    threads, interop = json.loads(out.stdout.strip().splitlines()[-1])
    assert threads == 3 and interop >= 1


def test_dead_and_recycled_entries_are_ignored_and_cleaned(tmp_path: Path) -> None:
    # A worker that registers and dies without running exit hooks leaves its file behind.
    code = (
        "import os, gyreprof as gp\n"
        f"gp.register_worker('ghost', registry={str(tmp_path)!r})\n"
        "os._exit(0)\n"
    )
    dead = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=True,
        timeout=60,
    )
    assert dead.returncode == 0
    leftovers = list(tmp_path.glob("*.json"))
    assert len(leftovers) == 1
    # A live process whose pid matches an old entry with another start time (recycled pid).
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        stale = json.loads(leftovers[0].read_text())
        stale.update(pid=sleeper.pid, create_time_s=psutil.Process().create_time() - 1000.0)
        (tmp_path / f"{sleeper.pid}.json").write_text(json.dumps(stale))
        c = gp.census(os.getpid(), interval_s=0, registry=tmp_path)
        assert sleeper.pid in {p.pid for p in c.processes}
        assert c.roles() == {}
        assert not list(tmp_path.glob("*.json"))  # both pruned
        # A corrupted entry of a live process is reported, not fatal.
        (tmp_path / f"{sleeper.pid}.json").write_text("{not json")
        c = gp.census(os.getpid(), interval_s=0, registry=tmp_path)
        assert any("unreadable" in n and str(sleeper.pid) in n for n in c.notes)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_registry_dir_default_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GYREPROF_REGISTRY_DIR", str(tmp_path / "x"))
    assert registry_mod.registry_dir() == tmp_path / "x"
    monkeypatch.delenv("GYREPROF_REGISTRY_DIR")
    default = registry_mod.registry_dir()
    assert default.name == "workers" and default.parent.name == f"gyreprof-{os.getuid()}"


# --------------------------------------------------------------------------- cores available


def test_cpu_limits_of_this_process() -> None:
    limits = cpu_limits(os.getpid())
    assert limits.affinity == CPUS
    assert 0 < limits.cores_available <= limits.affinity
    assert "cores available" in limits.describe()


def test_cpu_max_parsing() -> None:
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("200000 100000") == 2.0
    assert parse_cpu_max("50000 100000") == 0.5
    for bad in ("", "a b", "1 2 3", "-1 100000"):
        with pytest.raises(ValueError, match="cpu.max"):
            parse_cpu_max(bad)


def test_cgroup_quota_from_files(tmp_path: Path) -> None:
    # cgroup v2: the parent's quota (1.5 cores) is tighter than the job's own (4 cores).
    v2 = tmp_path / "v2"
    job = v2 / "sys/fs/cgroup/slice/job"
    job.mkdir(parents=True)
    (v2 / "sys/fs/cgroup/cpu.max").write_text("max 100000\n")
    (v2 / "sys/fs/cgroup/slice/cpu.max").write_text("150000 100000\n")
    (job / "cpu.max").write_text("400000 100000\n")
    mountinfo = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
    cores, source = cgroup_quota_cores("0::/slice/job\n", mountinfo, fs_prefix=str(v2))
    assert cores == 1.5 and source is not None and source.endswith("slice")
    # Not visible from here (another cgroup namespace): the mount point's own file counts.
    cores, _ = cgroup_quota_cores("0::/elsewhere\n", mountinfo, fs_prefix=str(v2))
    assert cores is None
    # cgroup v1 cpu controller, quota -1 at the top, 2 cores for the job.
    v1 = tmp_path / "v1"
    cpu = v1 / "sys/fs/cgroup/cpu,cpuacct"
    (cpu / "docker/abc").mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "docker/abc/cpu.cfs_quota_us").write_text("200000\n")
    (cpu / "docker/abc/cpu.cfs_period_us").write_text("100000\n")
    mountinfo = (
        "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    )
    cgroup = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n"
    cores, _ = cgroup_quota_cores(cgroup, mountinfo, fs_prefix=str(v1))
    assert cores == 2.0
    assert cgroup_quota_cores("garbage", "garbage") == (None, None)


# --------------------------------------------------------------------------- throughput


def test_compare_throughput_numbers() -> None:
    flat = gp.compare_throughput(1020.0, 1040.0, workers=(1, 4))
    assert isinstance(flat, ThroughputComparison)
    assert not flat.changed and not flat.ok
    assert "1→4" in flat.message and "did not move" in flat.message and "+2%" in flat.message
    scaled = gp.compare_throughput(1000.0, 3600.0, workers=(1, 4))
    assert scaled.changed and scaled.ok
    assert scaled.scaling_efficiency == pytest.approx(0.9)
    assert "90% of linear scaling" in str(scaled)
    worse = gp.compare_throughput(1000.0, 700.0, workers=(2, 8))
    assert worse.changed and not worse.ok and "wrong way" in worse.message
    fewer = gp.compare_throughput(4000.0, 1100.0, workers=(4, 1))
    assert fewer.ok
    # past the tolerance, but 1->8 workers for +12% is 14% of linear scaling: not ok
    weak = gp.compare_throughput(1000.0, 1120.0, workers=(1, 8))
    assert weak.changed and not weak.ok
    assert weak.scaling_efficiency == pytest.approx(0.14)
    assert "most of the added workers wait" in weak.message
    assert gp.compare_throughput(1000.0, 1120.0, workers=(1, 8), min_efficiency=0.1).ok
    with pytest.raises(ValueError, match="min_efficiency"):
        gp.compare_throughput(1.0, 2.0, workers=(1, 2), min_efficiency=1.5)
    json.dumps(flat.to_dict())


def test_compare_throughput_bad_input() -> None:
    with pytest.raises(ValueError, match="workers"):
        gp.compare_throughput(1.0, 2.0, workers=(0, 4))
    with pytest.raises(ValueError, match="workers"):
        gp.compare_throughput(1.0, 2.0, workers=(1, 2, 3))
    with pytest.raises(ValueError, match="positive"):
        gp.compare_throughput(-1.0, 2.0, workers=(1, 2))
    with pytest.raises(TypeError, match="Summary"):
        gp.compare_throughput("fast", 2.0, workers=(1, 2))


def test_compare_throughput_from_profiles() -> None:
    if importlib.util.find_spec("gyreprof._core") is None:
        pytest.skip("compiled core not built")
    try:
        profiler_cls = gp.Profiler
    except ImportError as exc:
        pytest.skip(f"compiled core not importable: {exc}")

    def run(env_ns: int) -> Any:
        prof = profiler_cls(["env", "fwd"])
        for _ in range(200):
            prof.begin()
            prof.record("env", env_ns)
            prof.record("fwd", 50_000)
            prof.end()
        return prof

    one_prof, four_prof = run(1_000_000), run(1_050_000)
    one, four = one_prof.summary(), four_prof.snapshot()  # Summaries, Snapshots, Profilers
    assert gp.compare_throughput(one_prof, four, workers=(1, 4)).rate_a_per_s == pytest.approx(
        1000.0, rel=0.01
    )
    same = gp.compare_throughput(one, four, workers=(1, 4), env_steps_per_call=(1, 1))
    assert not same.changed and "did not move" in same.message
    assert same.rate_a_per_s == pytest.approx(1000.0, rel=0.01)
    batched = gp.compare_throughput(one, four, workers=(1, 4), env_steps_per_call=(1, 4))
    assert batched.rate_b_per_s == pytest.approx(4 / 1.05e-3, rel=0.01)
    assert batched.changed and batched.ok
    with pytest.raises(ValueError, match="no phase 'step'"):
        gp.compare_throughput(one, four, workers=(1, 4), phase="step")


# --------------------------------------------------------------------------- CLI


def test_cli_census_json(async_oversubscribed: dict[str, Any], capsys: Any) -> None:
    code = cli_main(["census", str(async_oversubscribed["pid"]), "--interval", "0", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["roles"] == {"env_worker": 4}
    assert data["pid"] == async_oversubscribed["pid"]
    assert data["num_processes"] == len(data["processes"]) and data["groups"][0]["count"] >= 1
    back = Census.from_dict(data)
    assert back.roles() == {"env_worker": 4} and back.to_dict() == data
    assert all(p.worker is not None for p in back.workers("env_worker"))
    assert cli_main(["census", str(async_oversubscribed["pid"]), "--interval", "0"]) == 0
    assert "env_worker" in capsys.readouterr().out


def test_cli_check_exit_codes(
    sync4: dict[str, Any], async_clean: dict[str, Any], capsys: Any
) -> None:
    code = cli_main(["check", str(sync4["pid"]), "--expect", "env_worker=4", "--json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["observed"] == {"env_worker": 0}
    assert data["main_envs"] == {"env_worker": 4}
    assert any("no worker processes where 4 were expected" in f for f in data["findings"])
    back = ParallelismReport.from_dict(data)
    assert back.findings == data["findings"] and back.to_dict() == data
    with pytest.raises(CorruptDataError, match=r"census\.processes\[0\]\.pid"):
        ParallelismReport.from_dict(
            {**data, "census": {**data["census"], "processes": [{"pid": "x"}]}}
        )
    # The same through a fresh interpreter, as a script would run it.
    out = subprocess.run(
        [sys.executable, "-m", "gyreprof", "check", str(sync4["pid"]), "--expect", "env_worker=4"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert "no worker processes where 4 were expected" in out.stdout
    assert "4 envs built in the main process" in out.stdout
    if CPUS >= 2:
        # these workers wait on stdin: observed for 1 s (the default) they used no CPU, so
        # the parallelism is not running (exit 1); --sample 0 judges their lifetimes
        args = ["check", str(async_clean["pid"]), "--expect", "env_worker=2"]
        assert cli_main(args) == 1
        assert "used no CPU in 1 s" in capsys.readouterr().out
        args += ["--sample", "0"]
        assert cli_main([*args, "--config", "num_threads=1", "--config", "OMP_NUM_THREADS=1"]) == 0
        assert "ok" in capsys.readouterr().out
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert cli_main(["check", str(dead.pid), "--expect", "env_worker=1"]) == 2
    assert "no process with pid" in capsys.readouterr().err
    assert cli_main(["census", str(dead.pid)]) == 2
    for bad in (["check", "1", "--expect", "env_worker=x"], ["check", "abc"], ["census", "-3"]):
        with pytest.raises(SystemExit) as exc:
            cli_main(bad)
        assert exc.value.code == 2


def test_census_shows_live_segments(tmp_path) -> None:
    """A process publishing a live gyreprof segment shows its phases and steps in the census."""
    code = (
        "import sys, time, gyreprof as gp\n"
        "prof = gp.Profiler(['env', 'fwd'], live='sampler')\n"
        "for _ in range(500):\n"
        "    prof.begin(); prof.lap(0); prof.lap(1)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"  # alive, its segment published, until the test ends it
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        c = gp.census(proc.pid, interval_s=0)
        live = c.process(proc.pid).live
        assert len(live) == 1
        assert "sampler" in live[0] and "env, fwd" in live[0] and "steps so far" in live[0]
        assert "live gyreprof segment" in str(c)
        assert c.to_dict()["processes"][0]["live"] == list(live)
    finally:
        proc.kill()
        proc.wait(timeout=30)
