"""``gyreprof report`` on what ``gyreprof run --save DIR`` kept, and ``run --html``: one
story in every output (issue 22, items 7 and 9). One real SB3 PPO run on CartPole
(DummyVecEnv, a slow update) is read back as a folder, as its trainer snapshot alone,
and as its sampler and trainer snapshots; each gives the run's wait ratio and verdict."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("matplotlib")

from gyreprof._support.format import fmt_pct  # noqa: E402

from helpers.run_scripts.runhelp import gyreprof_run, script  # noqa: E402

pytestmark = pytest.mark.slow

Saved = tuple[str, dict[str, Any], Path, Path]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    tmp = tmp_path_factory.mktemp("saved_run")
    save, page = tmp / "raw", tmp / "page.html"
    proc, data = gyreprof_run(
        tmp,
        script("sb3_ppo.py"),
        *("dummy", "train", "512", "1", "64"),
        options=("--save", str(save), "--html", str(page)),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None and data["verdict"] is not None, proc.stderr[-4000:]
    return proc.stderr, data, save, page


def report(*args: str) -> subprocess.CompletedProcess[str]:
    got = subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr[-4000:]
    return got


def _run_text(stderr: str) -> list[str]:
    """The run's report after its head line (its answer first) to the end (before the
    wall time)."""
    lines = stderr.splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith("gyreprof run: ")) + 1
    return [x for x in lines[first:] if not x.startswith("(wall time")]


def _snap(save: Path, side: str) -> str:
    (path,) = save.glob(f"main-*.{side}.snap")
    return str(path)


def test_a_save_folder_is_reported_again_as_the_run_was(saved: Saved) -> None:
    stderr, data, save, _ = saved
    got = report(str(save)).stdout.splitlines()
    assert got[0] == f"gyreprof report: saved run {save}"
    # then the run's own head line (its command and exit code, kept in run.json) and
    # the run's report, line for line
    head = next(x for x in stderr.splitlines() if x.startswith("gyreprof run: "))
    assert got[1] == head
    assert got[2:] == _run_text(stderr)
    again = json.loads(report(str(save), "--json").stdout)
    assert again["format"] == "gyreprof.run/1"
    assert again["verdict"] == data["verdict"]
    assert again["wait"]["ratio"] == data["wait"]["ratio"]
    assert [p["pid"] for p in again["processes"]] == [p["pid"] for p in data["processes"]]


def test_a_trainer_snapshot_alone_gives_the_wait_ratio_and_a_verdict(saved: Saved) -> None:
    _, data, save, _ = saved
    ratio = data["wait"]["ratio"]
    out = report(_snap(save, "trainer")).stdout
    assert f"wait ratio: {fmt_pct(ratio)} of the trainer's time" in out
    assert "\nverdict: " in out
    got = json.loads(report(_snap(save, "trainer"), "--json").stdout)
    assert got["format"] == "gyreprof.report/1" and got["sampler"] is None
    assert got["verdict"]["wait_ratio"] == pytest.approx(ratio)
    assert got["verdict"]["bound"] in ("trainer", "sampler", "balanced")


def test_sampler_and_trainer_snapshots_give_the_runs_full_verdict(saved: Saved) -> None:
    _, data, save, _ = saved
    # in either order; the launcher declared SB3's loop synchronous, a snapshot cannot show it
    args = (_snap(save, "trainer"), _snap(save, "sampler"), "--loop", "sync", "--json")
    got = json.loads(report(*args).stdout)["verdict"]
    ran = data["verdict"]
    assert got["bound"] == ran["bound"] and got["loop"] == "sync"
    assert got["dominant_phase"] == ran["dominant_phase"]
    assert got["sampler_shares"] == pytest.approx(ran["sampler_shares"])
    text = report(_snap(save, "sampler"), _snap(save, "trainer"), "--loop", "sync").stdout
    assert "sampler (" in text and "trainer (" in text and "\nverdict: " in text


def test_run_html_tells_the_texts_story(saved: Saved) -> None:
    stderr, data, save, page = saved
    body = page.read_text()
    lines = _run_text(stderr)
    head = next(x for x in lines if x.startswith("verdict: "))[len("verdict: ") :]
    assert html.escape(head, quote=True) in body
    # the wait report's lines in full are the --verbose report's
    full = report(str(save), "--verbose").stdout.splitlines()
    wait_line = next(x for x in full if x.startswith("wait ratio: "))
    assert html.escape(wait_line, quote=True) in body
    assert "<h2>Trainer" in body and "<h2>Verdict</h2>" in body
    for phase, share in data["verdict"]["sampler_shares"].items():
        cells = f"<td>{html.escape(phase, quote=True)}</td><td>{fmt_pct(share)}</td>"
        assert cells in body
    # the sampler table's rows are the text's rows, cell for cell
    row = next(x for x in lines if x.startswith("fwd "))
    assert "".join(f"<td>{c}</td>" for c in row.split()[:2]) in body
    assert "No window closed yet" not in body
