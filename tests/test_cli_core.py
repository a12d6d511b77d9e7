"""The `gyreprof` command: demo on real CartPole, report on saved files, help and exit codes."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def test_help_lists_commands() -> None:
    r = run_cli("--help")
    assert r.returncode == 0
    for cmd in ("demo", "report"):
        assert cmd in r.stdout


def test_no_command_prints_help_and_exits_2() -> None:
    r = run_cli()
    assert r.returncode == 2
    assert "usage" in r.stdout.lower()


def test_demo_runs_cartpole_and_prints_the_table(tmp_path) -> None:
    pytest.importorskip("gymnasium")
    out = tmp_path / "demo.gyre"
    r = run_cli("demo", "--steps", "2000", "--warmup", "100", "--save", str(out))
    assert r.returncode == 0, r.stderr
    for word in ("env", "fwd", "xfer", "p99", "warm-up: first 100 steps excluded", "overhead"):
        assert word in r.stdout
    rep = run_cli("report", str(out), "--json")
    assert rep.returncode == 0, rep.stderr
    data = json.loads(rep.stdout)
    assert data["steps"] == 2000
    assert set(data["phases"]) == {"env", "fwd", "xfer"}
    assert data["warmup"]["steps"] == 100


def test_demo_json(tmp_path) -> None:
    pytest.importorskip("gymnasium")
    r = run_cli("demo", "--steps", "300", "--warmup", "10", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == 300


@pytest.mark.parametrize("args", [["--steps", "0"], ["--warmup", "-1"], ["--env", "NoSuchEnv-v9"]])
def test_demo_bad_arguments(args: list[str]) -> None:
    r = run_cli("demo", *args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip()


def test_report_text_and_markdown(tmp_path) -> None:
    import gyreprof as gp

    prof = gp.Profiler(["env"])
    for _ in range(20):
        prof.begin()
        prof.lap(0)
    prof.end()
    p = tmp_path / "s.json"
    prof.summary().to_json(p)
    r = run_cli("report", str(p))
    assert r.returncode == 0 and "env" in r.stdout and "p99" in r.stdout
    r = run_cli("report", str(p), "--markdown")
    assert r.returncode == 0 and "| env |" in r.stdout


@pytest.mark.parametrize("content", [b"", b"garbage", b"GYRS\x01\x00broken", b"{not json"])
def test_report_bad_files(tmp_path, content: bytes) -> None:
    p = tmp_path / "bad"
    p.write_bytes(content)
    r = run_cli("report", str(p))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "error" in r.stderr


def test_report_missing_file(tmp_path) -> None:
    r = run_cli("report", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = run_cli("report", str(tmp_path))
    assert r.returncode == 2 and "directory" in r.stderr


def test_output_to_a_closed_pipe_exits_quietly(tmp_path) -> None:
    """`gyreprof report run.snap | head -0`: the reader is gone before we write. We stop
    with the shell's SIGPIPE status and no traceback (a traceback here is the bug)."""
    import os
    import subprocess
    import sys

    import gyreprof as gp

    prof = gp.Profiler(["env", "fwd"])
    for _ in range(50):
        prof.begin()
        prof.lap(0)
        prof.lap(1)
    prof.end()
    path = prof.snapshot().save(tmp_path / "run.snap")
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read
    try:
        r = subprocess.run(
            [sys.executable, "-m", "gyreprof", "report", str(path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert r.returncode == 141, r.stderr
    assert "Traceback" not in r.stderr
    assert "BrokenPipe" not in r.stderr
