"""The instrumentation's own costs are measured once per run for each Python: the first
process measures and writes them into the run's folder, later ones (spawn workers) take
them from there; a file that holds what no measurement gives is not used."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gyreprof.integrations._auto import calibration
from gyreprof.recording import profiler

from helpers.run_scripts.runhelp import gyreprof_run

NAMES = ["a.timed", "a.inner"]
MEASURED = {"a.timed": 150.5, "a.inner": 25.25}


@pytest.fixture()
def in_run(tmp_path: Path) -> Path:
    """A run's folder (``state.run_dir`` in a process of the run)."""
    return tmp_path


def _measure(calls: list[int]) -> dict[str, float]:
    calls.append(1)
    return dict(MEASURED)


def _costs_under_run(tmp_path: Path, text: str) -> dict[str, Any]:
    """What the script ``text`` wrote of its processes' costs, run under ``gyreprof run``."""
    script, out = tmp_path / "costs.py", tmp_path / "costs.json"
    script.write_text(text)
    proc, _ = gyreprof_run(tmp_path, sys.executable, str(script), str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(out.read_text()))


def test_outside_a_run_each_process_measures_and_writes_nothing(tmp_path: Path) -> None:
    calls: list[int] = []
    assert calibration.path(None) is None
    assert calibration.shared(None, "wrappers", NAMES, lambda: _measure(calls)) == MEASURED
    assert calibration.shared(None, "wrappers", NAMES, lambda: _measure(calls)) == MEASURED
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def test_the_first_process_measures_and_the_next_reads(in_run: Path) -> None:
    calls: list[int] = []
    assert calibration.shared(in_run, "wrappers", NAMES, lambda: _measure(calls)) == MEASURED
    path = calibration.path(in_run)
    assert path is not None and path.parent == in_run
    assert json.loads(path.read_text()) == {"wrappers": MEASURED}

    def fail() -> dict[str, float]:
        raise AssertionError("measured although the run's file has them")

    assert calibration.shared(in_run, "wrappers", NAMES, fail) == MEASURED
    # another entry is added beside it, the first kept
    assert calibration.shared(in_run, "forms", ["lap"], lambda: {"lap": 90.0}) == {"lap": 90.0}
    assert json.loads(path.read_text()) == {"wrappers": MEASURED, "forms": {"lap": 90.0}}
    assert len(calls) == 1


def test_the_file_is_named_for_the_interpreter(in_run: Path) -> None:
    path = calibration.path(in_run)
    assert path is not None
    assert path.name.startswith(f"calibration-{sys.implementation.cache_tag}-")
    assert path.name.endswith(".json")


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b"[1, 2]",
        b'{"wrappers": [150.5, 25.25]}',
        b'{"wrappers": {"a.timed": 150.5}}',  # a name missing
        b'{"wrappers": {"a.timed": 150.5, "a.inner": 25.25, "b": 1.0}}',  # one unknown
        b'{"wrappers": {"a.timed": 150.5, "a.inner": -1.0}}',
        b'{"wrappers": {"a.timed": 150.5, "a.inner": NaN}}',
        b'{"wrappers": {"a.timed": 150.5, "a.inner": Infinity}}',
        b'{"wrappers": {"a.timed": 1e9, "a.inner": 25.25}}',  # a second a call
        b'{"wrappers": {"a.timed": "150.5", "a.inner": 25.25}}',
        b'{"wrappers": {"a.timed": true, "a.inner": 25.25}}',
        b'{"wrappers": {"a.timed": 150.5, "a.inner": 25.25}}' + b" " * (70 * 1024),
        b"\xff\xfe{}",
    ],
)
def test_a_file_no_measurement_writes_is_measured_over(in_run: Path, bad: bytes) -> None:
    path = calibration.path(in_run)
    assert path is not None
    path.write_bytes(bad)
    got = calibration.shared(in_run, "wrappers", NAMES, lambda: {"a.timed": 160.0, "a.inner": 30.0})
    assert got == {"a.timed": 160.0, "a.inner": 30.0}
    # rewritten with what this process measured (a file that was not an object: replaced)
    assert json.loads(path.read_text())["wrappers"] == got


def test_a_symlink_in_the_run_folder_is_not_followed(
    in_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "costs.json"
    elsewhere.write_text(json.dumps({"wrappers": {"a.timed": 1.0, "a.inner": 1.0}}))
    path = calibration.path(in_run)
    assert path is not None
    path.symlink_to(elsewhere)
    assert calibration.shared(in_run, "wrappers", NAMES, lambda: dict(MEASURED)) == MEASURED
    assert json.loads(elsewhere.read_text())["wrappers"]["a.timed"] == 1.0  # untouched


def test_a_measurement_no_file_may_hold_is_returned_but_not_written(in_run: Path) -> None:
    got = calibration.shared(
        in_run, "wrappers", NAMES, lambda: {"a.timed": math.nan, "a.inner": 1.0}
    )
    assert math.isnan(got["a.timed"])
    path = calibration.path(in_run)
    assert path is not None and not path.exists()


def test_form_costs_come_from_the_source_once_and_are_kept() -> None:
    clock = "monotonic-test-only"
    given = {f: 10.0 + i for i, f in enumerate(profiler.FORMS)}
    asked: list[tuple[str, tuple[str, ...]]] = []

    def source(c: str, forms: tuple[str, ...], measure: object) -> dict[str, float]:
        asked.append((c, forms))
        return dict(given)

    profiler._FORM_COSTS.pop(clock, None)
    profiler.set_form_cost_source(source)
    try:
        assert profiler.form_costs(clock) == given
        assert profiler.form_costs(clock) == given  # taken once per process
        assert asked == [(clock, profiler.FORMS)]
        profiler.set_form_cost_source(lambda c, f, m: {k: 99.0 for k in f})
        assert profiler.form_costs(clock) == given  # costs taken are kept
    finally:
        profiler.set_form_cost_source(None)
        profiler._FORM_COSTS.pop(clock, None)


def test_the_source_shares_form_costs_through_the_runs_file(in_run: Path) -> None:
    source = calibration.form_cost_source(in_run)
    forms = ("lap", "begin")
    assert source("monotonic", forms, lambda: {"lap": 50.0, "begin": 60.0}) == {
        "lap": 50.0,
        "begin": 60.0,
    }

    def fail() -> dict[str, float]:
        raise AssertionError("measured although the run's file has them")

    assert source("monotonic", forms, fail) == {"lap": 50.0, "begin": 60.0}
    # another clock is its own entry: measured
    assert source("tsc", forms, lambda: {"lap": 20.0, "begin": 25.0})["lap"] == 20.0
    path = calibration.path(in_run)
    assert path is not None
    assert set(json.loads(path.read_text())) == {"forms.monotonic", "forms.tsc"}


SCRIPT = """\
import json, multiprocessing as mp, os, sys
from pathlib import Path
import gymnasium as gym

def costs():
    from gyreprof.integrations.libs import gymnasium as g
    from gyreprof.recording import profiler
    env = gym.make("CartPole-v1")  # this process records: its thread's profilers exist
    env.reset(seed=0)
    env.step(0)
    return os.getpid(), g.wrapper_costs(), profiler.form_costs()

if __name__ == "__main__":
    main = costs()
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:  # a process a task
        workers = pool.starmap(costs, [()] * 2)
    from gyreprof.integrations._auto import calibration
    with open(sys.argv[1], "w") as f:
        json.dump({"main": main, "workers": workers,
                   "file": json.loads(calibration.path(Path(os.environ["GYREPROF_RUN_DIR"])).read_text())}, f)
"""


def test_a_runs_spawn_workers_take_the_costs_its_main_process_measured(tmp_path: Path) -> None:
    """Measured values differ from one measurement to the next in their last digits: the
    workers' being the main process's to the last bit says that they were read, not
    measured again."""
    pytest.importorskip("gymnasium")
    got = _costs_under_run(tmp_path, SCRIPT)
    main_pid, wrappers, forms = got["main"]
    assert wrappers["gyreprof.wrapper.env_step.timed"] > 0 and all(v > 0 for v in forms.values())
    assert got["file"] == {"wrappers": wrappers, "forms.monotonic": forms}
    pids = {main_pid}
    for pid, w, f in got["workers"]:
        pids.add(pid)
        assert (w, f) == (wrappers, forms)
    assert len(pids) == 3  # two processes besides the main one


def test_a_fifo_in_place_of_the_file_is_measured_over_not_waited_on(in_run: Path) -> None:
    path = calibration.path(in_run)
    assert path is not None
    os.mkfifo(path)  # opening it to read would wait for a writer that never comes
    assert calibration.shared(in_run, "wrappers", NAMES, lambda: dict(MEASURED)) == MEASURED
    assert json.loads(path.read_text()) == {"wrappers": MEASURED}  # a file in its place


QUEUE_SCRIPT = """\
import json, multiprocessing as mp, os, queue, sys, threading
from pathlib import Path

def costs():
    # a plain queue loop timed with the user's own Profiler: no library gyreprof patches
    import gyreprof as gp
    prof = gp.Profiler(["get"])
    q = queue.Queue()
    for i in range(20):
        threading.Timer(0.001, q.put, (i,)).start()
        prof.begin()
        with prof.phase("get"):
            q.get()
    prof.end()
    return os.getpid(), {k: prof.form_cost_ns[k] for k in ("lap", "begin", "with", "timed", "record")}

if __name__ == "__main__":
    main = costs()
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:  # a process a task
        workers = pool.starmap(costs, [()] * 2)
    from gyreprof.integrations._auto import calibration
    where = calibration.path(Path(os.environ["GYREPROF_RUN_DIR"]))
    with open(sys.argv[1], "w") as f:
        json.dump({"main": main, "workers": workers, "file": json.loads(where.read_text())}, f)
"""


def test_a_plain_queue_loops_own_profilers_in_spawn_workers_share_the_form_costs(
    tmp_path: Path,
) -> None:
    """No gymnasium, no torch: the Profilers a user makes in each process take the form
    costs the run's first process measured."""
    got = _costs_under_run(tmp_path, QUEUE_SCRIPT)
    main_pid, forms = got["main"]
    assert set(forms) == set(profiler.FORMS) and all(v > 0 for v in forms.values())
    assert got["file"] == {"forms.monotonic": forms}  # no env wrapper: none was patched
    assert len({main_pid} | {pid for pid, _ in got["workers"]}) == 3
    assert all(f == forms for _, f in got["workers"]), got
