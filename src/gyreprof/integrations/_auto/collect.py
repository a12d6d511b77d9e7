"""Read a ``gyreprof run`` directory back into one report.

A process counts as contributing when it left complete snapshots (its done
file, or its group's record: a Ray job's workers merged by node and role) or, if it
was killed first, a live segment of this run that can still be read. Sampler
snapshots are merged over every contributing process (a group's once); the
trainer's over those whose training thread completed steps. The verdict comes from
``gp.diagnose`` on the two merged sides.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyreprof._support.advice import advice_for
from gyreprof._support.errors import InvalidValueError
from gyreprof.analysis.run import (  # the result's types, read here and by the sessions
    ProcessEntry,
    RunReport,
    UserProfile,
    _ending_notes,
    sampler_snapshots,
)
from gyreprof.integrations._auto import run_files as rec  # names; records where there is one

if TYPE_CHECKING:
    pass


def _has_data(snap: Any) -> bool:
    return bool(snap is not None and snap.summary().events > 0)


def _read_live(run_id: str, pids: set[int], started_any: bool = True) -> dict[int, dict[str, Any]]:
    """Snapshots from the live segments this run left (processes that could not save).
    Nothing when no process of the run started recording: then none published a segment
    either, and the launcher of ``python -c pass`` loads no numpy."""
    if not started_any:
        return {}
    from gyreprof import live
    from gyreprof.model.snapshot import merge

    out: dict[int, dict[str, Any]] = {}
    names = {rec.segment_name(run_id, side): side for side in ("sampler", "trainer")}
    from gyreprof.live.reader import drop_folded

    try:
        # per_thread profilers: threads folded into a retired segment are read there only
        entries = drop_folded(live.list())
    except Exception:  # noqa: BLE001 - one bad segment must not cost the report
        return out
    for e in entries:
        side = names.get(e.name or "")
        if side is None:
            continue
        if e.pid in pids:  # a live one: a process still running after the launcher's wait
            try:
                snap = live.attach(e.path).snapshot()
                slot = out.setdefault(e.pid, {})
                slot[side] = merge([slot[side], snap]) if side in slot else snap
            except Exception:  # noqa: BLE001 - a segment that cannot be read is not read
                continue
        if not e.alive:
            try:
                os.unlink(e.path)
            except OSError:
                pass
    return out


def _merge(snaps: list[Any]) -> Any:
    snaps = [s for s in snaps if _has_data(s)]
    if not snaps:
        return None
    from gyreprof.model.snapshot import merge

    return merge(snaps)


_PHASES = {"sampler": rec.SAMPLER_PHASES, "trainer": rec.TRAINER_PHASES}
#: the phases of snapshots an earlier version saved (a ``--save`` folder read again): the
#: sampler's before ``generate`` was added
_EARLIER: dict[str, tuple[tuple[str, ...], ...]] = {
    "sampler": (rec.SAMPLER_PHASES[:5],),
    "trainer": (),
}


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
    from gyreprof._support.io import read_bytes

    try:
        data = read_bytes(path, "snapshot")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        _skipped(notes, path, exc)
        return None
    from gyreprof.model.snapshot import Snapshot  # (numpy) only where a process saved one

    try:
        snap = Snapshot.from_bytes(data)
        if tuple(snap.phases) != _PHASES[side] and tuple(snap.phases) not in _EARLIER[side]:
            raise InvalidValueError(
                f"phases {list(snap.phases)[:8]}, not the run's {side} phases {list(_PHASES[side])}"
            )
        snap.summary()  # decoded, but does it read back?
    except Exception as exc:  # noqa: BLE001 - a record is never worth the report
        _skipped(notes, path, exc)
        return None
    return snap


def load_sites(path: Path, notes: list[str] | None = None) -> Any:
    """The code sites a process's stack sampler saved (``analysis.sites.ProcessSites``),
    or None: a missing file silently, one that is not such a record with a note."""
    from gyreprof._support.io import read_bytes

    try:
        data = read_bytes(path, "snapshot", what="stack samples")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        _skipped(notes, path, exc)
        return None
    from gyreprof.analysis.sites import ProcessSites

    try:
        return ProcessSites.from_json(data)
    except ValueError as exc:
        _skipped(notes, path, exc)
        return None


def _sites(got: list[ProcessEntry], judged_trainer: bool) -> Any:
    """The stack samples behind the verdict: the sampler's from the processes whose
    sampler it judged (those that trained, else the main one), the compute's from
    those that trained."""
    from gyreprof.analysis.sites import ProcessSites, merge

    trainers = [e for e in got if _trains(e)]
    drivers = trainers if judged_trainer else [e for e in got if e.role == "main"]
    s = merge([e.sites for e in drivers if e.sites is not None])
    c = merge([e.sites for e in trainers if e.sites is not None])
    base = s if s is not None else c
    if base is None:
        return None
    return ProcessSites(
        pid=base.pid,
        hz=base.hz,
        sampler_samples=s.sampler_samples if s is not None else 0,
        compute_samples=c.compute_samples if c is not None else 0,
        sampler=list(s.sampler) if s is not None else [],
        compute=list(c.compute) if c is not None else [],
    )


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
        from gyreprof.integrations._auto.records import read_record

        try:
            record = read_record(p)
        except (OSError, ValueError) as exc:
            _skipped(notes, p, exc)
            continue
        if record.pid != pid:
            _skipped(notes, p, ValueError(f"it names pid {record.pid}"))
            continue
        role = "main" if main_pid is not None and pid == main_pid else record.role
        sampler = _load_snap(rec.snap_path(run_dir, key, "sampler"), "sampler", notes)
        trainer = _load_snap(rec.snap_path(run_dir, key, "trainer"), "trainer", notes)
        entry = ProcessEntry(pid, role, True, "before exec", record.loops, sampler, trainer)
        entry.sites = load_sites(rec.sites_path(run_dir, key), notes)
        out.append(entry)
    return out


def number_images(entries: list[ProcessEntry]) -> None:
    """Number each pid's images in the order they ran: those replaced by exec first (in
    the order of their records' names), then the one that ended the process."""
    seen: dict[int, int] = {}
    for e in sorted(entries, key=lambda e: e.source != "before exec"):  # stable
        e.image = seen.get(e.pid, 0)
        seen[e.pid] = e.image + 1


def saved_stems(entries: list[ProcessEntry]) -> list[str]:
    """The name each entry's snapshots have in a ``--save`` folder: ``<role>-<pid>`` for
    the image that ended the process (the only one where nothing exec'd), and
    ``<role>-<pid>.<image>`` for an image an exec replaced."""
    last: dict[int, int] = {}
    for e in entries:
        last[e.pid] = max(last.get(e.pid, 0), e.image)
    return [
        f"{e.role}-{e.pid}" if e.image == last[e.pid] else f"{e.role}-{e.pid}.{e.image}"
        for e in entries
    ]


def _pids(run_dir: Path, suffix: str) -> set[int]:
    out = set()
    for p in run_dir.glob(f"*{suffix}"):
        head = p.name[: -len(suffix)]
        if head.isdigit():
            out.add(int(head))
    return out


def _grouped(run_dir: Path, pids: set[int], notes: list[str]) -> dict[int, tuple[Any, Any, Any]]:
    """The processes of the run folder's groups (``records.GroupRecord``: a Ray job's
    workers merged by node and role): pid -> (its record, its own figures, the group's
    merged sampler snapshot). A group whose snapshot cannot be read keeps its records
    (the processes are listed, without figures); a pid that also has files of its own
    is skipped with a note, as is a group record that is not one."""
    from gyreprof._support.io import read_bytes
    from gyreprof.analysis.run import ProcessFigures

    out: dict[int, tuple[Any, Any, Any]] = {}
    for n in rec.group_numbers(run_dir):
        from gyreprof.integrations._auto.records import GroupRecord, ProcessRecord

        path = rec.group_path(run_dir, n)
        try:
            group = GroupRecord.from_json(read_bytes(path, "snapshot", what="run group"))
            members = [
                (ProcessRecord.from_json(r), ProcessFigures.from_dict(f))
                for r, f in zip(group.records, group.figures, strict=True)
            ]
        except (OSError, ValueError) as exc:
            _skipped(notes, path, exc)
            continue
        snap = _load_snap(rec.group_snap_path(run_dir, n), "sampler", notes)
        for record, figures in members:
            if record.pid in pids or record.pid in out:
                _skipped(notes, path, ValueError(f"pid {record.pid} is in the folder already"))
                continue
            out[record.pid] = (record, figures if snap is not None else None, snap)
    return out


def _uninstrumented(run_dir: Path) -> dict[int, str]:
    """pid -> why its Python was not instrumented (the launcher's sitecustomize wrote it)."""
    from gyreprof._support.format import safe_text

    out = {}
    for pid in sorted(_pids(run_dir, ".uninstrumented")):
        try:
            raw = (run_dir / f"{pid}.uninstrumented").read_bytes()[:2000]
        except OSError:
            continue
        out[pid] = safe_text(raw.decode("utf-8", "replace")).strip() or "no reason given"
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
    loop: str | None = None,
    received: tuple[str, ...] = (),
    warmup_given: bool = False,
) -> RunReport:
    """Read every process's contribution from ``run_dir`` and judge the run.

    ``signal_num``: the signal that ended the command's main process (its report names
    it and shows the stacks the process's trail holds). ``loop``: the loop's shape as
    declared (``gyreprof run --loop``). ``received``: the signals the launcher received
    while the command ran (passed on or not). ``warmup_given``: the launcher was given a
    warm-up rule (then the trainer's first step is never told apart as start-up)."""
    started = _pids(run_dir, ".start.json")
    done = _pids(run_dir, ".done.json")
    booted = _pids(run_dir, ".boot")
    live = _read_live(run_id, started - done, bool(started))
    entries: list[ProcessEntry] = []
    all_notes: list[str] = list(notes or [])
    deaths: list[Any] = []
    grouped = _grouped(run_dir, started | done, all_notes)
    for pid in sorted(started | done | grouped.keys()):
        from gyreprof.integrations._auto.records import read_record

        record = grouped[pid][0] if pid in grouped else None
        for path in (
            () if pid in grouped else (rec.done_path(run_dir, pid), rec.start_path(run_dir, pid))
        ):
            try:
                record = read_record(path)
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
            deaths += [d for d in record.deaths if role != "main" or d.who != "main thread"]
        if pid in grouped and record is not None:
            entry = ProcessEntry(pid, role, True, record.how, record.loops)
            entry.figures, entry.group = grouped[pid][1:]
            entry.sites = load_sites(rec.sites_path(run_dir, pid), all_notes)
        elif pid in done and record is not None:
            entry = ProcessEntry(
                pid,
                role,
                True,
                record.how,
                record.loops,
                _load_snap(rec.snap_path(run_dir, pid, "sampler"), "sampler", all_notes),
                _load_snap(rec.snap_path(run_dir, pid, "trainer"), "trainer", all_notes),
            )
            entry.sites = load_sites(rec.sites_path(run_dir, pid), all_notes)
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
        if record is not None and record.node_id:
            entry.node_id, entry.node_ip = record.node_id, record.node_ip
        entries.append(entry)
    entries += _exec_images(run_dir, all_notes, main_pid)
    number_images(entries)
    _ray_job(run_dir, entries, all_notes)
    join_user_profiles(entries, read_user_profiles(run_dir, all_notes), _main_of(run_dir, main_pid))
    all_notes += _role_notes(entries)
    got = [e for e in entries if e.contributed]
    for e in got:
        if _trains(e):
            shape = _shape_of(e)[0]
            e.loops = (shape,) if shape is not None else e.loops
    sampler = _merge_noting(sampler_snapshots(got), "sampler", all_notes)
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
        advice_for="run",
        loop=loop,
        received=tuple(received),
        warmup_given=warmup_given,
        uninstrumented=_uninstrumented(run_dir),
        deaths=deaths,
    )
    if report.uninstrumented and report.python_processes:
        for pid, why in sorted(report.uninstrumented.items()):
            report.notes.append(f"pid {pid} ran a Python that could not be instrumented: {why}")
    _autoreset_note(report)
    report.rollouts = _rollouts(run_dir, all_notes)
    with advice_for(report.advice_for):
        _judge(report, got)
    crash = _trail_notes(run_dir, signal_num, report)
    if signal_num is not None:
        report.ended_by = _signal_name(signal_num)
    elif any("fatal signal" in n for n in crash):
        report.ended_by = "a fatal signal in one of its processes"
    report.notes[0:0] = crash
    if not report.recognised:
        report.notes.insert(0, report.nothing_recognised())
    report.notes += _ending_notes(report) + _user_notes(report)
    return report


def _autoreset_note(report: RunReport) -> None:
    """A process that built a gymnasium vector env with next-step autoreset left
    ``autoreset.MARK``: say it once, with the run's env_step and env_reset counts."""
    from gyreprof.integrations._auto import autoreset

    if autoreset.MARK not in report.notes:
        return
    report.notes[:] = [n for n in report.notes if n != autoreset.MARK]
    if report.sampler is None:
        return
    phases = report.sampler.summary().phases
    step, reset = phases.get("env_step"), phases.get("env_reset")
    if step is None or reset is None or reset.count == 0:
        return
    report.notes.append(autoreset.words(int(step.count), int(reset.count)))


#: a Ray job's file (``integrations.ray.job.RAY_JOB_FILE``): the driver's node, the notes
RAY_JOB_FILE = "ray-job.json"


def _ray_job(run_dir: Path, entries: list[ProcessEntry], notes: list[str]) -> None:
    """The Ray job's file, where the driver wrote one: its notes join the run's, and the
    driver's entry gets its node. A file that is not one is skipped with a note."""
    path = run_dir / RAY_JOB_FILE
    if not path.exists():
        return
    import json

    from gyreprof._support.format import safe_text

    try:
        data = json.loads(path.read_bytes()[: 1 << 20])
        if not isinstance(data, dict) or data.get("format") != "gyreprof.ray-job/1":
            raise InvalidValueError("not a gyreprof.ray-job/1 record")
        driver = data.get("driver") or {}
        lines = data.get("notes") or []
        if not isinstance(driver, dict) or not isinstance(lines, list):
            raise InvalidValueError("its driver or notes are not a record and a list")
    except (OSError, ValueError) as exc:
        _skipped(notes, path, exc)
        return
    for line in lines:
        text = safe_text(str(line))
        if text not in notes:
            notes.append(text)
    pid = driver.get("pid")
    for e in entries:
        if e.pid == pid and not e.node_id and e.source != "before exec":
            e.node_id = safe_text(str(driver.get("node_id") or ""))
            e.node_ip = safe_text(str(driver.get("node_ip") or ""))


def _user_notes(report: RunReport) -> list[str]:
    """Why profilers marked by hand gave no verdict (their phases are not a trainer's)."""
    if report.verdict is not None or not any(e.user for e in report.contributed):
        return []
    return [
        "no verdict: your profilers' phases are shown, but none has a trainer's 'wait' and "
        "'compute' phases with samples; a gp.Profiler(['wait', 'compute']) timing the fetch "
        "of each batch ('wait') and the update ('compute') gives the wait ratio and the verdict"
    ]


# ------------------------------------------------------------ the user's own profilers

#: ``<pid>.user-<n>.snap``: a Profiler the user created under gyreprof run (user.py)
USER_SNAP = ".user-"


def read_user_profiles(folder: Path, notes: list[str], prefix: str = "") -> list[UserProfile]:
    """The user's Profilers saved in ``folder`` (``<prefix><pid>.user-<n>.snap``), in pid
    and creation order; a file that is not a readable snapshot is skipped with a note."""
    from gyreprof._support.io import read_bytes

    found = []
    for path in folder.glob(f"{prefix}*{USER_SNAP}*.snap"):
        head, _, tail = path.name[len(prefix) : -len(".snap")].partition(USER_SNAP)
        if not (head.isdigit() and tail.isdigit()):
            continue
        from gyreprof.model.snapshot import Snapshot  # (numpy) only where a user's profile is

        try:
            snap = Snapshot.from_bytes(read_bytes(path, "snapshot"))
            snap.summary()  # decoded, but does it read back?
        except Exception as exc:  # noqa: BLE001 - a record is never worth the report
            _skipped(notes, path, exc)
            continue
        found.append(UserProfile(int(head), int(tail), snap))
    return sorted(found, key=lambda u: (u.pid, u.index))


def _main_of(run_dir: Path, main_pid: int | None) -> int | None:
    """The command's main process: given, or the one the launcher started (its trail)."""
    if main_pid is not None:
        return main_pid
    from gyreprof.model import trail_file as trail

    for p in run_dir.glob("*.trail"):
        info = trail.read_trail(p)
        if info is not None and (info.launch or {}).get("ppid") == os.getpid():
            return int(info.pid)
    return None


def _is_trainer_profile(snap: Any) -> bool:
    phases = snap.summary().phases
    return all(n in phases and phases[n].count > 0 for n in rec.TRAINER_PHASES)


def join_user_profiles(
    entries: list[ProcessEntry], users: list[UserProfile], main_pid: int | None
) -> None:
    """Give each process its user Profilers (a process that left nothing else gets an
    entry of its own). While no automatic trainer recorded anything in the run, a user
    Profiler with ``wait`` and ``compute`` phases becomes its process's trainer (those of
    one process with the same phases merged), so the run gets a wait ratio and a
    verdict from a trainer marked by hand."""
    users = [u for u in users if _has_data(u.snapshot)]  # a Profiler that never recorded
    if not users:
        return
    by_pid: dict[int, list[UserProfile]] = {}
    for u in users:
        by_pid.setdefault(u.pid, []).append(u)
    auto_trainer = any(_has_data(e.trainer) for e in entries if e.contributed)
    for pid, mine in by_pid.items():
        entry = next((e for e in entries if e.pid == pid and e.source != "before exec"), None)
        if entry is None:
            role = "main" if pid == main_pid else "child"
            entry = ProcessEntry(pid, role, True, "exit")
            entries.append(entry)
        if not entry.contributed:
            entry.contributed, entry.source = True, "user profiler"
        if not auto_trainer and not _has_data(entry.trainer):
            mine = _adopt_trainer(entry, mine)
        entry.user = tuple(mine)


def _adopt_trainer(entry: ProcessEntry, mine: list[UserProfile]) -> list[UserProfile]:
    import dataclasses

    trainers = [u for u in mine if _is_trainer_profile(u.snapshot)]
    if not trainers:
        return mine
    # the phases of the first trainer profile; others of the same phases merge into it
    phases = tuple(trainers[0].snapshot.phases)
    chosen = [u for u in trainers if tuple(u.snapshot.phases) == phases]
    try:
        entry.trainer = _merge([u.snapshot for u in chosen])
    except Exception:  # noqa: BLE001 - shown as the user's own tables instead
        return mine
    ids = {id(u) for u in chosen}
    return [dataclasses.replace(u, as_trainer=True) if id(u) in ids else u for u in mine]


def _role_notes(entries: list[ProcessEntry]) -> list[str]:
    """What the processes of a framework's own roles did (RLlib's env runners)."""
    if not entries:  # a run that recorded nothing loads no framework's module
        return []
    from gyreprof.integrations.libs import rllib

    return rllib.role_notes(entries)


def _rollouts(run_dir: Path, notes: list[str]) -> Any:
    """The HTTP rollout requests of every process that saved them (``<key>.rollouts.json``:
    a pid, or the key of an image replaced by exec); a bad record is skipped with a note.
    A run that left no rollout file loads no rollout code (and so no numpy)."""
    saved = sorted(run_dir.glob("*.rollouts.json"))
    if not saved and next(run_dir.glob("*.rollouts.part.json"), None) is None:
        return None
    from gyreprof.integrations._auto import rollout_record

    records = []
    for p in saved:
        key = p.name[: -len(".rollouts.json")]
        if not key.isdigit() and rec.parse_exec_key(key) is None:
            continue
        try:
            records.append(rollout_record.read(p))
        except (OSError, ValueError) as exc:
            _skipped(notes, p, exc)
    records += rollout_record.flushed(run_dir, notes)  # the processes killed before saving
    try:
        return rollout_record.report(records) if records else None
    except ValueError as exc:
        notes.append(f"no rollout report: {exc}")
        return None


def _signal_name(num: int) -> str:
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _trail_notes(run_dir: Path, signal_num: int | None, report: RunReport) -> list[str]:
    """What the processes' start-up trails say of a crash or of a start-up that never
    ended: the fatal signal and the stacks faulthandler wrote, the exceptions swallowed."""
    from gyreprof.model import trail_file as trail

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


def _declared_loop(report: RunReport) -> dict[str, Any]:
    """The loop's shape the user declared (``gyreprof run --loop``), which wins."""
    return {"loop": report.loop} if report.loop is not None else {}


def _trains(e: ProcessEntry) -> bool:
    """The process ran a training thread: its trainer snapshot holds steps (the automatic
    trainer closes one per collect block), or a trainer marked by hand stands for it
    (``wait`` and ``compute`` timed, with or without steps marked). A framework's worker
    role (an RLlib learner actor, whose optimizer steps the driver waits on) never is."""
    if e.trainer is None:
        return False
    from gyreprof.integrations.libs.rllib import WORKER_ROLES

    if e.role in WORKER_ROLES:  # an RLlib learner actor: a worker the driver waits on
        return False
    s = e.trainer.summary()
    if s.steps > 0:
        return True
    return any(u.as_trainer for u in e.user) and all(
        s.phases[n].count > 0 for n in rec.TRAINER_PHASES if n in s.phases
    )


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
    trainer = whole = report.trainer
    if trainer is None and report.sampler is None:
        line = _rollout_wait_line(report)
        if line is not None:
            report.notes.append(line)
        _dead_feeder(report, None)  # what died is said even with nothing to judge
        return  # nothing to judge: the analysis (and numpy) stay unloaded
    from gyreprof.analysis.verdict import diagnose
    from gyreprof.analysis.wait import wait_report

    if trainer is not None:
        t = trainer.summary()
        if t.phases["wait"].count == 0 or t.phases["compute"].count == 0:
            report.notes.append(
                "the trainer loop did not complete a collect-and-update step, so there is no "
                "wait ratio"
            )
            trainer = None
        else:
            trainer = _start_up(report, trainer)
            try:
                report.wait = wait_report(trainer)
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
        _dead_feeder(report, None)
        return
    worker_sites = _collector_workers(report, got, trainer)
    loop_kw: dict[str, Any] = {}
    try:
        loop_kw = _declared_loop(report) or _loop_kwargs(got)
        report.verdict = diagnose(
            sampler=sampler,
            trainer=trainer,
            rollout_cause=_service_cause(report),
            dead_feeder=_dead_feeder(report, trainer),
            command=report.command,
            vector_workers=_vector_workers(got),
            sites=_sites(got, trainer is not None),
            collector_workers=report.workers,
            worker_sites=worker_sites,
            **loop_kw,
        )
    except ValueError as exc:
        report.notes.append(f"no verdict: {exc}")
    if report.start_up is not None:
        _judge_with_start_up(report, sampler, whole, loop_kw)
    line = _rollout_wait_line(report)
    if line is not None:
        report.notes.append(line)


def _vector_workers(got: list[ProcessEntry]) -> dict[str, float] | None:
    """A vector env's worker processes (role ``env_worker``): how many, and their env
    stepping in all (s), for the verdict's round-trip rule; None when there are none."""
    workers = [e for e in got if e.role == "env_worker" and e.sampler_figures() is not None]
    if not workers:
        return None
    env_ns = 0
    for e in workers:
        phases = e.sampler_figures().phases
        env_ns += sum(phases[n].sum_ns for n in ("env_step", "env_reset") if n in phases)
    return {"workers": float(len(workers)), "env_s": env_ns / 1e9}


def _collector_workers(report: RunReport, got: list[ProcessEntry], trainer: Any) -> Any:
    """A multi-process collector's workers (processes other than the main one and the
    trainers whose sampler counted batches of their own), kept in ``report.workers``
    for the report and the verdict, whose sampler part is read from their collection
    time (``analysis.workers``); returns their stack samples merged (or None)."""
    workers = [
        e for e in got if e.role != "main" and not _trains(e) and e.sampler_figures() is not None
    ]
    if not workers:
        return None
    from gyreprof.analysis import workers as cw
    from gyreprof.analysis.sites import merge

    # each worker's own counters: its snapshot's, or its figures' (a merged group's member)
    found = cw.from_snapshots([(e.pid, e.sampler or e.figures) for e in workers], trainer)
    if found is None:
        return None
    report.workers = found
    pids = {w.pid for w in found.workers}
    return merge([e.sites for e in workers if e.pid in pids and e.sites is not None])


def _env_loop(report: RunReport) -> bool:
    """The run's sampler stepped environments (a rollout service is then not all of it)."""
    if report.sampler is None:
        return False
    phases = report.sampler.summary().phases
    return any(name.startswith("env") and st.count > 0 for name, st in phases.items())


def _dead_feeder(report: RunReport, trainer: Any) -> dict[str, Any] | None:
    """The death after which the trainer starved (``analysis.feeders``), for the verdict;
    every other death is a note (the trainer kept its pace after it)."""
    if not report.deaths:
        return None
    found = None
    if trainer is not None:
        from gyreprof.analysis import feeders

        found = feeders.find(report.deaths, trainer)
    for d in report.deaths:
        if found is None or d.who != found.who or d.where() != found.where:
            report.notes.append(
                f"{d.who} (pid {d.pid}) died: {d.words()}; "
                + (
                    "the trainer kept its pace after it: not its feeder"
                    if trainer is not None
                    else "no trainer profile tells whether it fed one"
                )
            )
    return dataclasses.asdict(found) if found is not None else None


def _service_cause(report: RunReport) -> dict[str, Any] | None:
    """Why a trainer fed by a rollout service (and stepping no envs) would wait on it
    (``analysis.rollout_cause``), for the verdict; None for any other run."""
    if report.rollouts is None or _env_loop(report):
        return None
    from gyreprof.analysis import rollout_cause

    cause = rollout_cause.find(report.rollouts)
    return dataclasses.asdict(cause) if cause is not None else None


def _start_up(report: RunReport, trainer: Any) -> Any:
    """The trainer to judge: with its first step counted as warm-up when that step was
    start-up (``analysis.startup``) and the launcher was given no warm-up rule. The run's
    trainer is then that snapshot (the report's trainer section, its JSON and the verdict
    tell one story); the caller keeps the whole one for the figures with it."""
    if report.warmup_given:
        return trainer
    from gyreprof.analysis import startup

    found = startup.find(trainer)
    if found is None:
        return trainer
    report.start_up = found
    report.trainer = found.snapshot
    return found.snapshot


def _judge_with_start_up(
    report: RunReport, sampler: Any, whole: Any, loop_kw: dict[str, Any]
) -> None:
    """What the run reads with its start-up in (the verdict on every step), said first
    among the verdict's reasons."""
    import dataclasses

    from gyreprof._support.format import fmt_ns, fmt_pct
    from gyreprof.analysis.verdict import diagnose

    su = report.start_up
    try:
        bound_with = diagnose(sampler=sampler, trainer=whole, **loop_kw).bound
    except ValueError:
        bound_with = None
    su = dataclasses.replace(su, bound_with=bound_with)
    report.start_up = su
    times = f"{su.wait_ns / su.rest_p50_ns:.0f}x" if su.rest_p50_ns > 0 else "far above"
    longest = (
        f" and {su.wait_ns / su.rest_max_ns:.0f}x the longest of them" if su.rest_max_ns > 0 else ""
    )
    words = (
        f"start-up left out: the trainer's first step waited {fmt_ns(su.wait_ns)} for its "
        f"first batch, {times} the median wait of the {su.rest_steps} steps after it "
        f"({fmt_ns(su.rest_p50_ns)}){longest}; it is counted as warm-up, as --warmup-steps 1 "
        f"would, and these figures are the other {su.rest_steps} steps'. With it, the wait "
        f"ratio reads {fmt_pct(su.ratio_with)}"
    )
    verdict = report.verdict
    if bound_with is not None and verdict is not None and bound_with != verdict.bound:
        side = "balanced" if bound_with == "balanced" else f"{bound_with}-bound"
        words += f" and the run {side}"
    words += " (gyreprof run --warmup-steps 0 keeps every step)"
    if verdict is not None:
        report.verdict = dataclasses.replace(verdict, reasons=[words, *verdict.reasons])
    else:
        report.notes.append(words)


def _rollout_wait_line(report: RunReport) -> str | None:
    """The verdict's words for a loop fed by a rollout service: the endpoint the trainer
    waited on most, the share of a training step spent waiting, the batches' tail and the
    ceiling a 2x faster generation gives (None without rollouts or a wait ratio)."""
    roll, wait, verdict = report.rollouts, report.wait, report.verdict
    if roll is None or wait is None or not roll.endpoints:
        return None
    from gyreprof.analysis.rollouts import generation_endpoints, weight_sync_words

    eps = generation_endpoints(roll.endpoints)  # not a weight sync or a health check
    ep = max(eps, key=lambda e: e.requests * (e.latency.p50 or 0.0))
    words = (
        f"rollouts: the trainer waits on generation from {ep.endpoint} ({ep.requests} "
        f"requests, p50 {_ms(ep.latency.p50)}, p99 {_ms(ep.latency.p99)}): waiting is "
        f"{wait.ratio:.0%} of a training step"
    )
    if roll.tail_share_p50 is not None and roll.batch_count:
        words += (
            f"; the median tail share of its {roll.batch_count} batches is "
            f"{roll.tail_share_p50:.0%}"
        )
        if roll.typical_tail:
            words += f" ({roll.typical_tail})"
        if roll.tail_dominates:
            words += (
                "; the long tail dominates: half the batches wait at least "
                f"{roll.tail_share_p50:.0%} of their time for their last 10% of requests"
            )
    ceiling = (verdict.ceilings or {}).get("sampler_2x") if verdict is not None else None
    if ceiling is not None:
        words += f"; generation twice as fast makes a step up to {ceiling:.2f}x as fast"
    sync = weight_sync_words(roll)
    return words if sync is None else f"{words}; {sync}"


def _ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.1f} ms"
