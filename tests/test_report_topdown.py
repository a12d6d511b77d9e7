"""Issue 38 item 6: the run's report reads top-down. Real runs of real scripts under
``gyreprof run``: the first line after the run header is the answer (the side, the
wait ratio and the spread of its per-window ratios), then the named cause and the one
next step; the tables follow. Each piece of advice is said once, rows of phases that
did not run are hidden, a single-process report fits in 30 lines, and ``--verbose``
(on ``gyreprof run`` and ``gyreprof report``) shows what the default leaves out.

Where a naive rule fails: a phase whose every call fell in the warm-up has a steady
count of 0, like a phase that never ran; hiding its row must not hide that it ran
(``reset_once.py`` under ``--warmup-s``). And the warm-up advice is worded differently
in each place that gave it (the summary's warm-up line, the wait report's note, each
side's caveat): comparing lines alone would let it through three times.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gymnasium")

from gyreprof._support.format import fmt_pct  # noqa: E402

from helpers.run_scripts.runhelp import gyreprof_run, script  # noqa: E402

pytestmark = pytest.mark.slow

Run = tuple[list[str], dict[str, Any], Path]

#: the prefixes of the lines that give advice or notes in a run's report
ADVICE = ("next: ", "then: ", "- ", "note: ")


def _run(tmp: Path, *command: str, options: tuple[str, ...] = ()) -> Run:
    save = tmp / "raw"
    proc, data = gyreprof_run(
        tmp, sys.executable, *command, options=("--save", str(save), *options)
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None, proc.stderr[-4000:]
    return _report(proc.stderr), data, save


def _report(stderr: str) -> list[str]:
    """The report's lines, from its ``gyreprof run:`` header to its end (before the
    command's wall time)."""
    lines = stderr.splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith("gyreprof run: "))
    return [x for x in lines[first:] if not x.startswith("(wall time")]


def _cli(*args: str) -> list[str]:
    got = subprocess.run(
        [sys.executable, "-m", "gyreprof", *args], capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, got.stderr[-4000:]
    return got.stdout.splitlines()


def _verbose(save: Path) -> list[str]:
    """The same run's report in full: ``gyreprof report DIR --verbose`` of its folder."""
    return _cli("report", str(save), "--verbose")[1:]


def _advice(lines: list[str]) -> list[str]:
    """The advice and note lines, normalised: without their prefix, spaces or case."""
    out = []
    for line in lines:
        bare = line.strip()
        for p in ADVICE:
            if bare.startswith(p):
                out.append(" ".join(bare[len(p) :].split()).lower())
    return out


def _rows(lines: list[str]) -> list[list[str]]:
    """The cells of every phase row of every table (a header starts with ``phase``)."""
    rows, inside = [], False
    for line in lines:
        cells = line.split()
        if line.startswith("phase "):
            inside = True
        elif inside and len(cells) >= 2 and cells[1].isdigit() and ":" not in cells[0]:
            rows.append(cells)
        elif not (inside and cells and cells[0].startswith("(")):  # (untimed), (idle)
            inside = False
    return rows


@pytest.fixture(scope="module")
def sync(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A CleanRL-style loop, env-heavy: sampler-bound, a trainer, 6 steps (the sampler's
    ~730 env steps: enough for its p99, not for its p99.9)."""
    return _run(
        tmp_path_factory.mktemp("sync"),
        script("signals_cleanrl.py"),
        *("sync", "env", "6", "0.002"),
    )


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same loop on an AsyncVectorEnv: a main process and 4 env workers."""
    return _run(
        tmp_path_factory.mktemp("async"),
        script("signals_cleanrl.py"),
        *("async", "env", "6", "0.002"),
    )


@pytest.fixture(scope="module")
def starved(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory.mktemp("dead"), script("dead_feeder_run.py"), "thread")


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A sampler alone (no trainer): no wait ratio to give."""
    return _run(tmp_path_factory.mktemp("sites"), script("sites_loop.py"), "1")


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One env reset, inside the warm-up, then steps only."""
    return _run(
        tmp_path_factory.mktemp("warm"),
        script("reset_once.py"),
        "1.0",
        options=("--warmup-s", "0.3"),
    )


def test_the_first_line_is_the_side_the_wait_ratio_and_its_spread(sync: Run) -> None:
    lines, data, _ = sync
    wait, verdict = data["wait"], data["verdict"]
    side = {"sampler": "sampler-bound", "trainer": "trainer-bound", "balanced": "balanced"}
    first = lines[1]
    assert first.startswith(f"{side[verdict['bound']]}: the trainer waits "), first
    assert fmt_pct(wait["ratio"]) in first, first
    spread = wait["window_distribution"]
    assert f"p10 {fmt_pct(spread['p10'])}, p90 {fmt_pct(spread['p90'])}" in first, first
    # then the cause the verdict named and its first advice, before any table
    assert lines[2].startswith("cause: ") and repr(verdict["dominant_phase"]) in lines[2]
    assert lines[3] == f"next: {verdict['advice'][0]}"
    tables = next(i for i, x in enumerate(lines) if x.startswith("phase "))
    reasons = next(i for i, x in enumerate(lines) if x.startswith("  1. "))
    assert 3 < tables < reasons


def test_a_starved_trainer_names_its_dead_feeder_and_the_fix_first(starved: Run) -> None:
    lines, data, _ = starved
    assert lines[1].startswith("starved: the trainer waits "), lines[1]
    assert fmt_pct(data["wait"]["ratio"]) in lines[1] and "p10 " in lines[1]
    assert lines[2] == f"cause: {data['verdict']['dead_feeder']['short']}"
    assert lines[3].startswith("next: fix what ended thread `producer`")


def test_without_a_trainer_the_first_line_says_no_ratio_can_be_given(sites: Run) -> None:
    lines, data, _ = sites
    assert data["wait"] is None
    assert lines[1].startswith("unknown: no trainer profile")
    assert lines[2].startswith("cause: the sampler's untimed ") and "featurize" in lines[2]
    assert lines[3] == f"next: {data['verdict']['advice'][0]}"


@pytest.mark.parametrize("name", ["sync", "workers", "starved", "sites"])
def test_each_piece_of_advice_is_said_once(name: str, request: pytest.FixtureRequest) -> None:
    lines, _, save = request.getfixturevalue(name)
    for report in (lines, _verbose(save)):
        said = _advice(report)
        assert len(said) == len(set(said)), [x for x in said if said.count(x) > 1]
        # the warm-up advice, worded differently in each place that used to give it
        text = "\n".join(report)
        assert text.count("warm-up was not excluded") == 1, text
        assert text.count("rerun with gyreprof run --warmup") == 1, text


@pytest.mark.parametrize("name", ["sync", "workers", "sites"])
def test_no_table_shows_a_phase_that_did_not_run(name: str, request: pytest.FixtureRequest) -> None:
    lines, _, save = request.getfixturevalue(name)
    rows = _rows(lines)
    assert rows and all(int(r[1]) > 0 for r in rows), rows
    # --verbose shows them as they were (a vector env's phases, generate, ...)
    assert any(int(r[1]) == 0 for r in _rows(_verbose(save)))


def test_the_worker_totals_table_hides_them_too(workers: Run) -> None:
    lines, _, _ = workers
    totals = next(i for i, x in enumerate(lines) if "env_worker processes, totals" in x)
    table = lines[totals + 2 : lines.index("", totals)]
    assert table and {row.split()[0] for row in table} <= {"env_step", "env_reset"}, table
    assert len(lines) <= 45  # several processes: compact too


@pytest.mark.parametrize("name", ["sync", "starved", "sites"])
def test_one_process_report_fits_in_30_lines(name: str, request: pytest.FixtureRequest) -> None:
    lines, _, _ = request.getfixturevalue(name)
    assert len(lines) <= 30, "\n".join(lines)


def test_verbose_shows_what_the_default_leaves_out(sync: Run) -> None:
    lines, _, save = sync
    full = _verbose(save)
    hidden = (
        "first call: ",
        "profiler overhead: ",
        "per-window wait ratio (",
        "wait per call: ",
        "processes: 1 of 1 process contributed",
        "p99.9 needs at least 1000",
    )
    text, everything = "\n".join(lines), "\n".join(full)
    for words in hidden:
        assert words in everything and words not in text, words
    # the answer and the verdict are the same in both
    assert full[1:4] == lines[1:4]
    assert [x for x in full if x.startswith("  1. ")] == [x for x in lines if x.startswith("  1. ")]


def test_gyreprof_run_takes_verbose_itself(tmp_path: Path) -> None:
    proc, _ = gyreprof_run(tmp_path, sys.executable, script("gym_loop.py"), "300", options=("-v",))
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = "\n".join(_report(proc.stderr))
    assert "first call: " in text and "processes: 1 of 1 process contributed" in text
    assert any(int(r[1]) == 0 for r in _rows(_report(proc.stderr)))


def test_a_phase_that_ran_only_in_the_warm_up_is_not_hidden_as_if_it_never_ran(
    warm: Run,
) -> None:
    lines, data, save = warm
    # the naive case: in steady state, env_reset looks like a phase that never ran
    assert data["sampler"]["phases"]["env_reset"]["count"] == 0
    assert data["sampler"]["phases"]["step_wait"]["count"] == 0
    rows = {r[0] for r in _rows(lines)}
    assert "env_reset" not in rows and "env_step" in rows
    early = next(x for x in lines if x.startswith("ran only in the warm-up"))
    assert "env_reset (first call " in early and "step_wait" not in early
    assert any(x.startswith("warm-up: first 0.3 s excluded") for x in lines)
    # --verbose: its row (count 0) and its first call, as before
    full = _verbose(save)
    assert any(r[0] == "env_reset" and r[1] == "0" for r in _rows(full))
    assert any(x.startswith("first call: ") and "env_reset" in x for x in full)


def test_the_json_keeps_every_caveat_and_advice(sync: Run) -> None:
    lines, data, _ = sync
    verdict = data["verdict"]
    # the text says the two sides' warm-up once, and leaves the p99.9 caveat to
    # --verbose; the record keeps them all, as the verdict gave them
    assert any(c.startswith("trainer: warm-up was not excluded") for c in verdict["caveats"])
    assert any(c.startswith("sampler: warm-up was not excluded") for c in verdict["caveats"])
    assert any("p99.9 needs at least" in c for c in verdict["caveats"])
    assert len(verdict["advice"]) >= 1 and data["wait"]["window_ratios"]
    assert sum(1 for x in lines if "warm-up was not excluded" in x) == 1
