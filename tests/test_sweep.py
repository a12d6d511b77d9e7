"""gyreprof.sweep: controlled one-variable sweeps with real samplers and real subprocesses.

The samplers live in ``tests/helpers/sweep_samplers`` (on sys.path through conftest, and
handed to the sweep's subprocesses with the parent's sys.path). Timed figures are
only compared where the sampler's design makes the difference large (a 4x drop in
per-sample cost; 16 MiB steps of memory), never against wall-clock constants.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import gyreprof as gp
from gyreprof.analysis.sweep import SweepResult, SweepUsageError, parse_bytes

from helpers.sweep_samplers import misbehaving

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
MIB = 2**20

NUMPY = "helpers.sweep_samplers.numpy_sampler:make_sampler"


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _children_before_the_test() -> None:
    """Processes this test session already had (another file's module fixture, a
    multiprocessing resource tracker) are not the sweep's: remember them."""
    _BEFORE.clear()
    _BEFORE.update(p.pid for p in psutil.Process().children(recursive=True))


def _no_children_left() -> list[psutil.Process]:
    """Processes started during this test that are still running."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in _BEFORE and p.is_running()
    ]


# ----------------------------------------------------------------- the main result


# The flat sweep's sampler waits 4 ms per chunk besides computing: a call's time is set
# by its chunks. With computing alone (0.1-0.3 ms a call) a loaded machine decided the
# answer: 15 calls a repeat read a noise of 0.54+ and 2 -> 16's designed 8x as 2.8x; 300
# calls still went on to 64 in 1 of 6 parallel runs (16 -> 32, designed flat, read as a
# gain above 90%).
PACED = "helpers.sweep_samplers.numpy_sampler:make_paced_sampler"
FLAT_STEPS, FLAT_WARMUP = 60, 5


@pytest.fixture(scope="module")
def flat_sweep() -> SweepResult:
    # per-sample cost falls 8x from 2 to 16 (one padded chunk either way), then is flat;
    # every sample keeps 1 MiB, so peaks rise by 16 MiB from 16 to 32. flat_within is wide
    # because the CI machine is noisy: the designed steps are +700% and +0%. Three repeats:
    # a value's median then leaves out a repeat stalled by the machine's other load (with
    # two, the median is their mean, and one stall read +50% at 32 under a parallel run).
    return gp.sweep(
        PACED,
        "batch_size",
        [2, 16, 32, 64],
        steps=FLAT_STEPS,
        warmup=FLAT_WARMUP,
        repeats=3,
        flat_within=0.9,
        timeout_s=120,
        progress=False,
    )


def test_sweep_finds_flat_region_and_stops(flat_sweep: SweepResult) -> None:
    r = flat_sweep
    assert [p.value for p in r.points] == [2, 16, 32]
    assert all(p.ok for p in r.points), [p.error for p in r.points]
    assert r.stop_reason == "flat"
    assert r.stopped_at == 32
    assert r.flat_from == 16
    assert r.skipped == (64,)
    assert r.recommended == 16
    p2, p16, p32 = r.points
    assert p16.samples_per_s > 3 * p2.samples_per_s  # 8x by design
    assert p16.gain is not None and p16.gain > 2.0
    assert p32.gain is not None and p32.gain <= 0.9
    # the stored batch grows: so do the per-value peaks
    assert p16.peak_rss_bytes - p2.peak_rss_bytes > 8 * MIB
    assert p32.peak_rss_bytes - p16.peak_rss_bytes > 10 * MIB
    assert "flat from 16" in r.stop_detail or "from 16" in r.stop_detail
    assert "not tried: 64" in r.stop_detail


def test_figures_phases_and_warmup_per_value(flat_sweep: SweepResult) -> None:
    for p in flat_sweep.points:
        assert len(p.runs) == 3
        lo, hi = p.spread
        assert lo <= p.samples_per_s <= hi
        assert p.figure("samples_per_call").median == p.value
        call = p.figure("call_mean_ns")
        assert call.n == 3 and call.median > 0
        assert p.figure("call_p99_ns").median >= p.figure("call_p50_ns").median
        for run in p.runs:
            assert run.calls == FLAT_STEPS and run.warmup_calls == FLAT_WARMUP
            assert run.samples == FLAT_STEPS * p.value
            assert run.warmup["first_ns"] > 0
            assert run.exit_code == 0
            s = run.summary
            assert s is not None and s.steps == FLAT_STEPS and s.warmup.steps == FLAT_WARMUP
            # samples/s from time inside the calls only
            assert run.samples_per_s == pytest.approx(run.samples / (run.sample_time_ns / 1e9))
        assert set(p.phases) == {"compute", "store", "(other)"}
        shares = sum(ph.share.median for ph in p.phases.values())
        assert shares == pytest.approx(1.0, abs=0.05)
        assert p.phases["compute"].count_per_call.median == 1.0
    assert flat_sweep.settings["phases"] == ["compute", "store"]


def test_outputs_table_report_json_csv(flat_sweep: SweepResult, tmp_path: Path) -> None:
    r = flat_sweep
    table = r.table()
    assert table.splitlines()[0].split()[:2] == ["batch_size", "samples/s"]
    assert "not tried" in table and "recommended" in table
    assert "per-call time by phase" in table and "compute" in table
    words = r.report()
    head = words.splitlines()[0]
    assert head.startswith("with nothing else set (factory defaults), batch_size 2 -> 32:")
    assert "flat from 16" in head and "recommended 16" in head and "peak RSS" in head
    assert "Controlled result: only batch_size changed" in words
    assert "not as a universal optimum" in words
    assert "Where the call time goes" in words
    assert str(r).startswith(table)

    text = r.to_json(tmp_path / "s.json")
    data = json.loads(text)
    assert data["format"] == "gyreprof.sweep/2"
    assert data["recommended"] == 16 and data["stop_reason"] == "flat"
    assert [p["value"] for p in data["points"]] == [2, 16, 32]
    assert set(data["points"][0]["figures"]) >= {"samples_per_s", "peak_rss_bytes"}
    assert "summary" not in data["points"][0]["runs"][0]
    back = SweepResult.from_json(tmp_path / "s.json")
    assert back.recommended == 16 and back.points[1].samples_per_s == r.points[1].samples_per_s
    assert back.table() == r.table()
    with_summaries = r.to_dict(summaries=True)
    assert with_summaries["points"][0]["runs"][0]["summary"]["format"] == "gyreprof.summary/2"

    rows = list(csv.DictReader(io.StringIO(r.to_csv(tmp_path / "s.csv"))))
    assert [int(row["batch_size"]) for row in rows] == [2, 16, 32]
    assert rows[1]["recommended"] == "True"
    assert float(rows[2]["peak_rss_bytes"]) > float(rows[0]["peak_rss_bytes"])
    assert "phase:compute:share" in rows[0]

    png = r.to_plot(tmp_path / "s.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_which_extra(
    flat_sweep: SweepResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now fails
    with pytest.raises(ImportError, match=r"gyreprof\[plot\]"):
        flat_sweep.to_plot(tmp_path / "x.png")


# ----------------------------------------------------------------- isolation


def test_isolation_shows_peaks_a_shared_process_hides() -> None:
    kwargs = dict(steps=3, warmup=0, repeats=1, progress=False)
    iso = gp.sweep(
        "helpers.sweep_samplers.numpy_sampler:make_shrinking", "chunks", [1, 2, 4], **kwargs
    )
    shared = gp.sweep(
        "helpers.sweep_samplers.numpy_sampler:make_shrinking",
        "chunks",
        [1, 2, 4],
        isolate=False,
        **kwargs,
    )
    iso_peaks = [p.peak_rss_bytes for p in iso.points]
    shared_peaks = [p.peak_rss_bytes for p in shared.points]
    assert all(p.ok for p in iso.points + shared.points)
    # fresh processes: 96, 48 then 24 MiB of scratch -> the peaks fall
    assert iso_peaks[0] - iso_peaks[1] > 30 * MIB
    assert iso_peaks[1] - iso_peaks[2] > 12 * MIB
    # one process: the high-water mark never falls, so the drop is invisible
    assert shared_peaks[0] <= shared_peaks[1] <= shared_peaks[2]
    assert any("isolate=False" in w for w in shared.warnings)
    assert not any("isolate=False" in w for w in iso.warnings)
    assert "each run in a fresh process" in iso.report()


def test_crashing_values_are_reported_and_the_sweep_goes_on() -> None:
    r = gp.sweep(
        "helpers.sweep_samplers.misbehaving:make_crashy",
        "batch_size",
        [1, 2, 3, 4],
        fixed={"abort_at": 2, "kill_at": 3, "exit_at": 4},
        steps=5,
        warmup=1,
        repeats=2,
        timeout_s=120,
        progress=False,
    )
    by = {p.value: p for p in r.points}
    assert by[1].ok and len(by[1].runs) == 2
    assert by[2].status == "crash" and "SIGABRT" in by[2].error
    assert by[3].status == "crash" and "SIGKILL" in by[3].error
    assert "out-of-memory" in by[3].error
    assert by[4].status == "crash" and "exited with code 7" in by[4].error
    assert "measured calls" in by[4].error  # where it died (call 3 is a measured call)
    for v in (2, 3, 4):
        assert len(by[v].runs) == 1  # the first failed run ends the value
        assert not by[v].measured
    assert r.recommended == 1
    assert r.stop_reason == "end"
    report = r.report()
    assert "Failed: batch_size=2 (crash)" in report
    assert _no_children_left() == []


@pytest.mark.slow  # several seconds: run by .ci/run's second step
def test_hanging_factory_is_killed_at_the_timeout() -> None:
    r = gp.sweep(
        "helpers.sweep_samplers.misbehaving:make_hanging",
        "batch_size",
        [1, 2],
        fixed={"hang_at": 2},
        steps=3,
        warmup=0,
        repeats=1,
        timeout_s=6,
        progress=False,
    )
    by = {p.value: p for p in r.points}
    assert by[1].ok
    hung = by[2]
    assert hung.status == "timeout"
    assert "timed out after 6 s during building the sampler" in hung.error
    assert "called from make_hanging (misbehaving.py:" in hung.error  # where it hung
    assert len(hung.runs) == 1 and hung.runs[0].stacks
    assert r.recommended == 1
    assert _no_children_left() == []


def test_in_process_timeout_abandons_the_run_and_says_so() -> None:
    misbehaving.RELEASE.clear()
    try:
        r = gp.sweep(
            misbehaving.make_hanging,
            "batch_size",
            [1, 2],
            fixed={"hang_at": 2},
            steps=3,
            warmup=0,
            repeats=1,
            isolate=False,
            timeout_s=0.5,
            progress=False,
        )
    finally:
        misbehaving.RELEASE.set()
    assert r.points[0].ok
    assert r.points[1].status == "timeout"
    assert "abandoned" in r.points[1].error and "isolate=True" in r.points[1].error
    assert any("abandoned" in w for w in r.warnings)


# ----------------------------------------------------------------- bad samplers


def test_factory_errors_and_bad_returns_are_reported_per_value() -> None:
    r = gp.sweep(
        misbehaving.make_bad,
        "batch_size",
        [1, 2, 3, 4, 5, 6],
        fixed={"raise_at": 2, "zero_at": 3, "text_at": 4, "call_raise_at": 5},
        steps=8,
        warmup=2,
        repeats=1,
        isolate=False,
        progress=False,
    )
    by = {p.value: p for p in r.points}
    assert by[1].ok and by[6].ok
    assert by[2].status == "error"
    assert "factory raised ValueError: cannot build a sampler with batch_size=2" in by[2].error
    assert by[2].runs[0].traceback and "make_bad" in by[2].runs[0].traceback
    assert by[3].status == "invalid" and "returned 0 samples at call 2 (warm-up)" in by[3].error
    assert by[4].status == "invalid" and "returned str 'a batch'" in by[4].error
    assert "positive int" in by[4].error
    assert by[5].status == "error"
    assert "sampler raised RuntimeError: rollout worker 3 died at call 5" in by[5].error
    assert r.recommended in (1, 6)


def test_factory_returning_no_sampler() -> None:
    r = gp.sweep(
        misbehaving.make_none,
        "batch_size",
        [1],
        steps=2,
        warmup=0,
        repeats=1,
        isolate=False,
        progress=False,
    )
    p = r.points[0]
    assert p.status == "invalid"
    assert "returned None" in p.error and ".sample()" in p.error
    assert r.recommended is None
    assert "no value ran cleanly" in r.report()


def test_fixed_settings_that_did_not_stay_fixed_are_warned_about() -> None:
    r = gp.sweep(
        misbehaving.make_drifting,
        "batch_size",
        [4, 16],
        fixed={"num_envs": 8},
        steps=3,
        warmup=0,
        repeats=1,
        isolate=False,
        progress=False,
    )
    assert all(p.ok for p in r.points)
    text = "\n".join(r.warnings)
    assert "fixed setting num_envs did not stay fixed" in text
    assert "num_envs=4 at batch_size=4 (passed 8)" in text
    assert "os threads changed across values" in text
    assert r.points[0].runs[0].observed == {"batch_size": 4, "num_envs": 4}


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((NUMPY, "batch_size", []), {}, "values is empty"),
        ((NUMPY, "batch_size", [16, 8]), {}, "sorted ascending"),
        ((NUMPY, "batch_size", [8, 8]), {}, "must not repeat"),
        ((NUMPY, "batch_size", [8, True]), {}, "must be numbers"),
        ((NUMPY, "batch_size", "8,16"), {}, "list of numbers"),
        ((NUMPY, "batch_size", [8]), {"fixed": {"batch_size": 4}}, "both the swept parameter"),
        ((NUMPY, "batch_size", [8]), {"fixed": {"prof": 1}}, "reserved"),
        ((NUMPY, "prof", [8]), {}, "reserved"),
        ((NUMPY, "batch_size", [8]), {"steps": 0}, "steps must be >= 1"),
        ((NUMPY, "batch_size", [8]), {"repeats": 0}, "repeats must be >= 1"),
        ((NUMPY, "batch_size", [8]), {"flat_within": 1.5}, "flat_within"),
        ((NUMPY, "batch_size", [8]), {"memory_limit": "lots"}, "like '2GiB'"),
        ((NUMPY, "batch_size", [8]), {"timeout_s": 0}, "timeout_s"),
        ((NUMPY, "batch_size", [8]), {"fixed": {"mib_per_sample": lambda: 1}}, "pickled"),
        (("no_such_module_xyz:make", "batch_size", [8]), {}, "cannot import module"),
        (("not a target", "batch_size", [8]), {}, "package.module:factory"),
        ((lambda batch_size: None, "batch_size", [8]), {}, "lambda"),
        ((misbehaving.make_bad, "num_envs", [8]), {}, "no keyword parameter 'num_envs'"),
        ((misbehaving.make_drifting, "batch_size", [8]), {}, "needs 'num_envs'"),
        ((misbehaving.make_prof_no_phases, "batch_size", [8]), {}, "declares no phase names"),
        ((misbehaving.make_bad, "batch_size", [8]), {"phases": ["a"]}, "no 'prof' parameter"),
    ],
)
def test_bad_input_gets_a_clear_message(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        gp.sweep(*args, progress=False, **kwargs)


def test_closure_factory_with_isolation_is_refused() -> None:
    def make(batch_size: int) -> object:
        return misbehaving.Counter(batch_size)

    with pytest.raises(ValueError, match="defined inside a function"):
        gp.sweep(make, "batch_size", [1], progress=False)
    # the same factory runs in-process
    r = gp.sweep(make, "batch_size", [1], steps=2, repeats=1, isolate=False, progress=False)
    assert r.points[0].ok


def test_missing_attribute_of_an_importable_module_is_named() -> None:
    with pytest.raises(SweepUsageError, match="has no attribute 'nope'"):
        gp.sweep("helpers.sweep_samplers.numpy_sampler:nope", "batch_size", [1], progress=False)


def test_parse_bytes() -> None:
    assert parse_bytes("2GiB") == 2 * 2**30
    assert parse_bytes("1.5 GB") == 1_500_000_000
    assert parse_bytes("512MiB") == 512 * MIB
    assert parse_bytes(1024) == 1024
    for bad in ("", "-1G", "2 parsecs", 0, True):
        with pytest.raises(ValueError):
            parse_bytes(bad)  # type: ignore[arg-type]


def test_memory_limit_stops_the_sweep() -> None:
    # 8 MiB per sample: ~32 MiB above the baseline at 4, ~128 MiB at 16
    r = gp.sweep(
        NUMPY,
        "batch_size",
        [4, 16, 64],
        fixed={"mib_per_sample": 8},
        steps=3,
        warmup=1,
        repeats=1,
        memory_limit="150MiB",
        progress=False,
    )
    assert r.stop_reason == "memory_limit"
    assert r.stopped_at == 16 and r.skipped == (64,)
    assert r.points[1].over_memory_limit and not r.points[0].over_memory_limit
    assert r.recommended == 4
    assert "crossed memory_limit=150 MiB" in r.stop_detail


def test_plain_progress_lines_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    gp.sweep(
        misbehaving.make_bad,
        "batch_size",
        [1, 2],
        steps=2,
        warmup=0,
        repeats=1,
        isolate=False,
        progress=True,
    )
    err = capsys.readouterr().err
    assert "sweep batch_size [1/2] batch_size=1:" in err
    assert "sweep batch_size [2/2] batch_size=2:" in err


# ----------------------------------------------------------------- real gymnasium


def test_gymnasium_vector_env_sampler_smoke() -> None:
    pytest.importorskip("gymnasium")
    r = gp.sweep(
        "helpers.sweep_samplers.gym_sampler:make_vec_sampler",
        "num_envs",
        [1, 4],
        fixed={"batch_size": 8},
        steps=10,
        warmup=2,
        repeats=1,
        timeout_s=120,
        progress=False,
    )
    assert all(p.ok for p in r.points), [p.error for p in r.points]
    for p in r.points:
        assert p.figure("samples_per_call").median == 8
        assert set(p.phases) == {"policy", "env", "(other)"}
        assert p.phases["env"].count_per_call.median == 8 / p.value
        assert p.samples_per_s > 0
    assert r.points[0].runs[0].observed == {"num_envs": 1, "batch_size": 8}
    assert "with batch_size=8 fixed, num_envs 1 -> 4" in r.report()


def test_example_script_sweeps_a_factory_defined_in_main(tmp_path: Path) -> None:
    pytest.importorskip("gymnasium")
    out = tmp_path / "cartpole.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "sweep_cartpole.py"),
            "--values",
            "8,16",
            "--repeats",
            "1",
            "--steps",
            "5",
            "--warmup",
            "1",
            "--no-progress",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["factory"] == "__main__:make_sampler"
    assert all(p["status"] == "ok" for p in data["points"]), data["points"]
    assert set(data["points"][0]["phases"]) == {"sync", "policy", "env", "store", "(other)"}
    assert "with num_envs=8 fixed" in proc.stdout


# ----------------------------------------------------------------- command line


def test_cli_sweep_writes_json_csv_and_plot(cli, tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = cli(
        "sweep", NUMPY,
        "--param", "batch_size",
        "--values", "8,16",
        "--fixed", "mib_per_sample=0.5",
        "--steps", "5",
        "--warmup", "1",
        "--repeats", "1",
        "--json", str(tmp_path / "out.json"),
        "--csv", str(tmp_path / "out.csv"),
        "--plot", str(tmp_path / "out.png"),
        "--no-progress",
        env=env,
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["param"] == "batch_size" and data["fixed"] == {"mib_per_sample": 0.5}
    assert [p["value"] for p in data["points"]] == [8, 16]
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "out.csv").read_text().startswith("batch_size,status,samples_per_s")
    assert "Controlled result" in proc.stdout and "with mib_per_sample=0.5 fixed" in proc.stdout


def test_cli_bad_input_exits_2_with_a_message(cli, tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    unsorted = cli("sweep", NUMPY, "--param", "batch_size", "--values", "16,8", env=env)
    assert unsorted.returncode == 2
    assert "sorted ascending" in unsorted.stderr and "Traceback" not in unsorted.stderr
    clash = cli(
        "sweep",
        NUMPY,
        "--param",
        "batch_size",
        "--values",
        "8",
        "--fixed",
        "batch_size=4",
        env=env,
    )
    assert clash.returncode == 2 and "both the swept parameter" in clash.stderr
    missing = cli("sweep", "nosuchpkg_abc.mod:make", "--param", "batch_size", "--values", "8")
    assert missing.returncode == 2 and "cannot import module 'nosuchpkg_abc.mod'" in missing.stderr
    not_numbers = cli("sweep", NUMPY, "--param", "batch_size", "--values", "8,lots")
    assert not_numbers.returncode == 2 and "'lots' is not a number" in not_numbers.stderr


def test_cli_json_to_stdout_and_exit_1_when_nothing_ran(cli) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = cli(
        "sweep", "helpers.sweep_samplers.misbehaving:make_none", "--param", "batch_size",
        "--values", "1", "--repeats", "1", "--steps", "2", "--no-isolate", "--json",
        "--no-progress", env=env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["points"][0]["status"] == "invalid" and data["recommended"] is None


def test_nan_free_gain_for_first_point(flat_sweep: SweepResult) -> None:
    assert flat_sweep.points[0].gain is None
    assert not math.isnan(flat_sweep.points[1].gain or math.nan)


class _TtyBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_line_per_run_on_a_terminal_too() -> None:
    """One progress shape: the lines a log gets are what a terminal gets (no rich bar,
    no carriage-return rewriting), and a skipped repeat shrinks the total."""
    from gyreprof.analysis.sweep.progress import SweepProgress

    out = _TtyBuffer()
    bar = SweepProgress(enabled=True, total=4, title="sweep batch_size", stream=out)
    bar.start("batch_size=8 run 1/2")
    bar.done("12.1k samples/s")
    bar.start("batch_size=8 run 2/2")
    bar.done("error: boom")
    bar.start("batch_size=16 run 1/2")
    bar.done("crash: killed")
    bar.skip(1)
    bar.close()
    assert out.getvalue().splitlines() == [
        "sweep batch_size [1/4] batch_size=8 run 1/2: 12.1k samples/s",
        "sweep batch_size [2/4] batch_size=8 run 2/2: error: boom",
        "sweep batch_size [3/4] batch_size=16 run 1/2: crash: killed",
    ]
    assert bar.total == 3
    quiet = _TtyBuffer()
    bar = SweepProgress(enabled=False, total=1, title="sweep x", stream=quiet)
    bar.start("x=1")
    bar.done("ok")
    assert quiet.getvalue() == ""


def test_torch_sampler_reports_threads_and_gpu_memory_only_with_cuda() -> None:
    torch = pytest.importorskip("torch")
    r = gp.sweep(
        "helpers.sweep_samplers.torch_sampler:make_torch_sampler",
        "batch_size",
        [4, 8],
        steps=3,
        warmup=1,
        repeats=1,
        isolate=False,
        progress=False,
    )
    assert all(p.ok for p in r.points), [p.error for p in r.points]
    run = r.points[0].runs[0]
    assert run.threads["torch_threads"] == torch.get_num_threads()
    if torch.cuda.is_available():
        assert run.peak_gpu_bytes is not None and run.peak_gpu_bytes > 0
        assert r.points[1].peak_gpu_bytes >= r.points[0].peak_gpu_bytes
    else:
        assert run.peak_gpu_bytes is None
        assert math.isnan(r.points[0].figure("peak_gpu_bytes").median)
        assert "GPU" not in r.table()


# ----------------------------------------------------------------- decisions (no timing)


def _point(value: int, rates: list[float], rss_mib: float) -> gp.SweepPoint:
    from gyreprof.analysis.sweep import SweepPoint, SweepRun

    runs = [
        SweepRun(
            value=value,
            repeat=i,
            status="ok",
            samples_per_s=rate,
            peak_rss_bytes=int(rss_mib * MIB),
        )
        for i, rate in enumerate(rates)
    ]
    return SweepPoint.from_runs(value, runs)


def test_stop_rule_needs_flat_throughput_and_rising_memory() -> None:
    from gyreprof.analysis.sweep.decide import stop_check

    flat_mem_up = [_point(8, [1000, 1010], 100), _point(16, [1030, 1040], 200)]
    reason = stop_check("batch_size", flat_mem_up, 0.05, None)
    assert reason is not None and reason[0] == "flat" and reason[2] == 8
    assert "peak RSS rose 100 MiB -> 200 MiB" in reason[1]
    flat_mem_same = [_point(8, [1000, 1010], 100), _point(16, [1030, 1040], 100.5)]
    assert stop_check("batch_size", flat_mem_same, 0.05, None) is None
    rising = [_point(8, [1000, 1010], 100), _point(16, [1500, 1510], 200)]
    assert stop_check("batch_size", rising, 0.05, None) is None
    over = stop_check("batch_size", rising, 0.05, 150 * MIB)
    assert over is not None and over[0] == "memory_limit"


def test_not_distinguishable_and_recommendation() -> None:
    from gyreprof.analysis.sweep.decide import finish_points, recommend
    from gyreprof.analysis.sweep.rule import noise

    pts = finish_points(
        [
            _point(1, [100, 104], 10),
            _point(2, [158, 162], 10),  # +55% over 1: far beyond 5% + noise
            _point(4, [400, 404], 10),  # clearly above both
            _point(8, [410, 415], 10),  # +2.6% over 4: within 5% + noise
        ],
        None,
        0.05,
    )
    # twice the median relative spread: (4/160 + 5/412.5) / 2 * 2
    assert noise(pts) == pytest.approx(4 / 160 + 5 / 412.5)
    assert pts[0].not_distinguishable_from == ()
    assert pts[2].not_distinguishable_from == (8,)
    assert pts[3].not_distinguishable_from == (4,)
    assert pts[2].gain == pytest.approx(402 / 160 - 1)
    assert recommend(pts, 0.05) == 4  # the smallest value not distinguishable from 8
    # the tolerance is flat_within plus the noise: with none of either, 4 < 8 counts
    exact = finish_points([_point(4, [402], 10), _point(8, [412], 10)], None, 0.0)
    assert recommend(exact, 0.0) == 8


def test_recommendation_where_argmax_flips_with_the_noise() -> None:
    """A flat sampler measured twice: the best median moves from 64 to 8 and back with the
    noise, so argmax would recommend 64 one time and 16 the next; the rule says 8 both times."""
    from gyreprof.analysis.sweep.decide import best, finish_points, recommend, still_rising

    sweeps = [
        [  # run-to-run spread ~10%; 64's median happens to be highest, 9% above 8's
            _point(8, [1000, 1010, 1100], 10),
            _point(16, [1020, 1060, 1090], 10),
            _point(32, [990, 1050, 1080], 10),
            _point(64, [1060, 1100, 1110], 10),
        ],
        [
            _point(8, [1010, 1040, 1100], 10),
            _point(16, [1050, 1110, 1120], 10),
            _point(32, [1000, 1030, 1090], 10),
            _point(64, [990, 1020, 1080], 10),
        ],
    ]
    naive = []
    for pts in sweeps:
        done = finish_points(pts, None, 0.05)
        top = best(done)
        assert top is not None
        naive.append(top.value)
        assert recommend(done, 0.05) == 8
        # and nothing says "still rising": the largest value is no better than the rest
        assert still_rising(done, 0.05) is None
        # the table marks every neighbour as not distinguishable, as the rule reads them
        assert all(p.not_distinguishable_from for p in done)
    assert naive == [64, 16]


def test_one_erratic_value_does_not_hide_a_real_difference() -> None:
    """Tight repeats everywhere but at 8, whose runs spread 150..800 (one stalled): the
    widest spread (159%) as the noise band would call 2 no different from the best and
    recommend it, though 4 is twice as fast as 2 and as fast as the best."""
    from gyreprof.analysis.sweep.decide import finish_points, recommend
    from gyreprof.analysis.sweep.rule import noise

    pts = finish_points(
        [
            _point(1, [100, 101, 102], 10),
            _point(2, [200, 202, 204], 10),
            _point(4, [400, 404, 408], 10),
            _point(8, [150, 410, 800], 10),
        ],
        None,
        0.05,
    )
    assert noise(pts) < 0.1  # the typical spread (2%), doubled
    assert recommend(pts, 0.05) == 4
    # and the widest-spread rule is what got it wrong
    widest = max((p.spread[1] - p.spread[0]) / p.samples_per_s for p in pts)
    assert widest > 1.5


@pytest.mark.parametrize("n_values", [4, 6])
@pytest.mark.parametrize("level", [0.1, 0.2])
def test_a_flat_noisy_sampler_keeps_its_smallest_value(n_values: int, level: float) -> None:
    """The claim in rule.py, simulated through the rule itself: throughput independent of
    the value, 3 repeats each landing up to +-level off; the smallest value must be kept
    in at least 93% of 400 seeded sweeps (argmax would keep it about 1 time in n)."""
    from gyreprof.analysis.sweep.decide import finish_points, recommend

    rng = random.Random(7)
    kept = 0
    for _ in range(400):
        pts = [
            _point(2**i, [1000 * (1 + rng.uniform(-level, level)) for _ in range(3)], 10)
            for i in range(n_values)
        ]
        kept += recommend(finish_points(pts, None, 0.05), 0.05) == 1
    assert kept / 400 >= 0.93, kept


def test_still_rising_only_when_the_largest_value_is_recommended() -> None:
    from gyreprof.analysis.sweep.decide import finish_points, recommend, still_rising

    rising = finish_points(
        [_point(8, [1000, 1010], 10), _point(16, [1500, 1520], 10), _point(32, [2200, 2210], 10)],
        None,
        0.05,
    )
    assert recommend(rising, 0.05) == 32
    last = still_rising(rising, 0.05)
    assert last is not None and last.value == 32


def test_a_factory_that_mutates_a_fixed_setting_is_caught_and_contained() -> None:
    config = {"lr": 1.0}
    r = gp.sweep(
        misbehaving.make_mutating,
        "batch_size",
        [1, 2],
        fixed={"config": config},
        steps=2,
        warmup=0,
        repeats=1,
        isolate=False,
        progress=False,
    )
    assert config == {"lr": 1.0}  # the caller's dict is untouched
    text = "\n".join(r.warnings)
    # each run started from lr=1.0: the change at 1 did not leak into 2
    assert (
        "batch_size=1: the sampler changed setting config in place ({'lr': 1.0} -> {'lr': 3.0})"
        in text
    )
    assert (
        "batch_size=2: the sampler changed setting config in place ({'lr': 1.0} -> {'lr': 4.0})"
        in text
    )


@pytest.mark.parametrize("isolate", [True, False])
def test_samples_per_s_counts_time_inside_steady_calls_only(isolate: bool) -> None:
    """A 0.4 s build and two 0.1 s first calls must not dilute a 5 ms-per-call rate."""
    r = gp.sweep(
        "helpers.sweep_samplers.timed:make_sleeper",
        "batch_size",
        [4],
        steps=20,
        warmup=2,
        repeats=1,
        isolate=isolate,
        progress=False,
    )
    run = r.points[0].runs[0]
    assert run.status == "ok", run.error
    # 20 steady calls of >= 5 ms each; wide upper bound for a loaded machine
    assert 0.1 <= run.sample_time_ns / 1e9 < 0.4
    assert run.wall_s - run.sample_time_ns / 1e9 > 0.5  # build + warm-up stayed outside
    assert 4 * 20 / 0.4 < run.samples_per_s <= 4 / 0.005  # at most the sleep-bound rate
    assert run.warmup["first_ns"] >= 100e6 > 10 * run.call["p50_ns"]


# ----------------------------------------------------------------- stable recommendations


@pytest.mark.slow  # several seconds: run by .ci/run's second step
def test_reruns_of_a_flat_noisy_sampler_recommend_the_same_value() -> None:
    """Throughput does not depend on batch_size; each run lands up to 10% off. Three
    sweeps must recommend the same (smallest) value, and no sentence may say larger
    values pay off."""
    recs, bests = [], []
    for _ in range(3):
        r = gp.sweep(
            "helpers.sweep_samplers.flat:make_flat",
            "batch_size",
            [8, 16, 32, 64],
            steps=8,
            warmup=1,
            repeats=5,
            isolate=False,
            progress=False,
        )
        assert all(p.ok for p in r.points), [p.error for p in r.points]
        assert r.stop_reason == "end"
        recs.append(r.recommended)
        bests.append(max(r.points, key=lambda p: p.samples_per_s).value)
        text = r.report()
        assert "may pay off" not in text and "still rising" not in text
        assert "Rule: the smallest value not distinguishable from the best median" in text
        assert "Note column:" in text and "'~16'" in text
        assert _note_of(r, 8).startswith("recommended")
    assert recs == [8, 8, 8], (recs, bests)


def _note_of(r: SweepResult, value: int) -> str:
    for line in r.table().splitlines()[1:]:
        cells = line.split()
        if cells and cells[0] == str(value):
            return line.split("  ")[-1].strip()
    raise AssertionError(f"no row for {value}")


# ----------------------------------------------------------------- the whole sampler's memory


def test_memory_limit_counts_the_samplers_worker_processes() -> None:
    """Each worker process holds 48 MiB; the measuring process allocates nothing. The
    limit is crossed by the tree at 4 workers, never by the measuring process alone."""
    r = gp.sweep(
        "helpers.sweep_samplers.workers:make_workers",
        "num_workers",
        [1, 4, 8],
        steps=5,
        warmup=1,
        repeats=1,
        memory_limit="200MiB",
        timeout_s=180,
        progress=False,
    )
    assert all(p.ok for p in r.points), [p.error for p in r.points]
    one, four = r.points
    assert r.stop_reason == "memory_limit" and r.stopped_at == 4 and r.skipped == (8,)
    assert four.over_memory_limit and not one.over_memory_limit
    own = four.figure("peak_rss_bytes").median
    tree = four.figure("peak_tree_rss_bytes").median
    workers = four.figure("children_rss_bytes").median
    assert own < 200 * MIB  # the measuring process alone stays under the limit
    assert workers > 4 * 48 * MIB  # four workers' blocks, interpreters on top
    assert tree >= own + workers and tree > 200 * MIB
    assert four.peak_tree_rss_bytes is not None and four.peak_tree_rss_bytes > 200 * MIB
    assert "process tree" in r.stop_detail and "worker processes" in r.stop_detail
    assert r.recommended == 1
    text = str(r)
    assert "tree RSS" in r.table()
    assert "for the whole sampler" in text and "in the measuring process" in text
    back = SweepResult.from_json(r.to_json())
    assert back.points[1].peak_tree_rss_bytes == four.peak_tree_rss_bytes
    assert _no_children_left() == []


# ----------------------------------------------------------------- the process boundary


def test_run_result_crosses_the_boundary_typed_and_foreign_data_is_refused() -> None:
    from gyreprof.analysis.sweep import RUN_FORMAT, RunResult

    run = RunResult(
        status="ok",
        samples=8,
        calls=2,
        sample_time_ns=1e6,
        samples_per_s=8000.0,
        wall_s=0.5,
        call={"mean_ns": 5.0},
        notes=("a",),
    )
    back = RunResult.from_json(run.to_json())
    assert back == run and isinstance(back.notes, tuple)
    for text, match in [
        ("{not json", "not JSON"),
        ('{"format": "someone-else/9"}', "not a gyreprof.sweep-run/1 record"),
        ("[1, 2]", "not a gyreprof.sweep-run/1 record"),
        (f'{{"format": "{RUN_FORMAT}"}}', "missing field 'status'"),
        (f'{{"format": "{RUN_FORMAT}", "status": "ok", "calls": "many"}}', "calls: expected an"),
        (f'{{"format": "{RUN_FORMAT}", "status": "ok", "call": [1]}}', "call: expected an obj"),
    ]:
        with pytest.raises(ValueError, match=match):
            RunResult.from_json(text)
    # fields a newer worker adds are ignored, not fatal
    newer = json.loads(run.to_json())
    newer["added_later"] = {"x": 1}
    assert RunResult.from_json(json.dumps(newer)) == run


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ('{"format": "someone-else/9"}', "not a gyreprof.sweep-run/1 record"),
        ("{broken", "not JSON"),
    ],
)
def test_a_foreign_result_file_is_an_error_for_that_value(payload: str, match: str) -> None:
    r = gp.sweep(
        "helpers.sweep_samplers.misbehaving:make_clobbering",
        "batch_size",
        [1],
        fixed={"payload": payload},
        steps=2,
        warmup=0,
        repeats=1,
        timeout_s=120,
        progress=False,
    )
    p = r.points[0]
    assert p.status == "error" and "the run finished but" in (p.error or "")
    assert match in (p.error or "")
    assert r.recommended is None


def test_written_json_is_strict_and_summaries_come_back(flat_sweep: SweepResult) -> None:
    """The sweep writes through gyreprof.model._serial: no NaN literals (a strict JSON reader
    takes the file), and a run's summary read back is the summary written."""

    def refuse(name: str) -> None:
        raise ValueError(f"non-strict JSON constant {name}")

    text = json.dumps(flat_sweep.to_dict(summaries=True), allow_nan=False)
    json.loads(text, parse_constant=refuse)
    back = SweepResult.from_json(text)
    run, again = flat_sweep.points[0].runs[0], back.points[0].runs[0]
    assert again.summary is not None and again.summary.steps == run.summary.steps
    assert again.summary.step.p99 == run.summary.step.p99
    assert '"median": null' in text  # no GPU: a missing figure, null ...
    assert math.isnan(back.points[0].figure("peak_gpu_bytes").median)  # ... read as NaN
    assert back.table() == flat_sweep.table()


def test_settings_json_cannot_hold_are_written_as_their_repr() -> None:
    """A fixed setting with no JSON form (isolate=False takes any object) is written as
    its repr, as before the sweep used gyreprof.model._serial, and the file reads back."""

    class Device:
        def __repr__(self) -> str:
            return "Device('cpu:0')"

    r = gp.sweep(
        misbehaving.make_mutating,
        "batch_size",
        [1],
        fixed={"config": {"device": Device(), "lr": math.inf}},
        steps=2,
        warmup=0,
        repeats=1,
        isolate=False,
        progress=False,
    )
    # the NaN rule: inf is null
    data = json.loads(r.to_json())
    assert data["fixed"] == {"config": {"device": "Device('cpu:0')", "lr": None}}
    from gyreprof.analysis.sweep.record import as_json_value

    torch = pytest.importorskip("torch")
    assert as_json_value(torch.tensor(3)) == 3  # a scalar tensor is its number
    assert as_json_value(torch.zeros(2)).startswith("tensor(")  # .item() refused: repr
    assert SweepResult.from_dict(data).fixed["config"]["device"] == "Device('cpu:0')"


def test_old_format_files_still_load() -> None:
    """A gyreprof.sweep/1 file written before the tree figures and count rules existed."""
    old = json.loads((TESTS / "helpers" / "sweep_samplers" / "sweep_v1.json").read_text())
    r = SweepResult.from_dict(old)
    assert r.recommended == 8 and [p.value for p in r.points] == [8, 16]
    assert r.points[0].peak_tree_rss_bytes is None
    assert "recommended" in r.table()
    with pytest.raises(ValueError, match="format 'gyreprof.sweep/0'"):
        SweepResult.from_dict({**old, "format": "gyreprof.sweep/0"})
    with pytest.raises(ValueError, match=r"points\[0\].spread"):
        SweepResult.from_dict({**old, "points": [{**old["points"][0], "spread": "wide"}]})


# ----------------------------------------------------------------- one reading of a return value


def test_sweep_and_selfcheck_read_a_return_value_the_same_way() -> None:
    from gyreprof.diagnostics.selfcheck import selfcheck

    r = gp.sweep(
        misbehaving.make_bad,
        "batch_size",
        [3, 4],
        fixed={"text_at": 4},
        steps=2,
        warmup=0,
        repeats=1,
        isolate=False,
        progress=False,
    )
    assert r.points[0].runs[0].count_rule == "an int: the number of samples"
    assert "each call's return value read as an int: the number of samples" in r.report()
    assert r.points[1].status == "invalid" and "text, not a batch" in (r.points[1].error or "")
    ok = selfcheck(
        "helpers.sweep_samplers.misbehaving:make_bad", kwargs={"batch_size": 3}, cwd=TESTS
    )
    assert ok.exit_code == 0 and ok.count == 3 and ok.count_rule == "int"
    assert "counted by rule: int" in str(ok)
    text = selfcheck(
        "helpers.sweep_samplers.misbehaving:make_bad",
        kwargs={"batch_size": 4, "text_at": 4},
        cwd=TESTS,
    )
    assert text.exit_code == 1 and text.count_rule == "refused"
    assert "text, not a batch" in (text.error or "")


def test_selfcheck_counts_the_sweep_examples_return_as_samples() -> None:
    pytest.importorskip("gymnasium")
    from gyreprof.diagnostics.selfcheck import selfcheck

    r = selfcheck(
        "sweep_cartpole:make_sampler",
        kwargs={"batch_size": 8, "num_envs": 8},
        cwd=ROOT / "examples",
        timeout_s=120,
    )
    assert r.exit_code == 0, str(r)
    assert r.result_type == "int" and r.count == 8 and r.count_rule == "int"
    assert "count 8 (an int: the number of samples)" in str(r)


def test_count_samples_rules() -> None:
    import numpy as np

    from gyreprof._support.sample_count import NotACount, count_samples

    assert count_samples(8).n == 8 and count_samples(np.int64(8)).rule == "int"
    assert count_samples(None).n == 0
    assert count_samples(np.zeros((5, 3))).rule == "first dimension"
    assert count_samples({"obs": np.zeros((4, 2)), "rew": [1, 2, 3, 4]}).n == 4
    assert count_samples([1, 2]).detail == "length of a list"
    for bad in (True, -1, "ab", b"x", 2.5, iter([1]), {"a": [1], "b": [1, 2]}, np.array(1.5)):
        with pytest.raises(NotACount):
            count_samples(bad)
