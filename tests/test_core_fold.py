"""The fold: a lap only appends its event to the ring, and the histograms, warm-up
totals and rolling windows are accounted from the ring in batches, at step
boundaries and before a read. These tests hold the fold to "the same result as
accounting every event at once" and to what a reader in another process sees."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gyreprof._core import Recorder
from gyreprof._core import recorder as _rec
from gyreprof._support.block import StatsBlock

from helpers.reference import RefLayout

HIGHEST = 3_600_000_000_000


def _row(stats: np.ndarray, rec: Recorder, region: str, h: int, length: int) -> np.ndarray:
    start = int(rec.offsets[region]) + h * length
    return stats[start : start + length]


def _edge_values(lowest: int, highest: int) -> list[int]:
    vals = {0, 1, 2, 3, lowest - 1, lowest, lowest + 1, highest - 1, highest}
    for p in range(1, 63):
        for v in ((1 << p) - 1, 1 << p, (1 << p) + 1, 3 << max(p - 1, 0)):
            vals.add(v)
    rng = random.Random(5)
    vals.update(rng.randrange(0, highest) for _ in range(300))
    vals.update(int(10 ** rng.uniform(0, 12)) for _ in range(300))
    return sorted(v for v in vals if 0 <= v <= highest)


@pytest.mark.parametrize("sf", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("lowest", [1, 3, 1000, 1 << 20])
def test_the_folds_bucket_index_is_the_reference_index_for_every_layout(
    sf: int, lowest: int
) -> None:
    """The fold computes bucket indices in closed form, with compiled-in constants for
    the default layout and from the layout otherwise; both agree with the obviously
    correct reference for the phase histogram and the open window's histogram."""
    highest = 10**12
    rec = Recorder(
        1,
        significant_figures=sf,
        lowest_ns=lowest,
        highest_ns=highest,
        window_steps=1 << 40,
        capacity=1 << 12,
    )
    values = _edge_values(lowest, highest)
    for v in values:
        rec.record(0, v)
    stats = rec.stats_array()
    ref = RefLayout(lowest=lowest, highest=highest, significant_figures=sf)
    wref = RefLayout(
        lowest=lowest, highest=highest, significant_figures=int(_rec.WINDOW_SIGNIFICANT_FIGURES)
    )
    cfg = rec.config()
    want = np.zeros(cfg["counts_len"], dtype=np.int64)
    wwant = np.zeros(cfg["window_counts_len"], dtype=np.int64)
    for v in values:
        want[ref.index(v)] += 1
        wwant[wref.index(v)] += 1
    got = _row(stats, rec, "counts", 0, cfg["counts_len"])
    wgot = _row(stats, rec, "wcounts", 0, cfg["window_counts_len"])
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:10]
    assert np.array_equal(wgot, wwant), np.flatnonzero(wgot != wwant)[:10]
    block = StatsBlock.of(rec)
    st = block.stat_table()[0]
    assert st[0] == len(values) and st[1] == sum(values)
    assert st[2] == min(values) and st[3] == max(values)


def test_a_block_in_a_callers_buffer_holds_every_event_as_it_is_written() -> None:
    """Another process reads a shared block as it is (it cannot fold): a recorder whose
    block lives in a caller's buffer folds every event at once, whatever the form."""
    n_phases = 3
    buf = bytearray(Recorder.required_bytes(n_phases))
    rec = Recorder(n_phases, buffer=buf)
    raw = np.frombuffer(buf, dtype=np.int64)
    L = rec.config()["counts_len"]

    def visible(h: int) -> int:
        return int(_row(raw, rec, "counts", h, L).sum())

    t = rec.timer(2)
    rec.lap(0)  # the first boundary
    for k in range(1, 100):
        rec.lap(k % 2)
        assert visible(0) + visible(1) == k
    with t:
        pass
    assert visible(2) == 1
    rec.record(2, 10)
    assert visible(2) == 2
    rec.begin()
    rec.begin()
    assert visible(n_phases) == 1


def test_private_blocks_fold_in_batches_and_every_read_sees_everything() -> None:
    buf = bytearray(Recorder.required_bytes(2))
    rec = Recorder(2)
    rec.lap(0)
    for k in range(1, 3 * int(_rec.FOLD_BATCH) + 7):
        rec.lap(k % 2)
        assert int(StatsBlock.of(rec).stat_table()[:2, 0].sum()) == k  # a read folds
    for _ in range(10):
        rec.lap(0)
    # moving the block into shared memory folds what is pending first
    rec.rebind(buf)
    raw = np.frombuffer(buf, dtype=np.int64)
    L = rec.config()["counts_len"]
    n = 3 * int(_rec.FOLD_BATCH) + 6 + 10
    assert int(_row(raw, rec, "counts", 0, L).sum() + _row(raw, rec, "counts", 1, L).sum()) == n
    rec.lap(1)  # and from now on folds every event
    assert int(_row(raw, rec, "counts", 0, L).sum() + _row(raw, rec, "counts", 1, L).sum()) == n + 1


def test_steady_events_are_counted_by_form_when_folded() -> None:
    """Warm-up events of every form are left out; steady ones are counted by form, also
    when the warm-up ends in the middle of a batch."""
    rec = Recorder(2, warmup_steps=3, capacity=1 << 10)
    t = rec.timer(1)

    def work() -> None:
        @_timed(rec, 0)
        def f() -> None:
            pass

        with t:
            pass
        f()
        rec.record(1, 500)
        rec.lap(0)

    for _ in range(3):  # warm-up
        rec.begin()
        work()
    for _ in range(10):  # steady
        rec.begin()
        work()
        work()
    rec.end()
    forms = StatsBlock.of(rec).form_events()
    assert forms == {"with": 20, "timed": 20, "record": 20}


def _timed(rec: Recorder, phase: int):  # type: ignore[no-untyped-def]
    from gyreprof._core.recorder import TimedFunction

    def deco(fn):  # type: ignore[no-untyped-def]
        return TimedFunction(rec.timer(phase), fn)

    return deco


def _comparable(rec: Recorder) -> dict[str, np.ndarray]:
    """Everything in the block that does not depend on when the clock was read: the
    phases' histograms, totals and window rows (a whole step's duration is a clock
    reading, so the step histogram is left out), and the event counts."""
    stats = rec.stats_array()
    off = rec.offsets
    cfg = rec.config()
    P = rec.n_phases

    def rows(region: str, width: int) -> np.ndarray:
        return stats[int(off[region]) : int(off[region]) + P * width].copy()

    out = {
        "hot": rows("hot", int(_rec.HOT_WORDS)),
        "warm": rows("warm", int(_rec.WARM_FIELDS)),
        "counts": rows("counts", int(cfg["counts_len"])),
        "wcounts": rows("wcounts", int(cfg["window_counts_len"])),
    }
    nh = P + 1
    stride = int(_rec.WIN_HEADER) + int(_rec.WIN_FIELDS) * nh
    wring = stats[int(off["wring"]) : int(off["counters"])].reshape(-1, stride)
    keep = [int(_rec.WIN_FIRST_STEP), int(_rec.WIN_STEPS), int(_rec.WIN_WARMUP)]
    keep += list(range(int(_rec.WIN_HEADER), int(_rec.WIN_HEADER) + int(_rec.WIN_FIELDS) * P))
    out["wring"] = wring[:, keep].copy()
    words = [
        _rec.H_STEP,
        _rec.H_STEPS_DONE,
        _rec.H_NEGATIVE,
        _rec.H_OUT_OF_RANGE,
        _rec.H_WARMUP_STEPS,
        _rec.H_WINDOWS,
        _rec.H_RING_HEAD,
        _rec.H_N_TIMER,
        _rec.H_N_TIMED,
        _rec.H_N_RECORD,
        _rec.H_NONFINITE,
        _rec.H_WARMUP_END_STEP,
    ]
    out["header"] = stats[[int(w) for w in words]]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_folding_in_batches_gives_what_folding_every_event_at_once_gives(seed: int) -> None:
    """A ring of one event folds every event as it is written; a large ring folds in
    batches of FOLD_BATCH and at step boundaries; a block in shared memory takes each
    event into its histograms at once and folds its window in batches; a recorder
    moved between the two halfway (as live publishing and fork do) folds what is
    pending the old way. Driven with the same stream of recorded durations
    (deterministic, unlike laps), steps, warm-up, a time-based warm-up and window
    closes, the blocks agree word for word wherever the clock does not enter."""
    rng = random.Random(seed)
    kw = dict(window_steps=rng.choice([1, 3, 17]), max_windows=64)
    if seed == 5:
        kw["warmup_ns"] = 1  # ends at the first step (or, before any step, the first event)
    else:
        kw["warmup_steps"] = rng.choice([0, 1, 5])
    need = Recorder.required_bytes(3, max_windows=64)
    recs = {
        "at once": Recorder(3, capacity=1, **kw),
        "batched": Recorder(3, capacity=1 << 12, **kw),
        "shared": Recorder(3, capacity=1 << 12, buffer=bytearray(need), **kw),
        "moved": Recorder(3, capacity=1 << 12, **kw),
    }
    values = [0, 1, 999, 1000, 2047, 2048, 123_456, HIGHEST, HIGHEST + 5, -3]
    for k in range(3000):
        r = rng.random()
        phase = rng.randrange(3)
        value = rng.choice(values) if r < 0.2 else int(10 ** (r * 7))
        if k in (1000, 2000):
            # moved into shared memory, then back out, with events pending each time
            recs["moved"].rebind(bytearray(need) if k == 1000 else None)
        for rec in recs.values():
            if r < 0.04:
                rec.begin()
            elif r < 0.05:
                rec.end()
            elif r < 0.06:
                rec.record(phase, float("nan"))
            else:
                rec.record(phase, value)
        if rng.random() < 0.01:  # a read in the middle folds what is pending: equal now too
            mid = _comparable(recs["at once"])
            for label in ("batched", "shared", "moved"):
                got = _comparable(recs[label])
                assert all(np.array_equal(v, got[k]) for k, v in mid.items()), label
    want = _comparable(recs["at once"])
    for label in ("batched", "shared", "moved"):
        got = _comparable(recs[label])
        for name in want:
            assert np.array_equal(want[name], got[name]), (label, name)
    assert recs["at once"].stats_array()[int(_rec.H_WINDOWS)] > 0


def test_moving_a_block_out_of_shared_memory_writes_nothing_to_it() -> None:
    """After fork a child moves its block out of the parent's segment: the move (and
    the fold of the window's pending events) must not touch the old segment."""
    buf = bytearray(Recorder.required_bytes(2))
    rec = Recorder(2, buffer=buf)
    for _ in range(10):
        rec.begin()
        rec.lap(0)
        rec.lap(1)
    before = bytes(buf)
    rec.rebind(None)
    assert bytes(buf) == before
    rec.begin()
    assert bytes(buf) == before
    assert StatsBlock.of(rec).stat_table()[2, 0] == 10


@pytest.mark.parametrize("capacity", [1, 2, 8, 64, 100, 128, 1000, 4096])
@pytest.mark.parametrize("shared", [False, True])
def test_the_ring_returns_every_kept_event_in_order(capacity: int, shared: bool) -> None:
    """Events wait in the ring itself until they are folded (never more than the ring
    holds): events() sees every kept event, in order, at every point (mid-batch, at a
    batch boundary, after a wrap), private or shared, whatever the capacity."""
    buf = bytearray(Recorder.required_bytes(2)) if shared else None
    rec = Recorder(2, capacity=capacity, buffer=buf)
    kept = rec.capacity
    n = 0
    for checkpoint in (1, 5, 63, 64, 65, 127, 128, 129, 300, 1000, 5000):
        while n < checkpoint:
            n += 1
            rec.record(n % 2, n)
        ev = rec.events()
        want = np.arange(max(1, n - kept + 1), n + 1)
        assert np.array_equal(ev["duration_ns"], want), (capacity, n)
        assert np.array_equal(ev["phase"], want % 2)
        assert (ev["form"] == int(_rec.FORM_RECORD)).all()
        assert rec.overwritten == max(0, n - kept)
