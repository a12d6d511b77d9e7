"""envcheck on crafted declaration files against this test environment.

A throw-away distribution (a real ``.dist-info`` folder put on ``sys.path``) gives
an installed package with an extra whose requirement is missing and a broken
requirement of its own, so those paths are tested without installing anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import gyreprof
from gyreprof._support.errors import CorruptDataError
from gyreprof.cli import main as cli_main
from gyreprof.diagnostics.envcheck import (
    STATUS_EXTRAS,
    STATUS_MISSING,
    STATUS_OK,
    STATUS_SKIPPED,
    STATUS_UNCHECKED,
    STATUS_VERSION,
    EnvReport,
    envcheck,
)

NUMPY = metadata.version("numpy")
PSUTIL = metadata.version("psutil")


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


@pytest.fixture()
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed 'Demo_Pkg 1.2.0' with extra 'fast' (needs a missing package) and a
    requirement that is not satisfied (numpy>=999)."""
    site = tmp_path / "site"
    info = site / "demo_pkg-1.2.0.dist-info"
    info.mkdir(parents=True)
    _write(
        info / "METADATA",
        """
        Metadata-Version: 2.1
        Name: Demo_Pkg
        Version: 1.2.0
        Provides-Extra: fast
        Requires-Dist: numpy>=999
        Requires-Dist: psutil
        Requires-Dist: gyreprof-absent-accelerator>=2; extra == "fast"
        """,
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def _by_name(report: EnvReport) -> dict[str, list]:  # type: ignore[type-arg]
    out: dict[str, list] = {}  # type: ignore[type-arg]
    for c in report.checks:
        out.setdefault(c.name.lower(), []).append(c)
    return out


def test_requirements_file_all_statuses(tmp_path: Path, fake_site: Path) -> None:
    _write(tmp_path / "more.txt", "psutil>=1  # included by -r\n-r requirements.txt\n")
    req = _write(
        tmp_path / "requirements.txt",
        f"""
        # the numbers this project was tested with
        numpy=={NUMPY}
        psutil<1 ; python_version >= "3"
        gyreprof-not-installed-xyz>=1.0
        Prometheus-Client>=0.1
        demo-pkg[fast]>=1.0
        -r more.txt
        windows-only-thing==1.0 ; sys_platform == "never"
        rich \\
            >=10
        https://example.invalid/some-wheel-1.0-py3-none-any.whl
        --index-url https://example.invalid/simple
        threadpoolctl --hash=sha256:0000
        """,
    )
    report = envcheck(req, broken=False)
    by = _by_name(report)
    assert by["numpy"][0].status == STATUS_OK and by["numpy"][0].pinned
    psutil = {c.source: c for c in by["psutil"]}
    assert psutil["requirements.txt:3"].status == STATUS_VERSION
    assert PSUTIL in psutil["requirements.txt:3"].problems[0]
    assert psutil["more.txt:1"].status == STATUS_OK
    assert by["gyreprof-not-installed-xyz"][0].status == STATUS_MISSING
    prom = by["prometheus-client"][0]
    assert prom.status == STATUS_OK
    assert any("normalisation" in n for n in prom.notes)
    demo = by["demo-pkg"][0]
    assert demo.status == STATUS_EXTRAS and demo.missing_extras == ["fast"]
    assert any("gyreprof-absent-accelerator" in p for p in demo.problems)
    assert by["windows-only-thing"][0].status == STATUS_SKIPPED
    assert by["rich"][0].status == STATUS_OK and by["rich"][0].source == "requirements.txt:9"
    assert by["threadpoolctl"][0].status == STATUS_OK
    unchecked = [c for c in report.checks if c.status == STATUS_UNCHECKED]
    assert len(unchecked) == 1 and "whl" in unchecked[0].declared
    # pinned first, then by name
    pinned = [c.pinned for c in report.checks]
    assert pinned == sorted(pinned, reverse=True) and pinned[0]
    assert not report.errors and report.exit_code == 1 and not report.ok
    assert sorted(report.files) == ["more.txt", "requirements.txt"]
    text = str(report)
    assert "pinned:" in text and "MISSING" in text and "result: MISMATCH" in text


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # sources are shown relative to the current folder


def test_everything_matching_exits_zero(tmp_path: Path) -> None:
    req = _write(tmp_path / "requirements-dev.txt", f"numpy=={NUMPY}\npsutil>=5\n")
    report = envcheck(req, broken=False)
    assert report.ok and report.exit_code == 0
    assert "result: OK" in str(report)


def test_malformed_lines_are_reported_with_file_and_line(tmp_path: Path) -> None:
    req = _write(
        tmp_path / "requirements.txt",
        """
        numpy>=1
        numpy>>1
        --no-such-option
        -r
        """,
    )
    report = envcheck(req, broken=False)
    sources = [e.source for e in report.errors]
    assert sources == ["requirements.txt:2", "requirements.txt:3", "requirements.txt:4"]
    assert "invalid requirement" in report.errors[0].message
    assert "unknown option" in report.errors[1].message
    assert report.exit_code == 2
    assert "requirements.txt:2" in str(report)


def test_missing_include_and_unreadable_files(tmp_path: Path) -> None:
    req = _write(tmp_path / "requirements.txt", "-r nowhere.txt\n")
    report = envcheck(req, broken=False)
    assert report.errors and "file not found" in report.errors[0].message
    assert report.errors[0].source == "requirements.txt:1"
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00junk")
    report = envcheck(tmp_path / "binary.txt", broken=False)
    assert "not UTF-8" in report.errors[0].message


def test_constraints_apply_only_to_installed_packages(tmp_path: Path) -> None:
    _write(tmp_path / "constraints.txt", "numpy<1\ngyreprof-never-installed<2\n")
    req = _write(tmp_path / "requirements.txt", "-c constraints.txt\npsutil\n")
    by = _by_name(envcheck(req, broken=False))
    assert by["numpy"][0].status == STATUS_VERSION and by["numpy"][0].constraint
    assert by["gyreprof-never-installed"][0].status == STATUS_SKIPPED
    assert by["psutil"][0].status == STATUS_OK


def test_pyproject_dependencies_and_self_referencing_extras(tmp_path: Path) -> None:
    py = _write(
        tmp_path / "pyproject.toml",
        f"""
        [build-system]
        requires = ["setuptools>=61", "numpy>=1"]

        [project]
        name = "demo-app"
        version = "0.1"
        dependencies = [
            "numpy>=1",
            "psutil=={PSUTIL}",
        ]

        [project.optional-dependencies]
        fast = ["gyreprof-accel-not-installed>=1"]
        plot = ["numpy<1"]
        all = ["demo-app[fast,plot]"]
        """,
    )
    report = envcheck(py, broken=False)
    assert {c.name for c in report.checks} == {"numpy", "psutil"}
    assert report.ok
    assert report.checks[0].name == "psutil" and report.checks[0].pinned
    numpy = next(c for c in report.checks if c.name == "numpy")
    assert numpy.source == "pyproject.toml:8"  # the [project] entry, not build-system's
    assert any("optional groups not checked" in n for n in report.notes)

    report = envcheck(py, extras=["all"], broken=False)
    by = _by_name(report)
    assert by["gyreprof-accel-not-installed"][0].status == STATUS_MISSING
    assert by["gyreprof-accel-not-installed"][0].source == "pyproject.toml:13"
    assert [c.status for c in by["numpy"]].count(STATUS_VERSION) == 1
    assert "demo-app" not in by  # the project itself is expanded, not checked
    assert report.exit_code == 1
    assert _by_name(envcheck(py, all_extras=True, broken=False)).keys() == by.keys()

    report = envcheck(py, extras=["nope"], broken=False)
    assert report.errors and "known: all, fast, plot" in report.errors[0].message


def test_invalid_toml_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    py = _write(tmp_path / "pyproject.toml", "[project\nname = 1\n")
    report = envcheck(py, broken=False)
    assert report.exit_code == 2 and "invalid TOML" in report.errors[0].message


def test_conda_environment_pip_section_and_python_pin(tmp_path: Path) -> None:
    env = _write(
        tmp_path / "environment.yml",
        f"""
        name: rl
        channels:
          - conda-forge
        dependencies:
          - python=2.7   # deliberately not the running interpreter
          - cudatoolkit=11.8
          - pip
          - pip:
            - numpy=={NUMPY}
            - "gyreprof-conda-missing>=1"
        """,
    )
    report = envcheck(env, broken=False)
    by = _by_name(report)
    assert by["numpy"][0].status == STATUS_OK and by["numpy"][0].source == "environment.yml:9"
    assert by["gyreprof-conda-missing"][0].status == STATUS_MISSING
    assert by["python"][0].status == STATUS_VERSION
    assert any("conda package(s)" in n for n in report.notes)


def test_environment_yml_read_by_yaml_safe_load(tmp_path: Path) -> None:
    """Flow lists, quoted items, anchors: whatever YAML allows, not a hand-written subset."""
    env = _write(
        tmp_path / "environment.yml",
        f"""
        name: x
        base: &pins ["numpy=={NUMPY}"]
        dependencies:
          - 'pip'
          - pip: *pins
          - python>=3.0
        variables:
          - gyreprof-not-a-dependency
        """,
    )
    report = envcheck(env, broken=False)
    by = _by_name(report)
    assert sorted(by) == ["numpy", "python"]
    assert by["numpy"][0].status == STATUS_OK and by["python"][0].status == STATUS_OK
    bad = _write(tmp_path / "environment.yaml", "dependencies: [a\n  - b: !!python/object x\n")
    report = envcheck(bad, broken=False)
    assert report.exit_code == 2 and "invalid YAML" in report.errors[0].message
    unsafe = _write(
        tmp_path / "env-unsafe.yml", "dependencies:\n  - !!python/object/apply:os.getcwd []\n"
    )
    report = envcheck(unsafe, broken=False)  # the safe loader refuses to build objects
    assert report.exit_code == 2 and "invalid YAML" in report.errors[0].message


@pytest.mark.parametrize(("blocked", "named"), [("yaml", "pyyaml"), ("packaging", "packaging")])
def test_missing_extra_is_named_with_the_install_hint_before_any_work(
    tmp_path: Path, blocked: str, named: str
) -> None:
    """A real interpreter in which the library cannot be imported (sys.modules[name] = None)."""
    code = (
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "from gyreprof.cli import main\n"
        # a folder that does not exist: the extras message must come before any reading
        f"sys.exit(main(['envcheck', {str(tmp_path / 'nowhere')!r}]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        # the gyreprof this test imported (src/ in a checkout, site-packages when installed)
        env={**os.environ, "PYTHONPATH": str(Path(gyreprof.__file__).resolve().parent.parent)},
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert f"gyreprof envcheck needs {named}" in out.stderr
    assert 'pip install "gyreprof[envcheck]"' in out.stderr
    assert "Traceback" not in out.stderr and "nowhere" not in out.stderr


def test_broken_installed_requirements_like_pip_check(tmp_path: Path, fake_site: Path) -> None:
    req = _write(tmp_path / "requirements.txt", "psutil\n")
    report = envcheck(req)
    broken = [b for b in report.broken if b.package == "Demo_Pkg"]
    assert len(broken) == 1  # numpy>=999; the 'fast' extra's requirement is not pip check's
    assert broken[0].requirement == "numpy>=999" and broken[0].installed_version == NUMPY
    assert "Demo_Pkg 1.2.0 requires numpy>=999" in str(report)
    assert report.exit_code == 1
    assert not [b for b in envcheck(req, broken=False).broken]


def test_folder_discovery_and_nothing_to_check(tmp_path: Path) -> None:
    _write(tmp_path / "requirements.txt", "psutil\n")
    _write(tmp_path / "pyproject.toml", '[project]\nname = "x"\ndependencies = ["numpy"]\n')
    report = envcheck(broken=False)  # the current folder
    assert sorted(report.files) == ["pyproject.toml", "requirements.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no requirements"):
        envcheck(empty)


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = _write(tmp_path / "requirements.txt", "psutil\n")
    bad = _write(tmp_path / "requirements-bad.txt", "gyreprof-missing-pkg\n")
    broken = _write(tmp_path / "requirements-broken.txt", "numpy>>1\n")
    assert cli_main(["envcheck", str(ok), "--no-broken"]) == 0
    assert "result: OK" in capsys.readouterr().out
    assert cli_main(["envcheck", str(bad), "--no-broken", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["checks"][0]["status"] == "missing" and data["exit_code"] == 1
    assert data["ok"] is False and data["format"] == "gyreprof.envcheck/1"
    back = EnvReport.from_dict(data)
    assert back.exit_code == 1 and back.checks[0].name == "gyreprof-missing-pkg"
    assert back.to_dict() == data
    with pytest.raises(CorruptDataError, match=r"checks\[0\]\.pinned"):
        EnvReport.from_dict({**data, "checks": [{**data["checks"][0], "pinned": "no"}]})
    assert cli_main(["envcheck", str(broken), "--no-broken"]) == 2
    assert "requirements-broken.txt:1" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert cli_main(["envcheck", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no requirements" in err and "Traceback" not in err
