"""The child side of an isolated sweep run: one value, one repeat, a fresh interpreter.

Started by ``isolate.run_isolated`` as::

    python -c "<bootstrap>" RUN_DIR        (or: python -m gyreprof.analysis.sweep.worker RUN_DIR)

``RUN_DIR`` holds ``spec.json`` (the factory target, the swept parameter and
value, steps, warm-up, phase names and the parent's ``sys.path``) and
``kwargs.pkl`` (the keyword arguments for the factory). The child writes:

* ``stage`` — one word saying how far it got (``import``, ``build``, ``warmup``,
  ``measure``, ``report``, ``done``), overwritten at each stage, so the parent
  can say where a run hung or crashed;
* ``stacks.txt`` — every thread's stack, written by faulthandler when the parent
  sends SIGUSR1 before killing a run that timed out;
* ``result.json`` — the run's :class:`~gyreprof.analysis.sweep.record.RunResult`
  (``RunResult.to_json``: JSON tagged ``gyreprof.sweep-run/1``), written
  atomically at the end. No result file means the process died.

The exit code is 0 whenever a result was written (a factory that raised is a
result, not a crash).
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gyreprof._support.io import write_atomic
from gyreprof.analysis.sweep.factory import (
    SweepUsageError,
    describe_exc,
    inspect_factory,
    load_target,
    user_traceback,
)
from gyreprof.analysis.sweep.record import RunResult
from gyreprof.analysis.sweep.runner import run_once


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gyreprof.analysis.sweep.worker RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    stage_path = run_dir / "stage"

    def stage(name: str) -> None:
        try:
            write_atomic(stage_path, name.encode())
        except OSError:
            pass

    faulthandler.enable()  # a fatal signal prints the stacks into the captured output
    stacks = open(run_dir / "stacks.txt", "w", encoding="utf-8")  # noqa: SIM115 - process lifetime
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is not None:
        faulthandler.register(usr1, file=stacks, all_threads=True)
    stage("import")
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    parent_path = [p for p in spec.get("sys_path", []) if isinstance(p, str)]
    sys.path[:] = parent_path + [p for p in sys.path if p not in parent_path]

    result = _run(spec, run_dir, stage)
    result = result.replace(pid=os.getpid())
    result.to_json(run_dir / "result.json")  # atomically (gyreprof.render.json)
    stage("done")
    sys.stdout.flush()
    return 0


def _run(spec: dict[str, Any], run_dir: Path, stage: Callable[[str], None]) -> RunResult:
    """Load the factory and run once; a factory that cannot be loaded is a ``usage`` result."""
    target = spec["target"]
    try:
        factory = load_target(target)
        with open(run_dir / "kwargs.pkl", "rb") as fh:
            kwargs = pickle.load(fh)
        info = inspect_factory(
            factory, spec["param"], [k for k in kwargs if k != spec["param"]], spec.get("phases")
        )
    except SweepUsageError as exc:
        return RunResult(status="usage", stage="import", error=str(exc))
    except (Exception, SystemExit) as exc:
        return RunResult(
            status="usage",
            stage="import",
            error=(
                f"importing factory {target.get('module')}:{target.get('qualname')} raised "
                f"{describe_exc(exc)}"
            ),
            traceback=user_traceback(exc),
        )
    return run_once(
        factory,
        info,
        kwargs,
        param=spec["param"],
        steps=int(spec["steps"]),
        warmup=int(spec["warmup"]),
        stage=stage,
        in_process=False,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
