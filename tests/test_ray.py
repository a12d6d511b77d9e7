"""Fleet profiling over a real local Ray cluster (gyreprof.integrations.ray).

One cluster (``ray.init(num_cpus=2)``) serves the whole module; select these
tests with ``pytest -m ray``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install gyreprof[ray])")

import gyreprof as gp  # noqa: E402
from gyreprof._support.errors import UnknownPhaseError  # noqa: E402
from gyreprof.analysis.wait import WaitReport  # noqa: E402
from gyreprof.integrations import ray as gpray  # noqa: E402
from gyreprof.model.summary import Summary  # noqa: E402

from helpers.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parent.parent

# what each of the three "good" actors records: (steps, env_ns, fwd_ns)
PLAN = [(100, 10_000, 1_000), (200, 20_000, 1_000), (300, 40_000, 1_000)]


# ------------------------------------------------------------------ actor classes


@gpray.profiled_remote(num_cpus=0)
class Counted(gpray.ProfiledActor):
    """Records exactly what it is told to; a busy loop that can be snapshotted."""

    def __init__(self, label: str, significant_figures: int = 3) -> None:
        gpray.attach_profiler(
            self, ["env", "fwd"], label=label, significant_figures=significant_figures
        )

    def record(self, steps: int, env_ns: int, fwd_ns: int) -> int:
        prof = self.gyreprof_profiler
        assert prof is not None
        for _ in range(steps):
            prof.begin()
            prof.record("env", env_ns)
            prof.record("fwd", fwd_ns)
        prof.end()
        return steps

    def busy(self, seconds: float) -> int:
        """Step a timed loop for ``seconds`` (the actor's only method thread is taken)."""
        prof = self.gyreprof_profiler
        assert prof is not None
        env, fwd = prof.ids("env", "fwd")
        n = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            prof.begin()
            sum(range(200))
            prof.lap(env)
            sum(range(50))
            prof.lap(fwd)
            n += 1
        prof.end()
        return n

    def where(self) -> dict[str, Any]:
        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "node_id": ctx.get_node_id(), "actor_id": ctx.get_actor_id()}


@ray.remote(num_cpus=0)
class Plain:
    """An actor with no gyreprof at all."""

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@ray.remote(num_cpus=0)
class PlainProfiled(gpray.ProfiledActor):
    """Has the mixin (default concurrency group) but can also forget its profiler."""

    def __init__(self, attach: bool) -> None:
        if attach:
            gpray.attach_profiler(self, ["env", "fwd"])
            prof = self.gyreprof_profiler
            assert prof is not None
            prof.begin()
            prof.record("env", 5_000)
            prof.end()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@ray.remote(num_cpus=0)
class Learner(gpray.ProfiledActor):
    """A learner actor that waited 3 ms and computed 1 ms per step, 50 steps."""

    def __init__(self) -> None:
        prof = gpray.attach_profiler(self, ["wait", "compute"], window_steps=10)
        for _ in range(50):
            prof.begin()
            prof.record("wait", 3_000_000)
            prof.record("compute", 1_000_000)
        prof.end()


@ray.remote(num_cpus=0)
class Liar:
    """Answers gyreprof_snapshot with whatever payload it is told to."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.prof = gp.Profiler(["env", "fwd"])
        self.prof.begin()
        self.prof.record("env", 7_000)
        self.prof.end()

    def set_mode(self, mode: str) -> None:
        self.mode = mode

    def gyreprof_snapshot(self, windows: bool = False) -> Any:
        good = gpray.snapshot_bytes(self.prof, windows=windows)
        if self.mode == "ok":
            return good
        if self.mode == "corrupt":
            body = bytearray(good)
            for i in range(10, len(body), 7):
                body[i] ^= 0x5A
            return bytes(body)
        if self.mode == "truncated":
            return good[: len(good) // 2]
        if self.mode == "foreign":
            return b"PK\x03\x04 this is a zip file, not a snapshot"
        if self.mode == "future":
            return good[:4] + bytes([99]) + good[5:]
        if self.mode == "pickled":
            return {"counts": [1, 2, 3]}
        if self.mode == "raise":
            raise RuntimeError("the env crashed")
        raise AssertionError(self.mode)


# ------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():  # pragma: no cover - another module left one running
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=100 * 1024 * 1024,
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def good(cluster):
    """Three actors that recorded PLAN; returns (handles, their pids/nodes/ids)."""
    actors = [Counted.remote(f"good-{i}") for i in range(len(PLAN))]
    ray.get([a.record.remote(*plan) for a, plan in zip(actors, PLAN, strict=True)], timeout=120)
    where = ray.get([a.where.remote() for a in actors], timeout=60)
    return actors, where


@pytest.fixture(scope="module")
def liar(cluster):
    actor = Liar.remote()
    ray.get(actor.set_mode.remote("ok"), timeout=120)
    return actor


def _check_good_merge(fleet: gpray.FleetSummary, names: list[str]) -> None:
    assert fleet.merged is not None
    steps = sum(p[0] for p in PLAN)
    assert fleet.merged.phases["env"].count == steps
    assert fleet.merged.phases["fwd"].count == steps
    assert fleet.merged.steps == steps
    assert fleet.merged.sources == len(PLAN)
    assert sorted(fleet.per_actor) == sorted(names)


# --------------------------------------------------------------------------- tests


def test_merged_counts_exact_and_per_actor_stats_kept(good):
    actors, where = good
    fleet = gpray.collect(actors, timeout_s=30)
    assert fleet.missing == {}
    _check_good_merge(fleet, ["actor-0", "actor-1", "actor-2"])
    for i, (steps, env_ns, fwd_ns) in enumerate(PLAN):
        a = fleet.per_actor[f"actor-{i}"]
        assert a.index == i
        assert a.steps == steps
        assert a.summary.phases["env"].count == steps
        # one value recorded per actor: every percentile is that value (within 0.1%)
        assert a.percentile("env", 99) == pytest.approx(env_ns, rel=1e-3)
        assert a.summary.phases["fwd"].p50 == pytest.approx(fwd_ns, rel=1e-3)
        assert a.pid == where[i]["pid"]
        assert a.node_id == where[i]["node_id"]
        assert a.actor_id == where[i]["actor_id"]
        assert a.label == f"good-{i}"
        assert 0 < a.size_bytes < 20_000
    assert len({a.pid for a in fleet.per_actor.values()}) == 3
    # fleet view: slowest by env p99, spread across actors
    assert [a.name for a in fleet.slowest(phase="env")] == ["actor-2", "actor-1", "actor-0"]
    sp = fleet.spread()
    assert sp is not None and sp.phase == "env" and sp.actors == 3
    assert sp.max_ns == pytest.approx(40_000, rel=1e-3)
    assert sp.median_ns == pytest.approx(20_000, rel=1e-3)
    assert sp.max_over_median == pytest.approx(2.0, rel=1e-2)
    assert sp.stragglers == ["actor-2"]
    # merged percentiles span the actors: p50 lands on the 40 us actor (300 of 600 values)
    assert fleet.merged.phases["env"].max == pytest.approx(40_000, rel=1e-3)
    assert fleet.merged.phases["env"].min == pytest.approx(10_000, rel=1e-3)
    text = str(fleet)
    assert "3 of 3 actors answered" in text and "actor-2" in text and "stragglers" in text
    data = json.loads(fleet.to_json(), parse_constant=lambda c: pytest.fail(f"non-strict {c}"))
    assert data["format"] == "gyreprof.fleet/1" and data["slowest"][0] == "actor-2"
    assert data["per_actor"]["actor-0"]["summary"]["steps"] == fleet.per_actor["actor-0"].steps
    back = gpray.FleetRecord.from_dict(data)
    assert back == fleet.record() and back.spread == sp
    assert Summary.from_dict(back.merged).phases["env"].count == fleet.merged.phases["env"].count


def test_mapping_names_and_unknown_phase(good):
    actors, _ = good
    fleet = gpray.collect({"left": actors[0], "right": actors[1]}, timeout_s=30, phase="fwd")
    assert sorted(fleet.per_actor) == ["left", "right"]
    assert fleet.merged is not None and fleet.merged.phases["env"].count == 300
    with pytest.raises(UnknownPhaseError, match="recorded phases"):
        fleet.slowest(phase="xfer")
    assert fleet.spread(phase="(step)") is not None


def test_killed_actor_is_reported_not_waited_for(good):
    actors, _ = good
    doomed = Counted.remote("doomed")
    ray.get(doomed.record.remote(10, 1_000, 1_000), timeout=120)
    ray.kill(doomed)
    # ray.kill is asynchronous (a call sent at once can still run): wait until Ray
    # itself reports the actor dead, so the collect below meets a dead actor rather
    # than racing the kill
    deadline = time.monotonic() + 60
    while True:
        try:
            ray.get(doomed.record.remote(1, 1, 1), timeout=60)
        except ray.exceptions.RayActorError:
            break
        assert time.monotonic() < deadline, "Ray never reported the killed actor dead"
        time.sleep(0.1)
    t0 = time.monotonic()
    fleet = gpray.collect([*actors, doomed], timeout_s=30)
    elapsed = time.monotonic() - t0
    assert elapsed < 20, f"collect waited {elapsed:.1f} s for a dead actor"
    _check_good_merge(fleet, ["actor-0", "actor-1", "actor-2"])
    miss = fleet.missing["actor-3"]
    assert miss.reason == "died"
    assert miss.actor_id == doomed._actor_id.hex()
    assert "actor-3" in str(fleet) and "died" in str(fleet)


def test_actors_without_profiler_are_reported(good):
    actors, _ = good
    plain = Plain.remote()
    unattached = PlainProfiled.remote(False)
    fleet = gpray.collect([*actors, plain, unattached], timeout_s=30)
    _check_good_merge(fleet, ["actor-0", "actor-1", "actor-2"])
    assert fleet.missing["actor-3"].reason == "no_profiler"
    assert "ProfiledActor" in fleet.missing["actor-3"].detail
    assert fleet.missing["actor-4"].reason == "no_profiler"
    assert "attach_profiler" in fleet.missing["actor-4"].detail


@pytest.mark.parametrize(
    ("mode", "reason", "words"),
    [
        ("corrupt", "bad_snapshot", "corrupt"),
        ("truncated", "bad_snapshot", "truncated"),
        ("foreign", "bad_snapshot", "magic"),
        ("future", "bad_snapshot", "version 99"),
        ("pickled", "bad_snapshot", "returned dict"),
        ("raise", "error", "the env crashed"),
        ("ok", None, None),
    ],
)
def test_bad_snapshot_bytes_reported_per_actor(good, liar, mode, reason, words):
    actors, _ = good
    ray.get(liar.set_mode.remote(mode), timeout=60)
    fleet = gpray.collect([*actors, liar], timeout_s=30)
    if reason is None:
        assert fleet.missing == {}
        assert fleet.merged is not None and fleet.merged.phases["env"].count == 601
        return
    _check_good_merge(fleet, ["actor-0", "actor-1", "actor-2"])
    miss = fleet.missing["actor-3"]
    assert miss.reason == reason
    assert words in miss.detail


def test_incompatible_layout_reported(good):
    actors, _ = good
    odd = Counted.remote("two-figures", significant_figures=2)
    ray.get(odd.record.remote(5, 1_000, 1_000), timeout=120)
    fleet = gpray.collect([*actors, odd], timeout_s=30)
    _check_good_merge(fleet, ["actor-0", "actor-1", "actor-2"])
    miss = fleet.missing["actor-3"]
    assert miss.reason == "incompatible"
    assert "significant_figures" in miss.detail
    ray.kill(odd)


def test_busy_actors_monitor_and_timeout(cluster):
    """A profiled_remote actor answers while its loop runs; a busy plain one times out."""
    runner = Counted.remote("runner")
    stuck = PlainProfiled.remote(True)
    # first answers (actor start-up, first snapshot) may be slow on a loaded machine
    ray.get([runner.gyreprof_snapshot.remote(), stuck.gyreprof_snapshot.remote()], timeout=120)
    # both stay busy until they are killed at the end: no step of the test races the
    # length of their calls
    loop = runner.busy.remote(600.0)
    stuck.sleep.remote(600.0)

    def runner_steps() -> int:
        merged = gpray.collect([runner], timeout_s=10).merged
        return merged.steps if merged is not None else 0

    wait_for(lambda: runner_steps() > 0, "the runner's loop to step", 120)
    seen: list[gpray.FleetPoint] = []
    mon = gpray.FleetMonitor(
        {"runner": runner, "stuck": stuck},
        interval_s=0.5,
        timeout_s=1.0,
        on_update=lambda point, fleet: seen.append(point),
    )
    with mon:
        wait_for(lambda: len(mon.points) >= 3, "three points of the monitor", 120)
    assert not mon.running
    points = mon.points
    assert len(points) >= 3, mon.errors
    assert seen == points
    again = [gpray.FleetPoint.from_dict(json.loads(json.dumps(p.to_dict()))) for p in points]
    assert [p.to_dict() for p in again] == [p.to_dict() for p in points]  # NaN-safe compare
    assert mon.errors == []
    # the loop was never stopped: still running after the monitor is done
    ready, _ = ray.wait([loop], timeout=0)
    assert ready == []
    for p in points:
        assert p.answered == 1, (p, latest_detail(mon))
        assert p.missing == ["stuck"]
    steps = [p.steps for p in points]
    assert steps == sorted(steps) and steps[-1] > steps[0] > 0
    assert all(p.interval_steps > 0 and p.steps_per_s > 0 for p in points)
    assert all(p.phases["env"].count > 0 and p.phases["env"].p99 > 0 for p in points)
    assert points[-1].slowest == "runner"
    series = mon.series("p99", phase="env")
    assert len(series) == len(points) and all(v > 0 for _, v in series)
    latest = mon.latest
    assert latest is not None and latest.missing["stuck"].reason == "timeout"
    with pytest.raises(ValueError, match="unknown series"):
        mon.series("p42")
    # a one-shot collect does not hang on the busy plain actor either
    t0 = time.monotonic()
    fleet = gpray.collect([runner, stuck], timeout_s=0.5)
    assert time.monotonic() - t0 < 5
    assert fleet.missing["actor-1"].reason == "timeout"
    detail = fleet.missing["actor-1"].detail
    assert "use profiled_remote" in detail and "time.sleep(0)" in detail, detail
    assert ray.wait([loop], timeout=0)[0] == []
    ray.kill(runner)
    ray.kill(stuck)


@pytest.mark.parametrize("where", ["driver", "actor"])
def test_learner_wait_report(good, where):
    actors, _ = good
    if where == "driver":
        learner: Any = gp.Profiler(["wait", "compute"])
        for _ in range(50):
            learner.begin()
            learner.record("wait", 3_000_000)
            learner.record("compute", 1_000_000)
        learner.end()
    else:
        learner = Learner.remote()
    fleet = gpray.collect(actors, timeout_s=60, learner=learner)
    _check_good_merge(fleet, ["actor-0", "actor-1", "actor-2"])
    assert fleet.learner is not None, fleet.notes
    assert fleet.learner.phases["wait"].count == 50
    # the learner is reported apart, never merged into the samplers
    assert fleet.merged is not None and "wait" not in fleet.merged.phases
    if importlib.util.find_spec("gyreprof.analysis.wait") is None:
        assert fleet.wait is None
        assert any("wait report skipped" in n for n in fleet.notes)
    else:
        assert fleet.wait is not None, fleet.notes
        assert 0.5 < fleet.wait.ratio < 0.95
        assert "wait" in str(fleet)
    data = json.loads(fleet.to_json())
    if fleet.wait is not None:
        assert WaitReport.from_dict(data["wait"]).to_dict() == data["wait"]  # NaN-safe
    if where == "actor":
        ray.kill(learner)


def test_nothing_answered(cluster):
    fleet = gpray.collect([Plain.remote()], timeout_s=5)
    assert fleet.merged is None and fleet.answered == 0 and fleet.total == 1
    assert "0 of 1 actors answered" in str(fleet)


def test_bad_arguments(cluster):
    with pytest.raises(TypeError, match="list of Ray actor handles"):
        gpray.collect("actor", timeout_s=1)
    with pytest.raises(TypeError, match="not a Ray actor handle"):
        gpray.collect([object()], timeout_s=1)
    with pytest.raises(ValueError, match="timeout_s"):
        gpray.collect([], timeout_s=-1)
    with pytest.raises(ValueError, match="interval_s"):
        gpray.FleetMonitor([], interval_s=0)
    with pytest.raises(TypeError, match="gyreprof_snapshot"):

        @gpray.profiled_remote
        class NoMethod:
            pass

    with pytest.raises(TypeError, match="one or the other"):
        gpray.attach_profiler(object(), gp.Profiler(["env"]), warmup_steps=3)
    with pytest.raises(TypeError, match="Profiler or Snapshot"):
        gpray.snapshot_bytes("env")  # type: ignore[arg-type]


def test_example_runs_against_this_cluster(cluster):
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "ray_fleet.py"),
            "--address",
            address,
            "--actors",
            "2",
            "--seconds",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "gyreprof fleet: 2 of 2 actors answered" in proc.stdout
    assert "t=" in proc.stdout  # the per-second time series lines


def latest_detail(mon: gpray.FleetMonitor) -> str:
    fleet = mon.latest
    if fleet is None:
        return "no collection finished"
    return "; ".join(
        [f"{a.name} answered in {a.answer_s:.3f} s" for a in fleet.per_actor.values()]
        + [str(m) for m in fleet.missing.values()]
    )


def test_monitor_interval_takes_new_steps_and_restarts_whole() -> None:
    # no cluster needed: the monitor's per-interval arithmetic over decoded answers
    from gyreprof.integrations.ray.collect import _Answer, build_fleet
    from gyreprof.integrations.ray.monitor import _point

    def run(prof: gp.Profiler, steps: int) -> gp.Profiler:
        for _ in range(steps):
            prof.begin()
            prof.lap(0)
            prof.end()
        return prof

    a, b = run(gp.Profiler(["env"]), 10), run(gp.Profiler(["env"]), 40)
    prev = {"a": a.snapshot(), "b": b.snapshot()}
    run(a, 20)  # a goes on: 20 new steps
    b = run(gp.Profiler(["env"]), 5)  # b restarted: 5 steps, fewer than before
    answers = [
        _Answer("a", 0, "actor-a", payload=a.snapshot().to_bytes()),
        _Answer("b", 1, "actor-b", payload=b.snapshot().to_bytes()),
    ]
    fleet = build_fleet(
        answers,
        [],
        None,
        None,
        phase="env",
        wait="wait",
        compute="compute",
        started=time.monotonic(),
    )
    point = _point(fleet, prev, "env", 1.0)
    # a difference of b's histograms would go negative; its restart counts whole
    assert point.interval_steps == 20 + 5
    assert point.phases["env"].count == 25 and point.phases[gpray.STEP_PHASE].count == 25
    assert point.steps_per_s > 0
