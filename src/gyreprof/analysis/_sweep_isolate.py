"""Parent side of isolated sweep runs: start a fresh interpreter per run, watch it, read it.

Each run gets its own temporary folder (see ``_sweep_worker`` for the files in
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

from gyreprof._subproc import request_stacks
from gyreprof.analysis._sweep_runner import STAGE_WORDS, where_it_was

_POLL_S = 0.1  # memory poll / wait granularity
_STACK_WAIT_S = 1.0  # how long a timed-out run gets to write its stacks
_EXIT_GRACE_S = 5.0  # a run that reported but does not exit is killed after this
_OUTPUT_TAIL = 2000  # characters of the run's own output kept with a failure

_BOOTSTRAP = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from gyreprof.analysis._sweep_worker import main; sys.exit(main(sys.argv[1:]))"
)


def _package_root() -> str:
    import gyreprof

    return str(Path(gyreprof.__file__).resolve().parent.parent)


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _tree_rss(procs: Sequence[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += int(p.memory_info().rss)
        except psutil.Error:
            continue
    return total


def _kill_tree(pid: int, known: Sequence[psutil.Process]) -> None:
    """SIGKILL the run's process group and every descendant seen, whatever group it joined."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    for p in known:
        try:
            p.kill()
        except psutil.Error:
            pass


def cgroup_oom_kills() -> int | None:
    """The ``oom_kill`` count of this process's cgroup (v2), or None where unreadable."""
    try:
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


def run_isolated(
    target: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    *,
    param: str,
    steps: int,
    warmup: int,
    phases: Sequence[str] | None,
    timeout_s: float | None,
) -> dict[str, Any]:
    """Run one value once in a fresh interpreter; return the run's result dict.

    Adds ``exit_code``, ``wall_s``, ``output`` (tail of the run's stdout/stderr),
    ``rss_seen_bytes`` (largest RSS of the run's process tree the parent saw) and,
    for a timed-out run, ``stacks``. A run that died or timed out comes back with
    ``status`` ``"crash"`` or ``"timeout"`` and the error in plain words.
    """
    with tempfile.TemporaryDirectory(prefix="gyreprof-sweep-") as tmp:
        run_dir = Path(tmp)
        spec = {
            "target": dict(target),
            "param": param,
            "steps": int(steps),
            "warmup": int(warmup),
            "phases": list(phases) if phases is not None else None,
            "sys_path": [p for p in sys.path if isinstance(p, str)],
        }
        (run_dir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        with open(run_dir / "kwargs.pkl", "wb") as fh:
            pickle.dump(dict(kwargs), fh)
        (run_dir / "stage").write_text("start", encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        argv = [sys.executable, "-c", _BOOTSTRAP.format(root=_package_root()), str(run_dir)]
        oom_before = cgroup_oom_kills()
        out_path = run_dir / "output.txt"
        t0 = time.monotonic()
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=hasattr(os, "setsid"),
            )
        try:
            ps = psutil.Process(proc.pid)
        except psutil.Error:
            ps = None
        known: list[psutil.Process] = []
        rss_seen = 0
        timed_out = False
        killed_after_report = False
        reported_at: float | None = None
        result_path = run_dir / "result.json"
        try:
            while True:
                try:
                    proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if ps is not None:
                    tree = _tree(ps)
                    for p in tree:
                        if p not in known:
                            known.append(p)
                    rss_seen = max(rss_seen, _tree_rss(tree))
                now = time.monotonic()
                if timeout_s is not None and now - t0 > timeout_s and reported_at is None:
                    if result_path.exists():
                        reported_at = now
                    else:
                        timed_out = True
                        break
                if reported_at is None and result_path.exists():
                    reported_at = now
                if reported_at is not None and now - reported_at > _EXIT_GRACE_S:
                    killed_after_report = True  # it reported but does not exit: kill it
                    break
        except BaseException:
            _kill_tree(proc.pid, known)
            proc.wait()
            raise
        stacks: str | None = None
        if timed_out:
            stacks = request_stacks(proc, run_dir / "stacks.txt", _STACK_WAIT_S)
        # the run is over (or abandoned): nothing it started may outlive it
        _kill_tree(proc.pid, known)
        rc = proc.wait()
        wall_s = time.monotonic() - t0
        try:
            stage = (run_dir / "stage").read_text(encoding="utf-8").strip() or "start"
        except OSError:
            stage = "start"
        output = out_path.read_text(encoding="utf-8", errors="replace")[-_OUTPUT_TAIL:]
        result: dict[str, Any] | None = None
        if result_path.exists():
            try:
                result = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                result = None
        oom_after = cgroup_oom_kills()
    if result is None:
        if timed_out:
            where = STAGE_WORDS.get(stage, stage)
            frame = _innermost_frame(stacks or "")
            at = f"; it was in {frame}" if frame else ""
            error = f"timed out after {timeout_s:g} s during {where} and was killed{at}"
            status = "timeout"
        else:
            delta = (
                oom_after - oom_before if oom_after is not None and oom_before is not None else None
            )
            error = _death(rc, stage, rss_seen, delta)
            site = _crash_site(output)
            last = _last_line(output)
            if site:
                error += f"; it was in {site}"
            elif last:
                error += f"; last output: {last}"
            status = "crash"
        result = {"status": status, "stage": stage, "error": error, "notes": []}
    elif rc != 0 and result.get("status") == "ok":
        if killed_after_report:
            note = (
                f"the run's process did not exit within {_EXIT_GRACE_S:g} s of reporting "
                "(a non-daemon thread left running?) and was killed; its figures stand"
            )
        else:
            note = f"the run's process exited with code {rc} after reporting; its figures stand"
        result.setdefault("notes", []).append(note)
    result["exit_code"] = rc
    result["wall_s"] = wall_s
    result["output"] = output if result.get("status") != "ok" else ""
    result["rss_seen_bytes"] = rss_seen
    if stacks:
        result["stacks"] = stacks
    return result
