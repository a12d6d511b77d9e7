"""Shared by the real-stack tests: run a script of this folder under ``gyreprof run``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.run_scripts.runhelp import check_format, gyreprof_run

HERE = Path(__file__).resolve().parent
#: no download from a model hub, ever (the TRL script builds its model and tokenizer)
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
}


def need(*modules: str) -> None:
    """Skip unless every module imports (``pytest.importorskip``). Called from a test's
    fixtures, not at collection: the default suite deselects these tests and does not pay
    for importing RLlib or TRL."""
    for name in modules:
        pytest.importorskip(name)


class StackRun:
    """One ``gyreprof run --json --save`` of a script here: the completed process, the
    run's JSON (``gyreprof.run/1``), the script's own figures and the ``--save`` folder."""

    def __init__(self, tmp: Path, name: str, *args: str, timeout: float = 280) -> None:
        self.save = tmp / "raw"
        self.proc, data = gyreprof_run(
            tmp,
            sys.executable,
            str(HERE / name),
            *args,
            options=("--save", str(self.save)),
            env=OFFLINE,
            timeout=timeout,
        )
        # kept beside the run's JSON for a look after a failure
        (tmp / "script.stdout").write_text(self.proc.stdout)
        (tmp / "script.stderr").write_text(self.proc.stderr)
        assert self.proc.returncode == 0, self.proc.stderr[-4000:]
        assert data is not None, self.proc.stderr[-4000:]
        check_format(data)
        self.data: dict[str, Any] = data
        self.own: dict[str, Any] = stack_json(self.proc.stdout)

    def sampler_count(self, phase: str) -> int:
        return int(self.data["sampler"]["phases"][phase]["count"])

    def sampler_total_s(self, phase: str) -> float:
        return float(self.data["sampler"]["phases"][phase]["sum_ns"]) / 1e9

    def roles(self) -> dict[int, str]:
        return {int(p["pid"]): str(p["role"]) for p in self.data["processes"]}


def stack_json(stdout: str) -> dict[str, Any]:
    """The script's own figures: the JSON after ``STACK_JSON`` on its output."""
    for line in stdout.splitlines():
        if line.startswith("STACK_JSON "):
            out: dict[str, Any] = json.loads(line[len("STACK_JSON ") :])
            return out
    raise AssertionError(f"STACK_JSON not printed; stdout ended:\n{stdout[-3000:]}")
