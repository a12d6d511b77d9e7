"""The structure holds: one module reads a stats block's raw words."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

import gyreprof
from gyreprof._core import Recorder
from gyreprof._core import recorder as R
from gyreprof._support.block import StatsBlock

SRC = Path(gyreprof.__file__).resolve().parent
ALLOWED = {SRC / "_support" / "block.py"}

# every word name the layout declares (recorder.pxd's cpdef enum), read from the module itself
_PREFIXES = ("H_", "HOT_", "STAT_", "WCUR_", "WARM_", "WIN_")
LAYOUT_NAMES = {
    n
    for n, v in vars(R).items()
    if isinstance(v, int) and (n.startswith(_PREFIXES) or n == "HEADER_WORDS")
}
# indexing region offsets by hand: rec.offsets[...], config["offsets"][...], offsets.get(...)
_OFFSET_INDEXING = re.compile(r"""(\.offsets\s*\[|["']offsets["']\s*\]\s*\[|\boffsets\.get\()""")
# a live view indexed directly: rec.stats_view()[...]
_VIEW_INDEXING = re.compile(r"stats_(view|array)\(\)\s*\[")


def _code_without_strings(path: Path) -> tuple[list[str], str]:
    """(NAME tokens, the code with comments and docstrings/strings blanked)."""
    names: list[str] = []
    parts: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.NAME:
            names.append(tok.string)
        if tok.type == tokenize.COMMENT:
            continue
        if tok.type == tokenize.STRING and not tok.string.strip("\"'rbuf").startswith("offsets"):
            parts.append('""')
            continue
        parts.append(tok.string)
    return names, " ".join(parts)


def _violations(path: Path) -> list[str]:
    names, code = _code_without_strings(path)
    found = sorted({n for n in names if n in LAYOUT_NAMES})
    out = [f"reads layout word(s) {found}"] if found else []
    code = re.sub(r"\s+", "", code)  # tokens re-joined: match without spacing
    if _OFFSET_INDEXING.search(code):
        out.append("indexes region offsets by hand")
    if _VIEW_INDEXING.search(code):
        out.append("indexes a stats block by word")
    return out


def test_layout_names_are_found() -> None:
    # the check itself can fail: the layout exports its words, and a raw read is caught
    assert {"H_STEP", "HOT_STAT", "WIN_HEADER", "STAT_MIN", "HEADER_WORDS"} <= LAYOUT_NAMES
    assert "H_EVENTS" not in LAYOUT_NAMES  # the unused word is gone


def test_the_checker_catches_raw_reads(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from gyreprof._core import recorder as _rec\n"
        "def f(rec, cfg):\n"
        "    a = rec.stats_view()[_rec.H_STEADY_START]\n"
        '    b = cfg["offsets"]["counters"]\n'
        "    return a + b + rec.offsets['hot']\n"
    )
    v = _violations(bad)
    assert any("H_STEADY_START" in x for x in v)
    assert "indexes region offsets by hand" in v
    assert "indexes a stats block by word" in v
    good = tmp_path / "good.py"
    good.write_text(
        '"""Mentions H_STEP and offsets["x"] in prose only."""\n'
        "# HOT_STAT in a comment\n"
        "def f(block):\n"
        "    return block.steps_completed\n"
    )
    assert _violations(good) == []


def test_only_block_reads_raw_stats_words() -> None:
    bad = {}
    for path in sorted(SRC.rglob("*.py")):
        if path in ALLOWED or path.parent == SRC / "_core":
            continue
        v = _violations(path)
        if v:
            bad[str(path.relative_to(SRC))] = v
    assert not bad, (
        f"read a stats block through gyreprof._support.block (StatsBlock), not by raw words: {bad}"
    )


def test_block_fields_match_the_recorder() -> None:
    rec = Recorder(2, window_steps=2, max_windows=2)
    for _ in range(5):
        rec.begin()
        rec.record(0, 1_000)
        rec.record(1, 3_000)
    rec.end()
    rec.count(1, 7)
    block = StatsBlock.from_config(rec.stats_array(), rec.config())
    assert block.steps_begun == 5 and block.steps_completed == 5
    assert block.open_phase == -1 and block.step_start_ns == -1
    assert block.counts_total().tolist()[:2] == [5, 5]
    assert block.stat_table()[1, R.STAT_MIN] == 3_000
    assert block.first.tolist()[:2] == [1_000, 3_000]
    assert block.counter(1) == 7 and block.counters[1] == 7
    assert block.windows_closed == 2 and len(block.windows()) == 2  # 2 kept of 2
    w = block.windows()[-1]
    assert w.steps == 2 and w.histograms[0].count == 2 and w.histograms[0].max == 1_000
    assert block.max_counters == rec.max_counters and block.max_windows == 2
    live = StatsBlock.of(rec)
    rec.begin()
    assert live.steps_begun == 6  # a block over the live view follows the writer


def test_block_rejects_the_wrong_layout() -> None:
    rec = Recorder(1)
    cfg = rec.config()
    with pytest.raises(ValueError, match="layout version 999"):
        StatsBlock.from_config(rec.stats_array(), {**cfg, "layout_version": 999})
    with pytest.raises(ValueError, match="4 words"):
        StatsBlock(np.zeros(4, dtype=np.int64), rec.offsets, 1)
