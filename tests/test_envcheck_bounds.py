"""envcheck cannot be bombed (issue 25, item 5): YAML aliases, deep nesting, -r chains.

Each case is an error line naming the file (exit code 2), read in bounded time and
memory, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gyreprof.cli import main as cli_main
from gyreprof.diagnostics.envcheck import (
    MAX_INCLUDE_DEPTH,
    DeclarationTooComplexError,
    envcheck,
)

# 482 bytes; expanded, 9**9 strings (the file the probe used grew to 3.6 GB)
LAUGHS = textwrap.dedent(
    """\
    name: lol
    dependencies:
      - pip
      - pip:
        - &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
        - &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
        - &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
        - &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
        - &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
        - &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
        - &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
        - &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
        - &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    """
)


def test_a_billion_laughs_environment_yml_is_refused_not_expanded(tmp_path: Path) -> None:
    path = tmp_path / "environment.yml"
    path.write_text(LAUGHS)
    assert len(LAUGHS) < 600
    # in a child with 1 GiB of address space: the old reader grew to GBs (MemoryError)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from gyreprof.diagnostics.envcheck import envcheck\n"
        f"r = envcheck({str(path)!r}, broken=False)\n"
        "print(r.exit_code, [e.message for e in r.errors])\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.startswith("2 ") and "aliases" in got.stdout, got.stdout


def test_laughs_through_the_cli_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "environment.yml"
    path.write_text(LAUGHS)
    assert cli_main(["envcheck", str(path), "--no-broken"]) == 2
    out = capsys.readouterr()
    assert "environment.yml" in out.out and "aliases" in out.out
    assert "Traceback" not in out.out + out.err


def test_deep_yaml_is_an_error_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "environment.yml"
    path.write_text("dependencies:\n  - pip:\n    - " + "[" * 5000 + "]" * 5000 + "\n")
    report = envcheck(path, broken=False)
    assert report.exit_code == 2
    assert "nested" in report.errors[0].message, report.errors


def test_deep_toml_is_an_error_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[project]\nname = "x"\ndependencies = []\nx = ' + "[" * 5000 + "]" * 5000 + "\n"
    )
    report = envcheck(path, broken=False)
    assert report.exit_code == 2
    assert "nested" in report.errors[0].message, report.errors


def test_brackets_inside_toml_strings_are_not_nesting(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[project]\nname = "x"\ndependencies = ["psutil"]\n'
        f'description = "{"[" * 200}"\n# {"{" * 200}\n'
        f"readme = '''{'[' * 200}'''\n"
    )
    report = envcheck(path, broken=False)
    assert report.errors == [] and report.exit_code == 0


def test_a_3000_deep_include_chain_ends_in_a_clear_error(tmp_path: Path) -> None:
    n = 3000
    for i in range(n):
        nxt = f"-r r{i + 1}.txt\n" if i + 1 < n else "psutil\n"
        (tmp_path / f"r{i}.txt").write_text(nxt)
    report = envcheck(tmp_path / "r0.txt", broken=False)  # RecursionError before
    assert report.exit_code == 2
    (err,) = report.errors
    assert f"more than {MAX_INCLUDE_DEPTH} files deep" in err.message
    assert err.source.endswith(f"r{MAX_INCLUDE_DEPTH - 1}.txt:1")


def test_includes_are_still_read_in_place_and_in_order(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("psutil\n-r b.txt\nnumpy\n")
    (tmp_path / "b.txt").write_text("-c c.txt\npytest\n")
    (tmp_path / "c.txt").write_text("psutil>=1\n")
    report = envcheck(tmp_path / "a.txt", broken=False)
    assert report.errors == []
    assert [Path(f).name for f in report.files] == ["a.txt", "b.txt", "c.txt"]
    names = sorted(c.name for c in report.checks)
    assert names == ["numpy", "psutil", "psutil", "pytest"]


def test_the_error_is_a_value_error() -> None:
    assert issubclass(DeclarationTooComplexError, ValueError)
