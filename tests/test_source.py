"""Inputs are resolved once: each public entry point turns what it was given into one
``gyreprof.recording.source.Source`` at its door, and nothing deeper asks again.

Resolutions are counted on real Profilers: a wrapper around ``Profiler.snapshot`` (a
Profiler is snapshotted exactly when it is resolved) and around ``_rings.read_rings``
(its rings are read at most once per Source).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof._support.errors import GyreprofError
from gyreprof.export import chrome_trace, hdr_log, openmetrics, save_events
from gyreprof.recording import _rings
from gyreprof.recording.profiler import Profiler
from gyreprof.recording.source import Source, resolve


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[str]]:
    """Counts snapshots taken and rings read, per Profiler label."""
    calls: collections.Counter[str] = collections.Counter()
    take, read = Profiler.snapshot, _rings.read_rings

    def snapshot(self: Profiler) -> gp.Snapshot:
        calls[f"snapshot {self.label}"] += 1
        return take(self)

    def read_rings(prof: Profiler) -> _rings.Rings:
        calls[f"rings {prof.label}"] += 1
        return read(prof)

    monkeypatch.setattr(Profiler, "snapshot", snapshot)
    monkeypatch.setattr(_rings, "read_rings", read_rings)
    yield calls


def _pair(steps: int = 60) -> tuple[Profiler, Profiler]:
    """A synchronous sampler/trainer pair, both with marked steps."""
    sp = gp.Profiler(["env", "fwd"], label="sampler")
    tp = gp.Profiler(["wait", "compute"], label="trainer")
    for _ in range(steps):
        tp.begin()
        with tp.phase("wait"):
            sp.begin()
            with sp.phase("env"):
                sum(range(2000))
            with sp.phase("fwd"):
                sum(range(500))
        with tp.phase("compute"):
            sum(range(3000))
    sp.end()
    tp.end()
    return sp, tp


def test_diagnose_resolves_each_input_exactly_once(counted: collections.Counter[str]) -> None:
    sp, tp = _pair()
    counted.clear()
    v = gp.diagnose(sampler=sp, trainer=tp)
    assert v.bound in ("sampler", "trainer", "balanced")
    assert v.loop_source == "detected"  # the raw events of both sides were read
    # one snapshot and one read of the rings per side, whatever the layers below need
    assert counted == {
        "snapshot sampler": 1,
        "snapshot trainer": 1,
        "rings sampler": 1,
        "rings trainer": 1,
    }


def test_wait_report_resolves_the_trainer_and_other_source_once(
    counted: collections.Counter[str],
) -> None:
    sp, tp = _pair()
    counted.clear()
    rep = gp.wait_report(tp, other="env", other_source=sp, window_steps=10)
    assert rep.window_source == "ring" and "env" in rep.other
    assert counted["snapshot trainer"] == 1 and counted["rings trainer"] == 1
    assert counted["snapshot sampler"] == 1 and counted["rings sampler"] == 1


def test_a_source_is_passed_through_and_never_resolved_again(
    counted: collections.Counter[str], tmp_path: Path
) -> None:
    sp, tp = _pair()
    counted.clear()
    src = resolve(tp, what="test")
    assert resolve(src) is src
    gp.wait_report(src)
    gp.diagnose(trainer=src, loop="sync")
    openmetrics(src)
    hdr_log(src)
    chrome_trace(src)
    hdr_log(src, interval_s=0.001)
    assert counted == {"snapshot trainer": 1, "rings trainer": 1}
    # the chrome trace and the interval log read the same events file
    assert src.raw is src.raw
    # save_events takes the Profiler (it writes this process's rings)
    save_events(tp, tmp_path / "run.npz")


def test_resolve_reads_every_kind_of_input(tmp_path: Path) -> None:
    sp, _ = _pair(10)
    snap = sp.snapshot()
    snap_path = snap.save(tmp_path / "run.snap")
    json_path = tmp_path / "run.json"
    sp.summary().to_json(json_path)
    events_path = save_events(sp, tmp_path / "run.npz")
    kinds = {
        "Profiler": resolve(sp),
        "Snapshot": resolve(snap),
        "Summary": resolve(snap.summary()),
        "EventsFile": resolve(gp.export.load_events(events_path)),
    }
    for given, src in kinds.items():
        assert isinstance(src, Source) and src.given == given
        assert src.summary.phases["env"].count == 10
        assert src.phases == ("env", "fwd")
    assert kinds["Profiler"].rings is not None and kinds["Snapshot"].rings is None
    assert kinds["EventsFile"].raw is not None and kinds["Summary"].raw is None
    # a Summary is read as given: no clock to relate to wall time
    assert kinds["Summary"].unix_offset_ns is None and kinds["Snapshot"].unix_offset_ns
    for path, given in (
        (snap_path, "Snapshot"),
        (json_path, "Summary"),
        (events_path, "EventsFile"),
    ):
        src = resolve(path)
        assert src.given == given and src.origin == str(path)
    assert resolve(json_path).snapshot is None  # a Summary from JSON has no snapshot


def test_wrong_inputs_are_typed_errors(tmp_path: Path) -> None:
    for bad in (42, None, [1, 2], b"GYRS"):
        with pytest.raises(GyreprofError) as info:
            resolve(bad, what="the test")
        assert isinstance(info.value, TypeError) and "the test takes a Profiler" in str(info.value)
    with pytest.raises(TypeError, match="takes a Profiler"):
        resolve("run.snap", paths=False)  # analysis documents no file input
    with pytest.raises(FileNotFoundError) as missing:
        resolve(tmp_path / "missing.snap")
    assert isinstance(missing.value, GyreprofError)
    with pytest.raises(ValueError, match="directory") as folder:
        resolve(tmp_path)
    assert isinstance(folder.value, GyreprofError)
