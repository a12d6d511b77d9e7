"""What ``gyreprof run`` loads before the command's code: the launcher imports only what
starting the command needs (the report's modules come after it ends), a child loads
the patches only when a library they patch is imported, and the Profiler learns of the
run through a hook the bootstrap adds, not by reading the launcher's environment."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import gyreprof
from gyreprof.integrations._auto import bootstrap
from gyreprof.integrations._auto import records as rec
from gyreprof.recording import profiler

SRC = Path(gyreprof.__file__).resolve().parent
RUN = [sys.executable, "-m", "gyreprof", "run", "--"]

PROBE = """\
import sys
found = sorted(sys.modules)
import json, os
with open(os.environ["PROBE_OUT"], "w") as f:
    json.dump(found, f)
"""


def _modules_at_start(tmp_path: Path, body: str = "") -> list[str]:
    script = tmp_path / "probe.py"
    script.write_text(PROBE + body)
    out = tmp_path / "modules.json"
    env = {**_env(), "PROBE_OUT": str(out)}
    subprocess.run([*RUN, sys.executable, str(script)], env=env, check=True, capture_output=True)
    found: list[str] = json.loads(out.read_text())
    return found


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(SRC.parent) + (os.pathsep + old if old else "")
    return env


def test_the_bootstrap_names_the_run_as_the_records_do() -> None:
    assert bootstrap.ENV_RUN_DIR == rec.ENV_RUN_DIR
    assert bootstrap.ENV_MAIN_PID == rec.ENV_MAIN_PID


def test_every_module_a_patch_waits_for_is_watched() -> None:
    """The trigger loads the patches on the first import of a watched module: a module an
    instrumentor waits for and the trigger does not know would never be patched."""
    code = (
        "import wrapt\n"
        "from gyreprof.integrations._auto import bootstrap\n"
        "names = []\n"
        "def spy(hook, name):\n"  # every patch registers through wrapt's post-import hooks
        "    names.append(name)\n"
        "wrapt.register_post_import_hook = spy\n"
        "bootstrap.install_all()\n"
        "print(' '.join(sorted(set(names))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True
    ).stdout.split()
    assert "gymnasium" in out and "gyreprof.recording.profiler" in out and "httpx" in out
    assert set(out) <= bootstrap.WATCHED, set(out) - bootstrap.WATCHED


def test_a_child_that_imports_no_known_library_loads_no_patch(tmp_path: Path) -> None:
    found = _modules_at_start(tmp_path)
    assert "gyreprof.integrations._auto.bootstrap" in found
    loaded = [m for m in found if m.startswith("gyreprof.integrations.")]
    assert not [
        m
        for m in loaded
        if m.startswith(("gyreprof.integrations.libs", "gyreprof.integrations.http"))
    ], loaded
    assert "gyreprof.integrations._instrument" not in found
    assert "gyreprof.integrations._auto.state" not in found
    assert "numpy" not in found and "gyreprof.recording.profiler" not in found


def test_a_child_adds_at_most_20_modules_before_the_users_code(tmp_path: Path) -> None:
    """Issue 33: the bootstrap and the start-up trail load no more than 20 modules a bare
    interpreter lacks (13 today: gyreprof's own, the C tracer, ``_json``, ``faulthandler``)."""
    found = _modules_at_start(tmp_path)
    script = tmp_path / "probe.py"
    out = tmp_path / "bare.json"
    subprocess.run([sys.executable, str(script)], env={**_env(), "PROBE_OUT": str(out)}, check=True)
    added = sorted(set(found) - set(json.loads(out.read_text())))
    assert "gyreprof.integrations._auto.trail" in added
    assert len(added) <= 20, added
    assert not {"json", "pathlib", "sysconfig", "typing", "threading", "importlib"} & set(added)


def test_the_first_watched_import_loads_and_patches_it(tmp_path: Path) -> None:
    """``queue`` imported after the start goes through the trigger: its patches load and
    ``queue.Queue.get`` is the patched one."""
    body = (
        "import queue\n"
        "from gyreprof.integrations._instrument import is_wrapped\n"
        "print('PATCHED', is_wrapped(queue.Queue.get))\n"
    )
    script = tmp_path / "q.py"
    script.write_text(body)
    r = subprocess.run(
        [*RUN, sys.executable, str(script)], env=_env(), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "PATCHED True" in r.stdout


def test_a_users_profiler_reaches_the_run_through_the_hook(tmp_path: Path) -> None:
    body = (
        "import gyreprof as gp\n"
        "from gyreprof.recording import profiler\n"
        "print('HOOKS', [h.__name__ for h in profiler._on_create])\n"
        "p = gp.Profiler(['a'])\n"
        "with p.phase('a'):\n"
        "    pass\n"
    )
    script = tmp_path / "u.py"
    script.write_text(body)
    save = tmp_path / "saved"
    r = subprocess.run(
        [*RUN[:-1], "--save", str(save), "--", sys.executable, str(script)],
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "HOOKS ['join_run']" in r.stdout
    assert list(save.glob("*.user-0.snap"))


def test_a_hook_added_twice_runs_once() -> None:
    seen: list[object] = []
    hooks = list(profiler._on_create)
    try:
        profiler.on_create(seen.append)
        profiler.on_create(seen.append)
        p = profiler.Profiler(["a"])
        assert seen == [p]
    finally:
        profiler._on_create[:] = hooks


def test_the_profiler_reads_no_launcher_environment() -> None:
    source = (SRC / "recording" / "profiler.py").read_text()
    assert "GYREPROF_RUN" not in source
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert not [m for m in imported if m.startswith(("gyreprof.integrations", "gyreprof.commands"))]


def test_the_launcher_starts_the_command_before_the_reports_modules(tmp_path: Path) -> None:
    """When the launcher starts the command it has imported neither numpy nor the report's
    modules (analysis, render, the live reader, the run's collector) nor the other
    commands."""
    launcher = tmp_path / "launcher.py"
    out = tmp_path / "launcher.json"
    launcher.write_text(
        "import json, os, subprocess, sys\n"
        "_init = subprocess.Popen.__init__\n"
        "def at_start(self, *a, **k):\n"
        "    subprocess.Popen.__init__ = _init\n"
        "    with open(os.environ['PROBE_OUT'], 'w') as f:\n"
        "        json.dump(sorted(sys.modules), f)\n"
        "    return _init(self, *a, **k)\n"
        "subprocess.Popen.__init__ = at_start\n"
        "from gyreprof.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {**_env(), "PROBE_OUT": str(out)}
    cmd = [sys.executable, str(launcher), "run", "--", sys.executable, "-c", "pass"]
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    found = json.loads(out.read_text())
    heavy = [
        m
        for m in found
        if m == "numpy"
        or m.startswith(
            (
                "gyreprof.analysis",
                "gyreprof.render",
                "gyreprof.live",
                "gyreprof.integrations._auto.collect",
                "gyreprof.commands.report",
                "gyreprof.commands.top",
            )
        )
    ]
    assert heavy == []


def test_each_process_loads_the_sitecustomize_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run folder's sitecustomize is the package's file, with the bytecode the
    installation compiled of it: a process of the run loads that instead of compiling the
    source (~14 M instructions each); without it, the process compiles as before."""
    import py_compile

    from gyreprof.commands import run as launcher

    own = tmp_path / "pkg" / "_sitecustomize.py"
    own.parent.mkdir()
    own.write_bytes(launcher.SITECUSTOMIZE.read_bytes())
    monkeypatch.setattr(launcher, "SITECUSTOMIZE", own)
    for compiled in (False, True):
        if compiled:
            py_compile.compile(str(own), doraise=True)
        run_dir = tmp_path / f"run-{compiled}"
        run_dir.mkdir()
        env = launcher._environment(run_dir, "abc")
        site = run_dir / "site" / "sitecustomize.py"
        assert site.read_bytes() == own.read_bytes()
        assert (site.parent / "__pycache__").exists() == compiled
        r = subprocess.run(
            [sys.executable, "-v", "-c", "pass"], env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        loaded = [
            t for t in r.stderr.splitlines() if "code object from" in t and str(site.parent) in t
        ]
        suffix = ".pyc" if compiled else ".py"
        assert len(loaded) == 1 and loaded[0].strip("'").endswith(suffix), loaded


def test_the_start_up_watch_names_the_timeout_as_the_trail_does() -> None:
    from gyreprof.commands import _startup
    from gyreprof.integrations._auto import trail

    assert _startup.ENV_STARTUP_TIMEOUT == trail.ENV_STARTUP_TIMEOUT


def test_the_trigger_alone_gives_the_hooked_spec(tmp_path: Path) -> None:
    """With no other finder of gyreprof's on ``sys.meta_path`` (the start-up trail ended or
    never opened), the module whose import fires the trigger still gets its patches."""
    code = (
        "import os, sys\n"
        f"os.environ['GYREPROF_RUN_DIR'] = {str(tmp_path)!r}\n"
        "from gyreprof.integrations._auto import bootstrap\n"
        "assert 'queue' not in sys.modules\n"
        "sys.meta_path.insert(0, bootstrap._TRIGGER)\n"
        "import queue\n"
        "from gyreprof.integrations._instrument import is_wrapped\n"
        "print(is_wrapped(queue.Queue.get), bootstrap._TRIGGER in sys.meta_path)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False"]


def test_a_patch_loaded_halfway_through_a_standard_import_breaks_nothing(tmp_path: Path) -> None:
    """The patches load on the first import of a watched module, maybe while the module
    that imports it is half done (``concurrent.futures`` runs ``concurrent.futures._base``
    first). What they import then must not need that module: wrapt 2, which imports
    asyncio (and so ``concurrent.futures``) when it is imported, failed here with
    "cannot access submodule 'futures' of module 'concurrent'"."""
    script = tmp_path / "cf.py"
    script.write_text(
        "import concurrent.futures\n"
        "import asyncio, queue\n"
        "from gyreprof.integrations._instrument import is_wrapped\n"
        "print('OK', concurrent.futures.FIRST_COMPLETED, is_wrapped(queue.Queue.get))\n"
    )
    r = subprocess.run(
        [*RUN, sys.executable, str(script)], env=_env(), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK FIRST_COMPLETED True" in r.stdout, r.stdout + r.stderr[-3000:]
