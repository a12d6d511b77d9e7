"""The result of a ``gyreprof run``: every process's entry, the merged sides, the verdict
and the notes (:class:`RunReport`), and what of it is written (:class:`RunRecord`, format
``gyreprof.run/1``). ``gyreprof.integrations._auto.collect`` builds one from a run folder;
the renderers and ``gyreprof report`` read it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gyreprof._support import forms as _forms
from gyreprof.model._serial import Record, loads, serial_format

if TYPE_CHECKING:
    from gyreprof.analysis.rollouts import RolloutReport
    from gyreprof.analysis.startup import StartUp
    from gyreprof.analysis.verdict import Verdict
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.model.snapshot import SnapshotRecords
    from gyreprof.model.summary import Summary, WarmupInfo

FORMAT = "gyreprof.run/1"
#: how to mark a trainer by hand, as the report prints it: the set-up lines go at the top
#: of the script, the loop lines inside its training loop. Under ``gyreprof run`` the
#: Profiler joins the run's report; ``gyreprof report trainer.snap`` reads it again.
HAND_MARKING_SETUP = (
    "import gyreprof as gp",
    'tp = gp.Profiler(["wait", "compute"], autosave="trainer.snap")',
)
HAND_MARKING_LOOP = (
    'with tp.phase("wait"): batch = next(batches)',
    'with tp.phase("compute"): update(batch)',
)
HAND_MARKING = (
    *HAND_MARKING_SETUP,
    "# and in the training loop, around fetching a batch and around the update:",
    *HAND_MARKING_LOOP,
)
#: signals that mean a crash (the others that end a command stop it from outside)
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGILL", "SIGSYS", "SIGTRAP"})


@dataclass(frozen=True)
class UserProfile:
    """A Profiler the user created in a process of the run (``<pid>.user-<n>.snap``).

    ``as_trainer``: it stands for the process's trainer (phases ``wait`` and ``compute``,
    while no automatic trainer recorded anything in the run)."""

    pid: int
    index: int
    snapshot: Any  # Snapshot
    as_trainer: bool = False

    @property
    def name(self) -> str:
        """The profiler as the report names it: its label, else its phases."""
        from gyreprof._support.format import safe_name

        label = self.snapshot.meta.label
        if label:
            return safe_name(label)
        return "Profiler([" + ", ".join(repr(safe_name(p)) for p in self.snapshot.phases) + "])"


@dataclass(frozen=True)
class PhaseTotal(Record):
    """One phase of a process: its steady calls and their time (ns; NaN when unknown)."""

    count: int
    sum_ns: float


@dataclass(frozen=True)
class ProcessFigures(Record):
    """A process's own sampler figures, kept where its snapshot was merged with others'
    (a Ray job's workers of one node and role, :attr:`ProcessEntry.group`): what the
    report shows per process, read the way a :class:`~gyreprof.model.summary.Summary`
    is (``phases[name].count`` and ``.sum_ns``, ``events``, ``elapsed_s``, ``warmup``),
    and the snapshot's own counters (a collector's batches among them)."""

    events: int
    elapsed_s: float
    phases: dict[str, PhaseTotal]
    warmup: WarmupInfo
    counters: dict[str, int]

    @classmethod
    def of(cls, snap: SnapshotRecords) -> ProcessFigures:
        """The figures of ``snap`` (a Snapshot, or an EncodedSnapshot: its records alone),
        as its Summary gives them, without the Summary's percentiles."""
        from gyreprof.model.summary import steady_sum_ns, warmup_info

        return cls(
            events=snap.totals.events,
            elapsed_s=snap.steady_ns / 1e9,
            phases={r.name: PhaseTotal(r.count, steady_sum_ns(r)) for r in snap.rows[:-1]},
            warmup=warmup_info(snap),
            counters=dict(snap.counters),
        )


@dataclass
class ProcessEntry(Record):
    """One process of the run: did its numbers reach the report, and how."""

    pid: int
    role: str
    contributed: bool
    source: str  # exit | sigterm | mp-exit | live segment | none
    loops: tuple[str, ...] = field(default=(), metadata={"serial": False})
    sampler: Any = field(default=None, metadata={"serial": False})  # Snapshot
    trainer: Any = field(default=None, metadata={"serial": False})  # Snapshot
    # the Profilers the user created in the process (gyreprof run reads them too)
    user: tuple[UserProfile, ...] = field(default=(), metadata={"serial": False})
    # the process image within the pid: 0, then one more after each exec (os.execv keeps
    # the pid), so each image of an exec chain is a record of its own (a --save folder's
    # processes.json keeps it; the run JSON names the images by their source)
    image: int = field(default=0, metadata={"serial": False})
    # the code sites its stack sampler found (analysis.sites.ProcessSites), or None
    sites: Any = field(default=None, metadata={"serial": False})
    # the Ray node the process ran on (a job's worker reached through Ray; "" elsewhere)
    node_id: str = field(default="", metadata={"serial_sparse": True})
    node_ip: str = field(default="", metadata={"serial_sparse": True})
    # a process whose sampler snapshot was merged with the others of its node and role (a
    # Ray job's workers): that merged snapshot, shared by the group's entries, and its own
    # figures; its ``sampler`` is then None
    group: Any = field(default=None, metadata={"serial": False})  # Snapshot
    figures: ProcessFigures | None = field(default=None, metadata={"serial": False})

    def sampler_figures(self) -> Any:
        """The process's own sampler figures (a Summary, or :class:`ProcessFigures` where
        its snapshot was merged into its group's); None when it kept no sampler."""
        if self.sampler is not None:
            return self.sampler.summary()
        return self.figures


def sampler_snapshots(entries: list[ProcessEntry]) -> list[Any]:
    """The sampler snapshots that hold ``entries``' sampling: each process's own, and each
    merged group's once."""
    out: list[Any] = []
    seen: set[int] = set()
    for e in entries:
        if e.sampler is not None:
            out.append(e.sampler)
        elif e.group is not None and id(e.group) not in seen:
            seen.add(id(e.group))
            out.append(e.group)
    return out


#: a part of the run record nested whole, with its own format tag and version
_WHOLE = {"serial_whole": True}


def __getattr__(name: str) -> Any:
    # the types of RunRecord's parts, imported when a record is first read (gyreprof.model._serial
    # resolves them here), so importing this module (sb3, torchrl sessions) stays light
    if name == "Verdict":
        from gyreprof.analysis.verdict import Verdict

        return Verdict
    if name == "WaitReport":
        from gyreprof.analysis.wait import WaitReport

        return WaitReport
    if name == "Summary":
        from gyreprof.model.summary import Summary

        return Summary
    if name == "WarmupInfo":
        from gyreprof.model.summary import WarmupInfo

        return WarmupInfo
    if name == "RolloutReport":
        from gyreprof.analysis.rollouts import RolloutReport

        return RolloutReport
    if name == "StartUp":
        from gyreprof.analysis.startup import StartUp

        return StartUp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@serial_format(FORMAT)
@dataclass(frozen=True)
class RunRecord(Record):
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
    rollouts: RolloutReport | None = field(default=None, metadata=_WHOLE)  # HTTP requests
    # the trainer's first step, left out of its steady state as start-up (analysis.startup)
    start_up: StartUp | None = None

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
    # where the report is read, for the wording of its advice (gyreprof._support.advice)
    advice_for: str = "code"
    loop: str | None = None  # the loop's shape as declared (gyreprof run --loop)
    received: tuple[str, ...] = ()  # signals gyreprof run received while the command ran
    rollouts: Any = None  # RolloutReport of the HTTP rollout requests, or None
    # the launcher was given a warm-up rule (--warmup-steps / --warmup-s, 0 included): the
    # trainer's first step is then never told apart as start-up
    warmup_given: bool = False
    start_up: Any = None  # analysis.startup.StartUp: the first step told apart, or None
    # pid -> why its Python could not be instrumented (``<pid>.uninstrumented``)
    uninstrumented: dict[int, str] = field(default_factory=dict)
    # threads and processes that died of an exception (integrations._auto.deaths.Death),
    # the main process's main thread left out (the program's own end)
    deaths: list[Any] = field(default_factory=list)
    # a multi-process collector's workers, their batches timed in them
    # (analysis.workers.CollectorWorkers), or None
    workers: Any = None

    @property
    def contributed(self) -> list[ProcessEntry]:
        return [p for p in self.processes if p.contributed]

    @property
    def missing(self) -> list[ProcessEntry]:
        return [p for p in self.processes if not p.contributed]

    @property
    def recognised(self) -> bool:
        return (
            self.sampler is not None
            or self.trainer is not None
            or self.rollouts is not None
            or any(e.user for e in self.contributed)
        )

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
            rollouts=self.rollouts,
            start_up=self.start_up,
        )

    def to_dict(self) -> dict[str, Any]:
        """Format ``gyreprof.run/1`` (:class:`RunRecord`; strict JSON: ``null`` for a
        missing figure)."""
        return self.record().to_dict()

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """Strict JSON text of :meth:`to_dict`; written to ``path`` as well when given."""
        return _forms.text("json.write", self.to_dict(), path, indent=indent)

    def processes_line(self) -> str:
        return _forms.text("text.run_processes", self)

    def to_markdown(self) -> str:
        return _forms.text("markdown.run_report", self)

    def __str__(self) -> str:
        return _forms.text("text.run_report", self)

    def nothing_recognised(self) -> str:
        """Why the report has no numbers, and what to do: a crash, a stop from outside and a
        failed command each in their own words (pointing at the start-up trail notes);
        the hand-marking hint only for a command that ran to its end."""
        ended = _ended_early(self)
        if ended is not None:
            return ended
        if self.uninstrumented and self.python_processes == 0:
            pid, why = next(iter(sorted(self.uninstrumented.items())))
            return (
                f"nothing recorded: the command's Python could not be instrumented (pid {pid}: "
                f"{why}); install gyreprof with its dependencies (numpy, psutil) in that "
                "Python, or run the command with the Python gyreprof is installed in"
            )
        if self.python_processes == 0:
            why = f"no Python process of this command was instrumented ({_NOT_PYTHON})"
        else:
            why = (
                f"{self.python_processes} Python process(es) ran, but none stepped a gymnasium "
                "env, ran a stable-baselines3 algorithm or iterated a TorchRL collector"
            )
        return (
            f"nothing recognised: {why}. Mark the phases by hand in your script (under gyreprof "
            "run the Profiler joins this report; gyreprof report trainer.snap reads it "
            "again):\n    " + "\n    ".join(HAND_MARKING)
        )


_NOT_PYTHON = "is it a Python program? `python -I`, `-E` and `-S` skip the start-up hook"


def _trail_pointer(report: RunReport) -> str:
    """Where the report's own evidence of the failure is: the trail notes, if any (a trail
    that holds nothing beyond the launch adds no note)."""
    if any("start-up trail" in n or "its stacks" in n for n in report.notes):
        return "; what its start-up trail shows is in the notes below"
    return ""


def _ended_early(report: RunReport) -> str | None:
    """The words for a command that did not run to its end before recording anything: a
    crash (a fatal signal), a stop from outside (SIGINT, SIGTERM, SIGKILL: interrupted or
    timed out), a non-zero exit code; None for a command that ran to completion."""
    before = "before any step or phase was recorded"
    code = "" if report.exit_code is None else f", exit code {report.exit_code}"
    where = _trail_pointer(report)
    name = report.ended_by
    if name is not None:
        if name in CRASH_SIGNALS or not name.startswith("SIG"):
            return (
                f"nothing recorded: the command crashed ({name}{code}) {before}, so there is "
                f"nothing to judge; fix the crash first{where}"
            )
        return (
            f"nothing recorded: the command was stopped by {name}{code} {before}: it was "
            "interrupted or timed out while starting up, before its loop recorded anything"
            f"{where}"
        )
    if report.exit_code not in (None, 0):
        if report.python_processes == 0:
            return (
                f"nothing recorded: the command exited with code {report.exit_code}, and no "
                f"Python process of it was instrumented ({_NOT_PYTHON})"
            )
        if report.received:
            got = ", ".join(report.received)
            return (
                f"nothing recorded: the command was interrupted (gyreprof run received {got}) "
                f"and exited with code {report.exit_code} {before}{where}"
            )
        return (
            f"nothing recorded: the command failed (exit code {report.exit_code}) {before}: "
            f"it ended before its loop started (its own error output above says why){where}"
        )
    return None


def _ending_notes(report: RunReport) -> list[str]:
    """For a run that recorded something but did not end well: what the numbers cover."""
    if not report.recognised or report.exit_code in (None, 0) or report.ended_by is not None:
        return []
    return [
        f"the command exited with code {report.exit_code}: the numbers cover what it "
        "recorded until then"
    ]
