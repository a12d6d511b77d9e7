"""One owner of recordings (issue 21): a Profiler's recorders, its identity and its
finished threads live in its RecorderSet (gyreprof.recording._recorders); thread retirement,
autosave and live publishing share that set instead of keeping a view of their own."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

import gyreprof
import gyreprof as gp
from gyreprof.live import _layout as lay
from gyreprof.recording._recorders import RecorderSet

SRC = Path(gyreprof.__file__).resolve().parent
HOME = SRC / "recording" / "_recorders.py"
SHARERS = (
    "recording/_autosave.py",
    "live/publish.py",
)  # they get the set, never the Profiler's parts


def _modules() -> list[Path]:
    return [p for p in SRC.rglob("*.py") if "_core" not in p.parts]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _enclosing_functions(tree: ast.Module) -> dict[ast.AST, str]:
    """node -> the name of the innermost function around it ('' at module level)."""
    out: dict[ast.AST, str] = {}

    def walk(node: ast.AST, fn: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else fn
            out[child] = name
            walk(child, name)

    walk(tree, "")
    return out


def _calls_of(tree: ast.Module, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    ]


def test_only_the_recorder_set_creates_a_profilers_recorders() -> None:
    """Outside the compiled core a Recorder is built by the RecorderSet alone (and once,
    apart, to calibrate what each recording form costs)."""
    found = []
    for p in _modules():
        tree = _tree(p)
        where = _enclosing_functions(tree)
        for call in _calls_of(tree, "Recorder"):
            fn = where[call]
            if p == HOME or (p.name == "profiler.py" and fn == "_measure_form_costs"):
                continue
            found.append(f"{p.relative_to(SRC)}:{call.lineno} ({fn or 'module'})")
    assert found == [], f"a Recorder built outside the RecorderSet: {found}"


def test_only_the_recorder_set_enumerates_a_profilers_recorders() -> None:
    """No module keeps or walks a list of a profiler's recorders but the RecorderSet: the
    Profiler's ``recorders`` is the set's, and the sharers ask the set (``all()``,
    ``sources()``), never a Profiler's ``recorders``."""
    private = {"_recorders", "_timers_by_rec", "_retired", "_RetiredThreads", "snapshot_in_place"}
    found = []
    for p in _modules():
        if p == HOME:
            continue
        tree = _tree(p)
        for n in ast.walk(tree):
            name = (
                n.attr
                if isinstance(n, ast.Attribute)
                else n.id
                if isinstance(n, ast.Name)
                else n.name
                if isinstance(n, ast.ClassDef | ast.FunctionDef)
                else None
            )
            if name in private:
                found.append(f"{p.relative_to(SRC)}:{getattr(n, 'lineno', 0)} {name}")
            is_sharer = str(p.relative_to(SRC)) in SHARERS
            if is_sharer and isinstance(n, ast.Attribute) and n.attr in ("recorders", "recorder"):
                # the one recorder of a profiler without per_thread is handed over once
                if not (p.name == "publish.py" and n.attr == "recorder"):
                    found.append(f"{p.relative_to(SRC)}:{n.lineno} .{n.attr}")
    assert found == [], f"recorders enumerated outside the RecorderSet: {found}"
    prop = _tree(SRC / "recording" / "profiler.py")
    body = next(
        n for n in ast.walk(prop) if isinstance(n, ast.FunctionDef) and n.name == "recorders"
    )
    assert "self._recs.all()" in ast.unparse(body)


def test_the_profilers_identity_is_built_once() -> None:
    """ProfilerIdentity is built by the Profiler (once, for its RecorderSet) and by the live
    reader (the writer's identity, from its segment); no sharer copies phases or label."""
    found = sorted(
        f"{p.relative_to(SRC)}" for p in _modules() for _ in _calls_of(_tree(p), "ProfilerIdentity")
    )
    assert found == ["live/reader.py", "recording/profiler.py"], found
    for rel in SHARERS:
        tree = _tree(SRC / rel)
        copied = [
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and n.attr in ("_phases", "_label", "_lap_cost_ns", "_identity", "phases", "label")
        ]
        assert copied == [], f"{rel} keeps its own copy of the profiler's identity: {copied}"


def test_every_sharer_holds_the_profilers_own_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread retirement, autosave and live publishing of one per-thread profiler hold
    the one RecorderSet, and what it folds is what all of them see."""
    monkeypatch.setenv(lay.ENV_DIR, str(tmp_path / "live"))
    prof = gp.Profiler(["a"], per_thread=True, live=True, autosave=tmp_path / "p.snap")
    try:
        recs = prof._recs
        assert isinstance(recs, RecorderSet)
        assert prof._autosave is not None and prof._autosave.recordings is recs
        assert prof.live._recordings is recs
        assert prof.identity is recs.identity

        def work() -> None:
            prof.begin()
            prof.lap(0)
            prof.end()

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        recs.fold()
        assert recs.retired_threads == 3 and prof.recorders == recs.all() == ()
        assert prof.snapshot().totals.steps_completed == 3
        path = prof.save_autosave()
        assert path is not None
        assert gp.Snapshot.from_bytes(path.read_bytes()).totals.steps_completed == 3
        merged = gp.live.collect(os.getpid()).merged
        assert merged is not None and merged.phases["a"].count == 3
    finally:
        prof.live.close()
