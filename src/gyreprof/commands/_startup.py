"""``gyreprof run --startup-timeout S --stall-s T``: say what each process does when
nothing starts, and whenever nothing moves.

When no process of the run has recorded a step or phase ``S`` seconds after the
command started, print (stderr) for each process still running: its start-up
trail (the import in progress, the exceptions swallowed, where its main thread
waits, from the stacks ``faulthandler`` dumped into the trail at ``S`` seconds)
and the doctor's state from a short look. Once; the run goes on. A first
``env.reset()`` alone is not a start: only an env step, a trainer phase or step is.

After the start, the watch goes on for the whole run: when no trainer step and no
sampler progress (env steps, trainer phases: the events the run's live segments
count, resets left out) was recorded for ``T`` seconds, it prints the same kind of
report headed "nothing moved for T s" (the doctor's diagnosis of each process: a dead
feeder first, where each thread waits), once per stall; a "moves again" line when
events come back. The longest stall is kept (:attr:`Watch.stalls`) for the final
report.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from gyreprof.model.trail_file import TrailInfo

#: the trail's name for it (``trail.ENV_STARTUP_TIMEOUT``; tests/test_run_light_start.py
#: checks that they agree): the trail is read only if the watch has something to say, so
#: the launcher does not import it before it starts the command
ENV_STARTUP_TIMEOUT = "GYREPROF_STARTUP_TIMEOUT"

MAX_PROCESSES = 8
_DUMP_WAIT_S = 3.0  # how long to wait for a process's own stack dump to reach its trail
_DOCTOR_S = 0.5


#: how long nothing may move before the watch says so (``gyreprof run --stall-s``)
STALL_S = 60.0
#: events that are not a start nor progress by themselves (a first reset)
_NOT_PROGRESS = ("env_reset",)


class Watch:
    def __init__(
        self,
        run_dir: Path,
        timeout_s: float,
        started: float,
        stall_s: float = 0.0,
    ) -> None:
        self.run_dir = run_dir
        self.timeout_s = timeout_s
        self.deadline = started + timeout_s
        self.started = started
        self.done = timeout_s <= 0
        self.stall_s = stall_s
        self.moved = -1  # events counted at the last look (-1: not looked yet)
        self.moved_at = started
        self.stalled = False
        self.next_look = started + min(1.0, stall_s / 4) if stall_s > 0 else float("inf")
        #: (seconds nothing moved, the report's lines) of each stall seen, the last one
        #: updated until events come back or the run ends
        self.stalls: list[tuple[float, list[str]]] = []

    def next_wait(self, most: float) -> float:
        now = time.monotonic()
        when = self.next_look if self.done else min(self.deadline, self.next_look)
        return max(0.01, min(most, when - now))

    def check(self) -> None:
        now = time.monotonic()
        if now >= self.next_look:
            self.next_look = now + min(1.0, self.stall_s / 4)
            self._watch_stall(now)
        if self.done or now < self.deadline:
            return
        self.done = True
        if self._recorded() and self._progress_events() != 0:
            return
        try:
            text = self.report()
        except Exception as exc:  # noqa: BLE001 - the run itself matters more
            text = f"gyreprof run: no step or phase after {self.timeout_s:g} s ({exc!r})"
        print(text, file=sys.stderr, flush=True)

    def _progress_events(self) -> int | None:
        """Events the run's live segments count so far that are progress (env steps,
        trainer phases and steps; resets left out); None where none can be read."""
        try:
            from gyreprof.diagnostics._doctor_evidence import _launcher_events
        except ImportError:
            return None
        total: int | None = None
        for path in self._trails()[: MAX_PROCESSES * 2]:
            events = _launcher_events(int(path.name[:-6]))
            if events is None:
                continue
            total = (total or 0) + sum(n for k, n in events.items() if k not in _NOT_PROGRESS)
        return total

    def _watch_stall(self, now: float) -> None:
        try:
            moved = self._progress_events()
        except Exception:  # noqa: BLE001 - the run itself matters more
            return
        if moved is None:
            return
        if moved != self.moved:
            if self.stalled:
                print(
                    f"gyreprof run: moves again after {now - self.moved_at:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            self.moved, self.moved_at, self.stalled = moved, now, False
            return
        if moved <= 0 or now - self.moved_at < self.stall_s:
            if self.stalled and self.stalls:
                self.stalls[-1] = (now - self.moved_at, self.stalls[-1][1])
            return
        if self.stalled:
            self.stalls[-1] = (now - self.moved_at, self.stalls[-1][1])
            return
        self.stalled = True
        try:
            lines = self.stall_report(now - self.moved_at)
        except Exception as exc:  # noqa: BLE001 - the run itself matters more
            lines = [f"gyreprof run: nothing moved for {now - self.moved_at:.0f} s ({exc!r})"]
        self.stalls.append((now - self.moved_at, lines))
        print("\n".join(lines), file=sys.stderr, flush=True)

    def stall_report(self, still_s: float) -> list[str]:
        """Each live process of the run: the doctor's diagnosis, where its threads wait."""
        lines = [
            f"gyreprof run: nothing moved for {still_s:.0f} s (no trainer step, no sampler "
            f"progress; --stall-s {self.stall_s:g}); what each process is doing now (the "
            "run goes on):"
        ]
        alive = [p for p in self._trails() if _alive(int(p.name[:-6]))]
        for path in alive[:MAX_PROCESSES]:
            pid = int(path.name[:-6])
            lines.append(f"  pid {pid}:")
            lines += [f"    {t}" for t in _doctor_lines(pid, threads=True)]
        if not alive:
            lines.append("  no process of the run is alive")
        return lines

    def final_words(self, elapsed_s: float) -> list[str]:
        """What the final report says first of a run that stalled: how long nothing moved,
        where each process was, and what the numbers below cover."""
        if not self.stalls:
            return []
        still_s, lines = max(self.stalls, key=lambda s: s[0])
        if self.stalled:  # stalled to the end: count up to now
            still_s = max(still_s, time.monotonic() - self.moved_at)
        head = (
            f"this run stalled: nothing moved for {still_s:.0f} s of its {elapsed_s:.0f} s "
            "(no trainer step, no sampler progress)"
        )
        if self.stalled:
            head += " up to its end; the numbers below cover the time it moved"
        return [head] + [t[2:] for t in lines[1:]]

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
        from gyreprof.model import trail_file as trail

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
        from gyreprof.model import trail_file as trail

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


def _doctor_lines(pid: int, threads: bool = False) -> list[str]:
    from gyreprof.diagnostics.doctor import doctor

    try:
        d = doctor(pid, interval_s=_DOCTOR_S, samples=2, stacks=False)
    except Exception as exc:  # noqa: BLE001 - one process that cannot be read
        return [f"doctor: could not look ({type(exc).__name__}: {exc})"]
    out = [f"doctor: {d.state.upper()}"]
    lead = ("waits", "its main thread", "retrying", "main thread", "CPU")
    out += [e for e in d.evidence if e.startswith(lead)][:5]
    if threads:
        out += [f"thread {t.describe()}" for t in d.threads[:6]]
    return out


__all__ = ["ENV_STARTUP_TIMEOUT", "STALL_S", "Watch"]
