"""``gyreprof sweep [options] -- COMMAND``: sweep an unmodified script under the launcher.

The command's one brace list (:mod:`gyreprof.analysis.sweep.script`) gives the values;
each value (and repeat) runs the command once under ``gyreprof run``'s launcher (the
same ``sitecustomize``, run folder and records: :mod:`gyreprof.commands.run`), in a
session of its own, for at most ``max_s`` seconds or ``max_steps`` trainer steps. When
the bound is hit the whole process group gets SIGINT (a Python script unwinds and
saves its records), SIGTERM ``INT_GRACE_S`` later if it is still there (the records
are saved on SIGTERM too), and whatever is left is killed once the records were read.

What one run measured (one :class:`~gyreprof.analysis.sweep.record.RunResult`):

* **samples/s from sampling time only**: the env steps of every process of the run
  (vector-env workers included) over the time the *driving* process (the main one:
  the process that runs the loop) spent in the sampler's phases (env steps and
  resets, vector-env send and wait, the policy's forward, generation); the harness
  around them, the update and the start-up are not in it;
* the sampler's phase breakdown (time per env step and share of the sampling time);
* peak RSS of the whole process tree (polled with psutil), the main process apart;
* the run's verdict: the side it is bound by and the trainer's wait ratio.

The values, repeats, stop rule, recommendation and the result are the factory
sweep's (:func:`gyreprof.analysis.sweep.api.run_values`, ``conclude``).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyreprof.analysis.sweep.record import RunResult
from gyreprof.analysis.sweep.result import SweepResult
from gyreprof.analysis.sweep.script import ScriptSweep

#: how long a run bounded by --max-s / --max-steps may take to leave after SIGINT, and
#: after SIGTERM, before it is killed
INT_GRACE_S = 5.0
TERM_GRACE_S = 5.0
#: how long the run's other processes may take to save their records after the main one
SAVE_GRACE_S = 5.0
_POLL_S = 0.05
_STEPS_LOOK_S = 0.25
_OUTPUT_TAIL = 4000


@dataclass(frozen=True)
class ScriptPlan:
    """Every setting of a script sweep (what ``conclude`` reads, and the bounds)."""

    param: str
    values: tuple[int | float, ...]
    fixed: dict[str, Any]
    repeats: int
    flat_within: float
    memory_limit: int | None
    max_s: float
    max_steps: int | None
    isolate: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)


def sweep_script(
    spec: ScriptSweep,
    *,
    max_s: float,
    max_steps: int | None,
    repeats: int,
    flat_within: float,
    memory_limit: int | None,
    progress: bool,
) -> SweepResult:
    """Run ``spec``'s command for each value under the launcher; the sweep's result."""
    from gyreprof.analysis.sweep.api import conclude, run_values

    fixed = {k: v for k, v in spec.environment(spec.values[0]).items()}
    if spec.where == "env":
        fixed.pop(spec.param, None)
    plan = ScriptPlan(
        param=spec.param,
        values=spec.values,
        fixed=fixed,
        repeats=repeats,
        flat_within=flat_within,
        memory_limit=memory_limit,
        max_s=max_s,
        max_steps=max_steps,
    )
    points, stop, stopped_idx = run_values(
        spec.param,
        spec.values,
        lambda value: run_once(spec, value, max_s=max_s, max_steps=max_steps),
        repeats=repeats,
        flat_within=flat_within,
        memory_limit=memory_limit,
        progress=progress,
    )
    phases: list[str] = []
    for p in points:
        for r in p.runs:
            phases += [n for n in r.phases if n not in phases]
    settings = {
        "kind": "script",
        "command": spec.template(),
        "env": dict(spec.env),
        "max_s": max_s,
        "max_steps": max_steps,
        "repeats": repeats,
        "isolate": True,
        "flat_within": flat_within,
        "memory_limit_bytes": memory_limit,
        "phases": phases,
    }
    return conclude(plan, spec.template(), settings, points, stop, stopped_idx)


# ------------------------------------------------------------------ one run


@dataclass
class _Watched:
    """What the parent saw of a run's process tree while it ran."""

    own_peak: int = 0
    children_peak: int = 0
    tree_peak: int = 0
    processes: int = 0
    bound: str | None = None  # "max_s" or "max_steps" when the sweep stopped it
    signals: list[str] = field(default_factory=list)


def _rss(p: Any) -> int:
    import psutil

    try:
        return int(p.memory_info().rss)
    except psutil.Error:
        return 0


def _look(tree: Any, seen: _Watched) -> list[Any]:
    procs = tree.poll_tree()
    if procs:
        own = _rss(procs[0])
        rest = sum(_rss(p) for p in procs[1:])
        seen.own_peak = max(seen.own_peak, own)
        seen.children_peak = max(seen.children_peak, rest)
        seen.tree_peak = max(seen.tree_peak, own + rest)
        seen.processes = max(seen.processes, len(procs) - 1)
    return list(procs)


def _trainer_steps(procs: Sequence[Any]) -> int:
    """Trainer steps the run's live segments count so far (every process of the tree)."""
    from gyreprof.diagnostics._doctor_evidence import _launcher_events

    total = 0
    for p in procs:
        events = _launcher_events(p.pid)
        if events:
            total += int(events.get("(trainer steps)", 0))
    return total


def _wait_exit(tree: Any, seen: _Watched, until: float) -> bool:
    """Poll the tree's memory until the main process exits (True) or ``until`` passes."""
    while not tree.exited():
        if time.monotonic() >= until:
            return False
        _look(tree, seen)
        time.sleep(_POLL_S)
    return True


def _supervise(tree: Any, seen: _Watched, max_s: float, max_steps: int | None) -> None:
    """Wait for the run to end or hit its bound; then SIGINT, SIGTERM (see the module)."""
    t0 = time.monotonic()
    next_steps = t0 + _STEPS_LOOK_S
    while not tree.exited():
        procs = _look(tree, seen)
        now = time.monotonic()
        if now - t0 >= max_s:
            seen.bound = "max_s"
            break
        if max_steps is not None and now >= next_steps:
            next_steps = now + _STEPS_LOOK_S
            if _trainer_steps(procs) >= max_steps:
                seen.bound = "max_steps"
                break
        time.sleep(_POLL_S)
    if seen.bound is None:
        return
    for sig, grace in ((signal.SIGINT, INT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S)):
        seen.signals.append(signal.Signals(sig).name)
        tree.signal_group(sig)
        if _wait_exit(tree, seen, time.monotonic() + grace):
            return


def _exit_code(pid: int) -> tuple[int | None, int | None]:
    """(exit code as ``gyreprof run`` passes it on, signal that ended it) of the exited
    but not reaped process ``pid``."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError):
        return None, None
    if info is None:
        return None, None
    if info.si_code == os.CLD_EXITED:
        return info.si_status, None
    return 128 + info.si_status, info.si_status


def _child_setup() -> Any:
    """The child's start: SIGINT back to its default (a sweep started in the background
    inherits it ignored, and SIGINT is how a bounded run is asked to stop), and the
    launcher's death delivered as SIGTERM (``gyreprof run`` does the same)."""
    from gyreprof.commands.run import PR_SET_PDEATHSIG, _death_signal_setter

    prctl = _death_signal_setter()
    parent = os.getpid()

    def in_child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(128 + signal.SIGTERM)

    return in_child


def run_once(
    spec: ScriptSweep, value: int | float, *, max_s: float, max_steps: int | None
) -> RunResult:
    """Run the command of ``value`` under the launcher, bounded; what it measured."""
    from gyreprof._support.subproc import ChildTree
    from gyreprof.commands import run as launcher
    from gyreprof.integrations._auto import options

    command = spec.command(value)
    argv = launcher._resolve(command)
    if isinstance(argv, int):
        return RunResult(
            status="usage",
            stage="start",
            error=f"cannot start {command[0]} (exit code {argv}; see above)",
        )
    launcher._remove_stale_run_dirs()
    run_dir = Path(tempfile.mkdtemp(prefix=launcher.RUN_DIR_PREFIX))
    run_id = os.urandom(6).hex()
    lock = -1
    tree = None
    t0 = time.monotonic()
    try:
        lock = launcher._hold_run_dir(run_dir)
        env = launcher._environment(run_dir, run_id)
        env.update(options.environment(None, None, None, stacks_hz=0.0))
        env.update(spec.environment(value))
        log_path = run_dir / "sweep-output.log"
        with open(log_path, "wb") as log:
            try:
                tree = ChildTree.start(
                    argv, env=env, stdout=log, stderr=log, preexec_fn=_child_setup()
                )
            except (OSError, ValueError) as exc:
                return RunResult(
                    status="usage", stage="start", error=f"cannot start {argv[0]}: {exc}"
                )
        seen = _Watched()
        _supervise(tree, seen, max_s, max_steps)
        wall_s = time.monotonic() - t0
        code, sig = _exit_code(tree.pid)
        launcher._wait_for_run(run_dir, run_id, SAVE_GRACE_S)
        output = _tail(log_path)
        return _measure(run_dir, run_id, command, code, sig, seen, tree.pid, wall_s, output)
    finally:
        if tree is not None:
            tree.end()
        shutil.rmtree(run_dir, ignore_errors=True)
        if lock >= 0:
            os.close(lock)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _OUTPUT_TAIL))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _sum_ns(summary: Any, name: str) -> float:
    st = summary.phases.get(name) if name in summary.phases else None
    if st is None or not st.count:
        return 0.0
    v = float(st.sum_ns)
    return 0.0 if math.isnan(v) else v


def _measure(
    run_dir: Path,
    run_id: str,
    command: list[str],
    code: int | None,
    sig: int | None,
    seen: _Watched,
    pid: int,
    wall_s: float,
    output: str,
) -> RunResult:
    """Read the run's records (as ``gyreprof run`` does) into a RunResult."""
    from gyreprof.integrations._auto import records as rec
    from gyreprof.integrations._auto.collect import collect_run

    stopped = seen.bound is not None
    stage = f"stopped at {seen.bound} ({', '.join(seen.signals)})" if stopped else "exited"
    memory: dict[str, Any] = {
        "peak_rss_bytes": seen.own_peak or None,
        "children_rss_bytes": seen.children_peak,
        "peak_tree_rss_bytes": seen.tree_peak or None,
        "rss_seen_bytes": seen.tree_peak or None,
        "threads": {"child_processes": seen.processes},
        "pid": pid,
        "exit_code": code,
        "wall_s": wall_s,
        "stage": stage,
    }
    try:
        report = collect_run(
            run_dir,
            run_id,
            command,
            code,
            signal_num=sig if not stopped else None,
            received=tuple(seen.signals),
        )
    except Exception as exc:  # noqa: BLE001 - reported for this value, the sweep goes on
        return RunResult(
            status="error",
            error=f"the run's records could not be read ({type(exc).__name__}: {exc})",
            output=output,
            **memory,
        )
    if report.sampler is None:
        return _nothing(report, code, sig, stopped, output, memory)
    merged = report.sampler.summary()
    samples = int(merged.phases["env_step"].count) if "env_step" in merged.phases else 0
    got = [e for e in report.contributed if e.sampler_figures() is not None]
    drivers = [e for e in got if e.role == "main"] or [e for e in got if e.role != "env_worker"]
    summaries = [e.sampler_figures() for e in drivers]
    names = [n for n in rec.SAMPLER_PHASES if any(_sum_ns(s, n) > 0 for s in summaries)]
    per_phase = {n: sum(_sum_ns(s, n) for s in summaries) for n in names}
    sample_ns = sum(per_phase.values())
    if samples <= 0 or sample_ns <= 0:
        what = "stepped no gymnasium env" if samples <= 0 else "spent no time in its sampler"
        return RunResult(
            status="invalid",
            error=(
                f"the command {what} under the launcher, so there are no samples/s to compare "
                "(a script sweep counts env steps: gymnasium, SB3, TorchRL)"
            ),
            output=output,
            **memory,
        )
    env_step = merged.phases["env_step"]
    phases = {
        n: {
            "per_call_ns": per_phase[n] / samples,
            "share": per_phase[n] / sample_ns,
            "p50_ns": float(merged.phases[n].p50),
            "p99_ns": float(merged.phases[n].p99),
            "count_per_call": sum(s.phases[n].count for s in summaries) / samples,
        }
        for n in names
    }
    verdict = report.verdict
    wait = report.wait.ratio if report.wait is not None else None
    if wait is None and verdict is not None:
        wait = verdict.wait_ratio
    notes = []
    if not stopped and code not in (0, None):
        notes.append(
            f"the command exited with code {code} before the bound: the figures cover what "
            "it recorded until then"
        )
    if len(seen.signals) > 1:
        notes.append(
            f"the command did not stop within {INT_GRACE_S:g} s of SIGINT; it was sent SIGTERM"
        )
    return RunResult(
        status="ok",
        samples=samples,
        calls=samples,
        warmup_calls=0,
        sample_time_ns=sample_ns,
        samples_per_s=samples / (sample_ns / 1e9),
        samples_per_call_min=1,
        samples_per_call_max=1,
        count_rule="env steps of every process (one sample each)",
        call={
            "mean_ns": sample_ns / samples,
            "p50_ns": float(env_step.p50),
            "p99_ns": float(env_step.p99),
            "min_ns": float(env_step.min),
            "max_ns": float(env_step.max),
        },
        phases=phases,
        verdict_bound=None if verdict is None else str(verdict.bound),
        wait_ratio=None if wait is None or math.isnan(wait) else float(wait),
        notes=tuple(notes),
        summary_data=merged.to_dict(),
        **memory,
    )


def _nothing(
    report: Any,
    code: int | None,
    sig: int | None,
    stopped: bool,
    output: str,
    memory: dict[str, Any],
) -> RunResult:
    """A run that recorded no sampler: why, in the launcher's words."""
    why = report.nothing_recognised() if not report.recognised else "no sampler phase recorded"
    last = [ln for ln in output.strip().splitlines() if ln.strip()][-1:]
    if last and code not in (0, None) and not stopped:
        why += f"; its output ended with: {last[0].strip()[:300]}"
    if sig is not None and not stopped:
        status = "crash"
    elif stopped:
        status = "timeout"
    elif code not in (0, None):
        status = "error"
    else:
        status = "invalid"
    return RunResult(status=status, error=why, output=output, **memory)
