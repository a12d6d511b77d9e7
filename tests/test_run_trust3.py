"""``gyreprof run`` and the decoders against the third trust probe (issue 37).

Each test is one defect the probe found and fails on the code before it: user files
closed after ``os.closerange``, an exec chain's images saved over each other, writers
of one autosave path lost, impossible shares decoded, one group signal delivered twice,
and ``signal.getsignal`` showing gyreprof's handler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gyreprof as gp

from helpers.run_scripts.runhelp import gyreprof_run, script

# ------------------------------------------------ 1: fds that are no longer gyreprof's


def test_a_program_that_closes_every_fd_and_opens_its_own_files_keeps_every_byte(
    tmp_path: Path,
) -> None:
    """The live segments' numbers (and the trail's) are the program's files after its
    ``closerange``: gyreprof closes and writes none of them at exit (2 of 12 files were
    empty in 5 of 5 runs before)."""
    for trial in range(5):
        out = tmp_path / f"out{trial}"
        out.mkdir()
        proc, data = gyreprof_run(
            tmp_path, sys.executable, script("closerange_files.py"), str(out), "12"
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "OPENED" in proc.stdout
        for i in range(12):
            text = (out / f"user{i}.txt").read_text()
            assert text == f"line of file {i}\n" * 100, (trial, i, len(text))
        assert data is not None and data["sampler"]["phases"]["env_step"]["count"] >= 200


def test_a_live_reader_whose_fd_became_a_program_file_neither_reads_nor_closes_it(
    tmp_path: Path,
) -> None:
    prof = gp.Profiler(["x"], live=True)
    try:
        prof.record("x", 1000)
        reader = gp.live.attach(os.getpid())
        fd = reader._fd.fd
        os.close(fd)  # the program closes it (closerange) and opens a file of its own
        own = os.open(tmp_path / "mine.txt", os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            assert own == fd
            with pytest.raises(ValueError, match="descriptor was closed by the program"):
                reader.snapshot()
            reader.close()
            assert os.write(own, b"still mine\n") == 11  # not closed under the program
        finally:
            os.close(own)
        assert (tmp_path / "mine.txt").read_text() == "still mine\n"
    finally:
        prof.live.close()


# ------------------------------------------------ 2: every process image saved once


def _report_json(folder: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", str(folder), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_each_image_of_an_exec_under_save_keeps_its_record_and_report_counts_once(
    tmp_path: Path,
) -> None:
    """1000 steps, then ``os.execv`` into 500 more: the saved folder holds both images
    (same pid, images 0 and 1) and ``gyreprof report DIR`` counts 1500, as the run did
    (it said 2000: the second image was saved over the first)."""
    save = tmp_path / "save"
    proc, data = gyreprof_run(
        tmp_path, script("exec_steps.py"), "1000", "500", options=("--save", str(save))
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("IMAGE") == 2
    assert data is not None and data["sampler"]["phases"]["env_step"]["count"] == 1500
    listed = json.loads((save / "processes.json").read_text())
    assert sorted((p["pid"], p["image"]) for p in listed) == [
        (listed[0]["pid"], 0),
        (listed[0]["pid"], 1),
    ]
    assert len(list(save.glob("main-*.sampler.snap"))) == 2
    report = _report_json(save)
    assert report["sampler"]["phases"]["env_step"]["count"] == 1500
    assert sorted(p["source"] for p in report["processes"]) == ["before exec", "exit"]
