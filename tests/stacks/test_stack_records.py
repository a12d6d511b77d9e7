"""The sampler phases of a run's records: ``generate`` (transformers' patch) is one of
them, and a snapshot an earlier version saved (without it) still reads back."""

from __future__ import annotations

from pathlib import Path

import gyreprof as gp
from gyreprof.integrations._auto import collect
from gyreprof.integrations._auto import records as rec


def _saved(path: Path, phases: tuple[str, ...]) -> Path:
    prof = gp.Profiler(list(phases))
    for _ in range(3):
        prof.record(phases[0], 1000)
    path.write_bytes(prof.snapshot().to_bytes())
    return path


def test_generate_is_a_sampler_phase() -> None:
    assert rec.SAMPLER_PHASES[-1] == "generate"
    assert rec.SAMPLER_PHASES[:5] == ("env_step", "env_reset", "step_async", "step_wait", "fwd")


def test_snapshot_of_this_version_and_of_the_one_before_read_back(tmp_path: Path) -> None:
    notes: list[str] = []
    now = collect._load_snap(_saved(tmp_path / "a.snap", rec.SAMPLER_PHASES), "sampler", notes)
    before = collect._load_snap(
        _saved(tmp_path / "b.snap", rec.SAMPLER_PHASES[:5]), "sampler", notes
    )
    assert notes == []
    assert now is not None and before is not None
    assert before.summary().phases["env_step"].count == 3


def test_snapshot_of_other_phases_is_skipped_with_a_note(tmp_path: Path) -> None:
    notes: list[str] = []
    # a prefix that is not an earlier version's list, and the trainer's phases as a sampler
    for i, phases in enumerate([rec.SAMPLER_PHASES[:4], rec.TRAINER_PHASES]):
        path = _saved(tmp_path / f"{i}.snap", phases)
        assert collect._load_snap(path, "sampler", notes) is None
    assert len(notes) == 2 and all("not the run's sampler phases" in n for n in notes)
    # the earlier sampler list is no trainer snapshot
    path = _saved(tmp_path / "t.snap", rec.SAMPLER_PHASES[:5])
    assert collect._load_snap(path, "trainer", notes) is None
