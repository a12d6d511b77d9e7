"""One NaN rule and one ``to_json`` for every result type; the renderers apart from data.

Every JSON gyreprof writes is strict (``json.loads(text, parse_constant=<raise>)``
takes it), a missing figure is ``null``, each ``to_json`` has the one signature
``to_json(path=None, *, indent=None)``, and files written by the previous version of
each format still read (samples written by the code before the NaN rule, in
``tests/data/``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

import gyreprof as gp
from gyreprof.analysis.parallelism.census import Census
from gyreprof.analysis.parallelism.findings import ParallelismReport
from gyreprof.analysis.run import ProcessEntry, RunRecord, RunReport
from gyreprof.analysis.sweep.record import RunResult
from gyreprof.analysis.sweep.result import SweepResult
from gyreprof.analysis.verdict import Verdict
from gyreprof.analysis.wait import WaitReport
from gyreprof.diagnostics.doctor import ProcessDiagnosis
from gyreprof.diagnostics.envcheck import EnvReport
from gyreprof.diagnostics.selfcheck import SelfCheckResult
from gyreprof.integrations._auto.records import ProcessRecord
from gyreprof.integrations.ray.fleet import FleetSummary
from gyreprof.model.summary import PhaseStats, Summary, WarmupInfo
from gyreprof.model.window import Window
from gyreprof.render import csv as render_csv
from gyreprof.render import markdown as render_markdown
from gyreprof.render import metrics as render_metrics
from gyreprof.render import text as render_text

DATA = Path(__file__).parent / "data"
SWEEP_V1 = Path(__file__).parent / "helpers" / "sweep_samplers" / "sweep_v1.json"
US = 1000


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _nulls(value: Any) -> int:
    if value is None:
        return 1
    if isinstance(value, dict):
        return sum(_nulls(v) for v in value.values())
    if isinstance(value, list):
        return sum(_nulls(v) for v in value)
    return 0


def _sampler() -> gp.Profiler:
    sp = gp.Profiler(["env", "fwd", "never"])  # "never" has no mean: NaN figures
    for i in range(50):
        sp.begin()
        sp.record("env", 5 * US + (i % 7) * 10)
        sp.record("fwd", US)
    sp.begin()
    return sp


def _trainer(steps: int = 50) -> gp.Profiler:
    tp = gp.Profiler(["wait", "compute"], window_steps=1000)
    for _ in range(steps):
        tp.begin()
        tp.record("wait", 3 * US)
        tp.record("compute", US)
    tp.begin()
    return tp


def _results() -> dict[str, Any]:
    sp, tp = _sampler(), _trainer(4)  # 4 trainer steps: no steady windows, NaN spreads
    s = sp.summary()
    wait = gp.wait_report(tp.summary())
    # the verdict with a wait report that has missing figures nested in it
    verdict = dataclasses.replace(gp.diagnose(sampler=sp, trainer=tp), wait_report=wait)
    run = RunReport(
        command=["python", "train.py"],
        exit_code=0,
        processes=[ProcessEntry(1, "main", True, "exit"), ProcessEntry(2, "child", False, "none")],
        sampler=sp.snapshot(),
        trainer=tp.snapshot(),
        wait=wait,
        verdict=verdict,
    )
    return {
        "Summary": s,
        "WaitReport": wait,
        "Verdict": verdict,
        "RunReport": run,
        "ProcessRecord": ProcessRecord(pid=1, role="main", ppid=0, notes=("n",)),
        "SweepResult": SweepResult.from_json(SWEEP_V1),
    }


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return _results()


@pytest.mark.parametrize(
    "name", ["Summary", "WaitReport", "Verdict", "RunReport", "ProcessRecord", "SweepResult"]
)
def test_every_result_writes_strict_json_with_null_for_a_missing_figure(
    results: dict[str, Any], name: str, tmp_path: Path
) -> None:
    obj = results[name]
    text = obj.to_json()
    data = _strict(text)
    assert "\n" not in text  # indent=None by default: one line
    if name != "ProcessRecord":
        assert _nulls(data) > 0, "the sample has missing figures; they must be null"
    path = tmp_path / f"{name}.json"
    assert obj.to_json(path, indent=2) == path.read_text().rstrip("\n")
    assert _strict(path.read_text()) == data


def test_the_figures_that_were_nan_read_back_as_nan(results: dict[str, Any]) -> None:
    s = results["Summary"]
    data = _strict(s.to_json())
    assert data["format"] == "gyreprof.summary/2"
    assert data["phases"]["never"]["mean"] is None and data["phases"]["never"]["p99"] is None
    back = Summary.from_json(s.to_json())
    assert math.isnan(back["never"].mean) and math.isnan(back["never"].p999)
    assert back["env"].percentile(99) == s["env"].percentile(99)  # compact histograms kept
    assert str(back) == str(s) and back.to_markdown() == s.to_markdown()
    wait = results["WaitReport"]
    assert _strict(wait.to_json())["window_distribution"]["p50"] is None
    assert math.isnan(WaitReport.from_dict(wait.to_dict()).window_distribution["p50"])
    assert PhaseStats.to_dict(s["never"])["mean"] is None
    json.dumps(s["never"].to_dict(), allow_nan=False)
    for w in s.windows:
        json.dumps(w.to_dict(), allow_nan=False)


def test_a_summary_written_as_format_1_still_reads() -> None:
    """tests/data/summary_v1.json: written by the code before the NaN rule (bare NaN)."""
    text = (DATA / "summary_v1.json").read_text()
    assert '"gyreprof.summary/1"' in text and "NaN" in text
    s = Summary.from_json(DATA / "summary_v1.json")
    assert s.steps == 55 and s.counters == {"retry": 9} and len(s.windows) == 6
    assert math.isnan(s["never"].mean) and s["env"].percentile(50) == 1320.0
    assert "env        55  1.32 us" in str(s)
    # its shares were of the step time and added up past 1: read as /2's (of all phase time)
    assert sum(p.share for p in s.phases.values() if p.share == p.share) <= 1.0 + 1e-9
    again = _strict(s.to_json())  # written again as /2: strict
    assert again["format"] == "gyreprof.summary/2"
    assert Summary.from_dict(again).to_dict() == again


def test_a_v1_summary_without_the_fields_older_writers_left_out_reads() -> None:
    data = json.loads((DATA / "summary_v1.json").read_text())
    for key in ("nonfinite", "events", "counters", "counter_rates", "windows", "meta"):
        del data[key]
    del data["warmup"]["max_ns"]
    s = Summary.from_dict(data)
    assert s.events == 0 and s.counters == {} and s.windows == [] and s.warmup.max_ns == {}
    for pd in data["phases"].values():  # /1's shares of step time (above 1 here): /2's bound
        pd["share"] = 0.0
    data["format"] = "gyreprof.summary/2"  # /2 writes every field: a missing one is refused
    with pytest.raises(ValueError, match="missing field"):
        Summary.from_dict(data)


def test_a_verdict_written_as_format_1_still_reads() -> None:
    v = Verdict.from_dict(json.loads((DATA / "verdict_v1.json").read_text()))
    assert json.loads((DATA / "verdict_v1.json").read_text())["format"] == "gyreprof.verdict/1"
    assert v.bound == "sampler" and v.wait_report is not None
    assert _strict(v.to_json())["format"] == "gyreprof.verdict/2"


def test_a_sweep_written_as_format_1_still_reads_and_writes_2() -> None:
    r = SweepResult.from_json(SWEEP_V1)
    data = _strict(r.to_json())
    assert data["format"] == "gyreprof.sweep/2" and data["gyreprof"] == gp.__version__
    assert SweepResult.from_dict(data).table() == r.table()


@pytest.mark.parametrize(
    "cls",
    [Summary, WaitReport, Verdict, RunReport, ProcessRecord, SweepResult, FleetSummary]
    + [ParallelismReport, Census, EnvReport, ProcessDiagnosis, SelfCheckResult, RunResult],
)
def test_one_to_json_signature(cls: type) -> None:
    sig = inspect.signature(cls.to_json)  # type: ignore[attr-defined]
    params = list(sig.parameters.values())[1:]
    assert [(p.name, p.kind, p.default) for p in params] == [
        ("path", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
        ("indent", inspect.Parameter.KEYWORD_ONLY, None),
    ]


def test_the_data_classes_delegate_to_the_renderers(results: dict[str, Any]) -> None:
    s, wait, verdict, run = (results[k] for k in ("Summary", "WaitReport", "Verdict", "RunReport"))
    assert str(s) == render_text.summary(s) and s.table() == render_text.summary_table(s)
    assert s.to_markdown() == render_markdown.summary(s)
    assert s.to_csv() == render_csv.summary(s)
    assert s.to_metrics(prefix="x/") == render_metrics.summary(s, "x/")
    assert str(s.warmup) == render_text.warmup(s.warmup)
    assert str(wait) == render_text.wait_report(wait)
    assert str(verdict) == render_text.verdict(verdict)
    assert verdict.headline == render_text.verdict_headline(verdict)
    assert str(run) == render_text.run_report(run)
    # the run's report holds the verdict (its headline and reasons; the first advice at
    # the top) and, with --verbose, the whole wait report (its warm-up note said once)
    text, full = str(run), render_text.run_report(run, verbose=True)
    assert f"verdict: {verdict.headline}" in text
    assert all(f"  {i}. {r}" in text for i, r in enumerate(verdict.reasons, 1))
    assert f"next: {verdict.advice[0]}" in text
    said = render_text.warmup_caveat(run) is not None
    assert render_text.wait_report(wait, warmup_said=said) in full


def test_every_result_renders_in_every_format(results: dict[str, Any]) -> None:
    s, wait, verdict, run = (results[k] for k in ("Summary", "WaitReport", "Verdict", "RunReport"))
    assert "| never | 0 | - |" in s.to_markdown()  # a missing figure is '-', not 'nan'
    assert verdict.to_markdown().startswith("**verdict: ")
    assert "**wait report:" in wait.to_markdown()
    assert "### verdict" in run.to_markdown()
    m = verdict.to_metrics()
    assert m["gyreprof/verdict/sampler_bound"] in (0.0, 1.0)
    assert set(wait.to_metrics()) >= {"gyreprof/wait/ratio", "gyreprof/wait/spikes"}
    assert math.isnan(wait.to_metrics()["gyreprof/wait/window_p50"])
    lines = render_csv.windows(_trainer(50).windows(steps=10)).splitlines()
    assert lines[0].startswith("window,source,warmup") and len(lines) > 5
    assert "window 0 (ring" in str(_trainer(50).windows(steps=10)[0])
    assert str(s["never"]).startswith("phase: 0 calls, mean -, p50 -")


def test_a_missing_rate_or_lap_cost_reads_as_a_dash_not_nan() -> None:
    data = json.loads((DATA / "summary_v1.json").read_text())
    data["lap_cost_ns"] = float("nan")
    data["counter_rates"] = {"retry": float("nan")}
    text = str(Summary.from_dict(data))
    assert "nan" not in text.lower().replace("never", "")
    assert "profiler overhead: 25.4% of wall time\n" in text and "retry 9 (-/s)" in text


def test_the_run_record_nests_each_part_whole_and_reads_back(results: dict[str, Any]) -> None:
    run = results["RunReport"]
    data = _strict(run.to_json())
    assert set(data) == {
        "format",
        "verdict",
        "wait",
        "sampler",
        "trainer",
        "processes",
        "exit_code",
        "notes",
        "rollouts",  # null: no HTTP rollout requests
        "start_up",  # null: no first step told apart as start-up
    }
    assert data["format"] == "gyreprof.run/1"
    assert data["verdict"]["format"] == "gyreprof.verdict/2"
    assert data["wait"]["format"] == "gyreprof.wait_report/2"
    assert data["sampler"]["format"] == "gyreprof.summary/2" and "histograms" in data["sampler"]
    assert data["processes"][0] == {"pid": 1, "role": "main", "contributed": True, "source": "exit"}
    back = RunRecord.from_dict(data)
    assert back.sampler is not None and back.sampler["env"].percentile(99) == (
        run.sampler.summary()["env"].percentile(99)
    )
    assert back.verdict is not None and back.verdict.bound == run.verdict.bound
    assert back.wait is not None and back.wait.ratio == run.wait.ratio
    assert [p.pid for p in back.processes] == [1, 2] and back.exit_code == 0
    bad = {**data, "sampler": {**data["sampler"], "steps": "many"}}
    with pytest.raises(ValueError, match=r"gyreprof.run/1\.sampler: .*steps"):
        RunRecord.from_dict(bad)
    with pytest.raises(ValueError, match=r"\.wait: .*wait_report/2: the data has no 'format'"):
        RunRecord.from_dict(
            {**data, "wait": {k: v for k, v in data["wait"].items() if k != "format"}}
        )


_RENDER_METHODS = (
    "__str__",
    "report",
    "table",
    "table_rows",
    "to_markdown",
    "to_csv",
    "to_metrics",
    "to_json",
    "headline",
    "processes_line",
    "to_plot",
)


@pytest.mark.parametrize(
    "cls", [Summary, PhaseStats, Window, WarmupInfo, WaitReport, Verdict, RunReport, SweepResult]
)
def test_the_data_classes_keep_no_rendering_of_their_own(cls: type) -> None:
    """Every rendering method of a result class is one call into gyreprof.render (after
    its docstring and a deferred import), directly or through a form looked up by name in
    gyreprof._support.forms (the results below the render floor): the words live in one place."""
    checked = 0
    for name in _RENDER_METHODS:
        member = cls.__dict__.get(name)
        if isinstance(member, property):
            member = member.fget
        if member is None:
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(member)))
        func = tree.body[0]
        assert isinstance(func, ast.FunctionDef)
        body = [
            node
            for node in func.body
            if not isinstance(node, ast.ImportFrom)
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        ]
        assert len(body) == 1 and isinstance(body[0], ast.Return), f"{cls.__name__}.{name}"
        call = body[0].value
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
        owner = call.func.value
        by_name = (
            isinstance(owner, ast.Name)
            and owner.id == "_forms"
            and bool(call.args)
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        )
        assert by_name or (isinstance(owner, ast.Name) and owner.id.startswith("render_")), (
            f"{cls.__name__}.{name} renders by itself instead of calling gyreprof.render"
        )
        checked += 1
    assert checked >= 1


def test_the_diagnostics_write_through_the_one_to_json(tmp_path: Path) -> None:
    """envcheck, doctor, selfcheck and a sweep run: compact strict JSON by default, the
    same text (indented when asked) in the file given, and the record reads back."""
    from gyreprof.diagnostics.doctor import doctor
    from gyreprof.diagnostics.envcheck import envcheck

    req = tmp_path / "requirements.txt"
    req.write_text("numpy\n")
    env = envcheck(req, broken=False)
    gone = doctor(2**22 + 12345, interval_s=0.2)  # no such process: absent
    sc = SelfCheckResult(
        target="m:f", method="sample", status="ok", exit_code=0, stage="done", elapsed_s=0.5
    )
    cases: list[tuple[Any, Any]] = [
        (env, EnvReport.from_dict),
        (gone, ProcessDiagnosis.from_dict),
        (sc, lambda d: SelfCheckResult(**d)),
    ]
    for obj, back in cases:
        text = obj.to_json()
        assert "\n" not in text  # indent=None: one line (the commands pass indent=2)
        assert back(_strict(text)) == obj
        path = tmp_path / f"{type(obj).__name__}.json"
        assert obj.to_json(path, indent=2) == path.read_text().rstrip("\n")
        assert "\n" in path.read_text().rstrip("\n")
        assert _strict(path.read_text()) == _strict(text)
