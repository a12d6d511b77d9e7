"""``gyreprof run [--json FILE] [--html FILE] [--save DIR] -- COMMAND [ARGS...]``.

Runs COMMAND with every Python process of it instrumented (a ``sitecustomize``
first on ``PYTHONPATH`` starts ``gyreprof.integrations._auto`` in each one:
the main process and the workers started by fork, forkserver or spawn).
gymnasium, stable-baselines3 and TorchRL are recognised where importable. At
the end one report goes to stderr (COMMAND's stdout stays its own): sampler
phases merged over the processes, the trainer's wait ratio, the verdict and
which processes contributed. COMMAND's exit code passes through (128+N when a
signal N ended it); 127 when it is not found.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from gyreprof._errors import UsageError

SITECUSTOMIZE = '''"""Written by `gyreprof run`: instrument this process, then run any other sitecustomize."""

import os as _os
import sys as _sys


def _gyreprof_start():
    try:
        from gyreprof.integrations._auto import bootstrap
    except ImportError:
        extra = _os.environ.get("GYREPROF_RUN_PATH")
        if not extra:
            return
        _sys.path.append(extra)
        try:
            from gyreprof.integrations._auto import bootstrap
        except ImportError as exc:
            print(f"gyreprof run: pid {_os.getpid()} ({_sys.executable}) is not instrumented: "
                  f"{exc}", file=_sys.stderr)
            return
    try:
        bootstrap.start()
    except Exception as exc:
        print(f"gyreprof run: pid {_os.getpid()} is not instrumented: {exc!r}", file=_sys.stderr)


def _gyreprof_chain():
    here = _os.path.dirname(_os.path.abspath(__file__))
    mine = _sys.modules.pop("sitecustomize", None)
    saved = list(_sys.path)
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if exc.name != "sitecustomize":
            print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\\n{exc!r}",
                  file=_sys.stderr)
        if mine is not None:
            _sys.modules["sitecustomize"] = mine
    except Exception as exc:
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\\n{exc!r}",
              file=_sys.stderr)
    finally:
        _sys.path[:] = saved


if _os.environ.get("GYREPROF_RUN_DIR"):
    _gyreprof_start()
_gyreprof_chain()
'''


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="profile an unmodified training script (gymnasium, SB3, TorchRL recognised)",
        description=(
            "Run COMMAND with every Python process of it instrumented: gymnasium env steps, "
            "vector-env send/wait, stable-baselines3 rollouts and updates, TorchRL collectors. "
            "At the end print one report (to stderr): sampler phases merged over all processes, "
            "the trainer's wait ratio, the verdict and which processes contributed. A first "
            "argument ending in .py runs with this Python. The exit code is COMMAND's."
        ),
        usage="gyreprof run [--json FILE] [--html FILE] [--save DIR] -- COMMAND [ARGS...]",
    )
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (gyreprof.run/1)")
    p.add_argument("--html", metavar="FILE", help="write the sampler's HTML report (plot extra)")
    p.add_argument("--save", metavar="DIR", help="keep every process's raw snapshots in DIR")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    p.set_defaults(func=run)


def _check_output_file(opt: str, path: str | None) -> None:
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{opt} {path}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if p.exists():
        ok = os.access(p, os.W_OK)
    else:
        ok = parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
    if not ok:
        why = "no such directory" if not parent.is_dir() else "not writable"
        raise UsageError(f"{opt} {path}: cannot write there ({why}); nothing was run")


def _check_save_dir(path: str | None) -> None:
    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--save {path}: exists and is not a directory; nothing was run")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--save {path}: {probe} is not writable; nothing was run")


def _resolve(command: list[str]) -> list[str] | int:
    """The argv to start, or an exit code (127 not found, 126 not executable)."""
    first = command[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            print(f"gyreprof run: {first}: no such script", file=sys.stderr)
            return 127
        return [sys.executable, *command]
    if os.sep in first:
        if not Path(first).exists():
            print(f"gyreprof run: {first}: command not found", file=sys.stderr)
            return 127
        if not os.access(first, os.X_OK) or Path(first).is_dir():
            print(f"gyreprof run: {first}: not an executable file", file=sys.stderr)
            return 126
        return command
    found = shutil.which(first)
    if found is None:
        print(
            f"gyreprof run: {first}: command not found (not on PATH); give the path of the "
            "program, or a script ending in .py",
            file=sys.stderr,
        )
        return 127
    return command


def _environment(run_dir: Path, run_id: str) -> dict[str, str]:
    import gyreprof

    env = dict(os.environ)
    site = run_dir / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(site) + (os.pathsep + old if old else "")
    env["GYREPROF_RUN_DIR"] = str(run_dir)
    env["GYREPROF_RUN_ID"] = run_id
    env["GYREPROF_RUN_PATH"] = str(Path(gyreprof.__file__).resolve().parent.parent)
    env.pop("GYREPROF_RUN_MAIN_PID", None)
    return env


def _save_raw(report: Any, directory: Path) -> list[Path]:
    import json

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for e in report.processes:
        for side in ("sampler", "trainer"):
            snap = getattr(e, side)
            if snap is not None:
                path = directory / f"{e.role}-{e.pid}.{side}.snap"
                path.write_bytes(snap.to_bytes())
                written.append(path)
    index = directory / "processes.json"
    index.write_text(json.dumps([e.to_dict() for e in report.processes], indent=2) + "\n")
    written.append(index)
    return written


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "give the command to profile after --, e.g. gyreprof run -- python train.py"
        )
    _check_output_file("--json", args.json)
    _check_output_file("--html", args.html)
    if args.html:
        from gyreprof.commands._args import require_extra

        require_extra("--html (its pictures)", "matplotlib", "plot")
    _check_save_dir(args.save)
    argv = _resolve(command)
    if isinstance(argv, int):
        return argv

    run_dir = Path(tempfile.mkdtemp(prefix="gyreprof-run-"))
    run_id = uuid.uuid4().hex[:12]
    try:
        env = _environment(run_dir, run_id)
        return _run_and_report(args, command, argv, env, run_dir, run_id)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _run_and_report(
    args: argparse.Namespace,
    command: list[str],
    argv: list[str],
    env: dict[str, str],
    run_dir: Path,
    run_id: str,
) -> int:
    from gyreprof.integrations._auto.collect import collect_run

    signals: list[int] = []
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        print(f"gyreprof run: cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126

    def forward(signum: int, frame: Any) -> None:
        signals.append(signum)
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        code = child.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    elapsed = time.monotonic() - started
    exit_code = code if code >= 0 else 128 - code
    notes = []
    if signals:
        names = ", ".join(signal.Signals(s).name for s in signals)
        notes.append(f"gyreprof run received {names} and passed it to the command")
    report = collect_run(run_dir, run_id, command, exit_code, notes=notes)
    from gyreprof._format import safe_text

    print(f"\n{safe_text(str(report))}\n(wall time {elapsed:.3g} s)", file=sys.stderr, flush=True)
    if args.json:
        try:
            report.to_json(args.json, indent=2)
        except OSError as exc:
            print(f"gyreprof run: --json {args.json}: {exc}", file=sys.stderr)
    if args.html:
        _write_html(report, args.html, command)
    if args.save:
        try:
            _save_raw(report, Path(args.save))
        except OSError as exc:
            print(f"gyreprof run: --save {args.save}: {exc}", file=sys.stderr)
    return exit_code


def _write_html(report: Any, path: str, command: list[str]) -> None:
    if report.sampler is None:
        print(f"gyreprof run: --html {path}: no sampler phases to show", file=sys.stderr)
        return
    try:
        from gyreprof.export import html_report

        html_report(report.sampler, path, title="gyreprof run: " + " ".join(command))
    except (ImportError, ValueError, OSError) as exc:
        print(f"gyreprof run: --html {path}: {exc}", file=sys.stderr)
