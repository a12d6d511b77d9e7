"""Read a ``gyreprof run`` directory back into one report.

A process counts as contributing when it left complete snapshots (its done
file) or, if it was killed first, a live segment of this run that can still be
read. Sampler snapshots are merged over every contributing process; the
trainer's over those whose training thread completed steps. The verdict comes from
``gp.diagnose`` on the two merged sides.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyreprof._errors import InvalidValueError
from gyreprof._serial import decode, encode, loads, plain, serial_format
from gyreprof.integrations._auto import records as rec

if TYPE_CHECKING:
    from gyreprof.analysis.verdict import Verdict
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.summary import Summary

FORMAT = "gyreprof.run/1"
HAND_MARKING = (
    'tp = gp.Profiler(["wait", "compute"], autosave="trainer.snap")',
    'with tp.phase("wait"): batch = next(batches)    # and: with tp.phase("compute"): update(batch)',
)


@dataclass
class ProcessEntry:
    """One process of the run: did its numbers reach the report, and how."""

    pid: int
    role: str
    contributed: bool
    source: str  # exit | sigterm | mp-exit | live segment | none
    loops: tuple[str, ...] = field(default=(), metadata={"serial": False})
    sampler: Any = field(default=None, metadata={"serial": False})  # Snapshot
    trainer: Any = field(default=None, metadata={"serial": False})  # Snapshot

    def to_dict(self) -> dict[str, Any]:
        """``pid``, ``role``, ``contributed``, ``source`` (gyreprof._serial)."""
        out: dict[str, Any] = plain(self)
        return out


#: a part of the run record nested whole, with its own format tag and version
_WHOLE = {"serial_whole": True}


def __getattr__(name: str) -> Any:
    # the types of RunRecord's parts, imported when a record is first read (gyreprof._serial
    # resolves them here), so importing this module (sb3, torchrl sessions) stays light
    if name == "Verdict":
        from gyreprof.analysis.verdict import Verdict

        return Verdict
    if name == "WaitReport":
        from gyreprof.analysis.wait import WaitReport

        return WaitReport
    if name == "Summary":
        from gyreprof.summary import Summary

        return Summary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@serial_format(FORMAT)
@dataclass(frozen=True)
class RunRecord:
    """What ``gyreprof run --json`` writes, format ``gyreprof.run/1``: the verdict, the
    wait report and the two merged summaries, each nested whole with its own format tag
    (a summary with its histograms), then the processes, the exit code and the notes."""

    verdict: Verdict | None = field(metadata=_WHOLE)
    wait: WaitReport | None = field(metadata=_WHOLE)
    sampler: Summary | None = field(metadata=_WHOLE)
    trainer: Summary | None = field(metadata=_WHOLE)
    processes: list[ProcessEntry]
    exit_code: int | None
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record again from :meth:`to_dict`; ``CorruptDataError`` naming what is wrong."""
        return decode(cls, data)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecord:
        return loads(cls, text)


@dataclass
class RunReport:
    """Everything ``gyreprof run`` reports; ``to_dict()`` is format ``gyreprof.run/1``."""

    command: list[str]
    exit_code: int | None
    processes: list[ProcessEntry]
    sampler: Any = None  # merged Snapshot or None
    trainer: Any = None  # merged Snapshot or None
    wait: Any = None  # WaitReport or None
    verdict: Any = None  # Verdict or None
    notes: list[str] = field(default_factory=list)
    python_processes: int = 0
    ended_by: str | None = None  # the signal that ended the command ("SIGSEGV"), if one did

    @property
    def contributed(self) -> list[ProcessEntry]:
        return [p for p in self.processes if p.contributed]

    @property
    def missing(self) -> list[ProcessEntry]:
        return [p for p in self.processes if not p.contributed]

    @property
    def recognised(self) -> bool:
        return self.sampler is not None or self.trainer is not None

    def record(self) -> RunRecord:
        """What is written of the report (:class:`RunRecord`)."""
        return RunRecord(
            verdict=self.verdict,
            wait=self.wait,
            sampler=self.sampler.summary() if self.sampler is not None else None,
            trainer=self.trainer.summary() if self.trainer is not None else None,
            processes=list(self.processes),
            exit_code=self.exit_code,
            notes=list(self.notes),
        )

    def to_dict(self) -> dict[str, Any]:
        """Format ``gyreprof.run/1`` (:class:`RunRecord`; strict JSON: ``null`` for a
        missing figure)."""
        return self.record().to_dict()

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """Strict JSON text of :meth:`to_dict`; written to ``path`` as well when given."""
        from gyreprof.render import json as render_json  # here: sessions import this module

        return render_json.write(self.to_dict(), path, indent=indent)

    def processes_line(self) -> str:
        from gyreprof.render import text as render_text

        return render_text.run_processes(self)

    def to_markdown(self) -> str:
        from gyreprof.render import markdown as render_markdown

        return render_markdown.run_report(self)

    def __str__(self) -> str:
        from gyreprof.render import text as render_text

        return render_text.run_report(self)

    def nothing_recognised(self) -> str:
        if self.ended_by is not None:
            return (
                f"nothing recognised: the command ended by {self.ended_by} before any step or "
                "phase was recorded (what its start-up trail shows follows)"
            )
        if self.python_processes == 0:
            why = (
                "no Python process of this command was instrumented (is it a Python program? "
                "`python -I`, `-E` and `-S` skip the start-up hook)"
            )
        else:
            why = (
                f"{self.python_processes} Python process(es) ran, but none stepped a gymnasium "
                "env, ran a stable-baselines3 algorithm or iterated a TorchRL collector"
            )
        return f"nothing recognised: {why}. Mark the phases by hand:\n    " + "\n    ".join(
            HAND_MARKING
        )


def _has_data(snap: Any) -> bool:
    return bool(snap is not None and snap.summary().events > 0)


def _read_live(run_id: str, pids: set[int]) -> dict[int, dict[str, Any]]:
    """Snapshots from the live segments this run left (processes that could not save)."""
    import gyreprof as gp

    out: dict[int, dict[str, Any]] = {}
    names = {rec.segment_name(run_id, side): side for side in ("sampler", "trainer")}
    from gyreprof.live.reader import drop_folded

    try:
        # per_thread profilers: threads folded into a retired segment are read there only
        entries = drop_folded(gp.live.list())
    except Exception:  # noqa: BLE001 - one bad segment must not cost the report
        return out
    for e in entries:
        side = names.get(e.name or "")
        if side is None:
            continue
        if e.pid in pids:  # a live one: a process still running after the launcher's wait
            try:
                snap = gp.live.attach(e.path).snapshot()
                slot = out.setdefault(e.pid, {})
                slot[side] = gp.merge([slot[side], snap]) if side in slot else snap
            except Exception:  # noqa: BLE001 - a segment that cannot be read is not read
                continue
        if not e.alive:
            try:
                os.unlink(e.path)
            except OSError:
                pass
    return out


def _merge(snaps: list[Any]) -> Any:
    import gyreprof as gp

    snaps = [s for s in snaps if _has_data(s)]
    if not snaps:
        return None
    return gp.merge(snaps)


_PHASES = {"sampler": rec.SAMPLER_PHASES, "trainer": rec.TRAINER_PHASES}


def _merge_noting(snaps: list[Any], side: str, notes: list[str]) -> Any:
    """``_merge``, or None with a note when the processes' snapshots do not merge."""
    try:
        return _merge(snaps)
    except Exception as exc:  # noqa: BLE001 - the rest of the report still prints
        notes.append(
            f"the {side} snapshots of the processes do not merge ({exc}); no {side} report"
        )
        return None


def _load_snap(path: Path, side: str, notes: list[str] | None = None) -> Any:
    """The snapshot a process saved, or None: a missing file silently, a file that is not
    this side's snapshot (truncated, another format, other phase names) with a note."""
    import gyreprof as gp
    from gyreprof._io import read_bytes

    try:
        data = read_bytes(path, "snapshot")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        _skipped(notes, path, exc)
        return None
    try:
        snap = gp.Snapshot.from_bytes(data)
        if tuple(snap.phases) != _PHASES[side]:
            raise InvalidValueError(
                f"phases {list(snap.phases)[:8]}, not the run's {side} phases {list(_PHASES[side])}"
            )
        snap.summary()  # decoded, but does it read back?
    except Exception as exc:  # noqa: BLE001 - a record is never worth the report
        _skipped(notes, path, exc)
        return None
    return snap


def _skipped(notes: list[str] | None, path: Path, exc: BaseException) -> None:
    if notes is None:
        return
    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    line = f"skipped {path.name} from the run folder: {why}"
    if line not in notes:
        notes.append(line)


def _exec_images(run_dir: Path, notes: list[str], main_pid: int | None) -> list[ProcessEntry]:
    """The images that a process replaced by ``exec`` saved first (``<pid>-x<token>``)."""
    out = []
    for p in sorted(run_dir.glob("*-x*.done.json")):
        key = p.name[: -len(".done.json")]
        pid = rec.parse_exec_key(key)
        if pid is None:
            continue
        try:
            record = rec.read_record(p)
        except (OSError, ValueError) as exc:
            _skipped(notes, p, exc)
            continue
        if record.pid != pid:
            _skipped(notes, p, ValueError(f"it names pid {record.pid}"))
            continue
        role = "main" if main_pid is not None and pid == main_pid else record.role
        sampler = _load_snap(rec.snap_path(run_dir, key, "sampler"), "sampler", notes)
        trainer = _load_snap(rec.snap_path(run_dir, key, "trainer"), "trainer", notes)
        out.append(ProcessEntry(pid, role, True, "before exec", record.loops, sampler, trainer))
    return out


def _pids(run_dir: Path, suffix: str) -> set[int]:
    out = set()
    for p in run_dir.glob(f"*{suffix}"):
        head = p.name[: -len(suffix)]
        if head.isdigit():
            out.add(int(head))
    return out


def collect_run(
    run_dir: Path,
    run_id: str,
    command: list[str],
    exit_code: int | None,
    *,
    main_pid: int | None = None,
    notes: list[str] | None = None,
    signal_num: int | None = None,
) -> RunReport:
    """Read every process's contribution from ``run_dir`` and judge the run.

    ``signal_num``: the signal that ended the command's main process (its report names
    it and shows the stacks the process's trail holds)."""
    started = _pids(run_dir, ".start.json")
    done = _pids(run_dir, ".done.json")
    booted = _pids(run_dir, ".boot")
    live = _read_live(run_id, started - done)
    entries: list[ProcessEntry] = []
    all_notes: list[str] = list(notes or [])
    for pid in sorted(started | done):
        record = None
        for path in (rec.done_path(run_dir, pid), rec.start_path(run_dir, pid)):
            try:
                record = rec.read_record(path)
                break
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                _skipped(all_notes, path, exc)
                continue
        role = record.role if record is not None else "child"
        if main_pid is not None and pid == main_pid:
            role = "main"
        if record is not None and record.pid != pid:
            _skipped(all_notes, path, ValueError(f"it names pid {record.pid}"))
            record = None
        if record is not None:
            for n in record.notes:
                if n not in all_notes:
                    all_notes.append(n)
        if pid in done and record is not None:
            entry = ProcessEntry(
                pid,
                role,
                True,
                record.how,
                record.loops,
                _load_snap(rec.snap_path(run_dir, pid, "sampler"), "sampler", all_notes),
                _load_snap(rec.snap_path(run_dir, pid, "trainer"), "trainer", all_notes),
            )
        elif pid in live:
            segs = live[pid]
            entry = ProcessEntry(
                pid, role, True, "live segment", (), segs.get("sampler"), segs.get("trainer")
            )
            if role == "child" and _has_data(entry.sampler):
                if entry.sampler.summary().phases["env_step"].count > 0:
                    entry.role = "env_worker"
        else:
            entry = ProcessEntry(pid, role, False, "none")
        entries.append(entry)
    entries += _exec_images(run_dir, all_notes, main_pid)
    got = [e for e in entries if e.contributed]
    for e in got:
        if _trains(e):
            shape = _shape_of(e)[0]
            e.loops = (shape,) if shape is not None else e.loops
    sampler = _merge_noting([e.sampler for e in got], "sampler", all_notes)
    # the trainer side: only the processes whose training thread completed steps
    trainer = _merge_noting([e.trainer for e in got if _trains(e)], "trainer", all_notes)
    report = RunReport(
        command=list(command),
        exit_code=exit_code,
        processes=entries,
        sampler=sampler,
        trainer=trainer,
        notes=all_notes,
        python_processes=len(booted | started | done),
    )
    _judge(report, got)
    crash = _trail_notes(run_dir, signal_num, report)
    if signal_num is not None:
        report.ended_by = _signal_name(signal_num)
    elif any("fatal signal" in n for n in crash):
        report.ended_by = "a fatal signal in one of its processes"
    if not report.recognised:
        report.notes.insert(0, report.nothing_recognised())
    report.notes[0:0] = crash
    return report


def _signal_name(num: int) -> str:
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _trail_notes(run_dir: Path, signal_num: int | None, report: RunReport) -> list[str]:
    """What the processes' start-up trails say of a crash or of a start-up that never
    ended: the fatal signal and the stacks faulthandler wrote, the exceptions swallowed."""
    from gyreprof.integrations._auto import trail

    out: list[str] = []
    infos = []
    for p in sorted(run_dir.glob("*.trail")):
        info = trail.read_trail(p)
        if info is not None:
            infos.append(info)
    # the command's main process: the one the launcher started
    main = next((i for i in infos if (i.launch or {}).get("ppid") == os.getpid()), None)
    if signal_num is not None:
        name = _signal_name(signal_num)
        head = (
            f"the command was killed by {name} (signal {signal_num}, exit code {128 + signal_num})"
        )
        if main is not None and main.fatal:
            head += f": {main.fatal}; its stacks at that moment (from its start-up trail):"
            out.append(head + "\n    " + "\n    ".join(main.dumps[-1][:40]))
        else:
            out.append(head)
    for info in infos:
        if info is main and signal_num is not None and info.fatal:
            continue
        if info.fatal:
            out.append(
                f"pid {info.pid} died of a fatal signal ({info.fatal}); its stacks:\n    "
                + "\n    ".join(info.dumps[-1][:40])
            )
        elif info.first_record is None and not report.recognised:
            words = trail.describe(info, alive=False)
            if len(words) > 1:
                out.append(f"pid {info.pid}'s start-up trail: " + "; ".join(words))
    return out


def _trains(e: ProcessEntry) -> bool:
    """The process ran a training thread: its trainer snapshot holds steps."""
    return bool(e.trainer is not None and e.trainer.summary().steps > 0)


def _shape_of(e: ProcessEntry) -> tuple[str | None, str]:
    """A trainer process's loop shape from its training thread's collect blocks (the
    trainer's ``loop.own`` / ``loop.fed`` counters), and the words saying so; a record
    without them falls back to a shape declared for it (an in-process session)."""
    counters = e.trainer.counters if e.trainer is not None else {}
    own, fed = int(counters.get("loop.own", 0)), int(counters.get("loop.fed", 0))
    blocks = own + fed
    if blocks == 0:
        if "sync" in e.loops:
            return "sync", "declared for its framework (collect, then train)"
        return None, "no collect block was seen on its training thread"
    if own > fed:
        return (
            "sync",
            f"the training thread did the sampling itself in {own} of {blocks} collect blocks",
        )
    if fed > own:
        return "overlapped", (
            f"the training thread waited on data made elsewhere (a queue, a future, a "
            f"collector's workers) in {fed} of {blocks} collect blocks"
        )
    return None, f"the training thread sampled itself in {own} and was fed in {fed} collect blocks"


def _loop_kwargs(got: list[ProcessEntry]) -> dict[str, Any]:
    """The loop shape of the training processes, read from each training thread's timeline
    (``loop="sync"``: it sampled itself, then trained; ``"overlapped"``: it was fed),
    with the evidence; when they disagree or tell nothing, the verdict finds the shape
    from the timestamps itself."""
    trainers = [e for e in got if _trains(e)]
    shapes = [(e, *_shape_of(e)) for e in trainers]
    kinds = {shape for _, shape, _ in shapes}
    if not shapes or None in kinds or len(kinds) != 1:
        return {}
    (loop,) = kinds
    if len(shapes) == 1:
        words = shapes[0][2]
    else:
        words = "; ".join(f"pid {e.pid}: {w}" for e, _, w in shapes)
    return {"loop": loop, "loop_evidence": f"from the training thread's timeline: {words}"}


def _judge(report: RunReport, got: list[ProcessEntry]) -> None:
    import gyreprof as gp

    trainer = report.trainer
    if trainer is not None:
        t = trainer.summary()
        if t.phases["wait"].count == 0 or t.phases["compute"].count == 0:
            report.notes.append(
                "the trainer loop did not complete a collect-and-update step, so there is no "
                "wait ratio"
            )
            trainer = None
        else:
            try:
                report.wait = gp.wait_report(trainer)
            except ValueError as exc:
                report.notes.append(f"no wait ratio: {exc}")
                trainer = None
    # the verdict judges the sampler the trainer waited on: the phases of the processes
    # that ran the trainer loop (their env steps and vector-env waits tile its waits);
    # the workers' own env steps overlap each other and are in the merged report
    sampler = report.sampler
    if trainer is not None:
        sampler = _merge([e.sampler for e in got if _trains(e)]) or sampler
    else:  # the driving process's own wall time; its workers step in parallel to it
        sampler = _merge([e.sampler for e in got if e.role == "main"]) or sampler
    if sampler is None and trainer is None:
        return
    try:
        report.verdict = gp.diagnose(sampler=sampler, trainer=trainer, **_loop_kwargs(got))
    except ValueError as exc:
        report.notes.append(f"no verdict: {exc}")
