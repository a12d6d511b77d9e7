"""A trainer whose feeder died (issue 38, item 4): ``gyreprof run`` names the thread or
process, its exception and file:line first, and says nothing of tuning the sampler; a
thread that dies while the trainer keeps its pace is only a note.

The rule (``analysis.feeders``) is tested on trainer timelines written at known times,
where the naive rule ("something died and the trainer waits: the feeder died") fails:
a sampler-bound trainer whose progress reporter dies waits as much after as before.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof.analysis import feeders
from gyreprof.analysis.verdict import diagnose
from gyreprof.integrations._auto.records import ProcessRecord
from gyreprof.model.death import Death

SCRIPTS = Path(__file__).parent / "helpers" / "run_scripts"
SRC = Path(gp.__file__).resolve().parent.parent
MS = 1_000_000


def _trainer(steps: list[tuple[int, int]], start: int) -> gp.Profiler:
    """A trainer profile of one-step windows, as ``gyreprof run`` closes them: each step
    a (wait, compute) in ns, back to back from ``start`` (CLOCK_MONOTONIC ns)."""
    p = gp.Profiler(["wait", "compute"], window_steps=1)
    rec = p.recorder
    t = start
    for wait, compute in steps:
        rec.begin_at(t)
        rec.lap_at(0, t + wait)
        rec.lap_at(1, t + wait + compute)
        rec.end_at(t + wait + compute)
        t += wait + compute
    return p


def _death(at_ns: int, who: str = "thread producer", backlog: int = -1) -> Death:
    kind, name = who.split()
    return Death(
        kind, name, "ValueError", "bad item", "/app/feed.py", 12, "make_item", at_ns, 7, backlog
    )


def _timeline(before: int, wait_ms: float, compute_ms: float, tail_ms: float = 0.0):
    """``before`` steps of (wait, compute) ending ``tail_ms`` before now; returns the
    profile and the time its steps ended."""
    step = int((wait_ms + compute_ms) * MS)
    start = time.monotonic_ns() - before * step - int(tail_ms * MS)
    p = _trainer([(int(wait_ms * MS), int(compute_ms * MS))] * before, start)
    return p, start, start + before * step


def test_a_trainer_that_waits_from_a_death_to_its_end_names_that_death() -> None:
    # 40 steps of 10 ms wait + 10 ms compute, then nothing for 1.2 s until the profile is
    # taken: the trainer waited in its last (open) wait
    p, start, end = _timeline(40, 10, 10, tail_ms=1200)
    found = feeders.find([_death(end - 5 * MS)], p.snapshot())
    assert found is not None
    assert found.who == "thread `producer`" and found.where == "feed.py:12"
    assert found.wait_after > 0.95 and found.wait_before == pytest.approx(0.5, abs=0.02)
    assert found.after_s == pytest.approx(1.205, abs=0.05)
    assert "make_item" in found.short and "ValueError: bad item" in found.next


def test_a_death_the_trainer_kept_its_pace_after_is_no_feeder_even_when_it_waits_most() -> None:
    """Sampler-bound all along (85% waiting): the naive rule calls any death its feeder."""
    p, start, end = _timeline(60, 17, 3)
    assert feeders.find([_death(start + 600 * MS, "thread reporter")], p.snapshot()) is None


def test_the_first_death_that_starved_it_is_named_not_an_earlier_harmless_one() -> None:
    p, start, end = _timeline(50, 10, 10, tail_ms=1500)
    harmless = _death(start + 200 * MS, "thread reporter")
    found = feeders.find([_death(end, "process producer"), harmless], p.snapshot())
    assert found is not None and found.who == "process `producer`"


def test_a_death_just_before_the_end_or_before_a_long_compute_is_no_feeder() -> None:
    p, start, end = _timeline(40, 10, 10)
    assert feeders.find([_death(end - 100 * MS)], p.snapshot()) is None  # 0.1 s: too short
    # the trainer's last step computes for 1 s after the death: it was fed
    t0 = time.monotonic_ns() - 1_400 * MS
    q = _trainer([(10 * MS, 10 * MS)] * 10 + [(5 * MS, 1_000 * MS)], t0)
    assert feeders.find([_death(t0 + 210 * MS)], q.snapshot()) is None


def test_a_trainer_slowed_but_still_fed_after_a_death_is_not_starved() -> None:
    """One of two producers dies: the trainer waits more (10% -> 62%), but keeps stepping.
    The naive rule (the wait rose after a death) calls it starved."""
    steps = [(2 * MS, 18 * MS)] * 40 + [(30 * MS, 18 * MS)] * 40
    start = time.monotonic_ns() - 40 * 20 * MS - 40 * 48 * MS
    p = _trainer(steps, start)
    assert feeders.find([_death(start + 40 * 20 * MS)], p.snapshot()) is None


def test_a_feeder_that_left_a_backlog_is_named_once_the_trainer_took_it() -> None:
    """The producer dies leaving 40 items; the trainer takes them at its compute's pace
    (40 x 30 ms), then waits 2 s to the end. The first half after the death is the
    backlog's steps, so a rule that wants starvation from the death on rejects it."""
    pre = [(10 * MS, 10 * MS)] * 40
    drain = [(0, 30 * MS)] * 40
    start = time.monotonic_ns() - 40 * 20 * MS - 40 * 30 * MS - 2_000 * MS
    p = _trainer(pre + drain, start)
    death = start + 40 * 20 * MS
    found = feeders.find([_death(death, backlog=40)], p.snapshot())
    assert found is not None and found.backlog == 40
    assert 0.8 < found.drained_s <= 1.2 and found.wait_after >= feeders.STARVED
    assert found.wait_before == pytest.approx(0.5, abs=0.02)
    assert "it left 40 items in its queue" in found.words
    assert f"stepping on those for {found.drained_s:.2f} s" in found.words
    # the same death with no backlog known: the trainer kept its pace after it
    assert feeders.find([_death(death)], p.snapshot()) is None


def test_a_small_backlog_does_not_explain_a_starvation_long_after_the_death() -> None:
    """A producer that left 3 items dies at 0.2 s; another keeps the trainer at its pace
    for 2 s more, then the trainer waits 1.5 s to the end. A rule that lets the starvation
    start any time after a death names the first producer; its 3 items were taken in
    30 ms."""
    start = time.monotonic_ns() - 110 * 20 * MS - 1_500 * MS
    p = _trainer([(10 * MS, 10 * MS)] * 110, start)
    death = start + 200 * MS
    assert feeders.find([_death(death, backlog=3)], p.snapshot()) is None
    # a backlog that lasts that long (200 items of 10 ms) does explain it
    found = feeders.find([_death(death, backlog=200)], p.snapshot())
    assert found is not None and found.drained_s > 1.5


def test_windows_of_several_steps_cannot_say_and_say_nothing() -> None:
    p = gp.Profiler(["wait", "compute"], window_steps=4)
    t = time.monotonic_ns() - 2_000 * MS
    for _ in range(8):
        p.recorder.begin_at(t)
        p.recorder.lap_at(0, t + 10 * MS)
        p.recorder.lap_at(1, t + 20 * MS)
        p.recorder.end_at(t + 20 * MS)
        t += 20 * MS
    assert len(p.snapshot().windows()) == 2
    assert feeders.find([_death(time.monotonic_ns())], p.snapshot()) is None


def test_the_verdict_leads_with_the_feeder_and_drops_the_sampler_advice() -> None:
    p, start, end = _timeline(40, 10, 10, tail_ms=1200)
    found = dataclasses.asdict(feeders.find([_death(end)], p.snapshot()))
    plain = diagnose(trainer=p.snapshot(), loop="overlapped")
    assert plain.headline.startswith("sampler-bound") and "tune the sampler" in plain.headline
    v = diagnose(trainer=p.snapshot(), loop="overlapped", dead_feeder=found)
    assert v.headline.startswith("starved: ") and "thread `producer`" in v.headline
    assert v.reasons[0].startswith("feeder: thread `producer` died")
    assert v.advice[0].startswith("fix what ended thread `producer`")
    assert not any("sampler" in a and "tune" in a for a in v.advice), v.advice
    assert v.bound == plain.bound  # the measured side is kept; the words change
    assert v.dead_feeder is not None and v.dead_feeder["where"] == "feed.py:12"
    assert "starved" in str(v).splitlines()[0]


def test_a_process_record_keeps_its_deaths() -> None:
    r = ProcessRecord(pid=5, role="child", ppid=1, how="exit", deaths=(_death(123),))
    back = ProcessRecord.from_json(r.to_json())
    assert back.deaths == r.deaths and back.deaths[0].words().startswith("ValueError: bad")


_HOOKS_UNDONE = """
import queue, sys, threading  # queue: a module a feeder feeds through (libs.threads.FEEDS)
from gyreprof.integrations import libs
from gyreprof.integrations._auto import deaths

before = threading.excepthook, sys.excepthook
libs.instrument()
assert threading.excepthook is not before[0] and sys.excepthook is not before[1]


def boom():
    raise ZeroDivisionError("no rate")


t = threading.Thread(target=boom, name="boom")
t.start()
t.join()
(d,) = deaths.deaths()
print(d.who, d.exc_type, d.function, d.where())
libs.uninstrument()
assert (threading.excepthook, sys.excepthook) == before
print("undone")
"""


def test_the_exception_hooks_are_an_instrumentor_undone_with_the_others() -> None:
    # in a fresh interpreter: an import in this one (ray's) may chain its own hook on top
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", _HOOKS_UNDONE], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [
        "thread `boom` ZeroDivisionError boom <string>:12",
        "undone",
    ]
    assert "ZeroDivisionError: no rate" in out.stderr  # the hook set before still printed it


def _run(mode: str, tmp_path: Path) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env.pop("GYREPROF_RUN_DIR", None)
    out = subprocess.run(
        [sys.executable, "-m", "gyreprof", "run", "--json", str(tmp_path / "r.json"), "--"]
        + [sys.executable, str(SCRIPTS / "dead_feeder_run.py"), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_gyreprof_run_names_a_feeder_that_died_with_a_backlog_in_its_queue(tmp_path: Path) -> None:
    """The producer thread dies leaving about 40 items; the trainer takes them for about
    1.2 s, then waits 1.5 s. Its death, and the backlog, are read in the real run."""
    err = _run("backlog", tmp_path)
    report = err[err.index("gyreprof run: ") :]
    assert report.splitlines()[2].startswith(
        "cause: its feeder, thread `producer`, died: ValueError at dead_feeder_run.py:34"
    ), report
    import json

    got = json.loads((tmp_path / "r.json").read_text())["verdict"]["dead_feeder"]
    assert 30 <= got["backlog"] <= 40, got
    assert 0.5 < got["drained_s"] < 1.6 and got["wait_after"] >= feeders.STARVED, got
    assert f"it left {got['backlog']} items in its queue" in report


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_gyreprof_run_names_a_dead_feeder_first(mode: str, tmp_path: Path) -> None:
    err = _run(mode, tmp_path)
    report = err[err.index("gyreprof run: ") :]
    # the report opens with the answer: starved, the feeder named, the fix as the next step
    side, cause, step = report.splitlines()[1:4]
    assert side.startswith("starved: the trainer waits ") and "on a feeder that died" in side
    assert cause.startswith(f"cause: its feeder, {mode} `producer`, died: ValueError at ")
    assert step.startswith("next: fix what ended") and "item 24 came out malformed" in step
    verdict = err[err.index("verdict:") :]
    head = verdict.splitlines()[0]
    assert f"its feeder, {mode} `producer`, died: ValueError at dead_feeder_run.py:34" in head
    assert "(make_item)" in head
    assert "tune the sampler" not in report and "which sampler phase" not in report
    import json

    got = json.loads((tmp_path / "r.json").read_text())["verdict"]["dead_feeder"]
    assert got["who"] == f"{mode} `producer`" and got["wait_after"] >= feeders.STARVED


def test_gyreprof_run_notes_a_thread_that_fed_nothing_and_judges_as_before(
    tmp_path: Path,
) -> None:
    err = _run("helper", tmp_path)
    verdict = err[err.index("verdict:") :]
    assert "starved" not in verdict and "fix what ended" not in verdict
    assert (
        "thread `reporter` (pid " in err
        and "died: KeyError: 'endpoint' at dead_feeder_run.py:47 (report_progress); the "
        "trainer kept its pace after it: not its feeder"
        in err
    ), err


def test_a_feeder_that_died_before_recording_anything_is_still_named(tmp_path: Path) -> None:
    """The producer process dies on its first item: it recorded nothing, so only the start
    record written for its death (``state._save_deaths_only``) carries it; the trainer
    never stepped, so nothing tells whether it fed it, and the note says so."""
    err = _run("first", tmp_path)
    assert (
        "process `producer` (pid " in err
        and "died: ValueError: item 0 came out malformed at dead_feeder_run.py:34 (make_item); "
        "no trainer profile tells whether it fed one"
        in err
    ), err
