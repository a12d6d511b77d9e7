"""Time-bounded fuzzers for every decoder, and the crafted inputs that once blew up.

Each decoder (``Snapshot.from_bytes``, ``Summary.from_dict`` / ``from_json``,
the HdrHistogram log reader, the counts codec) is fed mutations of valid input:
bit flips, truncations, spliced bytes and header fields replaced by hostile
values (huge counts, impossible layouts, wrong types). Every input must either
decode into something a summary can print, or raise ValueError; and the memory
a decode allocates (tracemalloc peak) must stay under 64 MB + 100 x the input.

The hypothesis settings are derandomized and bounded by ``max_examples`` so the
whole file runs in well under a minute and cannot flake.
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.lib.format as npy_format
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gyreprof as gp
from gyreprof._core import decode_counts, encode_counts, layout_info
from gyreprof._support import limits as _limits
from gyreprof.export.hdrlog import decode_histogram, hdr_log, parse_hdr_log

from helpers.crafted import crafted_snapshot, join_snapshot, split_snapshot
from helpers.fuzzing import deep

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
DEEP = deep(FUZZ)  # the slow twins: a few thousand examples each (helpers/fuzzing.py)
MB = 1 << 20


def _bound(n_input: int) -> int:
    return 64 * MB + 100 * n_input


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_limits.ENV_MEMORY_BUDGET, raising=False)
    monkeypatch.delenv("GYREPROF_MAX_INPUT_BYTES", raising=False)


def _decode_bounded(fn: Callable[[], Any], n_input: int, *, budget: int = 0) -> tuple[Any, int]:
    """``fn()`` -> (result or the ValueError it raised, tracemalloc peak in bytes).

    Anything but ValueError propagates and fails the test. ``budget``: memory the
    input may legitimately make the decoder allocate (its declared layout)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            result: Any = fn()
        except ValueError as exc:
            result = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= budget + _bound(n_input), f"decoding {n_input} bytes took {peak / MB:.1f} MB"
    return result, peak


def _printable_summary(s: gp.Summary) -> None:
    """Everything a user does with a summary works."""
    str(s)
    s.table()
    s.to_markdown()
    json.loads(s.to_json())
    s.to_csv()
    s.to_metrics()
    for w in s.windows:
        w.to_dict()


# ------------------------------------------------------------------ seeds


def _seed_profilers() -> Iterator[gp.Profiler]:
    rng = np.random.default_rng(7)
    a = gp.Profiler(["env", "policy"], significant_figures=2, window_steps=10, max_windows=8)
    for _ in range(60):
        a.begin()
        a.record("env", int(rng.lognormal(9, 1)))
        a.record("policy", int(rng.lognormal(7, 1)))
    a.end()
    a.count("resets", 3)
    yield a
    b = gp.Profiler(["x"], warmup_steps=3, significant_figures=1, window_steps=4, max_windows=4)
    for i in range(20):
        b.begin()
        b.record("x", 1000 + 37 * i)
    b.end()
    yield b


SEED_SNAPSHOTS = [p.snapshot() for p in _seed_profilers()]
SEED_BYTES = [s.to_bytes() for s in SEED_SNAPSHOTS] + [
    SEED_SNAPSHOTS[0].to_bytes(compression="lzma", windows=False)
]


_split = split_snapshot
_join = join_snapshot


HOSTILE = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 5, 6, 255, 256, 2**31, 2**31 - 1, 2**62, 2**63 - 1, 2**63, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    st.lists(st.integers(min_value=-3, max_value=2**64), max_size=6),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.lists(st.lists(st.integers(min_value=-1, max_value=9), max_size=4), max_size=4),
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path into a JSON-like value (containers and leaves)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            yield from _paths(v, (*prefix, i))


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return obj


def _bytes_mutation(data: st.DataObject, blob: bytes) -> bytes:
    b = bytearray(blob)
    kind = data.draw(st.sampled_from(["flip", "truncate", "splice", "extend"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        del b[data.draw(st.integers(0, len(b) - 1)) :]
    elif kind == "splice":
        i = data.draw(st.integers(0, len(b)))
        b[i : i + data.draw(st.integers(0, 8))] = data.draw(st.binary(max_size=16))
    else:
        b += data.draw(st.binary(min_size=1, max_size=32))
    return bytes(b)


# -------------------------------------------------------------- snapshots


def _check_snapshot_bytes(blob: bytes) -> None:
    result, _ = _decode_bounded(lambda: gp.Snapshot.from_bytes(blob), len(blob))
    if isinstance(result, gp.Snapshot):
        _printable_summary(result.summary())
        result.windows()
        merged = gp.merge([result, result])
        _printable_summary(merged.summary())
        gp.Snapshot.from_bytes(result.to_bytes())


@FUZZ
@given(st.data())
def test_fuzz_snapshot_bytes(data: st.DataObject) -> None:
    blob = data.draw(st.sampled_from(SEED_BYTES))
    _check_snapshot_bytes(_bytes_mutation(data, blob))


@pytest.mark.slow
@DEEP
@given(st.data())
def test_fuzz_snapshot_bytes_deep(data: st.DataObject) -> None:
    test_fuzz_snapshot_bytes.hypothesis.inner_test(data)


@FUZZ
@given(st.data())
def test_fuzz_snapshot_header_fields(data: st.DataObject) -> None:
    prefix, header, rows = _split(data.draw(st.sampled_from(SEED_BYTES[:2])))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(header))[1:]))
        header = _set(header, path, data.draw(HOSTILE))
    if data.draw(st.booleans()):
        # keep counts_len consistent with a hostile layout, so the layout itself is tested
        try:
            c = header["config"]
            header["counts_len"] = layout_info(
                c["lowest_ns"], c["highest_ns"], c["significant_figures"]
            )["counts_len"]
        except Exception:  # noqa: BLE001 - the hostile header may not even have a config
            pass
    if data.draw(st.booleans()) and rows:
        i = data.draw(st.integers(0, len(rows) - 1))
        rows[i] = data.draw(st.binary(max_size=24))
    _check_snapshot_bytes(_join(prefix, header, rows))


@pytest.mark.slow
@DEEP
@given(st.data())
def test_fuzz_snapshot_header_fields_deep(data: st.DataObject) -> None:
    test_fuzz_snapshot_header_fields.hypothesis.inner_test(data)


@contextmanager
def _budget(value: str) -> Iterator[None]:
    old = os.environ.get(_limits.ENV_MEMORY_BUDGET)
    os.environ[_limits.ENV_MEMORY_BUDGET] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[_limits.ENV_MEMORY_BUDGET]
        else:
            os.environ[_limits.ENV_MEMORY_BUDGET] = old


@FUZZ
@given(
    n_phases=st.integers(0, 3000),
    sf=st.integers(1, 5),
    highest=st.sampled_from([2**12, 3_600_000_000_000, 2**62, 2**63 - 1]),
    windows=st.integers(0, 3),
)
@pytest.mark.slow  # several seconds: run by .ci/run's second step
def test_fuzz_snapshot_inflated_layouts(n_phases: int, sf: int, highest: int, windows: int) -> None:
    """Declared sizes are checked against the budget before anything is allocated.

    A tiny file may declare a layout whose histograms are dense and large (the
    format stores empty buckets as runs); what it may allocate is the memory
    budget, set to 256 MiB here, and not a byte more.
    """
    blob = _crafted_snapshot(n_phases, sf, highest, windows=windows)
    with _budget("256M"):
        tracemalloc.start()
        try:
            try:
                result: Any = gp.Snapshot.from_bytes(blob)
            except ValueError as exc:
                result = exc
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        L = layout_info(1, highest, sf)["counts_len"]
        assert peak <= 256 * MB + _bound(len(blob))
        if 8 * (n_phases + 1) * L > 256 * MB:
            assert isinstance(result, ValueError) and "memory budget" in str(result)
        else:
            assert isinstance(result, gp.Snapshot)
            _printable_summary(result.summary())


# -------------------------------------------------------------- summaries

SEED_SUMMARIES = [s.summary().to_dict() for s in SEED_SNAPSHOTS]


def _check_summary_text(text: str) -> None:
    n = len(text.encode("utf-8", "surrogatepass"))
    result, _ = _decode_bounded(lambda: gp.Summary.from_json(text), n)
    if isinstance(result, gp.Summary):
        _printable_summary(result)


@FUZZ
@given(st.data())
def test_fuzz_summary_fields(data: st.DataObject) -> None:
    d = json.loads(json.dumps(data.draw(st.sampled_from(SEED_SUMMARIES))))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(d))[1:]))
        d = _set(d, path, data.draw(HOSTILE))
    _check_summary_text(json.dumps(d))
    result, _ = _decode_bounded(lambda: gp.Summary.from_dict(d), len(json.dumps(d)))
    if isinstance(result, gp.Summary):
        _printable_summary(result)


@pytest.mark.slow
@DEEP
@given(st.data())
def test_fuzz_summary_fields_deep(data: st.DataObject) -> None:
    test_fuzz_summary_fields.hypothesis.inner_test(data)


@FUZZ
@given(st.data())
def test_fuzz_summary_text(data: st.DataObject) -> None:
    text = json.dumps(data.draw(st.sampled_from(SEED_SUMMARIES)))
    blob = _bytes_mutation(data, text.encode())
    _check_summary_text("{" + blob.decode("utf-8", "replace").lstrip("{"))


@pytest.mark.slow
@DEEP
@given(st.data())
def test_fuzz_summary_text_deep(data: st.DataObject) -> None:
    test_fuzz_summary_text.hypothesis.inner_test(data)


# --------------------------------------------------------------- HDR logs

SEED_LOGS = [str(hdr_log(s)) for s in SEED_SNAPSHOTS]


def _check_hdr_text(text: str, budget: int = 0) -> None:
    n = len(text.encode("utf-8", "replace"))
    result, _ = _decode_bounded(lambda: parse_hdr_log(text), n, budget=budget)
    if not isinstance(result, ValueError):
        for tag in result.tags:
            h = result.histogram(tag)
            h.percentiles([50.0, 99.0])
            assert h.mean == h.mean or h.total_count == 0
            assert h.max >= 0 or h.total_count == 0


@FUZZ
@given(st.data())
def test_fuzz_hdr_log_text(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(SEED_LOGS))
    _check_hdr_text(_bytes_mutation(data, text.encode()).decode("utf-8", "replace"))


@pytest.mark.slow
@DEEP
@given(st.data())
def test_fuzz_hdr_log_text_deep(data: st.DataObject) -> None:
    test_fuzz_hdr_log_text.hypothesis.inner_test(data)


def _histogram_b64(
    sf: int,
    lowest: int,
    highest: int,
    payload: bytes,
    *,
    plen: int | None = None,
    norm: int = 0,
    ratio: float = 1.0,
) -> str:
    head = struct.pack(
        ">IIiiqqd",
        0x1C849313,
        len(payload) if plen is None else plen,
        norm,
        sf,
        lowest,
        highest,
        ratio,
    )
    comp = zlib.compress(head + payload)
    return base64.b64encode(struct.pack(">II", 0x1C849314, len(comp)) + comp).decode()


_HDR_HEADERS: dict[str, st.SearchStrategy[Any]] = {
    "sf": st.integers(-(2**31), 2**31 - 1) | st.integers(0, 6),
    "lowest": st.integers(-(2**63), 2**63 - 1) | st.sampled_from([1, 2, 1000]),
    "highest": st.integers(-(2**63), 2**63 - 1) | st.sampled_from([2**20, 2**62, 2**63 - 1]),
    "payload": st.binary(max_size=40),
    "plen": st.none() | st.integers(0, 2**32 - 1),
    "norm": st.sampled_from([0, 0, 1, -1]),
    "ratio": st.floats(allow_nan=True, allow_infinity=True) | st.just(1.0),
    "lines": st.integers(1, 40),
}


@FUZZ
@given(**_HDR_HEADERS)
def test_fuzz_hdr_histogram_headers(
    sf: int,
    lowest: int,
    highest: int,
    payload: bytes,
    plen: int | None,
    norm: int,
    ratio: float,
    lines: int,
) -> None:
    b64 = _histogram_b64(sf, lowest, highest, payload, plen=plen, norm=norm, ratio=ratio)
    text = "".join(f"Tag=t{i % 3},{i}.0,1.0,1.0,{b64}\n" for i in range(lines))
    with _budget("256M"):  # what declared layouts may take, all lines together
        _check_hdr_text(text, budget=256 * MB)


@pytest.mark.slow
@DEEP
@given(**_HDR_HEADERS)
def test_fuzz_hdr_histogram_headers_deep(**kw: Any) -> None:
    test_fuzz_hdr_histogram_headers.hypothesis.inner_test(**kw)


# ------------------------------------------------------------ events files


@pytest.fixture(scope="module")
def events_blob(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    prof = gp.Profiler(["env", "policy"], capacity=64)
    for i in range(20):
        prof.begin()
        prof.record("env", 1000 + i)
        prof.record("policy", 300 + i)
    prof.end()
    path = tmp_path_factory.mktemp("events") / "run.npz"
    gp.export.save_events(prof, path)
    return path.read_bytes()


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_fuzz_events_file(
    data: st.DataObject, events_blob: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    blob = _bytes_mutation(data, events_blob)
    path = tmp_path_factory.getbasetemp() / "fuzz-events.npz"
    path.write_bytes(blob)
    result, _ = _decode_bounded(lambda: gp.export.load_events(path), len(blob))
    if not isinstance(result, ValueError):
        _printable_summary(result.snapshot.summary())


@pytest.mark.slow
@DEEP
@given(data=st.data())
def test_fuzz_events_file_deep(
    data: st.DataObject, events_blob: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    test_fuzz_events_file.hypothesis.inner_test(data, events_blob, tmp_path_factory)


@pytest.mark.parametrize("flag", [0x01, 0x20, 0x40])  # encrypted, patched, strong encryption
def test_an_events_file_zipfile_cannot_read_is_a_value_error(
    events_blob: bytes, tmp_path: Path, flag: int
) -> None:
    """Members flagged as encrypted or patched made ``zipfile`` raise RuntimeError or
    NotImplementedError (found by the slow fuzzer): a ValueError now."""
    data = bytearray(events_blob)
    for magic, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.find(magic)
        while i >= 0:
            data[i + at] |= flag
            i = data.find(magic, i + 4)
    path = tmp_path / "flagged.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="not a gyreprof events file"):
        gp.export.load_events(path)


def test_events_file_declaring_a_huge_array_is_refused(tmp_path: Path) -> None:
    """np.load allocates a .npy member's declared shape before reading: 745 GiB here."""
    head = io.BytesIO()
    npy_format.write_array_header_1_0(
        head, {"descr": "<i8", "fortran_order": False, "shape": (10**11,)}
    )
    path = tmp_path / "crafted.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("events", "tids", "phases", "snapshot", "meta"):
            zf.writestr(f"{name}.npy", head.getvalue() + bytes(64))
    assert path.stat().st_size < 2000
    result, peak = _decode_bounded(lambda: gp.export.load_events(path), path.stat().st_size)
    assert isinstance(result, ValueError)  # was MemoryError
    assert "declares 800000000000 bytes of data but holds 64" in str(result)


# ------------------------------------------------------------------ codec


@FUZZ
@given(data=st.binary(max_size=200), length=st.integers(0, 1 << 16))
def test_fuzz_codec_decode(data: bytes, length: int) -> None:
    result, _ = _decode_bounded(lambda: decode_counts(data, length), len(data) + 8 * length)
    if not isinstance(result, ValueError):
        assert result.shape == (length,) and (result >= 0).all()
        assert np.array_equal(decode_counts(encode_counts(result), length), result)


@pytest.mark.slow
@DEEP
@given(data=st.binary(max_size=200), length=st.integers(0, 1 << 16))
def test_fuzz_codec_decode_deep(data: bytes, length: int) -> None:
    test_fuzz_codec_decode.hypothesis.inner_test(data, length)


# ------------------------------------------------------- crafted regressions


_crafted_snapshot = crafted_snapshot


def test_huge_declared_snapshot_is_refused_before_allocation() -> None:
    blob = _crafted_snapshot(255, 5, 2**63 - 1)  # 256 x 6.2 M buckets: 12 GiB of counts
    assert len(blob) < 4096
    result, peak = _decode_bounded(lambda: gp.Snapshot.from_bytes(blob), len(blob))
    assert isinstance(result, ValueError)
    assert isinstance(result, _limits.BudgetError)  # too large, not "corrupted"
    assert str(result).startswith("snapshot: 256 histogram(s) of 6160384 buckets need 11.8 GiB")
    assert "memory budget of 1.0 GiB" in str(result) and "GYREPROF_MEMORY_BUDGET" in str(result)
    assert peak < 8 * MB


def test_snapshot_decompression_bomb_is_cut_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "64M")  # inflate cap: 16 MiB
    body = struct.pack("<I", 40 * MB) + b" " * (40 * MB)
    blob = b"GYRS\x01\x00" + zlib.compress(body, 9)
    assert len(blob) < 100_000
    result, peak = _decode_bounded(lambda: gp.Snapshot.from_bytes(blob), len(blob))
    assert isinstance(result, ValueError) and "inflates to more than 16.0 MiB" in str(result)
    assert peak < 40 * MB  # the capped output and zlib's buffer, not 40 MiB of text


def test_merge_refuses_a_union_above_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each input fits; the merged phase union does not: merge says so before allocating."""
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "64M")
    a = gp.Snapshot.from_bytes(_crafted_snapshot(150, 3, 3_600_000_000_000))
    header = _split(_crafted_snapshot(150, 3, 3_600_000_000_000))[1]
    header["phases"] = [f"q{i}" for i in range(150)]
    b = gp.Snapshot.from_bytes(_join(b"GYRS\x01\x00", header, [b""] * 151))
    assert gp.merge([a, a]).counts.shape[0] == 151  # same phases: fits
    with pytest.raises(_limits.BudgetError, match=r"merge: 301 histogram\(s\) of 33792 buckets"):
        gp.merge([a, b])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("totals", []),  # was AttributeError
        ("stat", [[2**70, 0, -1, -1]]),  # was OverflowError
        ("phases", None),  # was TypeError / KeyError
        ("times", {"start_ns": "soon"}),  # accepted, then summary() crashed
        ("sources", [{"steady_ns": "x"}]),  # accepted, then summary() crashed
        ("config", {"significant_figures": 3}),  # was KeyError
        ("rolling", [[1, 2, 3]]),  # accepted, then windows() crashed
        ("phases", ["a", "a"]),  # accepted, then merge and summary disagreed
        ("lap_cost_ns", 1e400),  # inf
    ],
)
def test_crafted_snapshot_fields_raise_value_error(field: str, value: Any) -> None:
    prefix, header, rows = _split(SEED_BYTES[0])
    header[field] = value
    with pytest.raises(ValueError, match="corrupted snapshot"):
        gp.Snapshot.from_bytes(_join(prefix, header, rows))


def test_deeply_nested_header_is_a_value_error() -> None:
    prefix, _, rows = _split(SEED_BYTES[0])
    hjson = b"[" * 200_000 + b"]" * 200_000
    body = struct.pack("<I", len(hjson)) + hjson
    with pytest.raises(ValueError, match="corrupted snapshot"):
        gp.Snapshot.from_bytes(b"GYRS\x01\x00" + zlib.compress(body))
    with pytest.raises(ValueError, match="not a valid gyreprof summary"):
        gp.Summary.from_json("{" + '"a":' + "[" * 200_000 + "]" * 200_000 + "}")


def test_hdr_log_of_huge_declared_histograms_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 15 KB log that mapped 9.8 GB: lines declaring 6.2 M buckets each."""
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "256M")
    b64 = _histogram_b64(5, 1, 2**63 - 1, b"")
    text = "".join(f"Tag=a,{i}.0,1.0,0.0,{b64}\n" for i in range(200))
    assert len(text) < 20_000
    result, peak = _decode_bounded(lambda: parse_hdr_log(text), len(text), budget=256 * MB)
    assert isinstance(result, ValueError)
    assert "line 6: HdrHistogram: 1 more histogram(s) of 6160384 buckets bring" in str(result)
    assert "memory budget of 256.0 MiB" in str(result)
    assert peak < 256 * MB + 16 * MB
    one = decode_histogram(b64)  # one such histogram alone fits the default budget
    assert one.counts.shape == (layout_info(1, 2**63 - 1, 5)["counts_len"],)


def test_hdr_payload_cannot_inflate_past_its_declared_length() -> None:
    b64 = _histogram_b64(3, 1, 2**40, b"\x02" * 10 + b"\x00" * 5_000_000, plen=10)
    with pytest.raises(ValueError, match="inflates past its declared"):
        decode_histogram(b64)
    with pytest.raises(ValueError, match="impossible"):
        decode_histogram(_histogram_b64(1, 1, 2**12, b"", plen=2**32 - 1))


def test_summary_json_with_huge_histogram_layouts_is_refused() -> None:
    d = json.loads(json.dumps(SEED_SUMMARIES[0]))
    assert d["histograms"]
    counts = base64.b64encode(b"").decode()
    d["histograms"] = {
        name: {"layout": [1, 2**63 - 1, 5], "counts": counts} for name in d["phases"]
    } | {f"extra{i}": {"layout": [1, 2**63 - 1, 5], "counts": counts} for i in range(60)}
    text = json.dumps(d)
    result, peak = _decode_bounded(lambda: gp.Summary.from_json(text), len(text))
    assert isinstance(result, ValueError) and "memory budget" in str(result)
    assert peak < 8 * MB


def test_unknown_extremes_and_impossible_ones_are_refused() -> None:
    """Extremes of -1 with values counted (issue 25: a mean outside [min, max] later),
    and a min above the max, are refused. A copy taken while the writer ran is settled
    against its buckets when it is built, so no writer produces them."""
    prefix, header, rows = _split(SEED_BYTES[0])
    header["stat"][0][2:4] = [-1, -1]
    with pytest.raises(ValueError, match="min -1 and max -1 are impossible"):
        gp.Snapshot.from_bytes(_join(prefix, header, rows))
    header["stat"][0][2:4] = [500, 100]
    with pytest.raises(ValueError, match="min 500 and max 100 are impossible"):
        gp.Snapshot.from_bytes(_join(prefix, header, rows))
