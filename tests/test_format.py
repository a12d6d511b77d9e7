"""gyreprof._support.format: one spelling per kind of number, and the edge cases of each."""

from __future__ import annotations

import math

import pytest

from gyreprof._support.format import (
    fmt_bytes,
    fmt_bytes_range,
    fmt_change_pct,
    fmt_count,
    fmt_factor,
    fmt_ns,
    fmt_pct,
    fmt_rate,
    fmt_speedup,
    markdown_table,
    shorten,
    text_table,
)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (850, "850 ns"),
        (12_300, "12.3 us"),
        (4_560_000, "4.56 ms"),
        (1.2e9, "1.2 s"),
        (999, "999 ns"),
    ],
)
def test_fmt_ns_picks_the_unit(ns: float, text: str) -> None:
    assert fmt_ns(ns) == text


def test_missing_values_print_as_a_dash() -> None:
    nan = math.nan
    for f in (fmt_ns, fmt_count, fmt_rate, fmt_pct, fmt_bytes, fmt_factor, fmt_speedup):
        assert f(None) == "-", f
        assert f(nan) == "-", f
    assert fmt_change_pct(None) == fmt_change_pct(nan) == "-"


def test_counts_and_rates() -> None:
    assert fmt_count(950) == "950"
    assert fmt_count(12_100) == "12.1k"
    assert fmt_count(3_400_000) == "3.4M"
    assert fmt_count(-12_100) == "-12.1k"
    assert fmt_rate(12_100) == "12.1k/s"


def test_pct_keeps_the_percent_sign() -> None:
    assert fmt_pct(0.125) == "12.5%"
    assert fmt_pct(1.0) == "100.0%"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (950, "950 B"),
        (1023, "1023 B"),  # not '1.02e+03 B'
        (1024, "1 KiB"),
        (512 * 2**20, "512 MiB"),
        (2.7 * 2**30, "2.7 GiB"),
        (123.4 * 2**30, "123 GiB"),
        (3 * 2**40, "3 TiB"),
    ],
)
def test_fmt_bytes_binary_units_three_figures(n: float, text: str) -> None:
    assert fmt_bytes(n) == text


def test_fmt_bytes_range_uses_the_unit_of_the_larger() -> None:
    assert fmt_bytes_range(0.9 * 2**30, 2.7 * 2**30) == "0.9 -> 2.7 GiB"
    assert fmt_bytes_range(512 * 2**20, 2 * 2**30) == "0.5 -> 2 GiB"
    assert fmt_bytes_range(10, 900) == "10 -> 900 B"


def test_speedup_and_change_are_different_things() -> None:
    # a ratio of rates (2.0 means twice as fast) ...
    assert fmt_speedup(1.005) == "0.5% faster"
    assert fmt_speedup(3.2) == "3.2x as fast"
    assert fmt_speedup(math.inf) == "arbitrarily faster"
    # ... against a relative change (2.0 means +200%)
    assert fmt_change_pct(0.12) == "+12%"
    assert fmt_change_pct(-0.034) == "-3.4%"
    assert fmt_change_pct(2.0) == "+200%"
    assert fmt_speedup(2.0) != fmt_change_pct(2.0)
    # the 9.5% boundary: one decimal below, whole percent from there
    assert fmt_change_pct(0.094) == "+9.4%"
    assert fmt_change_pct(0.095) == "+10%"


def test_factor() -> None:
    assert fmt_factor(3.21) == "3.21x"
    assert fmt_factor(math.inf) == "inf x"


def test_tables() -> None:
    text = text_table(["phase", "n"], [["env", "10"], ["policy", "2"]])
    assert text.splitlines() == ["phase    n", "env     10", "policy   2"]
    md = markdown_table(["a", "b"], [["1", "2"]])
    assert md.splitlines() == ["| a | b |", "|---|---|", "| 1 | 2 |"]
    # right= picks the right-aligned columns (a middle one left-aligned), indent= prefixes
    mixed = text_table(["n", "role", "cpu"], [["4", "env", "12%"]], right={0, 2}, indent="  ")
    assert mixed.splitlines() == ["  n  role  cpu", "  4  env   12%"]


def test_shorten_is_ascii_and_keeps_to_the_width() -> None:
    assert shorten("python train.py", 20) == "python train.py"
    cut = shorten("python train.py --config big.yaml", 12)
    assert cut == "python tr..." and len(cut) == 12
    assert shorten("abcdef", 2) == "ab"  # no room for the dots
    assert all(ord(c) < 128 for c in shorten("x" * 100, 10))
