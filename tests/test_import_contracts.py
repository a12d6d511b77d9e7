"""The folders are the floors: import-linter's contracts in pyproject.toml hold.

``[tool.importlinter]`` in pyproject.toml names the floors of the package, bottom-up
(``_core``; the small helpers; the model; recording; analysis; render and export;
diagnostics; integrations; commands and the command line) and forbids an import up a
floor, function-local imports included; nothing is ignored.

The root package ``gyreprof`` (its ``__init__`` imports every floor) is in no floor; the
last test keeps modules below the commands from importing it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import grimp
import pytest

import gyreprof

SRC = (
    Path(gyreprof.__file__).resolve().parent.parent
)  # the gyreprof imported: a checkout or site-packages
ROOT = Path(__file__).resolve().parent.parent  # the checkout whose contracts these are
PYPROJECT = ROOT / "pyproject.toml"

pytestmark = pytest.mark.skipif(
    not PYPROJECT.is_file(), reason="needs the source checkout's pyproject.toml"
)

_RUN = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filenames=(sys.argv[1],), no_cache=True, no_logo=True))\n"
)


def _lint(config: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on ``config`` in a fresh interpreter with ``paths`` importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return subprocess.run(
        [sys.executable, "-c", _RUN, str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
        timeout=120,
    )


def test_contracts_are_kept() -> None:
    out = _lint(PYPROJECT, SRC)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout, out.stdout


def test_every_floor_contract_is_configured_with_no_debt() -> None:
    text = PYPROJECT.read_text()
    for contract in ("core-independent", "floors", "results-below-integrations", "cli-on-top"):
        assert f'id = "{contract}"' in text, contract
    section = text[text.index("[tool.importlinter]") :]
    assert "ignore_imports" not in section  # no import runs up a floor, not even as debt


def test_an_upward_import_breaks_the_floors(tmp_path: Path) -> None:
    """A tiny package with a low floor importing a high one fails the same kind of contract."""
    pkg = tmp_path / "src" / "floorpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from floorpkg import high\n    return high\n")
    (pkg / "high.py").write_text("from floorpkg import low\n")
    config = tmp_path / "pyproject.toml"
    body = textwrap.dedent(
        """
        [tool.importlinter]
        root_package = "floorpkg"

        [[tool.importlinter.contracts]]
        id = "floors"
        name = "floors"
        type = "layers"
        layers = ["floorpkg.high", "floorpkg.low"]
        """
    )
    config.write_text(body)
    out = _lint(config, tmp_path / "src")
    assert out.returncode != 0, out.stdout
    assert "floorpkg.low -> floorpkg.high" in out.stdout, out.stdout


def test_a_function_local_import_up_a_floor_breaks_the_real_contract(tmp_path: Path) -> None:
    """The real contract, on a copy of the package where the model imports a renderer
    inside a function (the kind of import the floors used to hide), fails naming it."""
    copy = tmp_path / "src" / "gyreprof"
    shutil.copytree(
        SRC / "gyreprof", copy, ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__")
    )
    window = copy / "model" / "window.py"
    window.write_text(
        window.read_text() + "\n\ndef _planted():\n    from gyreprof.render import text\n\n"
        "    return text\n"
    )
    config = tmp_path / "pyproject.toml"
    config.write_text(PYPROJECT.read_text())
    out = _lint(config, tmp_path / "src")
    assert out.returncode != 0, out.stdout
    assert "gyreprof.model.window -> gyreprof.render.text" in out.stdout, out.stdout


TOP = ("gyreprof.commands", "gyreprof.cli", "gyreprof.__main__")


def test_only_the_top_imports_the_root_package() -> None:
    """The root package imports every floor (its lazy names), so a module below the
    commands imports the module it needs, never ``gyreprof`` itself."""
    graph = grimp.build_graph("gyreprof", include_external_packages=False)
    importers = {
        m
        for m in graph.find_modules_that_directly_import("gyreprof")
        if not m.startswith(TOP) and m != "gyreprof"
    }
    assert importers == set(), "import the module that defines the name instead"


_FRESH = """
import json, sys
from pathlib import Path
from gyreprof.model.summary import Summary

out = Path(sys.argv[1])
assert not [m for m in sys.modules if m.startswith("gyreprof.render")], "render loaded early"
s = Summary.from_json(out / "summary.json")
s.to_csv(out / "child.csv")
s.to_json(out / "child.json")
forms = {
    "str": str(s),
    "markdown": s.to_markdown(),
    "csv": s.to_csv(),
    "metrics": repr(sorted(s.to_metrics().items())),
    "phase": str(s["env"]),
}
(out / "child.forms.json").write_text(json.dumps(forms))
"""


def test_a_result_module_alone_still_renders(tmp_path: Path) -> None:
    """Results do not import their renderers, yet ``print(summary)``, ``to_markdown``,
    ``to_csv``, ``to_json`` and ``to_metrics`` work with only gyreprof.model.summary imported."""
    import json

    prof = gyreprof.Profiler(["env", "fwd"])
    for i in range(20):
        prof.begin()
        prof.record("env", 5_000 + 10 * i)
        prof.record("fwd", 1_000)
    prof.begin()
    s = prof.summary()
    s.to_json(tmp_path / "summary.json")
    s = gyreprof.Summary.from_json(tmp_path / "summary.json")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    forms = json.loads((tmp_path / "child.forms.json").read_text())
    assert forms == {
        "str": str(s),
        "markdown": s.to_markdown(),
        "csv": s.to_csv(),
        "metrics": repr(sorted(s.to_metrics().items())),
        "phase": str(s["env"]),
    }
    assert (tmp_path / "child.csv").read_bytes().decode() == s.to_csv()
    assert (tmp_path / "child.json").read_text() == s.to_json() + "\n"


def test_a_form_registered_twice_is_refused() -> None:
    from gyreprof._support import forms as _forms
    from gyreprof.render import text as render_text

    _forms.register("text", render_text.summary)  # the same function again: no change

    def summary(s: object) -> str:  # another function under a registered name
        return ""

    with pytest.raises(ValueError, match="'text.summary'"):
        _forms.register("text", summary)
    assert _forms.text("text.summary", gyreprof.Profiler(["a"]).summary()) != ""
    importlib.reload(render_text)  # a module imported again replaces its own forms
    assert _forms._FORMS["text.summary"] is render_text.summary
    with pytest.raises(LookupError, match="'text.no_such_form'"):
        _forms.text("text.no_such_form")
