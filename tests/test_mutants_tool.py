"""The mutation table of tools/mutants.py still matches the code (fast: no builds).

Each mutant finds its snippet by exact text; code that moved makes a mutant
stale, and this test names it so the table is updated with the move.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gyreprof_mutants", ROOT / "tools" / "mutants.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()


def test_every_snippet_is_found_exactly_once() -> None:
    stale = [f"{m.id}: {r}" for m in TOOL.MUTANTS if (r := TOOL.stale_reason(m)) is not None]
    assert not stale, "\n".join(stale)


def test_table_is_well_formed() -> None:
    ids = [m.id for m in TOOL.MUTANTS]
    assert len(ids) == len(set(ids)), "mutant ids must be unique"
    assert len(ids) >= 25
    for m in TOOL.MUTANTS:
        assert m.original != m.replacement, m.id
        assert m.tests, m.id
        for t in m.tests:
            assert (ROOT / t.split("::")[0]).is_file(), f"{m.id}: no test file {t}"
    covered = {Path(m.path).name for m in TOOL.MUTANTS}
    # the areas issue 15 names, at their homes since the renovation (issue 12)
    for name in ("recorder.pyx", "hdr.pxd", "histogram.pyx", "codec.pyx", "algebra.py",
                 "window.py", "wait.py", "verdict.py", "decide.py", "rule.py", "_doctor_rules.py",
                 "sample_count.py"):  # fmt: skip
        assert name in covered, f"no mutant in {name}"


def test_a_moved_snippet_is_reported_stale(tmp_path: Path) -> None:
    m = TOOL.MUTANTS[0]
    (tmp_path / m.path).parent.mkdir(parents=True)
    (tmp_path / m.path).write_text("nothing to see\n")
    reason = TOOL.stale_reason(m, tmp_path)
    assert reason is not None and "not found" in reason and "tools/mutants.py" in reason
    (tmp_path / m.path).write_text(m.original + "\n" + m.original + "\n")
    assert "found 2 times" in TOOL.stale_reason(m, tmp_path)
    (tmp_path / m.path).unlink()
    assert "does not exist" in TOOL.stale_reason(m, tmp_path)


def test_bad_options_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        TOOL.main(["--only", "no-such-mutant"])
    assert exc.value.code == 2
    assert "unknown mutant" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        TOOL.main(["--jobs", "0"])
    assert "--jobs" in capsys.readouterr().err


def test_list_prints_every_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    assert TOOL.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(m.id in out for m in TOOL.MUTANTS)
    assert "STALE" not in out


def test_tool_is_linted_and_typed() -> None:
    pytest.importorskip("ruff")
    for args in (["ruff", "check", "tools"], ["ruff", "format", "--check", "tools"]):
        r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
    pytest.importorskip("mypy")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(ROOT / ".mypy_cache"),
         "tools/mutants.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_a_survivor_fails_the_run_and_a_kill_is_counted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end on two Python-only mutants (no build): one equivalent, one fatal."""
    path = "src/gyreprof/_version.py"
    line = (ROOT / path).read_text().splitlines()[0]
    test = ("tests/test_merge_sums.py::test_disjoint_phase_sets",)
    monkeypatch.setattr(
        TOOL,
        "MUTANTS",
        (
            TOOL.Mutant("comment-only", path, line, line + "  # same meaning", test),
            TOOL.Mutant("import-fails", path, line, "__version__ = 1 // 0", test),
        ),
    )
    rc = TOOL.main(["--no-baseline", "--jobs", "2"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "SURVIVED  comment-only" in out
    assert "KILLED    import-fails" in out
    assert "kill rate: 1/2 = 50.0%" in out
    assert TOOL.main(["--no-baseline", "--only", "import-fails"]) == 0


# ------------------------------------------------------------ CI selection


def _ids(ms: list[object]) -> list[str]:
    return [m.id for m in ms]  # type: ignore[attr-defined]


def test_a_sample_is_fixed_by_its_seed_not_by_the_table_order() -> None:
    table = TOOL.MUTANTS
    a = TOOL.select(table, sample=6, seed="7")
    assert len(a) == 6 and _ids(a) == _ids(TOOL.select(table, sample=6, seed="7"))
    assert _ids(a) == [m.id for m in table if m.id in set(_ids(a))]  # in table order
    # the same rows when the table is reordered (rows moved while editing it)
    assert set(_ids(TOOL.select(tuple(reversed(table)), sample=6, seed="7"))) == set(_ids(a))
    seeds = {tuple(_ids(TOOL.select(table, sample=6, seed=str(s)))) for s in range(5)}
    assert len(seeds) > 1  # the seed matters
    assert len(TOOL.select(table, sample=10_000)) == len(table)  # more than there are: all


def test_changed_files_pick_the_rows_of_their_source_and_their_tests() -> None:
    table = TOOL.MUTANTS
    wait = TOOL.select(table, changed={"src/gyreprof/analysis/wait.py"})
    assert wait and all(m.path == "src/gyreprof/analysis/wait.py" for m in wait)
    # a test file picks the rows naming it, also by a node id inside it
    by_test = _ids(TOOL.select(table, changed={"tests/test_verdict.py"}))
    assert "verdict-sync-uses-wait-ratio" in by_test  # named as test_verdict.py::test_...
    assert "merge-totals" not in by_test
    assert TOOL.select(table, changed={"README.md", "docs/x.md"}) == []
    # changed rows plus a sample of the others
    both = _ids(TOOL.select(table, changed={"src/gyreprof/analysis/wait.py"}, sample=3, seed="1"))
    assert set(_ids(wait)) <= set(both) and len(both) == len(wait) + 3
    assert TOOL.select(table, only=["merge-totals"])[0].id == "merge-totals"


def test_changed_files_come_from_git_committed_or_not(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        r = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60, check=True)  # fmt: skip
        return r.stdout.strip()

    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "0")
    base = git("rev-parse", "HEAD")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "same.py").write_text("same\n")
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "1")
    assert TOOL.changed_files(base, tmp_path) == {"src/a.py", "same.py"}
    head = git("rev-parse", "HEAD")
    assert TOOL.changed_files(head, tmp_path) == set()
    (tmp_path / "src" / "a.py").write_text("a = 2\n")  # not committed
    (tmp_path / "new.py").write_text("new\n")  # not even added
    assert TOOL.changed_files(head, tmp_path) == {"src/a.py", "new.py"}
    with pytest.raises(ValueError, match="no-such-commit"):
        TOOL.changed_files("no-such-commit", tmp_path)


def test_ci_options_are_checked_and_the_budget_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, word in (
        (["--only", "merge-totals", "--sample", "2"], "--only"),
        (["--sample", "0"], "--sample"),
        (["--budget-s", "0"], "--budget-s"),
    ):
        with pytest.raises(SystemExit) as exc:
            TOOL.main(argv)
        assert exc.value.code == 2 and word in capsys.readouterr().err
    assert TOOL.main(["--changed", "no-such-commit-xyz", "--no-baseline"]) == 2
    assert "no-such-commit-xyz" in capsys.readouterr().err
    m = TOOL.MUTANTS[0]
    r = TOOL.run_mutant(m, ROOT, tmp_path, 60.0, deadline=0.0)  # spent before it starts
    assert r.status == "skipped" and not (tmp_path / m.id).exists()


def test_a_prebuilt_module_is_stale_only_when_its_own_sources_are_newer(tmp_path: Path) -> None:
    import os

    core = tmp_path / "src" / "gyreprof" / "_core"
    core.mkdir(parents=True)
    files = {
        "a.pyx": "from gyreprof._core.c cimport thing\n",
        "c.pxd": "cdef int thing\n",
        "b.pyx": "x = 1\n",
        "d.pxd": "cdef int other\n",  # used by no module
        "a.cpython-311-x86_64-linux-gnu.so": "",
        "b.cpython-311-x86_64-linux-gnu.so": "",
    }
    for name, text in files.items():
        (core / name).write_text(text)

    def at(name: str, t: float) -> None:
        os.utime(core / name, (t, t))

    for name in files:
        at(name, 200.0 if name.endswith(".so") else 100.0)
    assert TOOL._prebuilt_current(tmp_path)
    at("d.pxd", 300.0)  # newer than every build, but nothing cimports it
    assert TOOL._prebuilt_current(tmp_path)
    at("c.pxd", 300.0)  # a.pyx cimports it: a's build is out of date
    assert not TOOL._prebuilt_current(tmp_path)
    at("c.pxd", 100.0)
    at("b.pyx", 300.0)
    assert not TOOL._prebuilt_current(tmp_path)
