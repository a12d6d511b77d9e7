"""``gyreprof run --startup-timeout S``: say what each process does when nothing starts.

When no process of the run has recorded a step or phase ``S`` seconds after the
command started, print (stderr) for each process still running: its start-up
trail (the import in progress, the exceptions swallowed, where its main thread
waits, from the stacks ``faulthandler`` dumped into the trail at ``S`` seconds)
and the doctor's state from a short look. Once; the run goes on.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from gyreprof.integrations._auto.trail import TrailInfo

#: the trail's name for it (``trail.ENV_STARTUP_TIMEOUT``; tests/test_run_light_start.py
#: checks that they agree): the trail is read only if the watch has something to say, so
#: the launcher does not import it before it starts the command
ENV_STARTUP_TIMEOUT = "GYREPROF_STARTUP_TIMEOUT"

MAX_PROCESSES = 8
_DUMP_WAIT_S = 3.0  # how long to wait for a process's own stack dump to reach its trail
_DOCTOR_S = 0.5


class Watch:
    def __init__(self, run_dir: Path, timeout_s: float, started: float) -> None:
        self.run_dir = run_dir
        self.timeout_s = timeout_s
        self.deadline = started + timeout_s
        self.started = started
        self.done = False

    def next_wait(self, most: float) -> float:
        if self.done:
            return most
        return max(0.01, min(most, self.deadline - time.monotonic()))

    def check(self) -> None:
        if self.done or time.monotonic() < self.deadline:
            return
        self.done = True
        if self._recorded():
            return
        try:
            text = self.report()
        except Exception as exc:  # noqa: BLE001 - the run itself matters more
            text = f"gyreprof run: no step or phase after {self.timeout_s:g} s ({exc!r})"
        print(text, file=sys.stderr, flush=True)

    def _recorded(self) -> bool:
        try:
            names = os.listdir(self.run_dir)
            return any(n.endswith((".start.json", ".user.json")) for n in names)
        except OSError:
            return False

    def _trails(self) -> list[Path]:
        try:
            names = os.listdir(self.run_dir)
        except OSError:
            return []
        out = [self.run_dir / n for n in names if n.endswith(".trail") and n[:-6].isdigit()]
        return sorted(out, key=lambda p: int(p.name[:-6]))

    def report(self) -> str:
        from gyreprof.integrations._auto import trail

        elapsed = time.monotonic() - self.started
        lines = [
            f"gyreprof run: no step or phase recorded in {elapsed:.0f} s "
            f"(--startup-timeout {self.timeout_s:g}); what each process is doing now "
            "(the run goes on):"
        ]
        paths = self._trails()
        if not paths:
            lines.append("  no process of the run has started Python with gyreprof yet")
            return "\n".join(lines)
        alive = [p for p in paths if _alive(int(p.name[:-6]))]
        self._wait_for_dumps(alive[:MAX_PROCESSES])
        for path in paths[: MAX_PROCESSES * 2]:
            pid = int(path.name[:-6])
            info = trail.read_trail(path)
            if info is None:
                continue
            is_alive = path in alive
            lines.append(f"  pid {pid}{_command(info)}:" + ("" if is_alive else " (ended)"))
            lines += [f"    {t}" for t in trail.describe(info, alive=is_alive)]
            if is_alive and path in alive[:MAX_PROCESSES]:
                lines += [f"    {t}" for t in _doctor_lines(pid)]
        if len(paths) > MAX_PROCESSES * 2:
            lines.append(f"  ... and {len(paths) - MAX_PROCESSES * 2} more process(es)")
        return "\n".join(lines)

    def _wait_for_dumps(self, paths: list[Path]) -> None:
        from gyreprof.integrations._auto import trail

        end = time.monotonic() + _DUMP_WAIT_S
        waiting = list(paths)
        while waiting and time.monotonic() < end:
            still = []
            for p in waiting:
                info = trail.read_trail(p)
                if info is not None and not info.dumps and info.first_record is None:
                    if _alive(int(p.name[:-6])):
                        still.append(p)
            waiting = still
            if waiting:
                time.sleep(0.05)


def _command(info: TrailInfo) -> str:
    argv = (info.launch or {}).get("argv") or []
    if not argv:
        return ""
    text = " ".join(str(a) for a in argv)
    return f" ({text[:80]})"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read(4096).rpartition(b")")[2].split()[:1]
        return not (state and state[0] in (b"Z", b"X"))
    except OSError:
        return False


def _doctor_lines(pid: int) -> list[str]:
    from gyreprof.diagnostics.doctor import doctor

    try:
        d = doctor(pid, interval_s=_DOCTOR_S, samples=2, stacks=False)
    except Exception as exc:  # noqa: BLE001 - one process that cannot be read
        return [f"doctor: could not look ({type(exc).__name__}: {exc})"]
    out = [f"doctor: {d.state.upper()}"]
    out += [e for e in d.evidence if e.startswith(("retrying", "main thread", "CPU"))][:4]
    return out


__all__ = ["ENV_STARTUP_TIMEOUT", "Watch"]
