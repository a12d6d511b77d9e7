"""Why does nothing move?  Classify a process from evidence: absent, spinning, blocked,
busy, retrying, progressing.

``doctor(pid, log=None, interval_s=2.0)`` looks at the process several times
over ``interval_s`` seconds (psutil everywhere; ``/proc`` on Linux for each
thread's scheduler state, kernel wait channel, system call and open files) and
returns a :class:`ProcessDiagnosis`:

``absent``       no such process (or it exited and is a zombie).  With ``log=`` the
                 log's last lines are shown: a start-up exception hidden by output
                 buffering is the usual cause.
``spinning``     alive, burning CPU (at least ``SPIN_CPU_SHARE`` of one core, or runnable
                 at ``BUSY_RUNNING_SHARE`` of the looks), and the
                 live segment, ``step_file=`` or ``log=`` shows no progress; or busy
                 while the output files found have not changed for ``quiet_after_s``
                 (default 5 min); or *low-CPU spinning*: a loop that wakes often
                 (``POLL_WAKEUPS_PER_S``, in short sleeps or polls) with little CPU,
                 moving no data and making no progress (a poll loop on an empty queue),
                 with or without ``log=``.
``blocked``      alive, little CPU, no progress; each thread's kernel wait channel and
                 system call (and the socket or file it waits on) where readable. Said
                 first where found: a thread that died while the main thread waits on
                 what it fed, a zombie child, a lock-order (or possible) deadlock.
``busy``         alive, burning CPU, and no progress signal at all: nothing tells useful
                 work from a loop that spins (pass ``--log`` or publish a live segment).
``retrying``     alive and adding lines, but only failure lines (connection refused,
                 timeouts, HTTP 5xx/4xx, empty results, retry/backoff, tracebacks) and
                 no progress line; or a retry-like live counter rises while the step
                 counter does not; or the thread count grows and the new threads all
                 wait on the same peer; or repeated connection attempts to one
                 endpoint seen below the log (SYN_SENT sockets coming and going, new
                 sockets to one peer, a ``gyreprof run`` trail's swallowed connection
                 errors, a main thread sleeping while it holds a caught connection
                 error, by py-spy's locals). Names the kind, the count, the last line
                 and the endpoint; the endpoints are probed (see below).
``progressing``  a counter that moves: the step counter, the launcher's records, or
                 lines added to the log or a file the process writes that carry a step,
                 iteration, epoch, sample count or loss whose value changed since the
                 previous such line (or match ``progress=`` REGEX). Growth alone, a
                 repeated value or a heartbeat is never progress ("alive, writes, no
                 step moves").

Progress evidence, best first (the diagnosis says which one it used):

1. a gyreprof live segment published by the process (``gyreprof.live``): its step
   counter, open phase and event counters;
2. ``step_file=``: a file whose whole content is the step counter as an integer;
3. ``log=``: the log file's size and modification time, and the lines it gained;
4. found without being named (Linux ``/proc``): the process's stdout and stderr when
   redirected to a regular file, and the other regular files it holds open for
   writing (logs, TensorBoard event files, checkpoints). The lines the log and each
   text file found gained are read (see :mod:`._loglines`): one whose counter moved
   is progress, and growth without one is not ("alive, writes, no step moves").
   One that does not grow is *not* taken as proof of a stall -- a training loop may
   print once a minute -- so a busy process whose found files stay quiet is ``busy``
   (the files are listed), not ``spinning``; name the file with ``log=`` to make its
   silence count, or observe longer;
5. otherwise nothing: a busy process is ``busy``, an idle one ``blocked``.  CPU time
   alone never counts as progress, since a busy loop burns CPU too.

Under ``gyreprof run`` the launcher records env steps and trainer phases in live
segments without marking sampler steps: the events it records are the progress
evidence there (never advice to wait longer for step marks that cannot come).

Lines read: what the log and the text files found gained during the observation, at
most the last ``_loglines.MAX_READ_BYTES`` (1 MiB) of each file, lines cut at
``_loglines.MAX_LINE_CHARS``. A live Python process whose stdout is a file or a
pipe, that has written nothing and runs without ``-u`` or ``PYTHONUNBUFFERED``, is
said to be block-buffered (stderr too before Python 3.9; since then it is
line-buffered). That is a reason, not evidence: an empty ``log=`` of such a process
is no progress signal either way, and CPU (and stacks) decide its state.

Endpoint probes: each endpoint the process is connecting to (``SYN_SENT``) or
connected to with no bytes moving, and each endpoint named in failure lines,
gets one TCP connect (loopback and the process's own peers only; see
:mod:`gyreprof.diagnostics._probe`); ``probe=`` URLs get an HTTP GET.

Also reported: the thread-count trend across the samples (a growing count suggests
a retry storm or a thread leak), a ``retrying`` finding when a retry-like counter of
the live segment moves while the step counter does not, and Python stacks from
``py-spy dump`` when ``py-spy`` is found (on ``PATH``, beside ``sys.executable`` or in
the target's own virtualenv; otherwise how to get them).

Exit codes (``ProcessDiagnosis.exit_code`` and ``gyreprof doctor``):

=============  ====
progressing    0
absent         3
blocked        4
spinning       5
busy           6
retrying       7
=============  ====

(2 is left to command-line errors, 1 to unexpected failures.)

The work is split by job: :mod:`._doctor_evidence` gathers the evidence,
:mod:`._doctor_rules` holds the rule table that makes a state of it (its order is
documented there), :mod:`._doctor_text` renders the diagnosis; this module checks
the arguments, observes the process and assembles the :class:`ProcessDiagnosis`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.validate import check_positive_number
from gyreprof.diagnostics import _deadlock, _doctor_text, _feeders, _loglines, _probe, _procfs
from gyreprof.diagnostics._doctor_evidence import (
    ThreadWait,
    _activity_words,
    _block_buffered,
    _counter_findings,
    _Gone,
    _held_retry,
    _line_regions,
    _LiveProbe,
    _main_sleeps,
    _new_thread_wait,
    _poll_spin,
    _Progress,
    _progress,
    _py_spy,
    _quiet_output,
    _running_share,
    _Sample,
    _sample,
    _share_words,
    _socket_map,
    _SocketWatch,
    _startup_trail,
    _stuck_endpoints,
    _thread_count_words,
    _thread_findings,
    _thread_trend,
    _thread_waits,
    _trail_attempts,
    _trail_deaths,
    read_log_tail,
)
from gyreprof.diagnostics._doctor_rules import (
    BUSY_CPU_SHARE,
    BUSY_RUNNING_SHARE,
    IDLE_CPU_SHARE,
    IDLE_IO_BYTES,
    MAIN_WAKEUPS_PER_S,
    POLL_WAKEUPS_PER_S,
    QUIET_AFTER_S,
    RETRY_NEW_THREADS,
    RULES,
    SPIN_CPU_SHARE,
    Facts,
    decide,
    is_busy,
)
from gyreprof.model._serial import decode, encode, serial_format

__all__ = [
    "BUSY_CPU_SHARE",
    "BUSY_RUNNING_SHARE",
    "DIAGNOSIS_FORMAT",
    "EXIT_CODES",
    "IDLE_CPU_SHARE",
    "IDLE_IO_BYTES",
    "MAIN_WAKEUPS_PER_S",
    "POLL_WAKEUPS_PER_S",
    "QUIET_AFTER_S",
    "RETRY_NEW_THREADS",
    "RULES",
    "SPIN_CPU_SHARE",
    "STATES",
    "ProcessDiagnosis",
    "ThreadWait",
    "doctor",
    "read_log_tail",
]

DIAGNOSIS_FORMAT = "gyreprof.doctor/1"

STATES = ("absent", "spinning", "blocked", "busy", "retrying", "progressing")
EXIT_CODES: dict[str, int] = {
    "progressing": 0,
    "absent": 3,
    "blocked": 4,
    "spinning": 5,
    "busy": 6,
    "retrying": 7,
}


@serial_format(DIAGNOSIS_FORMAT)
@dataclass(frozen=True)
class ProcessDiagnosis:
    """The doctor's answer for one process.

    ``state`` is one of ``absent``, ``spinning``, ``blocked``, ``busy``,
    ``retrying`` (alive, adding only failure / retry lines, retry counters or
    threads waiting on one thing: exit code 7), ``progressing``; ``evidence``
    lists, in plain words, what was seen; ``exit_code`` is the state's exit code
    (0 progressing, 3 absent, 4 blocked, 5 spinning, 6 busy, 7 retrying).
    ``failure_lines`` counts the failure lines read by kind, ``progress_lines`` the
    progress lines (None: no lines read), ``last_failure`` quotes the last failure
    line, ``endpoints`` lists the endpoints named or seen stuck, ``probes`` what
    probing them found.
    ``cpu_share`` is CPU seconds per wall second over the observation (1.0 = one
    core); ``progress_source`` is the evidence used: ``"live"``, ``"step_file"``,
    ``"log"``, ``"files"`` (files found open for writing) or ``"none"`` (no
    progress signal); ``watched`` lists the files found and watched, each as
    ``"PATH (role)"``.
    """

    pid: int
    state: str
    evidence: list[str]
    exit_code: int
    interval_s: float
    progress_source: str | None = None
    progressed: bool | None = None
    cpu_share: float | None = None
    command: str | None = None
    status: str | None = None
    thread_counts: list[int] = field(default_factory=list)
    thread_trend: str | None = None
    threads: list[ThreadWait] = field(default_factory=list)
    wchan: str | None = None
    steps: tuple[int, int] | None = None
    open_phase: str | None = None
    counter_rates: dict[str, float] = field(default_factory=dict)
    retrying: bool = False
    log: str | None = None
    log_tail: list[str] = field(default_factory=list)
    stacks: str | None = None
    stacks_hint: str | None = None
    watched: list[str] = field(default_factory=list)
    failure_lines: dict[str, int] = field(default_factory=dict)
    progress_lines: int | None = None
    last_failure: str | None = None
    endpoints: list[str] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field, format ``gyreprof.doctor/1``."""
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessDiagnosis:
        """The diagnosis again from :meth:`to_dict`; ``CorruptDataError`` naming what is wrong."""
        return decode(cls, data)

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """Strict JSON text of :meth:`to_dict`; written to ``path`` as well (atomically)
        when given."""
        from gyreprof.render import json as render_json

        return render_json.write(self.to_dict(), path, indent=indent)

    def __str__(self) -> str:
        return _doctor_text.render(self)


def _check_pid(pid: object) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int):
        try:
            pid = int(str(pid))
        except ValueError:
            raise InvalidValueError(f"pid must be a positive integer, got {pid!r}") from None
    if pid <= 0:
        raise InvalidValueError(f"pid must be a positive integer, got {pid}")
    return pid


def _check_file_arg(path: str | os.PathLike[str] | None, what: str) -> Path | None:
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise InvalidValueError(
            f"{what} {str(p)!r} is a directory; pass the file the process writes"
        )
    if p.exists() and not os.access(p, os.R_OK):
        raise InvalidValueError(f"{what} {str(p)!r} is not readable (permission denied)")
    return p


def _absent(pid: int, interval_s: float, log: Path | None, why: str) -> ProcessDiagnosis:
    evidence = [why]
    tail: list[str] = []
    if log is not None:
        if log.exists():
            try:
                tail = read_log_tail(log)
            except (OSError, ValueError) as exc:  # ValueError: a FIFO or device
                evidence.append(f"the log {str(log)!r} could not be read ({exc})")
            else:
                if tail:
                    evidence.append(
                        f"the log {str(log)!r} ends with the lines below; a start-up exception "
                        "is usually the last thing written"
                    )
                else:
                    evidence.append(f"the log {str(log)!r} is empty")
        else:
            evidence.append(f"the log {str(log)!r} does not exist: nothing was written there")
    if log is None:
        evidence.append("pass --log FILE (where its output went) to see how it ended")
    else:
        evidence.append(
            "if the log stops short of the failure, output was buffered: run Python unbuffered "
            "(python -u or PYTHONUNBUFFERED=1) and call gp.banner(log=...) at start-up"
        )
    return ProcessDiagnosis(
        pid=pid,
        state="absent",
        evidence=evidence,
        exit_code=EXIT_CODES["absent"],
        interval_s=interval_s,
        log=str(log) if log is not None else None,
        log_tail=tail,
    )


def _zombie_why(proc: psutil.Process, pid: int) -> str:
    try:
        parent = proc.ppid()
    except psutil.Error:
        return f"process {pid} has exited (a zombie waiting for its parent to reap it)"
    return f"process {pid} has exited (a zombie waiting for its parent, pid {parent}, to reap it)"


def doctor(
    pid: int,
    log: str | os.PathLike[str] | None = None,
    interval_s: float = 2.0,
    *,
    step_file: str | os.PathLike[str] | None = None,
    samples: int = 5,
    stacks: bool = True,
    progress: str | None = None,
    probe: Sequence[str] = (),
    quiet_after_s: float = QUIET_AFTER_S,
    probe_timeout_s: float = _probe.PROBE_TIMEOUT_S,
) -> ProcessDiagnosis:
    """Observe process ``pid`` for ``interval_s`` seconds and say whether it is absent,
    spinning, blocked, busy or progressing, with the evidence.

    ``log``: a file the process writes (its growth is progress, its silence a stall;
    its tail is shown when the process is gone).  Without it, the files the process
    writes are found in ``/proc`` (stdout / stderr redirected to a file, files open
    for writing): their growth is progress, their silence is not taken as a stall.  ``step_file``: a file holding the step counter as an
    integer.  ``samples``: how many looks spread over the interval (at least 2; the
    thread-count trend uses all of them).  ``stacks``: run ``py-spy dump`` on a
    spinning or blocked process when py-spy is installed.  ``progress``: a regular
    expression that marks the process's own progress lines (beside the step / loss /
    iteration / rate lines recognised anyway).  ``probe``: health URLs to GET (loopback
    or the process's peers only).  ``quiet_after_s``: a busy process whose found output
    has not changed for this long is spinning.  ``probe_timeout_s``: how long each
    endpoint probe waits.

    Raises ``ValueError`` for a pid that is not a positive integer, a non-positive
    interval, a log / step file path that is a directory or unreadable, a bad
    ``progress`` expression or ``probe`` URL.  A
    missing process is not an error: it is the ``absent`` state.
    """
    pid = _check_pid(pid)
    check_positive_number("interval_s", interval_s, unit="seconds")
    if samples < 2:
        raise InvalidValueError(f"samples must be at least 2 (one look at each end), got {samples}")
    log_path = _check_file_arg(log, "log")
    step_path = _check_file_arg(step_file, "step_file")
    interval_s = float(interval_s)
    progress_rx = _loglines.compile_progress(progress)
    if isinstance(probe, str):
        probe = [probe]
    urls = [_probe.check_url(u) for u in probe]
    check_positive_number("quiet_after_s", quiet_after_s, unit="seconds")
    check_positive_number("probe_timeout_s", probe_timeout_s, unit="seconds")
    opts = _Options(progress_rx, urls, float(quiet_after_s), float(probe_timeout_s))

    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return _absent(pid, interval_s, log_path, f"no process with pid {pid} exists")
    try:
        command = " ".join(proc.cmdline()) or proc.name()
    except psutil.ZombieProcess:
        return _absent(pid, interval_s, log_path, _zombie_why(proc, pid))
    except psutil.NoSuchProcess:
        return _absent(pid, interval_s, log_path, f"process {pid} exited just now")
    except psutil.AccessDenied:
        command = None

    live = _LiveProbe(pid)
    watch = _SocketWatch(proc)
    t0 = time.monotonic()
    taken: list[_Sample] = []
    try:
        for i in range(samples):
            if i:
                watch.sleep_until(t0 + interval_s * i / (samples - 1))
            else:
                watch.look()
            edge = i in (0, samples - 1)
            taken.append(_sample(proc, pid, live, log_path, step_path, t0, launcher=edge))
    except _Gone:
        live.close()
        if taken:
            why = f"process {pid} exited during the observation"
        elif psutil.pid_exists(pid):
            why = _zombie_why(proc, pid)
        else:
            why = f"process {pid} exited just now"
        return _absent(pid, interval_s, log_path, why)
    live.close()
    sockets = _socket_map(proc)
    return _classify(
        pid,
        command,
        interval_s,
        taken,
        live,
        log_path,
        step_path,
        sockets,
        proc,
        stacks,
        opts,
        watch,
    )


@dataclass(frozen=True)
class _Options:
    progress_rx: re.Pattern[str] | None = None
    urls: Sequence[str] = ()
    quiet_after_s: float = QUIET_AFTER_S
    probe_timeout_s: float = _probe.PROBE_TIMEOUT_S


def _state(
    status: str | None,
    progress: _Progress,
    cpu_share: float | None,
    running_share: float,
    pid: int,
    activity: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """The state from the process status, the progress evidence and how busy it was
    alone: the rule table applied to those facts, with no line, counter or thread
    finding."""
    facts = Facts(
        pid=pid,
        status=status,
        progressed=progress.progressed,
        source=progress.source,
        busy=is_busy(cpu_share, running_share),
        activity=tuple(activity),
    )
    decision = decide(facts)
    return decision.state, decision.why


def _counter_progress(
    progress: _Progress, lines: _loglines.LineReport, evidence: list[str]
) -> _Progress:
    """Progress is a counter that moves: growth of the log or of the files found is not
    progress unless a line it added carries a step / iteration / epoch / sample count /
    loss whose value changed (or matches ``--progress``); such lines are progress
    whatever the other evidence says. Adds the words that say which."""
    if lines.progress and not progress.progressed:
        src = progress.source if progress.source in ("log", "files") else "log"
        words = (
            f"{lines.progress} added line(s) carry a counter that moved: {lines.last_progress!r}"
        )
        evidence.append(words)
        return _Progress(src, True, progress.evidence + [words], progress.steps, progress.watched)
    if progress.progressed and lines.failure_count and lines.progress:
        evidence.append(
            f"{lines.failure_count} failure line(s) among {lines.progress} progress lines: "
            "a loop that retries now and then but moves"
        )
    if not progress.progressed or progress.source not in ("log", "files") or lines.progress:
        return progress
    # it grew, but no counter moved: alive, not progressing
    if lines.still:
        why = (
            f"its step lines repeat the same value ({lines.last_still!r}): a heartbeat, not a step"
        )
    elif lines.failure_count:
        why = "the lines it added are failures"
    elif lines.lines:
        why = (
            "the lines it added carry no step, iteration, epoch, sample count or loss; pass "
            "--progress REGEX to name the process's own"
        )
    else:
        why = "no text line was added (growth alone is not progress)"
    evidence.append(f"alive, writes, no step moves: {why}")
    # a named log, or lines read whose counter stood still: it stood still; growth of a
    # found file with no counter to read is no signal either way
    stood = progress.source == "log" or bool(lines.still) or bool(lines.failure_count)
    return _Progress(
        progress.source,
        False if stood else None,
        progress.evidence,
        progress.steps,
        progress.watched,
    )


def _deadlock_words(
    pid: int,
    proc: psutil.Process,
    stacks: str | None,
    waits: Sequence[ThreadWait],
    evidence: Sequence[str],
) -> list[str]:
    """A lock-order deadlock the stacks show; without one, and with no dead feeder said,
    a possible deadlock where every thread sleeps on a lock."""
    if stacks:
        try:
            cwd: str | None = proc.cwd()
        except (psutil.Error, OSError):
            cwd = None
        named = _deadlock.lock_order_deadlock(stacks, cwd)
        if named is not None:
            return [named]
    if evidence and ("which died" in evidence[0] or "is dead (a zombie" in evidence[0]):
        return []
    possible = _deadlock.possible_deadlock(waits, pid)
    return [possible] if possible is not None else []


def _classify(
    pid: int,
    command: str | None,
    interval_s: float,
    taken: list[_Sample],
    live: _LiveProbe,
    log: Path | None,
    step_file: Path | None,
    sockets: Mapping[int, str],
    proc: psutil.Process,
    want_stacks: bool,
    opts: _Options | None = None,
    watch: _SocketWatch | None = None,
) -> ProcessDiagnosis:
    """Gather the evidence of the looks ``taken``, let the rule table decide the state,
    and assemble the diagnosis."""
    opts = opts or _Options()
    first, last = taken[0], taken[-1]
    wall_s = max(last.t_s - first.t_s, 1e-9)

    cpu_share: float | None = None
    if first.cpu_s is not None and last.cpu_s is not None:
        cpu_share = max(0.0, (last.cpu_s - first.cpu_s) / wall_s)
    progress = _progress(taken, wall_s, live, log, step_file)
    lines = _loglines.read_lines(_line_regions(taken, log), opts.progress_rx)
    evidence = list(progress.evidence) + live.skipped
    evidence += _loglines.describe(lines)
    progress = _counter_progress(progress, lines, evidence)
    if progress.source == "log" and progress.progressed is False and last.log_size == 0:
        buffered = _block_buffered(pid, proc)
        if buffered:
            # an empty log of a block-buffered process: the output sits in its buffer, so
            # the silence says nothing; CPU (and stacks) decide
            evidence.append(
                "the log is still empty, but the output is block-buffered: its silence is "
                "no evidence of a stall (a reason to run `python -u`, not a symptom)"
            )
            progress = _Progress("log", None, progress.evidence, progress.steps, progress.watched)
    if cpu_share is not None:
        evidence.append(f"CPU: {_share_words(cpu_share)} over {wall_s:.1f} s")
    else:
        evidence.append("CPU time could not be read (permission denied)")

    counter_rates, retry_counters, words = _counter_findings(first, last, wall_s, progress.steps)
    counts = [s.num_threads for s in taken if s.num_threads is not None]
    trend = _thread_trend(counts)
    waits = _thread_waits(first, last, pid, sockets)
    attempt_words: list[str] = []
    attempt_peers: list[str] = []
    if progress.progressed is not True:
        seen = watch.attempts(progress.progressed is False) if watch is not None else None
        if seen is not None:
            attempt_peers.append(seen[0])
            attempt_words.append(seen[2])
        trailed = _trail_attempts(pid)
        if trailed is not None:
            if trailed[0] is not None:
                attempt_peers.append(trailed[0])
            attempt_words.append(trailed[2])
    facts = Facts(
        pid=pid,
        status=last.status,
        progressed=progress.progressed,
        source=progress.source,
        busy=is_busy(cpu_share, _running_share(taken)),
        activity=tuple(_activity_words(first, last, wall_s)),
        lines=lines,
        wall_s=wall_s,
        retry_counters=retry_counters,
        attempts="; ".join(attempt_words) if attempt_words else None,
        thread_retry=_new_thread_wait(first, waits, trend),
        poll_spin=_poll_spin(taken, pid, wall_s, cpu_share),
        quiet_output=_quiet_output(last, opts.quiet_after_s),
    )
    decision = decide(facts)
    state = decision.state
    if state in ("blocked", "busy") and want_stacks and _main_sleeps(waits, pid):
        # a sleep between connection attempts that log nothing: the stacks' locals say
        held = _held_retry(pid)
        if held is not None:
            state = "retrying"
            evidence.append(f"retrying: {held[0]}")
            if held[1]:
                attempt_peers.append(held[1])
    evidence += decision.why if state == decision.state else []
    evidence += words
    evidence += _thread_count_words(counts, trend, wall_s)
    evidence += _thread_findings(state, waits, pid)
    evidence += _startup_trail(pid)
    if state != "progressing":
        evidence += _block_buffered(pid, proc)
        # what should feed a waiting main thread and died: said first
        evidence[:0] = _feeders.dead_feeders(
            pid, proc, _feeders.main_waits_on(waits, pid), log, _trail_deaths(pid)
        )

    endpoints: list[str] = []
    probes: list[str] = []
    if state not in ("progressing",):
        io_moved = (
            last.io_chars - first.io_chars
            if first.io_chars is not None and last.io_chars is not None
            else None
        )
        stuck, peers = _stuck_endpoints(proc, io_moved)
        targets: list[tuple[str, int]] = []
        for host, port, how in stuck:
            endpoints.append(f"{host}:{port} ({how})")
            targets.append((host, port))
        for peer in dict.fromkeys(attempt_peers):
            host, _, port_text = peer.rpartition(":")
            if port_text.isdigit() and (host.strip("[]"), int(port_text)) not in targets:
                endpoints.append(f"{peer} (repeated connection attempts)")
                targets.append((host.strip("[]"), int(port_text)))
        for ep, n in sorted(lines.endpoints.items(), key=lambda kv: -kv[1]):
            endpoints.append(f"{ep} (named by {n} failure line{'s' if n > 1 else ''})")
            targets.append((ep.host, ep.port))
        if targets or opts.urls:
            probes = _probe.probe_all(pid, targets, peers, opts.urls, opts.probe_timeout_s)
        evidence += probes

    tail: list[str] = []
    if log is not None and log.exists():
        try:
            tail = read_log_tail(log)
        except (OSError, ValueError) as exc:  # ValueError: a FIFO or device
            evidence.append(f"the log {str(log)!r} could not be read ({exc})")
    stacks: str | None = None
    hint: str | None = None
    if state in ("blocked", "spinning", "busy", "retrying"):
        if want_stacks:
            stacks, hint = _py_spy(pid)
        else:
            hint = f"not collected (run: py-spy dump --pid {pid})"
    if state == "blocked":
        evidence[:0] = _deadlock_words(pid, proc, stacks, waits, evidence)

    return ProcessDiagnosis(
        pid=pid,
        state=state,
        evidence=evidence,
        exit_code=EXIT_CODES[state],
        interval_s=interval_s,
        progress_source=progress.source,
        progressed=progress.progressed,
        cpu_share=cpu_share,
        command=command,
        status=last.status,
        thread_counts=counts,
        thread_trend=trend,
        threads=waits,
        wchan=_procfs.read_wchan(pid),
        steps=progress.steps,
        open_phase=last.open_phase,
        counter_rates=counter_rates,
        retrying=state == "retrying" or retry_counters,
        log=str(log) if log is not None else None,
        log_tail=tail,
        stacks=stacks,
        stacks_hint=hint,
        watched=progress.watched,
        failure_lines=dict(lines.failures),
        progress_lines=lines.progress if lines.lines else None,
        last_failure=lines.last_failure,
        endpoints=endpoints,
        probes=probes,
    )
