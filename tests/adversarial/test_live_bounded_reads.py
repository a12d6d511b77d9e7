"""Live readers against planted segments that are nested, oversized or inconsistent
(issue 25, items 2 and 4).

A segment's owner and folder are checked on the open fd before any header byte is
parsed; the metadata parse is bounded in depth and size, and the declared stats block
in layout and memory. One bad segment never hides the good ones. The cross-user
cases plant files as another uid from a forked child and need root.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof._core import Recorder
from gyreprof._support.limits import BudgetError
from gyreprof.cli import main as cli_main
from gyreprof.live import _layout as lay

from helpers.crossuser import (
    NOBODY,
    as_user,
    needs_root,
    plant,
    shared_dir_fixture,  # noqa: F401 - the fixture shared_dir
    victim,
)
from helpers.segments import segment_bytes, segment_parts


@pytest.fixture
def live_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "live"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    monkeypatch.setenv(lay.ENV_DIR, str(d))
    return d


def _raw_segment(
    pid: int,
    ident: lay.ProcessIdentity,
    meta_json: bytes,
    stats_bytes: int,
    max_counters: int,
) -> bytes:
    """A header whose metadata is ``meta_json`` as given (build_header would json.dumps)."""
    names_offset = (lay.FIXED_BYTES + len(meta_json) + 7) // 8 * 8
    header_bytes = (names_offset + max_counters * lay.NAME_SLOT_BYTES + 4095) // 4096 * 4096
    buf = bytearray(header_bytes)
    lay.FIXED.pack_into(
        buf,
        0,
        lay.LIVE_MAGIC,
        lay.LIVE_VERSION,
        header_bytes,
        stats_bytes,
        pid,
        ident.start_ticks,
        ident.create_time_s,
        lay.FIXED_BYTES,
        len(meta_json),
        names_offset,
        lay.NAME_SLOT_BYTES,
        max_counters,
        lay.STATE_LIVE,
        -1,
    )
    buf[lay.FIXED_BYTES : lay.FIXED_BYTES + len(meta_json)] = meta_json
    return bytes(buf)


def _deep_segment(pid: int, depth: int = 100_000) -> bytes:
    meta, stats, ident = segment_parts(pid)
    text = json.dumps(meta, separators=(",", ":")).encode()
    text = text[:-1] + b',"deep":' + b"[" * depth + b"]" * depth + b"}"
    cfg = meta["config"]
    return _raw_segment(pid, ident, text, len(stats), int(cfg["max_counters"])) + stats


def _padded_segment(pid: int, pad: int) -> bytes:
    meta, stats, ident = segment_parts(pid)
    meta["pad"] = "x" * pad
    return segment_bytes(pid, meta, stats, ident)


def _good_segment(pid: int) -> bytes:
    return _padded_segment(pid, 0)


def _plant_here(d: Path, serial: int, data: bytes) -> Path:
    path = d / lay.segment_filename(os.getpid(), serial)
    path.write_bytes(data)
    path.chmod(0o600)
    return path


# ------------------------------------------------------------- depth, size (item 2)


def test_deeply_nested_metadata_is_a_value_error_and_hides_no_good_segment(
    live_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _plant_here(live_dir, 1, _good_segment(os.getpid()))
    bad = _plant_here(live_dir, 2, _deep_segment(os.getpid()))
    entries = {e.path: e for e in gp.live.list(os.getpid())}  # RecursionError before
    assert entries[good].error is None and entries[good].alive
    assert "nested" in str(entries[bad].error)
    with pytest.raises(ValueError, match="nested"):
        gp.live.attach(bad)
    with gp.live.attach(os.getpid()) as r:
        assert r.path == good and r.snapshot().steps == 5
    got = gp.live.collect([os.getpid()])
    assert got.merged.steps == 5 and "nested" in got.missing[str(bad)]
    # top shows the good one and says the bad one was skipped
    rc = cli_main(["top", str(os.getpid()), "--once"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert "unreadable" in out.out and bad.name in out.out and "nested" in out.out


def test_only_a_nested_segment_is_a_documented_error_everywhere(live_dir: Path) -> None:
    bad = _plant_here(live_dir, 3, _deep_segment(os.getpid()))
    (entry,) = gp.live.list()
    assert entry.path == bad and entry.error
    with pytest.raises(ValueError, match="nested"):
        gp.live.attach(os.getpid())
    with pytest.raises(LookupError, match="nested"):
        gp.live.collect([os.getpid()])
    d = gp.doctor(os.getpid(), interval_s=0.2, samples=2, stacks=False)
    assert "nested" in " ".join(d.evidence) or "nested" in str(d.to_dict()), d.evidence


def test_a_header_above_the_cap_is_refused_from_its_size_field(live_dir: Path) -> None:
    big = _plant_here(live_dir, 4, _padded_segment(os.getpid(), 3_800_000))
    assert lay.FIXED.unpack_from(big.read_bytes(), 0)[2] > lay.HEADER_CAP
    (entry,) = gp.live.list(os.getpid())  # was believed: read 3.8 MB and parsed it
    assert entry.error and "a header of" in entry.error
    with pytest.raises(ValueError, match="a header of"):
        gp.live.attach(big)


# --------------------------------------------------------------- memory budget (item 4)


def _declaring_block(pid: int, block_bytes: int) -> tuple[bytes, int]:
    """A segment whose config declares a (consistent) stats block of about
    ``block_bytes``: (header, declared stats bytes); the caller makes it sparse."""
    meta, stats, ident = segment_parts(pid)
    cfg = meta["config"]
    per_window = Recorder.required_bytes(1, max_windows=2) - Recorder.required_bytes(
        1, max_windows=1
    )
    cfg["max_windows"] = block_bytes // per_window
    words = Recorder.required_bytes(1, max_windows=cfg["max_windows"]) // 8
    cfg["offsets"]["words"] = words
    head, _, _ = lay.build_header(
        pid=pid,
        identity=ident,
        stats_bytes=8 * words,
        max_counters=int(cfg["max_counters"]),
        meta=meta,
    )
    return head, 8 * words


def test_a_declared_stats_block_above_the_budget_is_refused_before_reading(
    live_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GYREPROF_MEMORY_BUDGET", "64M")
    head, stats_bytes = _declaring_block(os.getpid(), 256 << 20)
    path = live_dir / lay.segment_filename(os.getpid(), 5)
    with open(path, "wb") as fh:  # sparse: the file is small on disk
        fh.write(head)
        fh.truncate(len(head) + stats_bytes)
    path.chmod(0o600)
    with pytest.raises(BudgetError, match="memory budget"):
        gp.live.attach(path)
    with pytest.raises(ValueError, match="memory budget"):
        gp.live.attach(os.getpid())
    (entry,) = gp.live.list(os.getpid())
    assert entry.error and "memory budget" in entry.error


def test_six_gib_declared_block_costs_nothing(live_dir: Path) -> None:
    head, stats_bytes = _declaring_block(os.getpid(), 6 << 30)
    assert stats_bytes > 6 << 30
    path = live_dir / lay.segment_filename(os.getpid(), 6)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + stats_bytes)
    path.chmod(0o600)
    t0 = time.monotonic()
    with pytest.raises(BudgetError):
        gp.live.attach(path)
    rc = cli_main(["top", str(os.getpid()), "--once"])
    assert rc != 0
    assert time.monotonic() - t0 < 20  # 52 s and 6.3 GB before


def test_a_config_that_disagrees_with_its_block_size_is_corrupt(live_dir: Path) -> None:
    meta, stats, ident = segment_parts(os.getpid())
    meta["config"]["offsets"]["words"] += 4096  # more words than the settings give
    stats += bytes(8 * 4096)
    path = _plant_here(live_dir, 7, segment_bytes(os.getpid(), meta, stats, ident))
    with pytest.raises(ValueError, match="a Recorder with those settings has"):
        gp.live.attach(path)


# --------------------------------------------------------------------- cross-user


@needs_root
def test_planted_nested_and_huge_segments_of_another_uid_break_no_reader(
    shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with victim(live=True) as (pid, genuine):
        t0 = time.monotonic()
        with gp.live.attach(pid) as r:
            assert r.snapshot().steps == 10
        clean_s = time.monotonic() - t0
        deep = _deep_segment(pid)
        huge = _padded_segment(pid, 3_800_000)
        own = shared_dir / f"gyreprof-{NOBODY}"
        targets = [shared_dir / lay.segment_filename(pid, 100 + k) for k in range(25)]
        targets += [own / lay.segment_filename(pid, 200 + k) for k in range(25)]
        targets += [shared_dir / lay.segment_filename(pid, 7), own / lay.segment_filename(pid, 8)]

        def plant_all() -> object:
            for i, t in enumerate(targets):
                plant(t, deep if i >= 50 else huge)()
            return "planted"

        _, res = as_user(NOBODY, plant_all)
        assert res == "'planted'", res
        t0 = time.monotonic()
        with gp.live.attach(pid) as r:
            assert r.path == Path(genuine) and r.snapshot().steps == 10
        planted_s = time.monotonic() - t0
        assert planted_s < max(1.5, 5 * clean_s), (planted_s, clean_s)  # 3.3 s before
        entries = {e.path: e for e in gp.live.list()}
        for t in targets:
            assert entries[t].error and not entries[t].alive, entries[t]
        assert gp.live.collect([pid]).merged.steps == 10
        assert cli_main(["top", str(pid), "--once"]) == 0
        out = capsys.readouterr().out
        assert "unreadable" in out
        d = gp.doctor(pid, interval_s=0.3, samples=2, stacks=False)
        assert d.progress_source == "live", (d.state, d.evidence)
