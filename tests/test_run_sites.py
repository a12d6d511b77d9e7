"""Issue 38, item 1: under ``gyreprof run`` a stack sampler names the code behind the
sampler's untimed time and the trainer's compute (``Verdict.sampler_sites`` /
``compute_sites``), checked against the scripts' own clocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gyreprof as gp
from gyreprof.analysis import sites as S
from gyreprof.integrations._auto import stacks

from helpers.run_scripts.runhelp import clock, gyreprof_run, script

gym_needed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("gymnasium") is None, reason="needs gymnasium"
)


def _names(found: list[dict[str, Any]]) -> list[str]:
    return [r["function"] for r in found]


# --------------------------------------------------------------- real runs


@gym_needed
def test_sampler_sites_name_the_helper_by_its_time_not_its_calls(tmp_path: Path) -> None:
    proc, data = gyreprof_run(
        tmp_path, sys.executable, script("sites_loop.py"), "3", options=("--stacks-hz", "100")
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    own = clock(proc.stdout)
    v = data["verdict"]
    found = v["sampler_sites"]
    assert found, proc.stderr[-3000:]
    top = found[0]
    # featurize runs once in 20 steps but long; tick every step but briefly: the time
    # decides, not the number of calls
    assert top["function"] == "featurize", found
    assert top["file"].endswith("sites_loop.py") and top["line"] > 0
    assert abs(top["share"] - own["featurize"]) <= 0.10, (found, own)
    names = _names(found)
    assert "tick" in names and names.index("tick") > names.index("featurize")
    # sorted by share; the shares add up to at most the untimed share
    shares = [r["share"] for r in found]
    assert shares == sorted(shares, reverse=True)
    assert sum(shares) <= v["sampler_shares"]["(untimed)"] + 1e-9
    assert all(r["samples"] > 0 for r in found)
    # the first advice names the largest site; no "time the rest yourself"
    assert v["advice"][0].startswith("look first at featurize (sites_loop.py:")
    assert not any("time the rest of the sampler step" in a for a in v["advice"])
    assert "untimed" in proc.stderr and "featurize (sites_loop.py:" in proc.stderr


@gym_needed
def test_compute_sites_rank_the_update_parts_as_measured(tmp_path: Path) -> None:
    proc, data = gyreprof_run(
        tmp_path, sys.executable, script("sites_compute.py"), "3", options=("--stacks-hz", "100")
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    own = clock(proc.stdout)
    found = data["verdict"]["compute_sites"]
    parts = ("optimizer_step", "forward", "handle_data")
    measured = sorted(parts, key=lambda p: -own[p])
    ranked = [n for n in _names(found) if n in parts]
    assert ranked == measured, (found, own)
    assert sum(r["share"] for r in found) <= 1.0 + 1e-9
    assert "trainer: compute by site" in proc.stderr


@gym_needed
def test_no_stacks_names_no_site_and_save_keeps_them(tmp_path: Path) -> None:
    off = tmp_path / "off"
    off.mkdir()
    proc, data = gyreprof_run(
        off, sys.executable, script("sites_loop.py"), "0.5", options=("--no-stacks",)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None and data["verdict"]["sampler_sites"] == []
    assert "from stack samples" not in proc.stderr
    on = tmp_path / "on"
    on.mkdir()
    saved = tmp_path / "saved"
    proc, data = gyreprof_run(
        on,
        sys.executable,
        script("sites_loop.py"),
        "1.5",
        options=("--stacks-hz", "200", "--save", str(saved)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None and data["verdict"]["sampler_sites"]
    assert list(saved.glob("main-*.sites.json"))
    again = subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", str(saved), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["verdict"]["sampler_sites"] == data["verdict"]["sampler_sites"]


@pytest.mark.parametrize("bad", ["0", "-5", "nan", "fast", "100000"])
def test_stacks_hz_refuses_what_it_cannot_use(cli, bad: str) -> None:
    proc = cli("run", "--stacks-hz", bad, "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2
    assert "--stacks-hz" in proc.stderr


def test_stacks_hz_and_no_stacks_exclude_each_other(cli) -> None:
    proc = cli("run", "--stacks-hz", "50", "--no-stacks", "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2


# ------------------------------------------------------------- the pieces


def test_stacks_rate_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from gyreprof.integrations._auto import options

    monkeypatch.delenv(options.ENV_STACKS_HZ, raising=False)
    default = options.DEFAULT_STACKS_HZ
    assert options.stacks_hz() == default <= 100
    for text, hz in (("0", 0.0), ("0.0", 0.0), ("50", 50.0), ("junk", default), ("inf", default)):
        monkeypatch.setenv(options.ENV_STACKS_HZ, text)
        assert options.stacks_hz() == hz, text
    assert options.environment(None, None, stacks_hz=0.0) == {options.ENV_STACKS_HZ: "0.0"}
    assert options.environment(None, None) == {}


class _Frame:
    """What the sampler reads of a frame: its code and the frame it was called from."""

    def __init__(self, code: Any, back: _Frame | None = None) -> None:
        self.f_code, self.f_back = code, back


def _user_code() -> Any:
    return sys._getframe().f_code  # this file: the user's code (not installed, not stdlib)


def test_frames_are_told_apart_by_whose_code_they_are(tmp_path: Path) -> None:
    import os

    user = tmp_path / "train.py"
    user.write_text("x = 1\n")
    assert stacks._kind(str(user)) == stacks._USER
    assert stacks._kind("<string>") == stacks._USER  # python -c
    assert stacks._kind("<frozen importlib._bootstrap>") == stacks._STDLIB
    assert stacks._kind(os.__file__) == stacks._STDLIB
    assert stacks._kind(stacks.__file__) == stacks._OURS
    pkg = __import__("numpy").__file__
    assert stacks._kind(pkg) == stacks._PACKAGE


def test_a_sample_goes_to_the_innermost_frame_of_the_users_code() -> None:
    import json as stdlib_json

    import numpy as installed

    mine = _user_code()
    std = stdlib_json.dumps.__code__
    pkg = installed.loadtxt.__code__  # a Python function of an installed package
    ours = stacks._site.__code__
    # innermost first: gyreprof's wrapper, the stdlib, a package, then the user's frame
    f = _Frame(ours, _Frame(std, _Frame(pkg, _Frame(mine, _Frame(std)))))
    assert stacks._site(f) is mine  # type: ignore[arg-type]
    # no user frame: the innermost package's; none either: the stdlib's; never gyreprof's
    assert stacks._site(_Frame(ours, _Frame(std, _Frame(pkg)))) is pkg  # type: ignore[arg-type]
    assert stacks._site(_Frame(ours, _Frame(std))) is std  # type: ignore[arg-type]
    assert stacks._site(_Frame(ours)) is None  # type: ignore[arg-type]


class _Rec:
    def __init__(self) -> None:
        self.since = -1
        self.last = 0

    def since_mark_ns(self) -> int:
        return self.since

    def last_write_ns(self) -> int:
        return self.last


class _Thread:
    """A thread's timeline as the sampler reads it (``thread_state.ThreadState``)."""

    def __init__(self) -> None:
        self.ident = 7
        self.srec = _Rec()
        self.blocks = 0
        self.prev_end = -1
        self.blk_start = -1
        self.blk_end = -1
        self.step_open = False
        self.in_wait = False
        self.inside = False
        self.ng_depth = 0
        self.in_rollout = False
        self.in_fwd = False
        self.rolled = False
        self.trains = False
        self.clock = 0

    def now(self) -> int:
        return self.clock


def test_samples_are_sorted_by_the_threads_timeline() -> None:
    c = stacks._Counts()
    t = _Thread()
    a, b = _user_code(), test_frames_are_told_apart_by_whose_code_they_are.__code__
    frames: dict[int, Any] = {7: _Frame(a)}

    def look(at: int) -> None:
        t.clock = at
        stacks._sample(c, [t], frames)  # type: ignore[arg-type]

    look(10)  # nothing sampled yet: neither side's
    assert (c.sampler_samples, c.compute_samples) == (0, 0)
    t.srec.since, t.srec.last = 15, 15  # a collect block begins
    look(20)  # untimed, inside the block once a later write shows it went on
    t.inside = True
    look(30)  # in an env call: timed
    t.inside = False
    t.srec.last = 35
    look(40)  # after the last write: the block ends before it...
    assert c.sampler_samples == 2 and c.sampler == {a: 1}
    # ...the update closes the block at 35 and a trainer step's compute runs
    t.blocks, t.prev_end, t.step_open, t.srec.since = 1, 35, True, -1
    frames[7] = _Frame(b)
    look(50)
    assert c.sampler_samples == 2 and c.compute_samples == 2
    assert c.compute == {a: 1, b: 1}  # the sample at 40 was the update's, as is 50
    t.in_wait = True  # a data wait: the sampler's wall, timed
    look(60)
    t.in_wait = False  # the wait ends at 65 and closes the block there (a default trainer)
    t.blocks, t.prev_end = 2, 65
    stacks._settle(c, c.tracks[id(t)], final=True)
    assert c.sampler_samples == 3 and c.sampler == {a: 1}
    assert c.compute_samples == 2


def test_a_collector_workers_batches_are_sampled_and_not_between_them() -> None:
    """A TorchRL worker's batch is a data wait and a no-grad block, yet inside it
    (``in_rollout``) only the env calls and the timed policy forward are timed; between
    its batches the worker waits for its next order, and is not sampled."""
    c = stacks._Counts()
    t = _Thread()
    a = _user_code()
    frames: dict[int, Any] = {7: _Frame(a)}

    def look(at: int) -> None:
        t.clock = at
        stacks._sample(c, [t], frames)  # type: ignore[arg-type]

    t.srec.since, t.srec.last = 5, 5
    t.in_rollout = t.rolled = t.in_wait = True
    t.ng_depth = 1
    look(10)  # neither an env call nor the forward: untimed, the site's
    t.in_fwd = True
    look(20)  # the policy forward: timed
    t.in_fwd, t.inside = False, True
    look(30)  # an env call: timed
    t.inside = False
    t.srec.last, t.blk_end = 40, 45  # the batch ends at 45
    t.in_rollout = t.in_wait = False
    t.ng_depth = 0
    look(50)  # between batches: not sampled at all
    stacks._settle(c, c.tracks[id(t)], final=True)
    assert c.sampler_samples == 3 and c.sampler == {a: 1}
    assert c.compute_samples == 0


def test_site_shares_stay_within_the_untimed_share_and_hedge_few_samples() -> None:
    rec = S.ProcessSites(
        pid=1,
        hz=100.0,
        sampler_samples=400,
        compute_samples=50,
        sampler=[
            S.SiteCount("featurize", "/x/train.py", 14, 150),
            S.SiteCount("g", "/x/t.py", 3, 5),
        ],
        compute=[S.SiteCount("update", "/x/train.py", 40, 30)],
    )
    again = S.ProcessSites.from_json(rec.to_json())
    assert again == rec
    rows = S.sampler_rows(rec, 0.5)
    assert _names(rows) == ["featurize", "g"]
    assert sum(r["share"] for r in rows) == pytest.approx(0.5)
    assert S.share_words(rows[1]).startswith("~") and "5 samples" in S.share_words(rows[1])
    assert "~" not in S.share_words(rows[0])
    assert S.where(rows[0]) == "featurize (train.py:14)"
    merged = S.merge([rec, rec])
    assert merged is not None and merged.sampler_samples == 800
    assert merged.sampler[0].samples == 300
    with pytest.raises(ValueError):
        S.ProcessSites.from_json('{"format": "gyreprof.sites/1", "pid": "x", "hz": 1}')
    with pytest.raises(ValueError, match="sampler_samples"):
        S.ProcessSites(pid=1, hz=1.0, sampler_samples=1, sampler=[S.SiteCount("f", "a", 1, 2)])


def test_the_verdict_names_the_largest_site_first() -> None:
    prof = gp.Profiler(["env", "fwd"])
    for _ in range(50):
        prof.begin()
        with prof.phase("env"):
            pass
        sum(range(2000))  # untimed
    prof.end()
    v = gp.diagnose(sampler=prof)
    assert v.dominant_phase == "(untimed)"
    assert any("time the rest of the sampler step" in a for a in v.advice)
    rec = S.ProcessSites(
        pid=1,
        hz=100.0,
        sampler_samples=100,
        sampler=[S.SiteCount("featurize", "/x/train.py", 14, 60)],
    )
    out = gp.diagnose(sampler=prof, sites=rec)
    assert out.sampler_sites[0]["function"] == "featurize"
    assert out.advice[0].startswith("look first at featurize (train.py:14)")
    assert not any("time the rest of the sampler step" in a for a in out.advice)
    assert any(r.startswith("sampler: untimed ") for r in out.reasons)
    assert not any("time the rest next" in r for r in out.reasons)
    assert any("the stack samples name where it went" in r for r in out.reasons)
    assert "featurize (train.py:14)" in str(out)
    back = type(out).from_dict(out.to_dict())
    assert back.sampler_sites == out.sampler_sites
    assert gp.diagnose(sampler=prof, sites=None) == v
    # balanced: the trainer's side has its advice too, and the site still comes first
    trainer = gp.Profiler(["wait", "compute"], warmup_steps=0)
    for _ in range(20):
        trainer.begin()
        trainer.record("wait", 500_000)
        trainer.record("compute", 500_000)
        trainer.end()
    both = gp.diagnose(sampler=prof, trainer=trainer, loop="sync", sites=rec)
    assert both.bound == "balanced" and len(both.advice) > 1, both.advice
    assert both.advice[0].startswith("look first at featurize (train.py:14)"), both.advice


def test_a_list_resting_on_one_or_two_samples_gets_no_line_but_stays_in_the_json() -> None:
    """Any site with a share used to earn a line: one sample in a short run, a CleanRL
    loop whose untimed part was 1%, put two lines of noise in a 30-line report."""
    row = {"function": "learn", "file": "/x/train.py", "line": 67, "share": 0.01}
    for n, said in ((1, False), (2, False), (3, True), (40, True)):
        found = [dict(row, samples=n)]
        assert (S.sampler_line(0.3, found) is not None) is said, n
        assert (S.compute_line(found) is not None) is said, n
    # an untimed share of 1% gets no line however many samples name it; 5% does
    many = [dict(row, samples=40)]
    assert S.sampler_line(0.01, many) is None
    assert S.sampler_line(0.05, many) is not None
    # the samples of a list are added: two sites of 2 and 1 samples make a line
    two = [dict(row, samples=2), dict(row, function="g", samples=1)]
    assert S.compute_line(two) is not None
    # through diagnose, on a sampler whose untimed share is about half (over the 5%
    # line): 1 sample gives no line, 3 give one
    prof = gp.Profiler(["env", "fwd"])
    for _ in range(50):
        prof.begin()
        with prof.phase("env"):
            sum(range(2000))
        sum(range(2000))  # as much untimed
    prof.end()
    for n, said in ((1, False), (3, True)):
        sites = S.ProcessSites(
            pid=1, hz=25.0, sampler_samples=n, sampler=[S.SiteCount("learn", "/x/t.py", 67, n)]
        )
        out = gp.diagnose(sampler=prof, sites=sites)
        assert out.sampler_sites and out.sampler_sites[0]["samples"] == n  # in the JSON
        assert any(r.startswith("sampler: untimed ") for r in out.reasons) is said, out.reasons


def test_the_spawn_line_of_a_child_is_not_the_users_code() -> None:
    """A spawned child's outermost frame is ``python -c 'from multiprocessing.spawn
    import spawn_main; ...'`` (file ``<string>``): the standard library's, so a worker's
    sample inside package code names the package's frame, not ``<module> (<string>:1)``;
    a ``python -c`` of the user's stays the user's."""
    spawn = compile(
        "from multiprocessing.spawn import spawn_main; spawn_main()", "<string>", "exec"
    )
    mine = compile("x = 1", "<string>", "exec")
    assert stacks._kind_of(spawn) == stacks._STDLIB
    assert stacks._kind_of(mine) == stacks._USER


def test_code_objects_of_one_site_are_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``exec`` of a string compiles a code object of its own: two alike by name,
    file and line are one site (one row, their samples added), not two rows that each
    read as a rough figure."""
    one, two = compile("x = 1", "<string>", "exec"), compile("x = 2", "<string>", "exec")
    assert one is not two
    c = stacks._Counts()
    c.compute = {one: 2, two: 3, _user_code(): 1}
    c.compute_samples = 6
    monkeypatch.setattr(stacks, "_counts", c)
    found = stacks._found(final=True)
    rows = [(s.function, s.file, s.line, s.samples) for s in found.compute]
    assert rows[0] == ("<module>", "<string>", 1, 5), rows
    assert len(rows) == 2, rows
