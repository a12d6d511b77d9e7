"""``gyreprof report`` on files that exist but cannot be read (issue 25, item 13)."""

from __future__ import annotations

import os

import pytest

from conftest import run_cli


@pytest.mark.parametrize("path", ["/proc/self/mem", "/proc/self/pagemap"])
def test_an_unreadable_special_file_is_an_error_line_and_exit_code_2(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist on this system")
    got = run_cli("report", path)
    assert got.returncode == 2, got.stderr  # an OSError traceback (exit code 1) before
    assert "Traceback" not in got.stderr
    assert got.stderr.strip().splitlines()[-1].startswith(f"gyreprof report: cannot read {path}")
