"""Parent side of isolated sweep runs: start a fresh interpreter per run, watch it, read it.

Each run gets its own temporary folder (see ``worker`` for the files in
it) and its own session/process group, so a timeout can kill the run together
with any processes it started (vector-env workers). While it waits, the parent
polls the run's resident memory, so a run that dies still says how much memory
it had reached. A run that dies is told apart by how: exit code, the signal
(SIGKILL is what the out-of-memory killer sends; the cgroup's ``oom_kill``
counter confirms it where readable), or the timeout.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from gyreprof._support.subproc import ChildTree, package_root, request_stacks
from gyreprof.analysis.sweep.factory import STAGE_WORDS, where_it_was
from gyreprof.analysis.sweep.record import RunResult

_POLL_S = 0.1  # memory poll / wait granularity
_STACK_WAIT_S = 1.0  # how long a timed-out run gets to write its stacks
_EXIT_GRACE_S = 5.0  # a run that reported but does not exit is killed after this
_OUTPUT_TAIL = 2000  # characters of the run's own output kept with a failure

_BOOTSTRAP = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from gyreprof._support.subproc import bind_to_parent; bind_to_parent(sys.argv[1]); "
    "from gyreprof.analysis.sweep.worker import main; sys.exit(main(sys.argv[1:]))"
)


def _tree_rss(procs: Sequence[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += int(p.memory_info().rss)
        except psutil.Error:
            continue
    return total


def cgroup_oom_kills() -> int | None:
    """The ``oom_kill`` count of this process's cgroup (v2), or None where unreadable."""
    try:  # by hand: psutil has no cgroups
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            rel = line[3:].strip().lstrip("/")
            path = Path("/sys/fs/cgroup") / rel / "memory.events"
            try:
                text = path.read_text()
            except OSError:
                return None
            m = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
            return int(m.group(1)) if m else None
    return None


def _innermost_frame(stacks: str) -> str | None:
    """Where the main thread was, from a faulthandler dump (innermost frame first)."""
    block = stacks
    idx = stacks.find("Current thread")
    if idx < 0:
        idx = stacks.find("Thread")
    if idx >= 0:
        block = stacks[idx:]
        nxt = block.find("\nThread ", 1)
        if nxt > 0:
            block = block[:nxt]
    frames = [
        (m.group(1), int(m.group(2)), m.group(3))
        for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', block)
    ]
    return where_it_was(frames)


def _fmt_mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def _death(rc: int, stage: str, rss_seen: int, oom_delta: int | None) -> str:
    where = STAGE_WORDS.get(stage, stage)
    seen = f"; its memory had reached {_fmt_mib(rss_seen)} RSS" if rss_seen else ""
    if rc < 0:
        sig = -rc
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL:
            if oom_delta:
                why = "the out-of-memory killer (the cgroup's oom_kill count rose)"
            else:
                why = "most often the kernel's out-of-memory killer"
            return f"the run was killed by SIGKILL during {where} ({why}){seen}"
        if name in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE"):
            return f"the run crashed with {name} (a fault in native code) during {where}{seen}"
        if name == "SIGABRT":
            return f"the run aborted (SIGABRT) during {where}{seen}"
        return f"the run was killed by {name} during {where}{seen}"
    return (
        f"the run's process exited with code {rc} during {where} without reporting a "
        f"result (os._exit() or a fatal error){seen}"
    )


def _last_line(output: str) -> str | None:
    """The run's last meaningful line of output (faulthandler's module list skipped)."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith("Extension modules:"):
            return line[:300]
    return None


def _crash_site(output: str) -> str | None:
    """Where a fatal signal hit, from the faulthandler dump in the run's output."""
    idx = output.rfind("Fatal Python error")
    if idx < 0:
        return None
    return _innermost_frame(output[idx:])


def _spec(
    target: Mapping[str, Any],
    param: str,
    steps: int,
    warmup: int,
    phases: Sequence[str] | None,
) -> dict[str, Any]:
    return {
        "target": dict(target),
        "param": param,
        "steps": int(steps),
        "warmup": int(warmup),
        "phases": list(phases) if phases is not None else None,
        "sys_path": [p for p in sys.path if isinstance(p, str)],
    }


class _Watch:
    """Waits for the run's process while polling its tree's memory and the timeout."""

    def __init__(self, tree: ChildTree, result_path: Path) -> None:
        self.tree = tree
        self.result_path = result_path
        self.rss_seen = 0
        self.timed_out = False
        self.killed_after_report = False

    def wait(self, t0: float, timeout_s: float | None) -> None:
        """Return once the run exited (not reaped), timed out, or reported but lingers."""
        reported_at: float | None = None
        while not self.tree.wait(_POLL_S):
            self.rss_seen = max(self.rss_seen, _tree_rss(self.tree.poll_tree()))
            now = time.monotonic()
            if reported_at is None and self.result_path.exists():
                reported_at = now
            if timeout_s is not None and now - t0 > timeout_s and reported_at is None:
                self.timed_out = True
                return
            if reported_at is not None and now - reported_at > _EXIT_GRACE_S:
                self.killed_after_report = True  # it reported but does not exit: kill it
                return


def _read_result(path: Path) -> RunResult | str | None:
    """The run's record; the reason in words when it is there but unreadable; None if absent."""
    if not path.exists():
        return None
    try:
        return RunResult.from_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return f"its result file could not be read ({exc})"
    except ValueError as exc:
        return str(exc)


def _failed(
    watch: _Watch,
    rc: int,
    stage: str,
    output: str,
    stacks: str | None,
    timeout_s: float | None,
    oom_delta: int | None,
) -> RunResult:
    """The record of a run that died or timed out without reporting."""
    if watch.timed_out:
        where = STAGE_WORDS.get(stage, stage)
        frame = _innermost_frame(stacks or "")
        at = f"; it was in {frame}" if frame else ""
        return RunResult(
            status="timeout",
            stage=stage,
            error=f"timed out after {timeout_s:g} s during {where} and was killed{at}",
        )
    error = _death(rc, stage, watch.rss_seen, oom_delta)
    site = _crash_site(output)
    last = _last_line(output)
    if site:
        error += f"; it was in {site}"
    elif last:
        error += f"; last output: {last}"
    return RunResult(status="crash", stage=stage, error=error)


def run_isolated(
    target: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    *,
    param: str,
    steps: int,
    warmup: int,
    phases: Sequence[str] | None,
    timeout_s: float | None,
) -> RunResult:
    """Run one value once in a fresh interpreter; return the run's record.

    Adds ``exit_code``, ``wall_s``, ``output`` (tail of the run's stdout/stderr,
    failures only), ``rss_seen_bytes`` (largest RSS of the run's process tree
    the parent saw) and, for a timed-out run, ``stacks``. A run that died or
    timed out comes back with ``status`` ``"crash"`` or ``"timeout"``, and one
    whose result file cannot be read with ``"error"``, the error in plain words.
    """
    with tempfile.TemporaryDirectory(prefix="gyreprof-sweep-") as tmp:
        run_dir = Path(tmp)
        spec = _spec(target, param, steps, warmup, phases)
        (run_dir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        with open(run_dir / "kwargs.pkl", "wb") as fh:
            pickle.dump(dict(kwargs), fh)
        (run_dir / "stage").write_text("start", encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        argv = [sys.executable, "-c", _BOOTSTRAP.format(root=package_root()), str(run_dir)]
        oom_before = cgroup_oom_kills()
        out_path = run_dir / "output.txt"
        t0 = time.monotonic()
        with open(out_path, "wb") as out:
            tree = ChildTree.start(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        stacks: str | None = None
        try:
            watch = _Watch(tree, run_dir / "result.json")
            watch.wait(t0, timeout_s)
            if watch.timed_out:
                stacks = request_stacks(tree.proc, run_dir / "stacks.txt", _STACK_WAIT_S)
        finally:
            # the run is over, abandoned or interrupted: nothing it started may outlive it
            rc = tree.end()
        wall_s = time.monotonic() - t0
        try:
            stage = (run_dir / "stage").read_text(encoding="utf-8").strip() or "start"
        except OSError:
            stage = "start"
        output = out_path.read_text(encoding="utf-8", errors="replace")[-_OUTPUT_TAIL:]
        got = _read_result(run_dir / "result.json")
        oom_after = cgroup_oom_kills()
    if isinstance(got, RunResult):
        result = got
        if rc != 0 and result.ok:
            if watch.killed_after_report:
                note = (
                    f"the run's process did not exit within {_EXIT_GRACE_S:g} s of reporting "
                    "(a non-daemon thread left running?) and was killed; its figures stand"
                )
            else:
                note = f"the run's process exited with code {rc} after reporting; its figures stand"
            result = result.replace(notes=(*result.notes, note))
    elif isinstance(got, str):
        result = RunResult(status="error", stage=stage, error=f"the run finished but {got}")
    else:
        delta = oom_after - oom_before if oom_after is not None and oom_before is not None else None
        result = _failed(watch, rc, stage, output, stacks, timeout_s, delta)
    return result.replace(
        exit_code=rc,
        wall_s=wall_s,
        output=output if not result.ok else "",
        rss_seen_bytes=watch.rss_seen,
        stacks=stacks or result.stacks,
    )
