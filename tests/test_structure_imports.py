"""Structure checks: no import cycles among gyreprof's modules; the public face is complete.

The import graph is built statically with ``ast`` from the files under src/gyreprof:

- an import at module level (also inside ``try``, ``if``, ``with`` and class bodies) is
  a *runtime* edge;
- an import inside a function is a *deferred* edge: it still makes the two modules
  depend on each other (a deferred import that dodges a cycle hides it, not removes it);
- ``importlib.import_module("gyreprof.x")`` counts as an import of ``gyreprof.x``, and
  ``import_module(f"gyreprof.commands.{name}")`` as an import of every module in that
  package;
- an import under ``if TYPE_CHECKING:`` is a *typing* edge and never forms a cycle;
- a module-level ``__getattr__`` (PEP 562: ``gyreprof``'s lazy public names) adds no
  edge: it runs on attribute access, after the importing is done.

A cycle is a strongly connected set of modules over runtime and deferred edges; the
failure message spells one path around it, with the line of each import.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import gyreprof

SRC = Path(gyreprof.__file__).resolve().parent.parent

# Cycles that other work in flight removes. Each entry must still be a cycle: once it is
# gone the test says to delete it, so a cycle cannot come back under an old excuse.
KNOWN_CYCLES: set[frozenset[str]] = set()


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str  # "runtime", "deferred" or "typing"
    line: int


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package) for every .py file under ``root``."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector:
    def __init__(self, name: str, is_pkg: bool, modules: dict[str, tuple[Path, bool]]) -> None:
        self.name = name
        self.package = name if is_pkg else name.rpartition(".")[0]
        self.modules = modules
        self.edges: list[Edge] = []

    def add(self, target: str, kind: str, line: int) -> None:
        if target in self.modules and target != self.name:
            self.edges.append(Edge(self.name, target, kind, line))

    def imported(self, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
            return
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            yield sub if sub in self.modules else source

    def dynamic(self, node: ast.Call) -> Iterator[str]:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called != "import_module" or not node.args:
            return
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            yield arg.value
        elif isinstance(arg, ast.JoinedStr) and arg.values:
            head = arg.values[0]
            if isinstance(head, ast.Constant) and str(head.value).endswith("."):
                prefix = str(head.value)
                yield from (
                    m for m in self.modules if m.startswith(prefix) and "." not in m[len(prefix) :]
                )

    def visit(self, stmts: Iterable[ast.stmt], kind: str, top: bool = False) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for target in self.imported(stmt):
                    self.add(target, kind, stmt.lineno)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not (top and stmt.name == "__getattr__"):  # PEP 562: see the docstring
                    self.deferred(stmt, "typing" if kind == "typing" else "deferred")
            elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                self.visit(stmt.body, "typing")
                self.visit(stmt.orelse, kind)
            else:
                # still module level inside if/try/with; not inside a class body
                inner = top and not isinstance(stmt, ast.ClassDef)
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.stmt):
                        self.visit([child], kind, inner)
                    elif isinstance(child, ast.ExceptHandler):
                        self.visit(child.body, kind, inner)
                    elif isinstance(child, ast.expr):
                        self.calls(child, kind)

    def deferred(self, func: ast.AST, kind: str) -> None:
        for node in ast.walk(func):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in self.imported(node):
                    self.add(target, kind, node.lineno)
            elif isinstance(node, ast.Call):
                for target in self.dynamic(node):
                    self.add(target, kind, node.lineno)

    def calls(self, expr: ast.expr, kind: str) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                for target in self.dynamic(node):
                    self.add(target, kind, node.lineno)


def import_graph(root: Path) -> list[Edge]:
    """Every import edge between the modules of the package at ``root``."""
    modules = _modules(root)
    edges: list[Edge] = []
    for name, (path, is_pkg) in modules.items():
        collector = _Collector(name, is_pkg, modules)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        collector.visit(tree.body, "runtime", top=True)
        edges += collector.edges
    return edges


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as a path of edges) per strongly connected set of modules, over runtime
    and deferred edges."""
    graph: dict[str, list[Edge]] = {}
    for e in edges:
        if e.kind != "typing":
            graph.setdefault(e.source, []).append(e)
            graph.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan; the graph is a few dozen modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            if e.target not in index:
                connect(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            comp: set[str] = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_path_through(comp, graph) for comp in components]


def _path_through(comp: set[str], graph: dict[str, list[Edge]]) -> list[Edge]:
    """A shortest cycle through the first module of ``comp`` (breadth-first)."""
    start = min(comp)
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for v in frontier:
            for e in sorted(graph[v], key=lambda e: (e.target, e.line)):
                if e.target not in comp:
                    continue
                if e.target == start:
                    path = [e]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if e.target not in came:
                    came[e.target] = e
                    nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover - comp is cyclic


def describe(cycle: list[Edge]) -> str:
    steps = [f"{e.source} -> {e.target} (line {e.line}, {e.kind})" for e in cycle]
    return "\n    ".join(steps)


# ------------------------------------------------------------------ the checks


def test_no_import_cycles_among_gyreprof_modules() -> None:
    cycles = find_cycles(import_graph(SRC / "gyreprof"))
    found = {frozenset(e.source for e in c): c for c in cycles}
    new = [c for key, c in found.items() if key not in KNOWN_CYCLES]
    gone = [sorted(k) for k in KNOWN_CYCLES if k not in found]
    remaining = [describe(c) for key, c in found.items() if key in KNOWN_CYCLES]
    if remaining:
        warnings.warn(
            "import cycles still to remove (KNOWN_CYCLES):\n    " + "\n\n    ".join(remaining),
            stacklevel=1,
        )
    assert not new, "import cycle(s) among gyreprof modules:\n    " + "\n\n    ".join(
        describe(c) for c in new
    )
    assert not gone, f"no longer cycles, delete them from KNOWN_CYCLES: {gone}"


def test_commands_do_not_import_the_cli() -> None:
    # the cycle that once hid behind the CLI's dynamic loading of its commands
    edges = import_graph(SRC / "gyreprof")
    back = [
        e for e in edges if e.source.startswith("gyreprof.commands.") and e.target == "gyreprof.cli"
    ]
    assert not back, [f"{e.source}:{e.line}" for e in back]


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_detector_finds_hidden_cycles_and_ignores_typing_ones(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            # a deferred cycle: still a cycle
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "def f():\n    from pkg.a import x\n",
            # a TYPE_CHECKING-only cycle: not one
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n",
            "pkg/d.py": "import pkg.c\n",
            # dynamic loading by prefix, and a relative import back
            "pkg/cli.py": (
                "import importlib\ndef main(n):\n    importlib.import_module(f'pkg.cmds.{n}')\n"
            ),
            "pkg/cmds/__init__.py": "",
            "pkg/cmds/run.py": "try:\n    from ..cli import main\nexcept ImportError:\n    pass\n",
            # PEP 562 lazy loading (also under a guard): no edge, so no cycle
            "pkg/lazy/__init__.py": (
                "import importlib\n"
                "if not False:\n"
                "    def __getattr__(n):\n"
                "        return importlib.import_module(f'pkg.lazy.{n}')\n"
            ),
            "pkg/lazy/m.py": "import pkg.lazy\n",
            # three modules around, at module level
            "pkg/x.py": "import pkg.y\n",
            "pkg/y.py": "class C:\n    from pkg import z\n",
            "pkg/z.py": "from . import x\n",
        },
    )
    cycles = find_cycles(import_graph(pkg))
    found = {frozenset(e.source for e in c) for c in cycles}
    assert found == {
        frozenset({"pkg.a", "pkg.b"}),
        frozenset({"pkg.cli", "pkg.cmds.run"}),
        frozenset({"pkg.x", "pkg.y", "pkg.z"}),
    }
    ring = next(c for c in cycles if len(c) == 3)
    text = describe(ring)
    assert "pkg.x -> pkg.y (line 1, runtime)" in text and "pkg.z -> pkg.x" in text
    deferred = next(c for c in cycles if {e.source for e in c} == {"pkg.a", "pkg.b"})
    assert any(e.kind == "deferred" and e.line == 2 for e in deferred)


# ------------------------------------------------------------------ the public face


def test_public_face_lists_every_lazy_name_for_type_checkers() -> None:
    tree = ast.parse((SRC / "gyreprof" / "__init__.py").read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.ImportFrom)
                    and stmt.module
                    and stmt.module.startswith("gyreprof")
                ):
                    for alias in stmt.names:
                        assert alias.asname == alias.name, f"re-export {alias.name} as itself"
                        is_sub = stmt.module == "gyreprof"
                        typed[alias.name] = f"gyreprof.{alias.name}" if is_sub else stmt.module
    lazy = dict(gyreprof._LAZY)
    lazy.update({name: f"gyreprof.{name}" for name in gyreprof._SUBMODULES})
    assert typed == lazy  # same names, from the same modules
    assert sorted(gyreprof.__all__) == sorted(["__version__", *lazy])
    for name in gyreprof.__all__:
        assert getattr(gyreprof, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        gyreprof.Nope  # type: ignore[attr-defined]  # noqa: B018


# Modules of the read side that still import the native core, each with why. An entry
# must still import it: once it does not, the test says to delete the entry.
KNOWN_CORE_IMPORTS: dict[str, str] = {
    # the HdrHistogram codec re-encodes counts through the native histogram and codec;
    # moving that behind gyreprof.model.histogram is its own change
    "gyreprof.export.hdrlog": "Histogram, encode_counts/decode_counts, layout_info",
}


def _reaches_into_the_core(target: str) -> bool:
    return (
        target == "gyreprof._support.block"
        or target == "gyreprof._core"
        or target.startswith("gyreprof._core.")
    )


def test_analysis_and_export_never_import_the_core_or_the_stats_block() -> None:
    """Analysis and export read a ``gyreprof.recording.source.Source``; only the profiler side
    (profiler, _rings, snapshot, live) touches Recorders and stats blocks."""
    edges = import_graph(SRC / "gyreprof")
    read_side = ("gyreprof.analysis", "gyreprof.export")
    offenders: dict[str, list[str]] = {}
    for e in edges:
        if e.kind == "typing" or not _reaches_into_the_core(e.target):
            continue
        if any(e.source == p or e.source.startswith(p + ".") for p in read_side):
            offenders.setdefault(e.source, []).append(f"{e.target} (line {e.line}, {e.kind})")
    new = {m: v for m, v in offenders.items() if m not in KNOWN_CORE_IMPORTS}
    gone = sorted(m for m in KNOWN_CORE_IMPORTS if m not in offenders)
    assert not new, f"analysis/export modules importing _core or _block: {new}"
    assert not gone, f"{gone} no longer import the core: delete them from KNOWN_CORE_IMPORTS"


def test_the_core_import_rule_sees_a_deferred_import(tmp_path: Path) -> None:
    """The rule catches an import hidden inside a function, not only at module level."""
    pkg = tmp_path / "gyreprof"
    (pkg / "_core").mkdir(parents=True)
    (pkg / "analysis").mkdir()
    (pkg / "_support").mkdir()
    for init in (pkg, pkg / "_core", pkg / "analysis", pkg / "_support"):
        (init / "__init__.py").write_text("")
    (pkg / "_support" / "block.py").write_text("")
    (pkg / "analysis" / "sneaky.py").write_text(
        "def f():\n    from gyreprof._support.block import StatsBlock\n    return StatsBlock\n"
    )
    edges = import_graph(pkg)
    hits = [e for e in edges if e.source == "gyreprof.analysis.sneaky"]
    assert [(e.target, e.kind) for e in hits] == [("gyreprof._support.block", "deferred")]
    assert _reaches_into_the_core(hits[0].target)
