"""``gyreprof report FILE [FILE]`` / ``gyreprof report DIR``: print saved profiles, with the
wait ratio and the verdict whenever the phases allow; draw them.

- one file: its table; a trainer profile (``wait`` and ``compute`` phases with samples)
  gets the wait report and the verdict as well;
- two files (a sampler and a trainer profile, in either order): both tables, the wait
  report and the full verdict;
- the file ``gyreprof run --json FILE`` wrote (format ``gyreprof.run/1``): the run's report
  again from its record (its verdict, wait report, merged summaries and processes as the
  run judged them; ``--json`` the record itself);
- a ``gyreprof run --save DIR`` folder: the run's report again, the verdict included
  (the text of ``gyreprof run``'s report, headed by the command line and its exit code,
  its rollouts section included, from the folder's ``rollouts.json``; ``--json`` its
  ``gyreprof.run/1`` layout).

The advice is worded for this command (``gyreprof._support.advice``): for files, its options
and the lines of the script that saved them; for a folder, the launcher's options.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from gyreprof._support.errors import CorruptDataError, InvalidValueError, UsageError
from gyreprof._support.format import safe_text

#: what ``--json`` prints for profiles that gave a verdict (a single non-trainer file
#: prints its summary JSON as before)
REPORT_FORMAT = "gyreprof.report/1"
#: the index file ``gyreprof run --save DIR`` writes
PROCESSES_JSON = "processes.json"
#: what the folder keeps of the run itself (commands/run.py: RUN_FILE)
RUN_JSON = "run.json"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="print saved profiles (with the wait ratio and the verdict) or a --save folder; "
        "--plot / --html draw them",
        description="Reads a summary saved as JSON (Summary.to_json, autosave=*.json) or a "
        "snapshot saved as bytes (Snapshot.save, autosave=other names) or an events file "
        "(gyreprof.export.save_events) and prints the table, "
        "or JSON with --json. A trainer profile (phases 'wait' and 'compute') gets the wait "
        "ratio and the verdict; give a sampler and a trainer profile for the full verdict. "
        "The file gyreprof run --json FILE wrote and a folder written by gyreprof run "
        "--save DIR are reported again as the run was, "
        "verdict included. --plot writes a PNG (percentiles, window series, phase shares) "
        "and --html a self-contained HTML report; both need the plot extra "
        "(pip install 'gyreprof[plot]').",
    )
    p.add_argument(
        "file",
        nargs="+",
        help="summary JSON, snapshot or events (.npz) file; or a sampler and a trainer "
        "file; or gyreprof run's --json file or --save folder",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument(
        "--loop",
        choices=("sync", "overlapped"),
        help="the loop's shape for the verdict (a snapshot does not show it; for a --save "
        "folder, in place of the one given to gyreprof run --loop)",
    )
    p.add_argument("--plot", metavar="OUT.png", help="write the pictures to this PNG file")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report")
    from gyreprof.commands._args import add_verbose

    add_verbose(p)
    p.set_defaults(func=run)


def _load_source(path: str) -> Any:
    """The richest object the file holds: an events file or a Snapshot (windows, times),
    else a Summary."""
    from gyreprof.export._source import load_file

    p = Path(path)
    if not p.exists():
        raise UsageError(f"no such file: {path}")
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a summary or snapshot file")
    try:
        return load_file(p)
    except OSError as exc:  # /proc/self/mem and other files that exist but cannot be read
        why = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot read {path}: {why}") from None


def _check_out(option: str, value: str | None, suffix: str) -> Path | None:
    if value is None:
        return None
    out = Path(value)
    if out.is_dir():
        raise UsageError(f"{option} {value} is a directory; give a file name ending in {suffix}")
    if not out.parent.exists():
        raise UsageError(f"{option} {value}: the folder {out.parent} does not exist")
    return out


def _is_trainer(source: Any, wait: str = "wait", compute: str = "compute") -> bool:
    """The profile has a trainer's wait and compute phases, each with steady samples."""
    phases = source.summary.phases
    return all(n in phases and phases[n].count > 0 for n in (wait, compute))


def _why_not_a_trainer(source: Any, wait: str = "wait", compute: str = "compute") -> None:
    """A profile with a trainer's phases but no steady samples in them: say why there is
    no wait ratio (stderr), rather than print its table alone."""
    phases = source.summary.phases
    if not all(n in phases for n in (wait, compute)):
        return
    w = source.summary.warmup
    why = "no steady samples in them"
    if not w.done:
        why += f" (still in its warm-up, {w.rule})"
    print(
        f"gyreprof report: a trainer profile ({wait!r} and {compute!r} phases) but {why}, so "
        "no wait ratio and no verdict",
        file=sys.stderr,
    )


# ------------------------------------------------------------------ a --save folder


def _saved_entries(folder: Path, notes: list[str]) -> list[Any]:
    """The processes of a ``--save`` folder, each with the snapshots it saved."""
    from gyreprof._support import io as _io
    from gyreprof.analysis import run as run_result
    from gyreprof.integrations._auto import collect

    index = folder / PROCESSES_JSON
    try:
        listed = json.loads(_io.read_bytes(index, "snapshot", what="gyreprof run --save index"))
    except FileNotFoundError:
        raise InvalidValueError(
            f"{folder} is a directory, not a gyreprof run --save folder (no {PROCESSES_JSON}); "
            "give a summary or snapshot file"
        ) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise CorruptDataError(f"cannot read {index}: {exc}") from None
    if not isinstance(listed, list):
        raise CorruptDataError(f"{index} is not a list of processes")
    entries = []
    groups: dict[int, Any] = {}  # a merged group's number -> its snapshot (None: unreadable)
    for item in listed:
        try:
            pid, role = int(item["pid"]), str(item["role"])
            contributed, how = bool(item["contributed"]), str(item.get("source", "saved"))
            loops = tuple(str(x) for x in item.get("loops", ()))
            image = item.get("image", 0)  # absent in a folder saved before images were
        except (KeyError, TypeError, ValueError, AttributeError):
            notes.append(f"skipped an entry of {PROCESSES_JSON} that names no pid and role")
            continue
        if not isinstance(image, int) or isinstance(image, bool) or image < 0:
            notes.append(f"skipped an entry of {PROCESSES_JSON} whose image is {image!r}")
            continue
        if "/" in role or role.startswith("."):
            notes.append(f"skipped an entry of {PROCESSES_JSON} whose role {role!r} is no name")
            continue
        entry = run_result.ProcessEntry(pid, role, contributed, how, loops, image=image)
        entry.node_id = _text(item.get("node_id"))  # a Ray job's worker: its node
        entry.node_ip = _text(item.get("node_ip"))
        _join_group(folder, entry, item, groups, notes)
        entries.append(entry)
    for entry, stem in zip(entries, collect.saved_stems(entries), strict=True):
        entry.sampler, entry.trainer = (
            collect._load_snap(folder / f"{stem}.{side}.snap", side, notes)
            for side in ("sampler", "trainer")
        )
        entry.sites = collect.load_sites(folder / f"{stem}.sites.json", notes)
        if stem == f"{entry.role}-{entry.pid}":  # the image that ended the process
            users = collect.read_user_profiles(folder, notes, prefix=f"{entry.role}-")
            collect.join_user_profiles([entry], [u for u in users if u.pid == entry.pid], None)
    if any(_has_data(e.trainer) and not any(u.as_trainer for u in e.user) for e in entries):
        for e in entries:  # a user trainer stands in only while no automatic one recorded
            if any(u.as_trainer for u in e.user):
                e.trainer = None
                e.user = tuple(dataclasses.replace(u, as_trainer=False) for u in e.user)
    return entries


def _join_group(
    folder: Path, entry: Any, item: dict[str, Any], groups: dict[int, Any], notes: list[str]
) -> None:
    """A process whose sampler was saved merged with its group's (``group-<n>.sampler.snap``,
    a Ray job's workers of one node and role): the group's snapshot and its own figures
    from its index entry. A group whose snapshot cannot be read leaves its processes
    without figures (with a note); figures that are not such a record, with a note."""
    from gyreprof.analysis import run as run_result
    from gyreprof.integrations._auto import collect

    n = item.get("group")
    if n is None:
        return
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        notes.append(f"skipped the group of pid {entry.pid} in {PROCESSES_JSON}: {n!r}")
        return
    if n not in groups:
        groups[n] = collect._load_snap(folder / f"group-{n}.sampler.snap", "sampler", notes)
    if groups[n] is None:
        return
    try:
        entry.figures = run_result.ProcessFigures.from_dict(item.get("figures", {}))
    except (TypeError, ValueError) as exc:
        notes.append(f"skipped the figures of pid {entry.pid} in {PROCESSES_JSON}: {exc}")
        return
    entry.group = groups[n]


def _text(value: Any) -> str:
    from gyreprof._support.format import safe_text

    return safe_text(value)[:200] if isinstance(value, str) else ""


def _has_data(snap: Any) -> bool:
    return bool(snap is not None and snap.summary().events > 0)


def _run_facts(folder: Path, notes: list[str]) -> dict[str, Any]:
    """What the folder keeps of the run itself (``run.json``; none in a folder saved
    before it was written): command, exit code, how it ended, the declared loop, notes."""
    from gyreprof._support import io as _io

    path = folder / RUN_JSON
    try:
        facts = json.loads(_io.read_bytes(path, "snapshot", what="gyreprof run --save facts"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        notes.append(f"skipped {RUN_JSON} of the folder: {str(exc)[:200]}")
        return {}
    if not isinstance(facts, dict):
        notes.append(f"skipped {RUN_JSON} of the folder: not a JSON object")
        return {}
    out: dict[str, Any] = {}
    command = facts.get("command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        out["command"] = command
    code = facts.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        out["exit_code"] = code
    for key in ("ended_by", "loop"):
        if isinstance(facts.get(key), str):
            out[key] = facts[key]
    if out.get("loop") not in (None, "sync", "overlapped"):
        del out["loop"]
    for key in ("received", "notes"):
        value = facts.get(key)
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            out[key] = value
    if isinstance(facts.get("warmup_given"), bool):
        out["warmup_given"] = facts["warmup_given"]
    n = facts.get("python_processes")
    if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        out["python_processes"] = n
    return out


def saved_run(folder: Path, loop: str | None = None) -> Any:
    """The RunReport of a ``gyreprof run --save`` folder, judged as the run was (with
    the loop it declared, or ``loop`` in its place). ValueError when the folder is not
    one (no ``processes.json``) or its ``processes.json`` is corrupt; a bad entry or
    snapshot in it is skipped with a note."""
    from gyreprof._support.advice import advice_for
    from gyreprof.analysis import run as run_result
    from gyreprof.integrations._auto import collect

    notes: list[str] = []
    entries = _saved_entries(folder, notes)
    facts = _run_facts(folder, notes)
    notes[0:0] = facts.get("notes", [])
    got = [e for e in entries if e.contributed]
    report = run_result.RunReport(
        command=facts.get("command", []),
        exit_code=facts.get("exit_code"),
        processes=entries,
        sampler=collect._merge_noting(run_result.sampler_snapshots(got), "sampler", notes),
        trainer=collect._merge_noting([e.trainer for e in got], "trainer", notes),
        notes=notes,
        python_processes=facts.get("python_processes", len(entries)),
        ended_by=facts.get("ended_by"),
        advice_for="run",
        loop=loop or facts.get("loop"),
        received=tuple(facts.get("received", ())),
        warmup_given=facts.get("warmup_given", False),
    )
    from gyreprof.integrations._auto import rollout_record

    report.rollouts = rollout_record.read_report(folder, notes)  # as the run showed them
    with advice_for(report.advice_for):
        collect._judge(report, got)
    report.notes[:] = list(dict.fromkeys(report.notes))  # the saved notes hold the judge's
    if not report.recognised:
        report.notes.insert(0, report.nothing_recognised())
    return report


# ------------------------------------------------------------------ files


def _order(sources: list[Any], paths: list[str]) -> tuple[Any, Any, list[str]]:
    """(sampler, trainer, their paths) of two profiles: the one with trainer phases is
    the trainer; otherwise the order given."""
    a, b = sources
    if _is_trainer(a) and not _is_trainer(b):
        return b, a, [paths[1], paths[0]]
    if not _is_trainer(b):
        raise UsageError(
            f"neither {paths[0]} nor {paths[1]} is a trainer profile (phases 'wait' and "
            "'compute' with samples); give a sampler and a trainer profile"
        )
    return a, b, list(paths)


def _recorded_shape(trainer: Any, path: str) -> dict[str, Any]:
    """The loop's shape as the run that saved the trainer's snapshot read it: from the
    training thread's collect blocks it counted (``loop.own`` / ``loop.fed``), else the
    shape its ``--save`` folder's index declared for the process; ``{}`` when neither
    tells (the verdict then says the shape was not detected)."""
    from gyreprof.analysis import run as run_result
    from gyreprof.integrations._auto import collect

    snap = getattr(trainer, "snapshot", None)
    if snap is None:
        return {}
    role, pid = _saved_as(Path(path))
    loops = _declared_loops(Path(path).parent, role, pid) if role else ()
    entry = run_result.ProcessEntry(pid, role or "main", True, "saved", loops, None, snap)
    return collect._loop_kwargs([entry])


def _saved_as(path: Path) -> tuple[str | None, int]:
    """The role and pid of a ``--save`` folder's snapshot name (``main-123.trainer.snap``)."""
    stem = path.name.split(".", 1)[0]
    role, _, pid = stem.rpartition("-")
    if not role or not pid.isdigit():
        return None, 0
    return role, int(pid)


def _declared_loops(folder: Path, role: str, pid: int) -> tuple[str, ...]:
    """The loop shapes the folder's index declared for the process (none when absent)."""
    try:
        listed = json.loads((folder / PROCESSES_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    for item in listed if isinstance(listed, list) else ():
        if isinstance(item, dict) and item.get("pid") == pid and item.get("role") == role:
            loops = item.get("loops", ())
            return tuple(str(x) for x in loops) if isinstance(loops, list) else ()
    return ()


def _profiles_text(
    sampler: Any, trainer: Any, names: list[str], verdict: Any, markdown: bool
) -> str:
    from gyreprof.render import markdown as render_markdown
    from gyreprof.render import text as render_text

    parts = []
    for side, src, name in (("sampler", sampler, names[0]), ("trainer", trainer, names[-1])):
        if src is None:
            continue
        # the sampler's shares are of its wall time, as the verdict reads them
        shares = render_text.wall_shares(src.summary, verdict) if side == "sampler" else None
        if markdown:
            body = render_markdown.summary(src.summary, shares)
            parts.append(f"### {side}: {name}\n\n{body}")
        else:
            parts.append(f"{side} ({name}):\n{render_text.summary(src.summary, shares)}")
    if verdict.wait_report is not None:
        wr = verdict.wait_report
        parts.append(render_markdown.wait_report(wr) if markdown else render_text.wait_report(wr))
    parts.append(render_markdown.verdict(verdict) if markdown else render_text.verdict(verdict))
    return "\n\n".join(parts)


def _profiles_json(sampler: Any, trainer: Any, verdict: Any) -> dict[str, Any]:
    return {
        "format": REPORT_FORMAT,
        "verdict": verdict.to_dict(),
        "wait": verdict.wait_report.to_dict() if verdict.wait_report is not None else None,
        "sampler": sampler.summary.to_dict(histograms=False) if sampler is not None else None,
        "trainer": trainer.summary.to_dict(histograms=False) if trainer is not None else None,
    }


class _Held:
    """A summary where a run's report holds a snapshot (``.summary()``): the merged
    summaries ``gyreprof run --json`` wrote."""

    def __init__(self, summary: Any) -> None:
        self._summary = summary

    def summary(self) -> Any:
        return self._summary


def _run_record(path: Path) -> Any:
    """The record in a file ``gyreprof run --json`` wrote (format ``gyreprof.run/1``), or
    None for any other file (read as a profile as before)."""
    from gyreprof._support import io as _io
    from gyreprof.analysis import run as run_result

    try:
        if _io.read_head(path, 1) != b"{":
            return None
        data = json.loads(_io.read_bytes(path, "snapshot", what="gyreprof run --json"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != run_result.FORMAT:
        return None
    try:
        return run_result.RunRecord.from_dict(data)
    except ValueError as exc:
        raise UsageError(f"{path}: not a readable gyreprof run --json record: {exc}") from None


def _report_record(args: argparse.Namespace, path: Path, record: Any, html_out: Path | None) -> int:
    """The run's report again from its ``--json`` record: the same verdict, wait report,
    summaries and processes, so the same shares and loop shape as the run printed."""
    from gyreprof.analysis import run as run_result

    report = run_result.RunReport(
        command=[],
        exit_code=record.exit_code,
        processes=list(record.processes),
        sampler=_Held(record.sampler) if record.sampler is not None else None,
        trainer=_Held(record.trainer) if record.trainer is not None else None,
        wait=record.wait,
        verdict=record.verdict,
        notes=list(record.notes),
        python_processes=len(record.processes),
        advice_for="run",
        rollouts=record.rollouts,
        start_up=record.start_up,
    )
    head = f"gyreprof report: gyreprof run --json record {path} (exit code {record.exit_code})"
    return _show_run(report, args, html_out, path, head)


def _show_run(
    report: Any, args: argparse.Namespace, html_out: Path | None, source: Path, head: str
) -> int:
    """One run's report through the door ``args`` asked for: HTML beside any of the
    others, then JSON, Markdown or the text headed by ``head``."""
    from gyreprof.render import text as render_text

    if html_out is not None:
        from gyreprof.export import html_report

        html_report(report, html_out, title=f"gyreprof report: {source}")
        print(f"wrote {html_out}", file=sys.stderr)
    if args.json:
        print(report.to_json(indent=2))
    elif args.markdown:
        _print(report.to_markdown())
    else:
        verbose = bool(getattr(args, "verbose", False))
        _print(head + "\n" + render_text.run_report(report, verbose=verbose))
    return 0


def _print(text: str) -> None:
    print(safe_text(text))


def _report_folder(args: argparse.Namespace, folder: Path, html_out: Path | None) -> int:
    try:
        report = saved_run(folder, args.loop)
    except (InvalidValueError, CorruptDataError) as exc:  # a usage error at the command line
        raise UsageError(str(exc)) from None
    return _show_run(report, args, html_out, folder, f"gyreprof report: saved run {folder}")


def run(args: argparse.Namespace) -> int:
    from gyreprof.commands._args import require_extra

    if args.plot is not None:
        require_extra("--plot", "matplotlib", "plot")
    if args.html is not None:
        require_extra("--html (its pictures)", "matplotlib", "plot")
    plot_out = _check_out("--plot", args.plot, ".png")
    html_out = _check_out("--html", args.html, ".html")
    paths: list[str] = list(args.file)
    if len(paths) > 2:
        raise UsageError("give one file, a sampler and a trainer file, or one --save folder")
    if len(paths) == 1 and Path(paths[0]).is_dir():
        if plot_out is not None:
            raise UsageError("--plot takes a file, not a --save folder; use --html")
        return _report_folder(args, Path(paths[0]), html_out)
    record = _run_record(Path(paths[0])) if len(paths) == 1 else None
    if record is not None:
        if plot_out is not None:
            raise UsageError("--plot takes a profile file, not gyreprof run's --json; use --html")
        if args.loop is not None:
            raise UsageError(
                "--loop judges profiles again; gyreprof run's --json holds the run's verdict "
                "as it was (give its --save folder to judge it again)"
            )
        return _report_record(args, Path(paths[0]), record, html_out)
    from gyreprof._support.advice import advice_for

    with advice_for("report"):  # "next" lines name this command's options and files
        return _report_files(args, paths, plot_out, html_out)


def _report_files(
    args: argparse.Namespace, paths: list[str], plot_out: Path | None, html_out: Path | None
) -> int:
    from gyreprof.analysis.verdict import diagnose
    from gyreprof.recording.source import resolve

    # read once, resolved once: the plot, the HTML page and the verdict take the same Source
    sources = [resolve(_load_source(p), what="gyreprof report") for p in paths]
    sampler: Any
    trainer: Any
    if len(sources) == 2:
        sampler, trainer, names = _order(sources, paths)
    elif _is_trainer(sources[0]):
        sampler, trainer, names = None, sources[0], paths
    else:
        sampler, trainer, names = sources[0], None, paths
        _why_not_a_trainer(sources[0])
    verdict = None
    if trainer is not None:
        shape = {"loop": args.loop} if args.loop else _recorded_shape(trainer, names[-1])
        try:
            verdict = diagnose(sampler=sampler, trainer=trainer, **shape)
        except ValueError as exc:
            if sampler is not None:
                raise UsageError(f"no verdict: {exc}") from None
            print(f"gyreprof report: no verdict: {exc}", file=sys.stderr)
    main = trainer if sampler is None else sampler
    if plot_out is not None or html_out is not None:
        from gyreprof.export import html_report, plot_report

        if plot_out is not None:
            plot_report(main, plot_out)
            print(f"wrote {plot_out}", file=sys.stderr)
        if html_out is not None:
            html_report(main, html_out, verdict=verdict, trainer=trainer)
            print(f"wrote {html_out}", file=sys.stderr)
    if verdict is None:
        summary = main.summary
        if args.json:
            json.dump(summary.to_dict(histograms=False), sys.stdout, indent=2)
            print()
        elif args.markdown:
            _print(summary.to_markdown())
        else:
            _print(str(summary))
        return 0
    if args.json:
        json.dump(_profiles_json(sampler, trainer, verdict), sys.stdout, indent=2)
        print()
    else:
        _print(_profiles_text(sampler, trainer, names, verdict, args.markdown))
    return 0
