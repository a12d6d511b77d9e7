"""Merged shares are honest (issue 22, item 6): a gymnasium AsyncVectorEnv run under
``gyreprof run``. The main loop steps no env itself (its time is the vector env's send and
wait); its 3 workers step in parallel. The main loop's shares never add the workers' time
to its own wall time, worker time is shown per process role, and the workers' env
stepping against the main loop's wall time is a line of its own."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gymnasium")

import gyreprof as gp  # noqa: E402
from gyreprof._support.format import fmt_ns  # noqa: E402

from helpers.run_scripts.runhelp import gyreprof_run, script  # noqa: E402

Run = tuple[str, dict[str, Any], Path, Path]


@pytest.fixture(scope="module")
def vec_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("shares")
    save, page = tmp / "raw", tmp / "page.html"
    options: tuple[str, ...] = ("--save", str(save))
    have_plot = True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        have_plot = False
    if have_plot:
        options += ("--html", str(page))
    proc, data = gyreprof_run(tmp, script("async_vec.py"), "600", options=options)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None and data["verdict"] is not None, proc.stderr[-4000:]
    return proc.stderr, data, save, page


def _workers_env_ns(save: Path) -> tuple[int, float]:
    snaps = [gp.Snapshot.load(p) for p in sorted(save.glob("env_worker-*.sampler.snap"))]
    total = 0.0
    for snap in snaps:
        s = snap.summary()
        total += sum(s.phases[n].sum_ns for n in ("env_step", "env_reset"))
    return len(snaps), total


def test_the_main_loops_shares_hold_only_its_own_time(vec_run: Run) -> None:
    _, data, _, _ = vec_run
    shares = data["verdict"]["sampler_shares"]
    # the naive merge adds the workers' env steps to the main loop's wall: over 100%
    assert sum(shares.values()) <= 1.0 + 1e-9, shares
    assert shares.get("env_step", 0.0) == 0.0, shares  # the main loop steps no env itself
    assert data["verdict"]["dominant_phase"] in ("step_wait", "step_async"), data["verdict"]


def test_worker_time_is_shown_per_role_and_against_the_main_loop(vec_run: Run) -> None:
    stderr, data, save, page = vec_run
    main = next(p for p in data["processes"] if p["role"] == "main")
    assert f"sampler phases of main {main['pid']}:" in stderr
    n, env_ns = _workers_env_ns(save)
    assert n == 3
    assert "sampler phases of 3 env_worker processes, totals" in stderr
    line = next(x for x in stderr.splitlines() if x.startswith("the 3 env_worker processes"))
    assert f"spent {fmt_ns(env_ns)} of env stepping in the main loop's " in line
    assert "sampler phases, merged over 4 processes" not in stderr
    if page.exists():
        assert html.escape(line, quote=True) in page.read_text()
