"""The structure of the read model (issue 21): one Snapshot builder, typed records with
no plain dict in a public field, and no caller reading a snapshot's tables by column."""

from __future__ import annotations

import dataclasses
import io
import re
import sys
import tokenize
import typing
from pathlib import Path

import gyreprof
import gyreprof.model.snapshot as snapshot_mod
from gyreprof.model.histogram import PhaseRow

SRC = Path(gyreprof.__file__).resolve().parent
ROOT = SRC.parent.parent
HOME = SRC / "model" / "snapshot"  # the package: records, model, binary, algebra, overhead, build

# a snapshot's packed tables read by column number: snap.stat[i, 1], s.warm[:, 0], ...
_COLUMNS = re.compile(r"\b(?!block\b|st\b)\w+\.(stat|warm)\[[^\]]*,\s*-?\d+\s*\]")


def _home(path: Path) -> bool:
    return path.parent == HOME


def _code(path: Path) -> list[tuple[int, str]]:
    """(line number, line) with comments dropped (docstrings hold no calls here)."""
    return [(i, line.split("#", 1)[0]) for i, line in enumerate(path.read_text().splitlines(), 1)]


def _calls(path: Path, name: str) -> list[int]:
    """Lines where ``name(`` is called (a name token followed by an open parenthesis;
    strings and comments are not code)."""
    toks = [
        t
        for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    ]
    return [
        a.start[0]
        for before, a, b in zip(toks, toks[1:], toks[2:], strict=False)
        if a.type == tokenize.NAME
        and a.string == name
        and b.string == "("
        and before.string not in ("def", "class")
    ]


def test_only_the_snapshot_module_builds_a_snapshot() -> None:
    found = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        if not _home(p)
        for name in ("Snapshot", "from_stats")
        for i in _calls(p, name)
    ]
    assert found == [], f"Snapshot built outside gyreprof/model/snapshot/: {found}"


def test_one_place_builds_a_snapshot_from_a_stats_block() -> None:
    """``Snapshot.from_stats`` is called once, by ``build_snapshot``; a profiler's
    recordings (the profiler, thread retirement and autosave, all through its
    RecorderSet) and the live reader are its only callers."""
    home = sorted(HOME.glob("*.py"))
    assert [(p.name, len(_calls(p, "from_stats"))) for p in home if _calls(p, "from_stats")] == [
        ("build.py", 1)
    ]
    text = (HOME / "build.py").read_text()
    start = text.index("def build_snapshot(")
    assert start < text.index("Snapshot.from_stats(", start)
    callers = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if not _home(p) and _calls(p, "build_snapshot")
    )
    assert callers == ["live/reader.py", "recording/_recorders.py"], callers


def _public_hints(cls: type) -> dict[str, object]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if not f.name.startswith("_")}


def _mentions_dict(tp: object) -> bool:
    if tp is dict or typing.get_origin(tp) is dict:
        return True
    return any(_mentions_dict(a) for a in typing.get_args(tp))


def test_no_public_field_of_the_read_model_is_a_dict() -> None:
    records = [
        snapshot_mod.Snapshot,
        snapshot_mod.SnapshotConfig,
        snapshot_mod.Times,
        snapshot_mod.Totals,
        snapshot_mod.SourceRecord,
        snapshot_mod.Meta,
        snapshot_mod.ProfilerIdentity,
        PhaseRow,
    ]
    for cls in records:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        for name, tp in _public_hints(cls).items():
            assert not _mentions_dict(tp), f"{cls.__name__}.{name}: {tp}"


def test_the_source_record_keys_are_declared_once() -> None:
    """No module spells a source's keys as a dict literal any more (they were written in
    four places and checked again in _limits.py)."""
    pattern = re.compile(r"""["'](steady_ns|overhead_ns|warmup_done)["']\s*:""")
    found = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        for i, line in _code(p)
        if pattern.search(line)
    ]
    assert found == []


def test_no_caller_reads_a_snapshot_table_by_column() -> None:
    found = []
    for folder in ("src", "tests", "benchmarks", "tools", "examples"):
        for p in (ROOT / folder).rglob("*.py"):
            if _home(p) or p.name == "mutants.py":  # mutants.py quotes the package's code
                continue
            found += [f"{p.relative_to(ROOT)}:{i}" for i, line in _code(p) if _COLUMNS.search(line)]
    assert found == [], f"read by column number (use snap.rows / snap.row(name)): {found}"
