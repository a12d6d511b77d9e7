"""Accepted => usable (issue 25, item 11): live segments and HdrHistogram logs whose
numbers were tampered with are refused with a ValueError, or every read method works
on them and each mean lies in [min, max]. Time-bounded hypothesis runs.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import gyreprof as gp
from gyreprof.export.hdrlog import parse_hdr_log
from gyreprof.live import _layout as lay
from gyreprof.model.snapshot import merge

from helpers.fuzzing import deep

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same inputs on every run
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
DEEP = deep(FUZZ)  # the slow twins: a few thousand examples each (helpers/fuzzing.py)


def _usable(snap: gp.Snapshot) -> None:
    """Every read method works and each mean lies in [min, max]."""
    s = snap.summary()
    str(s)
    s.to_json()
    for ph in [*s.phases.values(), s.step]:
        if ph.count > 0 and not math.isnan(ph.mean):
            assert ph.min <= ph.mean <= ph.max, (ph.min, ph.mean, ph.max)
        if ph.count > 0:
            ph.percentile(50.0)
            ph.percentile(99.9)
    m = merge([snap, snap])
    ms = m.summary()
    str(ms)
    for ph in [*ms.phases.values(), ms.step]:
        if ph.count > 0 and not math.isnan(ph.mean):
            assert ph.min <= ph.mean <= ph.max
    assert 0.0 <= s.overhead_share <= 1.0 or math.isnan(s.overhead_share)
    gp.Snapshot.from_bytes(snap.to_bytes())


class _Seg(tuple):  # type: ignore[type-arg]
    """(bytes, header_bytes, offsets) with a short repr (hypothesis prints its inputs)."""

    def __repr__(self) -> str:
        return f"<segment of {len(self[0])} bytes>"


@pytest.fixture(scope="module")
def segment() -> Iterator[tuple[bytes, int, dict[str, int]]]:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-fuzz2-"))
    old = os.environ.get(lay.ENV_DIR)
    os.environ[lay.ENV_DIR] = str(d)
    try:
        prof = gp.Profiler(["env", "fwd"], live=True)
        for i in range(300):
            prof.begin()
            prof.lap(0)
            prof.record("fwd", 1000 + i)
        prof.end()
        data = prof.live.path.read_bytes()
        header_bytes = lay.FIXED.unpack_from(data, 0)[2]
        offsets = dict(prof.recorder.offsets)
        prof.live.close()
        yield _Seg((data, header_bytes, offsets))
    finally:
        if old is None:
            os.environ.pop(lay.ENV_DIR, None)
        else:
            os.environ[lay.ENV_DIR] = old
        shutil.rmtree(d, ignore_errors=True)


_WORDS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([-1, 0, 1, 2**62, 2**63 - 1, -(2**63), 2**31]),
)


_STATS_EDITS: dict[str, st.SearchStrategy[Any]] = {
    "region": st.sampled_from(["hot", "warm", "counts", "header", "counters", "sumhi"]),
    "edits": st.lists(st.tuples(st.integers(0, 200), _WORDS), min_size=1, max_size=6),
}


@FUZZ
@given(**_STATS_EDITS)
# a maximum just below the int64 limit, read back as a float that rounds past it
@example(region="hot", edits=[(4, 9_223_372_036_854_775_296)])
def test_tampered_stats_blocks_are_refused_or_usable(
    segment: tuple[bytes, int, dict[str, int]],
    tmp_path_factory: pytest.TempPathFactory,
    region: str,
    edits: list[tuple[int, int]],
) -> None:
    data, header_bytes, offsets = segment
    arr = bytearray(data)
    words = np.frombuffer(arr, dtype="<i8", offset=header_bytes, count=offsets["words"]).copy()
    start = 0 if region == "header" else offsets[region]
    if region == "counts":
        # the buckets that hold data, and their neighbours
        nz = np.flatnonzero(words[offsets["counts"] : offsets["wcounts"]])
        start = offsets["counts"] + int(nz[0]) - 50 if nz.size else offsets["counts"]
    for k, v in edits:
        words[min(start + k, len(words) - 1)] = v
    arr[header_bytes : header_bytes + 8 * len(words)] = words.astype("<i8").tobytes()
    d = tmp_path_factory.mktemp("seg")
    d.chmod(0o700)
    path = d / lay.segment_filename(os.getpid(), 9)
    path.write_bytes(bytes(arr))
    path.chmod(0o600)
    try:
        with gp.live.attach(path) as r:
            r.progress()
            snap = r.snapshot()
    except ValueError:
        return
    _usable(snap)


@pytest.mark.slow
@DEEP
@given(**_STATS_EDITS)
def test_tampered_stats_blocks_are_refused_or_usable_deep(
    segment: tuple[bytes, int, dict[str, int]],
    tmp_path_factory: pytest.TempPathFactory,
    region: str,
    edits: list[tuple[int, int]],
) -> None:
    test_tampered_stats_blocks_are_refused_or_usable.hypothesis.inner_test(
        segment, tmp_path_factory, region, edits
    )


@pytest.fixture(scope="module")
def hdr_text() -> str:
    from gyreprof.export import hdr_log

    prof = gp.Profiler(["env"])
    for i in range(200):
        prof.begin()
        prof.record("env", 1000 + 7 * i)
    prof.end()
    text = hdr_log(prof, interval_s=1.0)
    assert isinstance(text, str)
    return text


_HDR_EDITS: dict[str, st.SearchStrategy[Any]] = {
    "scale": st.sampled_from([1, 3, 2**20, 2**40, 2**61, 2**62]),
    "neg": st.booleans(),
    "length": st.sampled_from(["1.0", "-1.0", "0.0"]),
    "mx": st.sampled_from(["0.5", "-3", "1e300"]),
}


@FUZZ
@given(**_HDR_EDITS)
def test_tampered_hdr_logs_are_refused_or_usable(
    hdr_text: str, scale: int, neg: bool, length: str, mx: str
) -> None:
    from gyreprof.export.hdrlog import HdrHistogramData, encode_histogram

    log = parse_hdr_log(hdr_text)
    iv = log.intervals[0]
    counts = iv.histogram.counts.astype(object) * scale
    if neg:
        counts[int(np.flatnonzero(iv.histogram.counts)[0])] *= -1
    try:
        enc = encode_histogram(np.array(counts, dtype=np.int64), *iv.histogram.layout)
    except (ValueError, OverflowError):
        return
    line = f"0.000,{length},{mx},{enc}"
    text = "\n".join([*[c for c in hdr_text.splitlines() if c.startswith("#")], line, line])
    try:
        got = parse_hdr_log(text)
    except ValueError:
        return
    h = got.histogram(None)
    assert isinstance(h, HdrHistogramData)
    assert h.total_count >= 0
    if h.total_count:
        assert h.min <= h.mean <= h.max
        h.percentile(50.0)
    for interval in got.intervals:
        assert interval.length_s >= 0 and interval.max_value >= 0


@pytest.mark.slow
@DEEP  # a small space: it ends when every combination was tried
@given(**_HDR_EDITS)
def test_tampered_hdr_logs_are_refused_or_usable_deep(
    hdr_text: str, scale: int, neg: bool, length: str, mx: str
) -> None:
    test_tampered_hdr_logs_are_refused_or_usable.hypothesis.inner_test(
        hdr_text, scale, neg, length, mx
    )


@pytest.fixture(scope="module")
def summary_dict() -> dict[str, object]:
    prof = gp.Profiler(["env", "fwd"])
    for i in range(300):
        prof.begin()
        prof.record("env", 1000 + i)
        prof.record("fwd", 50_000 + 13 * i)
    prof.end()
    d: dict[str, object] = prof.summary().to_dict()
    return d


_FIELDS = ["count", "mean", "min", "max", "p50", "p90", "p99", "p999", "share", "sum_ns"]
_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 2**63, -(2**63), 1e300, -0.5, float("nan"), float("inf"), None]),
    st.floats(min_value=0, max_value=1e7),
    st.integers(min_value=0, max_value=10**6),
)


_SUMMARY_EDITS: dict[str, st.SearchStrategy[Any]] = {
    "where": st.sampled_from(["env", "fwd", "step"]),
    "edits": st.lists(st.tuples(st.sampled_from(_FIELDS), _VALUES), min_size=1, max_size=4),
    "top": st.one_of(
        st.none(),
        st.tuples(st.sampled_from(["steps", "overhead_share", "elapsed_s", "negative"]), _VALUES),
    ),
}


@FUZZ
@given(**_SUMMARY_EDITS)
# a NaN literal (or null) where gyreprof always writes a finite share
@example(where="env", edits=[("count", 300)], top=("overhead_share", float("nan")))
@example(where="env", edits=[("count", 300)], top=("overhead_share", None))
def test_tampered_summary_json_is_refused_or_usable(
    summary_dict: dict[str, object],
    where: str,
    edits: list[tuple[str, object]],
    top: tuple[str, object] | None,
) -> None:
    import copy
    import json

    from gyreprof.model.summary import Summary

    d = copy.deepcopy(summary_dict)
    target = d["step"] if where == "step" else d["phases"][where]  # type: ignore[index]
    for k, v in edits:
        target[k] = v  # type: ignore[index]
    if top is not None:
        d[top[0]] = top[1]
    text = json.dumps(d, allow_nan=True)
    try:
        s = Summary.from_json(text)
    except ValueError:
        return
    str(s)
    s.to_json()
    s.to_markdown()
    assert 0.0 <= s.overhead_share <= 1.0
    for ph in [*s.phases.values(), s.step]:
        if ph.count > 0 and not math.isnan(ph.mean):
            assert ph.min <= ph.mean * (1 + 1e-9) and ph.mean <= ph.max * (1 + 1e-9)
        if ph.count > 0:
            ph.percentile(50.0)


@pytest.mark.slow
@DEEP
@given(**_SUMMARY_EDITS)
def test_tampered_summary_json_is_refused_or_usable_deep(
    summary_dict: dict[str, object],
    where: str,
    edits: list[tuple[str, object]],
    top: tuple[str, object] | None,
) -> None:
    test_tampered_summary_json_is_refused_or_usable.hypothesis.inner_test(
        summary_dict, where, edits, top
    )


def test_summary_from_json_text_is_not_taken_as_a_path() -> None:
    from gyreprof._support.errors import CorruptDataError
    from gyreprof.model.summary import Summary

    # "no such file" before: the text was taken as a path
    with pytest.raises(CorruptDataError, match="not a valid gyreprof summary"):
        Summary.from_json("[1,2]")
    with pytest.raises(CorruptDataError, match="not a valid gyreprof summary"):
        Summary.from_json("  [] ")
