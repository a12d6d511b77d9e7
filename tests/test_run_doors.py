"""One run, one set of numbers, every door (issue 33, item 7): a real ``gyreprof run`` of a
synchronous CartPole + torch loop, then each rendering of it compared with the same run's
``--json``: the terminal table, ``report DIR`` (text and Markdown), the HTML page and
``report`` on the run's own ``.snap`` files show the verdict's shares of the sampler's
wall time (with the untimed row) and its loop shape; ``top`` never adds a sampler's
segment to a trainer's."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("torch")

import gyreprof as gp  # noqa: E402
from gyreprof._support.format import fmt_pct  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "helpers" / "run_scripts"))
from runhelp import gyreprof_run, script  # noqa: E402

# real processes for seconds each: run by .ci/run's second step
pytestmark = pytest.mark.slow

Run = tuple[str, dict[str, Any], Path, Path]


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("doors")
    save, page = tmp / "raw", tmp / "page.html"
    options: tuple[str, ...] = ("--save", str(save))
    try:
        import matplotlib  # noqa: F401

        options += ("--html", str(page))
    except ImportError:
        pass
    proc, data = gyreprof_run(
        tmp, sys.executable, script("doors_cartpole_torch.py"), "12", options=options
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert data is not None and data["verdict"] is not None, proc.stderr[-4000:]
    assert data["verdict"]["loop"] == "sync", data["verdict"]  # what every door must show
    return proc.stderr, data, save, page


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", *args], capture_output=True, text=True, timeout=120
    )


def _want(data: dict[str, Any]) -> dict[str, str]:
    """The run's --json shares of the sampler's wall time, as every table prints them."""
    return {n: fmt_pct(x) for n, x in data["verdict"]["sampler_shares"].items()}


def _text_shares(text: str, after: str) -> dict[str, str]:
    """The share column of the first table after the line holding ``after``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if after in ln)
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("phase "))
    out = {}
    for ln in lines[head + 1 :]:
        if not ln or ln.startswith(("share:", "warm-up", "gyreprof")):
            break
        cells = ln.split()
        if cells[-1].endswith("%"):
            out[cells[0]] = cells[-1]
    return out


def _md_shares(text: str) -> dict[str, str]:
    section = text.split("### sampler", 1)[1].split("###", 1)[0]
    out = {}
    for ln in section.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[-1].endswith("%"):
            out[cells[0]] = cells[-1]
    return out


def _timed(shares: dict[str, str]) -> dict[str, str]:
    """Without the phases that did not run (0.0%, absent from the verdict's shares)."""
    return {n: v for n, v in shares.items() if v != fmt_pct(0.0) or n.startswith("(")}


def test_the_run_table_shows_the_verdicts_shares_with_the_untimed_row(sync_run: Run) -> None:
    stderr, data, _, _ = sync_run
    want = _want(data)
    assert "(untimed)" in want
    got = _text_shares(stderr, "sampler phases, merged over")
    assert _timed(got) == want, (got, want)
    assert "share: of the sampler's wall time (from " in stderr


def test_report_of_the_folder_shows_the_same_shares_and_shape(sync_run: Run) -> None:
    _, data, save, _ = sync_run
    out = _cli("report", str(save))
    assert out.returncode == 0, out.stderr
    assert _timed(_text_shares(out.stdout, "sampler phases, merged over")) == _want(data)
    assert "[synchronous loop, timeline]" in out.stdout


def test_the_markdown_shows_the_same_shares_and_no_zero_steady_steps(sync_run: Run) -> None:
    _, data, save, _ = sync_run
    out = _cli("report", str(save), "--markdown")
    assert out.returncode == 0, out.stderr
    assert _timed(_md_shares(out.stdout)) == _want(data), out.stdout
    assert "0 steady steps" not in out.stdout
    assert f"**{data['sampler']['events']} phase events (no steps marked)**" in out.stdout
    trainer = data["trainer"]
    assert f"**{trainer['steps']} steady steps in " in out.stdout


def test_the_html_page_shows_the_same_shares(sync_run: Run) -> None:
    _, data, _, page = sync_run
    if not page.exists():
        pytest.skip("no plot extra: no HTML page")
    text = page.read_text()
    table = text.split("<h2>Sampler phases, merged over", 1)[1].split("</table>", 1)[0]
    got = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table):
        cells = re.findall(r"<td>(.*?)</td>", row)
        if cells and cells[-1].endswith("%"):
            got[html.unescape(cells[0])] = cells[-1]
    assert _timed(got) == _want(data), got


def test_report_of_the_runs_snaps_reads_the_runs_shape_and_shares(sync_run: Run) -> None:
    _, data, save, _ = sync_run
    snaps = sorted(str(p) for p in save.glob("*.snap"))
    assert len(snaps) == 2
    out = _cli("report", *snaps, "--json")
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)["verdict"]
    run = data["verdict"]
    assert (verdict["loop"], verdict["loop_source"]) == (run["loop"], run["loop_source"])
    assert verdict["bound"] == run["bound"]
    assert _want({"verdict": verdict}) == _want(data)
    text = _cli("report", *snaps)
    assert "[synchronous loop, timeline]" in text.stdout and "overlapped" not in text.stdout
    assert _timed(_text_shares(text.stdout, "sampler (")) == _want(data)


def test_a_snapshot_that_does_not_show_the_shape_says_so(sync_run: Run, tmp_path: Path) -> None:
    _, _, save, _ = sync_run
    trainer = gp.Snapshot.load(next(save.glob("*.trainer.snap")))
    blind = trainer.replace(counters={})  # no collect blocks counted: no shape recorded
    blind.save(tmp_path / "t.snap")
    sampler = next(save.glob("*.sampler.snap"))
    out = _cli("report", str(sampler), str(tmp_path / "t.snap"))
    assert out.returncode == 0, out.stderr
    head = next(ln for ln in out.stdout.splitlines() if ln.startswith("verdict: "))
    assert "loop shape not detected" in head and "--loop" in head, head


def test_report_reads_the_json_the_run_wrote(sync_run: Run) -> None:
    stderr, data, save, _ = sync_run
    run_json = save.parent / "run.json"
    out = _cli("report", str(run_json))
    assert out.returncode == 0, out.stderr
    assert _timed(_text_shares(out.stdout, "sampler phases, merged over")) == _want(data)
    # the same report as the run printed, from its verdict down
    printed = stderr[stderr.index("verdict: ") :].split("\n(wall time")[0].rstrip()
    assert printed in out.stdout
    again = _cli("report", str(run_json), "--json")
    assert again.returncode == 0, again.stderr
    back = json.loads(again.stdout)
    assert back["verdict"] == data["verdict"] and back["sampler"] == data["sampler"]
    md = _cli("report", str(run_json), "--markdown")
    assert md.returncode == 0 and _timed(_md_shares(md.stdout)) == _want(data), md.stdout


def test_export_of_the_folder_and_its_snaps_is_a_trace(sync_run: Run, tmp_path: Path) -> None:
    from gyreprof.export.chrome import validate_trace

    _, data, save, _ = sync_run
    out = tmp_path / "trace.json"
    r = _cli("export", str(save), "-f", "chrome", "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert validate_trace(doc) == []
    pid = data["processes"][0]["pid"]
    tracks = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert tracks == {"sampler", "trainer"}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == pid]
    sampler = next(e for e in spans if e["name"] == "sampler profile")
    fwd = data["sampler"]["phases"]["fwd"]
    assert sampler["args"]["phases"]["fwd"]["count"] == fwd["count"]
    windows = [e for e in spans if e["cat"] == "window"]
    assert len(windows) == len(data["trainer"]["windows"]) > 0
    snap = next(save.glob("*.trainer.snap"))
    one = _cli("export", str(snap), "-f", "chrome", "--windows")
    assert one.returncode == 0 and validate_trace(json.loads(one.stdout)) == [], one.stderr
    bare = _cli("export", str(snap), "-f", "chrome")  # each call needs the raw events
    assert bare.returncode == 2 and "--windows" in bare.stderr


def test_top_after_the_run_says_it_ended_and_where_its_records_are(sync_run: Run) -> None:
    _, data, save, _ = sync_run
    pid = data["processes"][0]["pid"]
    out = _cli("top", "--once", str(pid))
    assert out.returncode == 1
    assert "live=True" not in out.stderr, out.stderr
    assert f"pid {pid} was part of gyreprof run" in out.stderr, out.stderr
    assert "exit code 0" in out.stderr and str(save) in out.stderr
    assert str(save.parent / "run.json") in out.stderr


def test_top_never_adds_a_samplers_segment_to_a_trainers(tmp_path: Path) -> None:
    from runhelp import gyreprof_popen

    stop = tmp_path / "stop"
    proc, run_json = gyreprof_popen(
        tmp_path, sys.executable, script("doors_cartpole_torch.py"), "3", str(stop)
    )
    try:
        assert proc.stdout is not None
        child = next(int(ln.split()[1]) for ln in proc.stdout if ln.startswith("READY "))
        out = _cli("top", "--once", "--json", "--interval", "0.3", str(child))
        assert out.returncode == 0, out.stderr
        frame = json.loads(out.stdout)
        kinds = {tuple(sorted(p["since_start"]["phases"])) for p in frame["processes"]}
        assert len(kinds) == 2, frame  # a sampler's and a trainer's segment
        assert frame["merged"] is None, frame["merged"]  # one of each: nothing to add up
        # the sampler's panel: shares of its wall time (the trainer's waits, as the run's
        # verdict takes them in a synchronous loop), the untimed part a row of its own
        text = _cli("top", "--once", "--interval", "0.3", str(child)).stdout
        panel = text.split(":sampler", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
        shares = [
            float(ln.split()[-2 if not ln.startswith("(") else -1][:-1])
            for ln in panel
            if ln[:1].isalpha() or ln.startswith("(untimed)")
        ]
        assert any(ln.startswith("(untimed)") for ln in panel), text
        assert abs(sum(shares) - 100.0) <= 0.5, (shares, text)
    finally:
        stop.touch()
        proc.communicate(timeout=120)
    # the run's own table, at its end, reads the same wall time: its untimed share is
    # top's give or take what the loop did after top looked (not the ~90% that the
    # sampler's elapsed time would give: the trainer's compute is not the sampler's)
    final = json.loads(run_json.read_text())["verdict"]["sampler_shares"]["(untimed)"]
    assert abs(shares[-1] - 100.0 * final) <= 15.0, (shares, final, text)
