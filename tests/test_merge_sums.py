"""A merged snapshot is the sum of its sources, row by row and field by field.

Every case builds its sources from explicit durations (``record``) so the
expected figures are known exactly, then checks the merge against a sum
computed here, phase by phase *by name*: totals, warm-up counts, counters,
steady count, sum, min and max, warm-up count, sum and max, the first value and
every histogram row, the whole-step row included. Reordered and disjoint phase
lists and sources without marked steps are the cases a merge that adds rows by
position gets wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

import gyreprof as gp
from gyreprof._core.histogram import Histogram

STEP_ROW = -1  # the whole-step row is the last row of every per-phase array


def _source(
    phases: Sequence[str],
    per_step: dict[str, list[int]],
    *,
    steps: bool = True,
    warmup_steps: int | None = None,
    negatives: int = 0,
    counters: dict[str, int] | None = None,
) -> gp.Snapshot:
    """A profile whose phase durations are exactly ``per_step[name]`` (one per step).

    With ``steps=False`` the same durations are recorded without marking steps.
    """
    prof = gp.Profiler(list(phases), warmup_steps=warmup_steps)
    n = max(len(v) for v in per_step.values())
    for i in range(n):
        if steps:
            prof.begin()
        for name in phases:
            if i < len(per_step.get(name, [])):
                prof.record(name, per_step[name][i])
    if steps:
        prof.end()
    for _ in range(negatives):
        prof.record(phases[0], -7)
    for name, k in (counters or {}).items():
        prof.count(name, k)
    return prof.snapshot()


def _row(snap: gp.Snapshot, name: str | None) -> int | None:
    """Row of phase ``name`` in ``snap`` (None: the whole step); None when absent."""
    if name is None:
        return len(snap.phases)
    return snap.phases.index(name) if name in snap.phases else None


def _assert_merge_is_the_sum(merged: gp.Snapshot, sources: Sequence[gp.Snapshot]) -> None:
    names: list[str] = []
    for s in sources:
        names.extend(p for p in s.phases if p not in names)
    assert sorted(merged.phases) == sorted(names)
    L = merged.counts.shape[1]
    for name in [*names, None]:
        m = _row(merged, name)
        assert m is not None
        rows = [(s, r) for s in sources if (r := _row(s, name)) is not None]
        want_counts = np.zeros(L, dtype=np.int64)
        for s, r in rows:
            want_counts += s.counts[r]
        assert np.array_equal(merged.counts[m], want_counts), f"histogram row of {name}"
        count = sum(s.rows[r].count for s, r in rows)
        total = sum(s.rows[r].sum for s, r in rows)
        mins = [s.rows[r].min for s, r in rows if s.rows[r].count > 0]
        maxs = [s.rows[r].max for s, r in rows if s.rows[r].count > 0]
        mr = merged.rows[m]
        got = [mr.count, mr.sum, mr.min, mr.max]
        assert got[0] == count == int(want_counts.sum()), f"steady count of {name}"
        assert got[1] == total, f"steady sum of {name}"
        if count:
            assert got[2] == min(mins), f"min of {name}"
            assert got[3] == max(maxs), f"max of {name}"
        wcount = sum(s.rows[r].warm_count for s, r in rows)
        wsum = sum(s.rows[r].warm_sum for s, r in rows)
        wmax = max([s.rows[r].warm_max for s, r in rows if s.rows[r].warm_count > 0], default=0)
        assert [mr.warm_count, mr.warm_sum] == [wcount, wsum], f"warm-up of {name}"
        if wcount:
            assert merged.rows[m].warm_max == wmax, f"warm-up max of {name}"
        firsts = [s.rows[r].first for s, r in rows if s.rows[r].first >= 0]
        assert merged.rows[m].first == (max(firsts) if firsts else -1), f"first of {name}"
    for key, value in dataclasses.asdict(merged.totals).items():
        assert value == sum(getattr(s.totals, key) for s in sources), f"totals[{key!r}]"
    counters: dict[str, int] = {}
    for s in sources:
        for k, v in s.counters.items():
            counters[k] = counters.get(k, 0) + v
    assert merged.counters == counters
    assert merged.steps == sum(s.steps for s in sources)
    # the bytes form re-checks that every histogram adds up to its count
    back = gp.Snapshot.from_bytes(merged.to_bytes())
    assert np.array_equal(back.counts, merged.counts)
    assert back.rows == merged.rows


def _values(start: int, n: int, stride: int) -> list[int]:
    return [start + stride * i for i in range(n)]


def test_five_and_seven_steps_merge_to_twelve() -> None:
    """The figures a merge that stops adding totals gets wrong (7, 2 and 1)."""
    a = _source(
        ["env", "policy"],
        {"env": _values(1_000, 5, 10), "policy": _values(50, 5, 3)},
        warmup_steps=2,
        negatives=1,
    )
    b = _source(
        ["env", "policy"],
        {"env": _values(2_000, 7, 10), "policy": _values(90, 7, 3)},
        warmup_steps=2,
        negatives=1,
    )
    assert (a.steps, b.steps) == (5, 7)
    merged = gp.merge([a, b])
    assert merged.steps == 12
    s = merged.summary()
    assert s.warmup.steps == 4
    assert s.negative == 2
    assert s.steps == 12 - 4  # steady steps: warm-up kept apart
    assert s.phases["env"].count == 3 + 5
    _assert_merge_is_the_sum(merged, [a, b])


def test_same_order_phases() -> None:
    rng = np.random.default_rng(11)
    srcs = [
        _source(
            ["env", "policy", "learn"],
            {
                "env": [int(x) for x in rng.integers(1_000, 10**7, 40)],
                "policy": [int(x) for x in rng.integers(10, 10**5, 40)],
                "learn": [int(x) for x in rng.integers(10**6, 10**9, 40)],
            },
            warmup_steps=3,
            negatives=i,
            counters={"retry": 2 + i, f"only{i}": 1},
        )
        for i in range(3)
    ]
    _assert_merge_is_the_sum(gp.merge(srcs), srcs)


def test_reordered_phases_with_marked_steps() -> None:
    """Phase lists in another order: rows go by name, and the step row still adds up."""
    a = _source(
        ["env", "policy"],
        {"env": _values(10_000, 5, 1_000), "policy": _values(100, 5, 7)},
        warmup_steps=1,
    )
    b = _source(
        ["policy", "env"],
        {"env": _values(90_000, 5, 1_000), "policy": _values(900, 5, 7)},
        warmup_steps=1,
    )
    merged = gp.merge([a, b])
    assert merged.phases == ("env", "policy")
    nstep = len(merged.phases)
    assert merged.rows[nstep].count == 8  # 2 x (5 steps - 1 warm-up step)
    assert int(merged.counts[nstep].sum()) == 8  # step percentiles come from all of them
    s = merged.summary()
    assert s.phases["env"].min == 11_000 and s.phases["env"].max == 94_000
    assert s.phases["policy"].min == 107 and s.phases["policy"].max == 928
    _assert_merge_is_the_sum(merged, [a, b])
    _assert_merge_is_the_sum(gp.merge([b, a]), [b, a])


def test_disjoint_phase_sets() -> None:
    a = _source(["env"], {"env": _values(5_000, 6, 11)}, counters={"x": 1})
    b = _source(
        ["learn", "log"],
        {"learn": _values(10**6, 4, 3), "log": [77, 88, 99, 111]},
        counters={"y": 5},
    )
    merged = gp.merge([a, b])
    assert merged.phases == ("env", "learn", "log")
    s = merged.summary()
    assert s.phases["env"].count == 6 and s.phases["learn"].count == 4
    assert s.phases["log"].max == 111 and s.phases["log"].min == 77
    assert merged.counters == {"x": 1, "y": 5}
    _assert_merge_is_the_sum(merged, [a, b])


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_sources_with_and_without_marked_steps(order: tuple[int, int, int]) -> None:
    stepped = _source(
        ["env", "fwd"],
        {"env": _values(3_000, 9, 17), "fwd": _values(400, 9, 5)},
        warmup_steps=2,
        negatives=2,
    )
    unstepped = _source(
        ["fwd", "env"], {"env": _values(8_000, 6, 13), "fwd": _values(10, 6, 1)}, steps=False
    )
    other = _source(["io"], {"io": [1, 2, 3]}, steps=False, counters={"retry": 4})
    srcs = [[stepped, unstepped, other][i] for i in order]
    merged = gp.merge(srcs)
    s = merged.summary()
    assert merged.steps == 9 and s.steps == 7
    assert s.phases["env"].count == 7 + 6
    assert s.phases["fwd"].min == 10
    _assert_merge_is_the_sum(merged, srcs)


def test_merged_percentiles_match_one_histogram_of_all_values() -> None:
    rng = np.random.default_rng(5)
    parts = [[int(x) for x in rng.lognormal(11, 1.2, n)] for n in (300, 50, 1)]
    srcs = [
        _source(["a", "b"], {"a": parts[0], "b": [5]}, steps=False),
        _source(["b", "a"], {"a": parts[1], "b": [6]}, steps=False),
        _source(["a"], {"a": parts[2]}, steps=False),
    ]
    merged = gp.merge(srcs)
    h = Histogram()
    h.record_many(np.concatenate([np.asarray(p) for p in parts]))
    ps = merged.summary().phases["a"]
    assert ps.count == h.total == 351
    assert (ps.min, ps.max) == (h.min, h.max)
    assert ps.mean == pytest.approx(h.mean(), rel=1e-12)
    for q in (1, 50, 90, 99, 99.9):
        assert ps.percentile(q) == h.percentile(q), q
    _assert_merge_is_the_sum(merged, srcs)
