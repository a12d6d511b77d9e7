"""Lint and type-check as part of the tests (ruff, mypy), when the tools are installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> list[str]:
    pytest.importorskip(name)
    return [sys.executable, "-m", name]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source checkout")
def test_ruff() -> None:
    r = subprocess.run(
        [*_tool("ruff"), "check", "src", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source checkout")
def test_ruff_format() -> None:
    r = subprocess.run(
        [*_tool("ruff"), "format", "--check", "src", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source checkout")
def test_mypy_config_is_strict() -> None:
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config.get("strict") is True
    for override in config.get("overrides", []):
        # strict may be relaxed only for named error codes in named modules, never wholesale
        assert set(override) <= {"module", "disable_error_code", "implicit_reexport"}, override
        assert "*" not in override["module"] and "gyreprof.*" not in override["module"]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source checkout")
@pytest.mark.slow  # strict mypy over the whole tree is the longest single test
def test_mypy() -> None:
    cache = ROOT / ".mypy_cache"
    r = subprocess.run(
        [*_tool("mypy"), "--cache-dir", str(cache), "src/gyreprof"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_generated_c_committed() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    r = subprocess.run(
        ["git", "ls-files", "*.c", "*.so"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert r.stdout.strip() == ""
