"""Files users give us: FIFOs, devices and oversized inputs are refused, logs are tailed,
and Profiler settings are weighed against the memory budget before anything is allocated."""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gyreprof as gp
from gyreprof._core import Recorder
from gyreprof._support import io as _io
from gyreprof._support import limits as _limits
from gyreprof._support.errors import CorruptDataError
from gyreprof.analysis.sweep import SweepResult
from gyreprof.diagnostics.doctor import read_log_tail
from gyreprof.diagnostics.envcheck import envcheck
from gyreprof.export.hdrlog import decode_histogram, hdr_log, read_hdr_log
from gyreprof.model.snapshot import interval

from conftest import run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero are POSIX")


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_limits.ENV_MEMORY_BUDGET, raising=False)
    monkeypatch.delenv(_io.ENV_MAX_INPUT, raising=False)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    prof = gp.Profiler(["env", "policy"])
    for i in range(50):
        prof.begin()
        prof.record("env", 1000 + i)
        prof.record("policy", 300 + i)
    prof.end()
    return prof.snapshot().save(tmp_path / "run.gyrs")


# ----------------------------------------------------------------- the CLI


@pytest.mark.parametrize("command", ["report", "export -f hdrlog", "export -f openmetrics"])
def test_cli_refuses_dev_zero_and_a_fifo_without_reading(command: str, fifo: Path) -> None:
    for path, kind in (("/dev/zero", "character device"), (str(fifo), "FIFO")):
        r = run_cli(*command.split(), path, timeout=60)  # used to hang or read until OOM
        assert r.returncode == 2, r.stderr
        assert kind in r.stderr and "regular files" in r.stderr
        assert "Traceback" not in r.stderr


def test_cli_refuses_a_file_over_its_cap_with_size_and_cap(snapshot_file: Path) -> None:
    size = snapshot_file.stat().st_size
    r = run_cli("report", str(snapshot_file), env={_io.ENV_MAX_INPUT: "100"}, timeout=60)
    assert r.returncode == 2
    assert f"holds {_io.fmt_size(size)}" in r.stderr and "cap of 100 bytes" in r.stderr
    assert _io.ENV_MAX_INPUT in r.stderr
    ok = run_cli("report", str(snapshot_file), timeout=60)
    assert ok.returncode == 0 and "env" in ok.stdout


def test_cli_doctor_log_and_envcheck_refuse_special_files(fifo: Path) -> None:
    # doctor still diagnoses the process; the log it cannot tail becomes evidence
    r = run_cli(
        "doctor",
        "--log",
        "/dev/zero",
        "--interval",
        "0.2",
        "--no-stacks",
        str(os.getpid()),
        timeout=60,
    )  # used to read /dev/zero until memory ran out
    assert "could not be read" in r.stdout and "character device" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr
    r = run_cli("doctor", "--log", str(fifo), "--interval", "0.2", "--no-stacks", "999999999")
    assert "could not be read" in r.stdout and "FIFO" in r.stdout, r.stdout
    r = run_cli("envcheck", "--no-broken", str(fifo), timeout=60)
    assert r.returncode == 2 and "FIFO" in r.stdout


# --------------------------------------------------------------------- API


def test_api_loaders_refuse_fifos_and_devices(fifo: Path) -> None:
    loaders = [
        gp.Snapshot.load,
        gp.Summary.from_json,
        read_hdr_log,
        gp.export.load_events,
        lambda p: _io.read_head(p, 4),
        lambda p: gp.export.hdr_log(p),
        SweepResult.from_json,
    ]
    for load in loaders:
        for path in (fifo, Path("/dev/zero"), Path("/dev/null")):
            with pytest.raises(ValueError, match="regular files"):
                load(path)


def test_directories_are_refused_and_missing_files_stay_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        gp.Snapshot.load(tmp_path)
    with pytest.raises(FileNotFoundError):
        gp.Snapshot.load(tmp_path / "nope.gyrs")


def test_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "run.gyrs"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="character device"):
        gp.Snapshot.load(link)


def test_oversized_inputs_are_refused_per_kind(
    snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "run.hlog"
    hdr_log(gp.Snapshot.load(snapshot_file), log)
    assert len(read_hdr_log(log).tags) == 3
    monkeypatch.setenv(_io.ENV_MAX_INPUT, "64")
    for load, path in ((gp.Snapshot.load, snapshot_file), (read_hdr_log, log)):
        with pytest.raises(ValueError, match="above the cap of 64 bytes"):
            load(path)


def test_a_file_that_grows_past_the_cap_is_cut_at_cap_plus_one(tmp_path: Path) -> None:
    """The size check happens at open; the read itself stops at cap + 1 bytes."""
    p = tmp_path / "growing"
    p.write_bytes(b"x" * 10)
    fd, size = _io._open_regular(p, "input file")
    try:
        with open(p, "ab") as fh:
            fh.write(b"y" * 5000)
        assert size == 10
        assert len(_io._read_at_most(fd, 101)) == 101
    finally:
        os.close(fd)


def test_requirements_file_over_its_cap_is_an_unreadable_declaration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("numpy\n" * 1000)
    assert envcheck(req, broken=False).errors == []
    monkeypatch.setenv(_io.ENV_MAX_INPUT, "1K")
    errors = envcheck(req, broken=False).errors
    assert len(errors) == 1 and "above the cap of 1.0 KiB" in str(errors[0])


def _rchar() -> int:
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_log_tail_reads_only_the_end(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    with open(log, "w") as fh:
        for i in range(400_000):
            fh.write(f"line {i}\n")
    assert log.stat().st_size > 4_000_000
    before = _rchar()
    tail = read_log_tail(log, 3)
    read = _rchar() - before
    assert tail == ["line 399997", "line 399998", "line 399999"]
    assert read < 200_000, f"read {read} bytes to tail a {log.stat().st_size}-byte log"
    assert _io.tail_lines(log, 5, max_bytes=9) == ["e 399999"]  # the last 9 bytes only


def test_tail_of_a_short_file_and_of_a_fifo(tmp_path: Path, fifo: Path) -> None:
    p = tmp_path / "short.log"
    p.write_text("a\nb\r\nc")
    assert _io.tail_lines(p, 5) == ["a", "b", "c"]
    assert _io.tail_lines(p, 0) == []
    assert _io.read_tail(p, 3) == b"b\r\nc"[-3:]
    with pytest.raises(ValueError, match="FIFO"):
        read_log_tail(fifo)


def test_size_setting_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _io.parse_size("4G", "X") == 4 << 30
    assert _io.parse_size("512 MiB", "X") == 512 << 20
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "lots")
    with pytest.raises(ValueError, match="GYREPROF_MEMORY_BUDGET='lots' is not a size"):
        _limits.memory_budget()


# ------------------------------------------------------------ memory budget


def test_profiler_over_the_budget_names_the_number_and_the_fix() -> None:
    with pytest.raises(ValueError) as info:
        gp.Profiler([f"p{i}" for i in range(255)], significant_figures=5)
    msg = str(info.value)
    assert msg.startswith("255 phases at 5 significant figures need 6.5 GiB")
    assert "memory budget of 1.0 GiB" in msg
    for fix in ("significant_figures", "max_windows", "capacity", "GYREPROF_MEMORY_BUDGET"):
        assert fix in msg


def test_the_event_ring_counts_toward_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small stats block with a huge ring: a stats-only check would let it through."""
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "64M")
    assert Recorder.required_bytes(2) < 64 << 20
    with pytest.raises(ValueError, match=r"event ring 64\.0 MiB for capacity=2000000"):
        gp.Profiler(["a", "b"], capacity=2_000_000)  # rounds up to 2**21 events x 32 bytes
    gp.Profiler(["a", "b"], capacity=1_000_000)  # 32 MiB of ring fits


@pytest.mark.slow  # several seconds: run by .ci/run's second step
def test_raising_the_budget_allows_larger_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    kw = {"significant_figures": 4, "max_windows": 16}
    need = _limits.check_profiler_budget(
        100,
        capacity=1024,
        lowest_ns=1,
        highest_ns=3_600_000_000_000,
        max_counters=32,
        **kw,
    )
    assert 300 << 20 < need < 400 << 20
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "256M")
    with pytest.raises(ValueError, match="above the memory budget of 256.0 MiB"):
        gp.Profiler([f"p{i}" for i in range(100)], capacity=1024, **kw)
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "512M")
    prof = gp.Profiler([f"p{i}" for i in range(100)], capacity=1024, **kw)
    assert prof.summary().steps == 0


def test_the_default_budget_admits_every_layout_up_to_4_significant_figures() -> None:
    """The boundary sits between sf=4 (all 255 phases, 4096 windows) and sf=5."""
    base = {"capacity": 1 << 16, "lowest_ns": 1, "highest_ns": 3_600_000_000_000}
    need = _limits.check_profiler_budget(
        255, significant_figures=4, max_windows=4096, max_counters=4096, **base
    )
    assert 0.9 * (1 << 30) < need <= _limits.DEFAULT_MEMORY_BUDGET
    _limits.check_profiler_budget(
        30, significant_figures=5, max_windows=512, max_counters=32, **base
    )
    with pytest.raises(
        _limits.BudgetError, match="50 phases at 5 significant figures need 1.3 GiB"
    ):
        _limits.check_profiler_budget(
            50, significant_figures=5, max_windows=512, max_counters=32, **base
        )
    # just above the budget: rounding would print "1.0 GiB ... budget of 1.0 GiB" (the
    # sums' high words, 2 per histogram, are in the block)
    with pytest.raises(
        _limits.BudgetError, match=r"need 1,121,116,712 bytes .*budget of 1,073,741,824 bytes"
    ):
        _limits.check_profiler_budget(
            40, significant_figures=5, max_windows=512, max_counters=32, **base
        )


def test_invalid_settings_are_still_reported_by_their_own_checks() -> None:
    with pytest.raises(ValueError, match="at most 255 phases"):
        gp.Profiler([f"p{i}" for i in range(300)], significant_figures=5)
    with pytest.raises(ValueError, match="significant_figures must be"):
        gp.Profiler(["a"], significant_figures=9)


# ------------------------------------------- error types; what snapshots hold now


def _profiled(label: str, steps: int = 40) -> gp.Snapshot:
    prof = gp.Profiler(["env", "policy"], label=label, window_steps=10)
    for i in range(steps):
        prof.begin()
        prof.record("env", 1000 + i)
        prof.record("policy", 300 + i)
    prof.end()
    return prof.snapshot()


def _edit_header(blob: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """``blob`` (zlib snapshot bytes) with its JSON header changed by ``edit``."""
    body = zlib.decompress(blob[6:])
    (hlen,) = struct.unpack_from("<I", body, 0)
    header = json.loads(body[4 : 4 + hlen])
    edit(header)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    return blob[:6] + zlib.compress(struct.pack("<I", len(hjson)) + hjson + body[4 + hlen :])


def test_decode_failures_are_corrupt_data_and_too_large_is_not(
    tmp_path: Path, fifo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = _profiled("a").to_bytes()
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04" + b"\x00" * 60)
    corrupt: list[Callable[[], object]] = [
        lambda: gp.Snapshot.from_bytes(b"GYRX" + blob[4:]),
        lambda: gp.Snapshot.from_bytes(blob[:-7]),  # truncated compressed body
        lambda: gp.Snapshot.from_bytes(_edit_header(blob, lambda h: h.update(totals=[]))),
        lambda: gp.Summary.from_json('{"format": 1}'),
        lambda: gp.Summary.from_json("{" * 50),
        lambda: decode_histogram("HISTFAAAACR4nJNpmSzMwMDAxAAAB9QBIw=="[:-6]),
        lambda: gp.export.load_events(junk),
    ]
    for decode in corrupt:
        with pytest.raises(CorruptDataError):
            decode()
    # a valid snapshot over the budget is refused as too large, not as corrupt
    monkeypatch.setenv(_limits.ENV_MEMORY_BUDGET, "64K")
    with pytest.raises(_limits.BudgetError, match="memory budget of 64.0 KiB") as info:
        gp.Snapshot.from_bytes(blob)
    assert not isinstance(info.value, CorruptDataError)
    monkeypatch.delenv(_limits.ENV_MEMORY_BUDGET)
    # so is a FIFO: a ValueError that says what it is, not "corrupted"
    with pytest.raises(ValueError, match="FIFO") as refused:
        gp.export.load_events(fifo)
    assert not isinstance(refused.value, CorruptDataError)


def test_snapshots_with_wall_clock_sources_round_trip() -> None:
    """What snapshots hold now (per-source steady span, Unix offset, host) passes the checks."""
    a, b = _profiled("a"), _profiled("b", steps=25)
    src = a.sources[0]
    assert None not in (src.steady_start_ns, src.end_ns, src.unix_offset_ns, src.host)
    assert a.rolling is not None and len(a.rolling) > 0  # closed windows, with their min
    merged = gp.merge([a, b])
    later = _profiled("a", steps=60)
    for snap in (a, merged, interval(a, later, strict=False)):
        again = gp.Snapshot.from_bytes(snap.to_bytes())
        assert again.sources == snap.sources
        assert again.summary().to_dict() == snap.summary().to_dict()
        assert again.windows() == snap.windows()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("host", ["a", "b"]),  # summary() puts hosts in a set: a list cannot go there
        ("end_ns", "later"),
        ("steady_start_ns", 2**64),
        ("unix_offset_ns", 1.5),
    ],
)
def test_bad_wall_clock_fields_of_a_source_are_corrupt(key: str, value: Any) -> None:
    blob = gp.merge([_profiled("a"), _profiled("b")]).to_bytes()

    def edit(h: dict[str, Any]) -> None:
        h["sources"][1][key] = value

    # the field named in the codec's path style (gyreprof.model._serial): sources[1].host
    with pytest.raises(CorruptDataError, match=rf"sources\[1\]\.{key}\b"):
        gp.Snapshot.from_bytes(_edit_header(blob, edit))
