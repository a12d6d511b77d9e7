"""Rolling-window percentiles on distinct values, against numpy's inverted-CDF rule.

The recorder's rolling windows keep ~3% buckets, so each percentile may differ
from ``numpy.percentile(..., method="inverted_cdf")`` by at most the width of
the bucket holding the true value; the maximum is exact. The value sets are
built so that the neighbouring order statistics of p50, p90 and p99 lie far
apart (at least a factor 1.5), so a rank off by one lands outside that bound.
"""

from __future__ import annotations

import numpy as np
import pytest

import gyreprof as gp
from gyreprof._core import bucket_edges, index_of
from gyreprof._core.recorder import Recorder

QS = (50, 90, 99)
_CFG = Recorder(1).config()  # the rolling windows' bucket layout
LOWEST, HIGHEST, WINDOW_SF = (
    _CFG["lowest_ns"],
    _CFG["highest_ns"],
    _CFG["window_significant_figures"],
)
_EDGES = bucket_edges(LOWEST, HIGHEST, WINDOW_SF)


def _width(value: float) -> int:
    i = index_of(int(value), LOWEST, HIGHEST, WINDOW_SF)
    return int(_EDGES[1][i])


def _stepped_values(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct durations; the order statistics around each rank that p50, p90
    and p99 use for a window of ``n`` differ by at least 1.5x, in shuffled order."""
    ranks = {max(1, -(-q * n // 100)) for q in QS}  # ceil(q/100 * n), 1-based
    v, out = 20_000, []
    for r in range(1, n + 1):
        out.append(v)
        v = v * 2 if r in ranks or r - 1 in ranks else v + 7
    x = np.asarray(out, dtype=np.int64)
    rng.shuffle(x)
    return x


def _run(values_per_window: list[np.ndarray], window_steps: int) -> gp.Profiler:
    prof = gp.Profiler(["env", "policy"], window_steps=window_steps, max_windows=64)
    for vals in values_per_window:
        for v in vals:
            prof.begin()
            prof.record("env", int(v))
            prof.record("policy", 1_000)
    prof.end()
    return prof


def _check(win: gp.WindowStats, vals: np.ndarray) -> None:
    want = np.percentile(vals, QS, method="inverted_cdf")
    got = (win.p50, win.p90, win.p99)
    for q, g, w in zip(QS, got, want, strict=True):
        assert abs(g - w) <= _width(w), f"p{q}: window says {g}, numpy {w} (bucket {_width(w)})"
    assert win.max == vals.max()
    assert win.count == len(vals)
    assert win.mean == pytest.approx(float(vals.mean()), rel=1e-12)


def test_ten_step_window_of_100k_to_1m() -> None:
    """The case a rank rounded down gets wrong: p99 is 1,000,000 (to within its ~3%
    bucket: the bucket's midpoint, 999,423), not 900,000's bucket (901,119)."""
    vals = np.arange(100_000, 1_000_001, 100_000, dtype=np.int64)
    prof = _run([np.random.default_rng(0).permutation(vals)], window_steps=10)
    (w,) = prof.windows()
    assert w.steps == 10 and w.source == "rolling"
    env = w.phases["env"]
    assert abs(env.p99 - 1_000_000) <= _width(1_000_000)
    assert env.p99 > 950_000 and abs(env.p90 - 900_000) <= _width(900_000)
    assert env.max == 1_000_000
    _check(env, vals)


@pytest.mark.parametrize("window_steps", [1, 10, 1000])
def test_rolling_windows_match_inverted_cdf(window_steps: int) -> None:
    rng = np.random.default_rng(window_steps)
    n_windows = 3 if window_steps > 1 else 5
    per_window = [_stepped_values(window_steps, rng) for _ in range(n_windows)]
    for i, vals in enumerate(per_window):  # every window in its own range
        vals += np.int64(i * 3_000_000_000)
    prof = _run(per_window, window_steps)
    rolling = (prof.windows(), prof.summary().windows, prof.snapshot().windows())
    exact = prof.windows(steps=window_steps)  # from the raw events in the ring
    for source in (*rolling, exact):
        assert len(source) == n_windows
        for w, vals in zip(source, per_window, strict=True):
            assert w.steps == window_steps
            _check(w.phases["env"], vals)
            pol = w.phases["policy"]
            assert pol.p50 == pol.p99 == pol.max == 1_000


def test_windows_survive_the_bytes_form() -> None:
    rng = np.random.default_rng(7)
    per_window = [_stepped_values(10, rng) for _ in range(4)]
    snap = _run(per_window, 10).snapshot()
    back = gp.Snapshot.from_bytes(snap.to_bytes())
    for w, vals in zip(back.windows(), per_window, strict=True):
        _check(w.phases["env"], vals)
