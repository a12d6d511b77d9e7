"""``diagnose`` and ``wait_report`` take their knobs as an options record
(``DiagnoseOptions``, ``WaitOptions``), each knob still a keyword of the call."""

from __future__ import annotations

import dataclasses

import pytest

import gyreprof as gp
from gyreprof.analysis.verdict import DiagnoseOptions
from gyreprof.analysis.wait import WaitOptions

MS = 1_000_000


def _trainer(wait_ns: int, compute_ns: int, *, spikes: bool = True) -> gp.Profiler:
    """A trainer profile of 100 steps, each waiting ``wait_ns`` and computing
    ``compute_ns``; with ``spikes``, every tenth wait is ten times longer."""
    tp = gp.Profiler(["wait", "compute"], window_steps=1000)
    for i in range(100):
        tp.begin()
        tp.record("wait", wait_ns * (10 if spikes and i % 10 == 9 else 1))
        tp.record("compute", compute_ns)
    tp.end()
    return tp


def _sampler() -> gp.Profiler:
    prof = gp.Profiler(["env", "fwd"], window_steps=1000)
    for _ in range(100):
        prof.begin()
        prof.record("env", 5 * MS)
        prof.record("fwd", MS)
    prof.end()
    return prof


def test_the_design_calls_still_work() -> None:
    tp = _trainer(3 * MS, MS)
    rep = gp.wait_report(tp, wait="wait", compute="compute")
    assert rep.wait_phase == "wait" and 0.0 < rep.ratio < 1.0
    v = gp.diagnose(sampler=_sampler(), trainer=tp)
    assert v.bound == "sampler" and v.wait_ratio == pytest.approx(rep.ratio)


def test_a_knob_as_keyword_is_the_options_field() -> None:
    tp = _trainer(3 * MS, MS)
    by_keyword = gp.wait_report(tp, window_steps=10, spike_factor=2.0)
    by_record = gp.wait_report(tp, options=WaitOptions(window_steps=10, spike_factor=2.0))
    assert by_keyword.to_dict() == by_record.to_dict()
    assert by_record.window_size == "10 steps" and by_record.thresholds["spike_factor"] == 2.0
    # a keyword replaces that one field of the record, the others stay
    mixed = gp.wait_report(tp, options=WaitOptions(window_steps=10), spike_factor=2.0)
    assert mixed.to_dict() == by_record.to_dict()


def test_diagnose_options_and_its_wait_options() -> None:
    tp = _trainer(MS, 9 * MS, spikes=False)  # waits 10%: at the default threshold
    opts = DiagnoseOptions(band=0.0, wait_options=WaitOptions(window_steps=20))
    by_record = gp.diagnose(trainer=tp, options=opts)
    by_keyword = gp.diagnose(trainer=tp, band=0.0, window_steps=20)
    assert by_record.to_dict() == by_keyword.to_dict()
    assert by_record.bound == "sampler" and by_record.band == 0.0
    assert by_record.wait_report is not None and by_record.wait_report.window_size == "20 steps"
    # the keyword wins over the record's field
    assert gp.diagnose(trainer=tp, options=opts, trainer_bound_below=0.2).bound == "trainer"
    assert (
        gp.diagnose(trainer=tp, options=opts, window_steps=50).wait_report.window_size == "50 steps"
    )
    assert opts.wait_options.window_steps == 20  # frozen: the record given is not changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.band = 0.1  # type: ignore[misc]


def test_defaults_are_the_documented_ones() -> None:
    from gyreprof.analysis import verdict, wait

    d, w = DiagnoseOptions(), WaitOptions()
    assert d.trainer_bound_below == verdict.DEFAULT_TRAINER_BOUND_BELOW
    assert d.min_coverage == verdict.DEFAULT_MIN_COVERAGE
    assert d.env_phases == verdict.DEFAULT_ENV_PHASES and d.band is None and d.gpu is None
    assert w.spike_factor == wait.DEFAULT_SPIKE_FACTOR
    assert (w.window_steps, w.window_s, w.other, w.other_source) == (None, None, None, None)
    assert d.wait_options == w


def test_an_unknown_knob_is_named() -> None:
    tp = _trainer(3 * MS, MS)
    with pytest.raises(TypeError, match="'window_stpes'"):
        gp.wait_report(tp, window_stpes=10)
    with pytest.raises(TypeError, match="'bandd'"):
        gp.diagnose(trainer=tp, bandd=0.0)
    with pytest.raises(TypeError, match="'bandd'"):  # said even without a trainer
        gp.diagnose(sampler=_sampler(), bandd=0.0)


def test_a_bad_value_in_a_record_names_its_field() -> None:
    tp = _trainer(3 * MS, MS)
    with pytest.raises(ValueError, match="window_steps"):
        gp.wait_report(tp, options=WaitOptions(window_steps=0))
    with pytest.raises(ValueError, match="band"):
        gp.diagnose(trainer=tp, options=DiagnoseOptions(band=1.5))
    with pytest.raises(ValueError, match="spike_factor"):
        gp.diagnose(trainer=tp, options=DiagnoseOptions(wait_options=WaitOptions(spike_factor=0)))
    with pytest.raises(ValueError, match="min_coverage"):
        gp.diagnose(sampler=_sampler(), min_coverage=2.0)
