"""The doctor's rule table (diagnostics/_doctor_rules.py): which facts make which state.

Constructed facts, no process: each rule is reached, each rule's precedence over the
rules after it holds, and the table gives the state the doctor's earlier if/elif
ladder gave for every combination of facts.
"""

from __future__ import annotations

import itertools

import psutil
import pytest

from gyreprof.diagnostics import _loglines
from gyreprof.diagnostics._doctor_rules import (
    RULES,
    SPIN_CPU_SHARE,
    Facts,
    Rule,
    decide,
    is_busy,
    only_failures,
)
from gyreprof.diagnostics.doctor import EXIT_CODES, STATES

RUNNING = psutil.STATUS_RUNNING
STOPPED = psutil.STATUS_STOPPED

FAILING = _loglines.LineReport(
    lines=4, progress=0, failures={"connection refused": 4}, last_failure="refused"
)
MIXED = _loglines.LineReport(lines=5, progress=1, failures={"timeout": 4})
QUIET_WORDS = "busy, yet its output has not changed for 6.0 min: spinning"
POLL_WORDS = "spinning (low CPU): the main thread woke 20 times a second"
ATTEMPTS = "3 connection attempts to 10.0.0.5:8000 seen connecting (SYN_SENT)"

#: one set of facts per rule that reaches it (and no rule before it)
REACHES: dict[str, Facts] = {
    "stopped": Facts(pid=7, status=STOPPED, progressed=True, busy=True),
    "progress": Facts(pid=7, status=RUNNING, progressed=True, lines=MIXED),
    "failure-lines": Facts(pid=7, status=RUNNING, progressed=False, busy=True, lines=FAILING),
    "connect-attempts": Facts(pid=7, status=RUNNING, progressed=None, attempts=ATTEMPTS),
    "retry-counters": Facts(pid=7, status=RUNNING, progressed=False, retry_counters=True),
    "piling-threads": Facts(pid=7, status=RUNNING, progressed=None, thread_retry=(4, "in connect")),
    "poll-spin": Facts(pid=7, status=RUNNING, progressed=False, poll_spin=POLL_WORDS),
    "quiet-output": Facts(
        pid=7, status=RUNNING, progressed=None, source="files", busy=True, quiet_output=QUIET_WORDS
    ),
    "busy-no-signal": Facts(pid=7, status=RUNNING, progressed=None, busy=True),
    "working-through-them": Facts(
        pid=7, status=RUNNING, progressed=None, activity=("moved 9000 bytes",)
    ),
    "idle-no-signal": Facts(pid=7, status=RUNNING, progressed=None),
    "stood-still-busy": Facts(pid=7, status=RUNNING, progressed=False, busy=True),
    "stood-still": Facts(pid=7, status=RUNNING, progressed=False),
}


def test_every_rule_has_a_case_and_every_state_a_rule() -> None:
    assert [r.name for r in RULES] == list(REACHES)
    assert len({r.name for r in RULES}) == len(RULES)
    # absent is decided before any rule: there is no process to gather facts from
    assert {r.state for r in RULES} | {"absent"} == set(STATES) == set(EXIT_CODES)


@pytest.mark.parametrize("name", list(REACHES))
def test_each_rule_is_reached_by_its_facts(name: str) -> None:
    decision = decide(REACHES[name])
    rule = next(r for r in RULES if r.name == name)
    assert (decision.rule, decision.state) == (name, rule.state)
    # no rule before it holds: the case is the rule's own, not one it shadows
    before = RULES[: RULES.index(rule)]
    assert not any(r.when(REACHES[name]) for r in before)


def test_the_words_each_rule_gives() -> None:
    why = {name: decide(facts).why for name, facts in REACHES.items()}
    assert "kill -CONT 7" in why["stopped"][0]
    assert why["failure-lines"][0].startswith("retrying: the process added 4 failure lines")
    assert why["failure-lines"][1] == "last failure line: 'refused'"
    assert "4 threads started during the watch all in connect" in why["piling-threads"][0]
    assert why["poll-spin"] == [POLL_WORDS]
    assert why["quiet-output"] == [QUIET_WORDS]
    assert "no progress signal" in why["busy-no-signal"][0]
    assert "it moved 9000 bytes: it works through them" in why["working-through-them"][0]
    for silent in ("progress", "retry-counters", "idle-no-signal", "stood-still-busy"):
        assert why[silent] == []


@pytest.mark.parametrize(
    ("facts", "state", "rule"),
    [
        # a stopped process is blocked even when its counters moved before the pause
        (REACHES["stopped"], "blocked", "stopped"),
        # progress beats failures: a loop that fails now and then but moves
        (
            Facts(pid=1, progressed=True, lines=FAILING, retry_counters=True),
            "progressing",
            "progress",
        ),
        # failures beat CPU: a loop failing fast is busy too, but retrying says why
        (Facts(pid=1, progressed=False, busy=True, lines=FAILING), "retrying", "failure-lines"),
        (
            Facts(pid=1, progressed=None, busy=True, retry_counters=True),
            "retrying",
            "retry-counters",
        ),
        # a poll loop that burns a core is the busy stand-still, not the low-CPU spin
        (
            Facts(pid=1, progressed=False, busy=True, poll_spin=POLL_WORDS),
            "spinning",
            "stood-still-busy",
        ),
        (Facts(pid=1, progressed=None, busy=True, poll_spin=POLL_WORDS), "busy", "busy-no-signal"),
        # a quiet log named with --log is a stall by itself; the quiet rule is for found files
        (
            Facts(pid=1, progressed=None, source="log", busy=True, quiet_output=QUIET_WORDS),
            "busy",
            "busy-no-signal",
        ),
        # working through pipes or children, and its found files quiet for long: spinning
        (
            Facts(
                pid=1, progressed=None, source="files", activity=("x",), quiet_output=QUIET_WORDS
            ),
            "spinning",
            "quiet-output",
        ),
        # a signal that stood still beats the activity words
        (Facts(pid=1, progressed=False, activity=("x",)), "blocked", "stood-still"),
    ],
)
def test_precedence(facts: Facts, state: str, rule: str) -> None:
    decision = decide(facts)
    assert (decision.state, decision.rule) == (state, rule)


def test_an_order_that_looks_natural_is_wrong() -> None:
    """Base states first, findings after, reads naturally, and is wrong: a busy process
    whose found output has been quiet for minutes would stay "busy", and a loop failing
    fast on a busy core would be "spinning" instead of "retrying"."""
    quiet = REACHES["quiet-output"]
    failing = Facts(pid=1, progressed=False, busy=True, lines=FAILING)
    base = ("busy-no-signal", "working-through-them", "idle-no-signal", "stood-still-busy")
    naive = tuple(r for r in RULES if r.name in base) + tuple(
        r for r in RULES if r.name not in base
    )
    assert decide(quiet, naive).state == "busy"
    assert decide(failing, naive).state == "spinning"
    assert decide(quiet).state == "spinning"
    assert decide(failing).state == "retrying"


def test_a_table_whose_last_rule_can_fail_is_refused() -> None:
    partial = (Rule("only-progress", "progressing", lambda f: f.progressed is True, lambda f: []),)
    with pytest.raises(ValueError, match="facts"):
        decide(Facts(pid=1, progressed=False), partial)


def test_busy_and_only_failures() -> None:
    assert is_busy(SPIN_CPU_SHARE, 0.0) and not is_busy(SPIN_CPU_SHARE * 0.99, 0.0)
    assert is_busy(None, 0.6) and not is_busy(None, 0.59)
    assert only_failures(FAILING) and not only_failures(MIXED)
    assert not only_failures(None) and not only_failures(_loglines.LineReport())


def _ladder(f: Facts) -> tuple[str, list[str]]:
    """The doctor's decision as its if/elif ladder made it before the rule table, kept
    here as the reference the table must agree with."""
    if f.status in (STOPPED, getattr(psutil, "STATUS_TRACING_STOP", "tracing-stop")):
        return "blocked", [f"stopped {f.pid}"]
    if f.progressed:
        return "progressing", []
    if f.progressed is None:
        if f.busy:
            state, why = "busy", ["busy"]
        elif f.activity:
            state, why = "busy", ["activity"]
        else:
            state, why = "blocked", []
    else:
        state, why = ("spinning" if f.busy else "blocked"), []
    if only_failures(f.lines):
        return "retrying", ["failures"]
    if f.attempts is not None:
        return "retrying", ["attempts"]
    if f.retry_counters:
        return "retrying", why
    if f.thread_retry is not None:
        return "retrying", ["threads"]
    if not f.busy and f.poll_spin is not None:
        return "spinning", [f.poll_spin]
    if state == "busy" and f.source == "files" and f.quiet_output is not None:
        return "spinning", [f.quiet_output]
    return state, why


def _kind(words: list[str]) -> list[str]:
    """The table's words reduced to the reference's labels."""
    if not words:
        return []
    first = words[0]
    for needle, label in (
        ("failure lines", "failures"),
        ("connection attempts", "attempts"),
        ("threads started", "threads"),
        ("CPU busy, no progress signal", "busy"),
        ("works through them", "activity"),
    ):
        if needle in first:
            return [label]
    return words


def test_the_table_agrees_with_the_ladder_on_every_combination() -> None:
    seen: set[str] = set()
    for (
        status,
        progressed,
        source,
        busy,
        activity,
        lines,
        counters,
        attempts,
        threads,
        poll,
        quiet,
    ) in itertools.product(
        (RUNNING, STOPPED, None),
        (True, False, None),
        ("live", "log", "files", "none"),
        (False, True),
        ((), ("moved data",)),
        (None, FAILING, MIXED),
        (False, True),
        (None, ATTEMPTS),
        (None, (3, "in connect")),
        (None, POLL_WORDS),
        (None, QUIET_WORDS),
    ):
        if counters and progressed is None:
            # cannot happen: a retry counter is judged against a step counter that stood
            # still, so there is a progress signal (the ladder kept words of a base state
            # that no process reaches here)
            continue
        facts = Facts(
            pid=9,
            status=status,
            progressed=progressed,
            source=source,
            busy=busy,
            activity=activity,
            lines=lines,
            retry_counters=counters,
            attempts=attempts,
            thread_retry=threads,
            poll_spin=poll,
            quiet_output=quiet,
        )
        decision = decide(facts)
        want_state, want_why = _ladder(facts)
        assert decision.state == want_state, facts
        if decision.rule == "stopped":
            assert want_why == ["stopped 9"] and "kill -CONT 9" in decision.why[0]
        else:
            assert _kind(decision.why) == want_why, facts
        seen.add(decision.rule)
    assert seen == {r.name for r in RULES}
