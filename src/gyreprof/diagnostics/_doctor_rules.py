"""The doctor's rules: which evidence makes which state, and the words that say why.

One observation of a process is boiled down to :class:`Facts` (gathered by
:mod:`gyreprof.diagnostics._doctor_evidence`).  :data:`RULES` is the table that
turns them into a state: the rules are tried in the order listed, and the first
whose condition holds gives the state and the cause; the last one always holds.

==  =====================  ===========  ==============================================
#   rule                   state        when
==  =====================  ===========  ==============================================
1   stopped                blocked      the process is stopped (SIGSTOP, Ctrl-Z, a
                                        debugger), whatever its other evidence
2   progress               progressing  the progress evidence moved
3   failure-lines          retrying     it added failure lines and no progress line
4   connect-attempts       retrying     repeated connection attempts to one endpoint,
                                        seen below the log: SYN_SENT sockets coming and
                                        going, new sockets to one peer, the ``gyreprof
                                        run`` trail's swallowed connection errors
5   retry-counters         retrying     a retry-like live counter rose, steps did not
6   piling-threads         retrying     threads started during the watch all wait on
                                        one thing
7   poll-spin              spinning     little CPU, yet its main thread wakes often in
                                        short sleeps or polls, moving no data
8   quiet-output           spinning     no progress signal, busy, and every output file
                                        found has been quiet for ``quiet_after_s``
9   busy-no-signal         busy         no progress signal, CPU busy
10  working-through-them   busy         no progress signal, own CPU idle, but moving
                                        data or driving busy children
11  idle-no-signal         blocked      no progress signal, idle
12  stood-still-busy       spinning     the progress evidence stood still, CPU busy
13  stood-still            blocked      the progress evidence stood still, idle
==  =====================  ===========  ==============================================

Why this order:

- *stopped* comes first: a paused process cannot move, even if its counters moved
  during the watch before the pause.
- *progress* comes before every sign of trouble: a loop that fails now and then but
  moves is progressing.
- the *retrying* rules come before the CPU rules: a loop that fails fast is busy (or
  idle between attempts) too, and the failures say why it makes no progress.
- *poll-spin* comes before the idle rules (11, 13), which would call a loop that
  polls an empty queue blocked; it needs little CPU (rule 12 takes a busy one).
- *quiet-output* comes before *busy-no-signal*, which would otherwise take every busy
  process whose only evidence is files found open for writing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from gyreprof._support.errors import InvalidValueError
from gyreprof.diagnostics import _loglines

#: No progress (or no progress signal) and at least this share of one core busy ->
#: "spinning" (or "busy"); below -> "blocked".
SPIN_CPU_SHARE = 0.2
#: ... or runnable (a thread in state R) at least this share of the looks (a busy loop
#: on a crowded machine may get less than SPIN_CPU_SHARE of a core).
BUSY_RUNNING_SHARE = 0.6
#: Bytes through its descriptors over the watch that make an idle process "busy", not
#: "blocked": a process stalled on a lock or an empty socket moves none.
IDLE_IO_BYTES = 4096
#: ... or wakeups of its main thread a second (a thread stuck in one wait wakes never).
MAIN_WAKEUPS_PER_S = 5.0
#: Below this share of one core a process is called idle in the evidence.
IDLE_CPU_SHARE = 0.05
#: At or above this share of one core a process is called busy in the evidence.
BUSY_CPU_SHARE = 0.5
#: Main-thread wakeups a second, in short sleeps or polls, that make an idle process
#: with no progress a low-CPU spin (a 50 ms poll loop wakes 20 times a second).
POLL_WAKEUPS_PER_S = 10.0
#: A busy process whose found output has not changed for this long is spinning.
QUIET_AFTER_S = 300.0
#: New threads (at least this many) all waiting on one thing while no progress: retrying.
RETRY_NEW_THREADS = 3

_STOPPED = (psutil.STATUS_STOPPED, getattr(psutil, "STATUS_TRACING_STOP", "tracing-stop"))


def is_busy(cpu_share: float | None, running_share: float) -> bool:
    """Busy: at least ``SPIN_CPU_SHARE`` of one core, or runnable at ``BUSY_RUNNING_SHARE``
    of the looks (a crowded machine may give a busy loop less than a share of a core)."""
    return (cpu_share is not None and cpu_share >= SPIN_CPU_SHARE) or (
        running_share >= BUSY_RUNNING_SHARE
    )


def only_failures(lines: _loglines.LineReport | None) -> bool:
    """The lines added were failures, with no progress line among them."""
    return lines is not None and lines.failure_count > 0 and lines.progress == 0


@dataclass(frozen=True)
class Facts:
    """What one observation showed, as the rules read it.

        ``progressed``: True when the progress evidence moved, False when it stood still,
        None without any progress signal; ``source`` names that evidence. ``busy``: see
        :func:`is_busy`. ``activity``: what an idle process did besides its own CPU
        (data moved, wakeups, busy children), in words. ``lines``: the lines the log and
        the output files gained (None: none read). ``retry_counters``: a retry-like live
        counter rose while the step counter did not. ``attempts``: the words naming repeated
    connection attempts to one endpoint seen below the log. ``thread_retry``: (how many, on what)
        when the threads started during the watch all wait on one thing. ``poll_spin`` and
        ``quiet_output``: the words of those findings where they were seen.
    """

    pid: int
    status: str | None = None
    progressed: bool | None = None
    source: str = "none"
    busy: bool = False
    activity: tuple[str, ...] = ()
    lines: _loglines.LineReport | None = None
    wall_s: float = 0.0
    retry_counters: bool = False
    attempts: str | None = None
    thread_retry: tuple[int, str] | None = None
    poll_spin: str | None = None
    quiet_output: str | None = None

    @property
    def stopped(self) -> bool:
        return self.status in _STOPPED


@dataclass(frozen=True)
class Rule:
    """Where ``when`` holds of the facts, the process is in ``state``; ``why`` gives the
    cause in words (added to the evidence; empty where the evidence already says it)."""

    name: str
    state: str
    when: Callable[[Facts], bool]
    why: Callable[[Facts], list[str]]


def _no_words(_: Facts) -> list[str]:
    return []


def _stopped_words(f: Facts) -> list[str]:
    return [
        f"the process is {f.status}: a signal (SIGSTOP, Ctrl-Z) or a debugger paused it; "
        f"resume with: kill -CONT {f.pid}"
    ]


def retry_words(lines: _loglines.LineReport, wall_s: float) -> list[str]:
    """The cause of a process that adds only failure lines: their kinds, the endpoints
    they name and the last one."""
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(lines.failures.items(), key=lambda kv: -kv[1]))
    where = ""
    if lines.endpoints:
        top = sorted(lines.endpoints.items(), key=lambda kv: -kv[1])
        where = " against " + ", ".join(str(e) for e, _ in top[:3])
    words = [
        f"retrying: the process added {lines.failure_count} failure lines ({kinds}) and no "
        f"progress line in {wall_s:.1f} s{where}: it keeps failing, not stepping"
    ]
    if lines.last_failure is not None:
        words.append(f"last failure line: {lines.last_failure!r}")
    return words


def _failure_line_words(f: Facts) -> list[str]:
    assert f.lines is not None  # the rule's condition
    return retry_words(f.lines, f.wall_s)


def _thread_retry_words(f: Facts) -> list[str]:
    assert f.thread_retry is not None  # the rule's condition
    n, what = f.thread_retry
    return [
        f"retrying: {n} threads started during the watch all {what}; new attempts "
        "pile up waiting on the same thing"
    ]


def _busy_words(_: Facts) -> list[str]:
    return [
        "CPU busy, no progress signal to tell work from spinning; pass --log or "
        "publish a live segment"
    ]


def _working_words(f: Facts) -> list[str]:
    # idle on its own CPU, yet moving data or driving busy children: waiting on them
    # is its work, not a hang; without a progress signal, busy says so
    return [
        f"its own CPU is idle, but it {' and '.join(f.activity)}: it works through "
        "them; no progress signal to tell work from a stall; pass --log or publish "
        "a live segment"
    ]


# fmt: off
#: The rules, in the order they are tried (see the module docstring for why).
RULES: tuple[Rule, ...] = (
    Rule("stopped", "blocked", lambda f: f.stopped, _stopped_words),
    Rule("progress", "progressing", lambda f: f.progressed is True, _no_words),
    Rule("failure-lines", "retrying", lambda f: only_failures(f.lines), _failure_line_words),
    Rule("connect-attempts", "retrying", lambda f: f.attempts is not None,
         lambda f: [f"retrying: {f.attempts}"]),
    # the counter findings already say which counters rose
    Rule("retry-counters", "retrying", lambda f: f.retry_counters, _no_words),
    Rule("piling-threads", "retrying", lambda f: f.thread_retry is not None,
         _thread_retry_words),
    Rule("poll-spin", "spinning", lambda f: not f.busy and f.poll_spin is not None,
         lambda f: [f.poll_spin or ""]),
    Rule("quiet-output", "spinning",
         lambda f: (f.progressed is None and (f.busy or bool(f.activity))
                    and f.source == "files" and f.quiet_output is not None),
         lambda f: [f.quiet_output or ""]),
    Rule("busy-no-signal", "busy", lambda f: f.progressed is None and f.busy, _busy_words),
    Rule("working-through-them", "busy", lambda f: f.progressed is None and bool(f.activity),
         _working_words),
    Rule("idle-no-signal", "blocked", lambda f: f.progressed is None, _no_words),
    Rule("stood-still-busy", "spinning", lambda f: f.busy, _no_words),
    Rule("stood-still", "blocked", lambda f: True, _no_words),
)
# fmt: on


@dataclass(frozen=True)
class Decision:
    """The state a rule gave, the words saying why, and the rule's name."""

    state: str
    why: list[str]
    rule: str


def decide(facts: Facts, rules: Sequence[Rule] = RULES) -> Decision:
    """The first rule of ``rules`` whose condition holds of ``facts`` decides."""
    for rule in rules:
        if rule.when(facts):
            return Decision(rule.state, rule.why(facts), rule.name)
    raise InvalidValueError(
        f"facts: no rule applies to {facts!r} (the table's last rule must always hold)"
    )
