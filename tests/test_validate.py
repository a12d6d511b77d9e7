"""gyreprof._support.validate: the argument checks behind the public entry points."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gyreprof._core import Recorder
from gyreprof._support.errors import ArgumentTypeError, GyreprofError, InvalidValueError
from gyreprof._support.validate import (
    check_fraction,
    check_input_path,
    check_int,
    check_live,
    check_name,
    check_names,
    check_non_negative_int,
    check_number,
    check_output_path,
    check_positive_int,
    check_positive_number,
    check_recorder_config,
)


def test_int_accepts_ints_and_numpy_ints_and_returns_plain_int() -> None:
    assert check_int("n", 3) == 3
    v = check_int("n", np.int64(7))
    assert v == 7 and type(v) is int
    assert check_positive_int("n", 1) == 1
    assert check_non_negative_int("n", 0) == 0


@pytest.mark.parametrize("bad", [True, False, 2.0, np.float64(2.0), "2", None, [2]])
def test_int_refuses_bool_float_and_text_with_a_type_error_naming_the_argument(
    bad: object,
) -> None:
    with pytest.raises(TypeError, match=r"^batch_size must be an int, got "):
        check_int("batch_size", bad)


def test_int_ranges() -> None:
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        check_positive_int("steps", 0)
    with pytest.raises(ValueError, match="lag must be >= 0, got -1"):
        check_non_negative_int("lag", -1)
    with pytest.raises(ValueError, match="k must be <= 8, got 9"):
        check_int("k", 9, maximum=8)
    assert check_int("k", 8, minimum=8, maximum=8) == 8


@given(st.integers())
def test_int_range_matches_the_comparison(n: int) -> None:
    if n >= 1:
        assert check_positive_int("n", n) == n
    else:
        with pytest.raises(ValueError):
            check_positive_int("n", n)


def test_number() -> None:
    assert check_number("x", 3) == 3.0 and type(check_number("x", 3)) is float
    assert check_number("x", np.float32(0.5)) == 0.5
    assert check_positive_number("t", 0.001, unit="seconds") == 0.001
    for wrong in (True, "1.5", None, 1j):
        with pytest.raises(TypeError, match="^t must be a number of seconds"):
            check_positive_number("t", wrong, unit="seconds")
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="^t must be a finite number"):
            check_positive_number("t", bad)
    for bad in (0, 0.0, -1e-9):  # zero is not positive
        with pytest.raises(ValueError, match="^t must be a positive number"):
            check_positive_number("t", bad)
    with pytest.raises(ValueError, match="x must be <= 2"):
        check_number("x", 2.5, maximum=2)
    with pytest.raises(ValueError, match="x must be >= -1"):
        check_number("x", -2, minimum=-1)


def test_fraction_edges() -> None:
    assert check_fraction("f", 0) == 0.0
    assert check_fraction("f", 1) == 1.0
    for bad in (-0.01, 1.01, math.nan):  # NaN fails the range too, not only the type
        with pytest.raises(ValueError, match="f must be in 0..1"):
            check_fraction("f", bad)
    with pytest.raises(TypeError, match="f must be a number in 0..1"):
        check_fraction("f", True)


def test_names() -> None:
    assert check_name("phase", "env") == "env"
    with pytest.raises(TypeError, match="phase must be a str, got int 3"):
        check_name("phase", 3)
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="phase must be a non-empty name"):
            check_name("phase", blank)
    assert check_names("phases", ["env", "fwd"]) == ("env", "fwd")
    assert check_names("phases", (n for n in ["a"])) == ("a",)
    with pytest.raises(TypeError, match="phases must be a list of names"):
        check_names("phases", "env")  # not ('e', 'n', 'v')
    with pytest.raises(TypeError, match=r"phases\[1\] must be a str"):
        check_names("phases", ["env", None])
    with pytest.raises(ValueError, match=r"repeated: \['env'\]"):
        check_names("phases", ["env", "fwd", "env"])


def test_output_path(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    assert check_output_path("log", str(target)) == target
    assert check_output_path("log", target) == target
    with pytest.raises(ValueError, match="log .* is a directory; pass a file path"):
        check_output_path("log", tmp_path)
    with pytest.raises(ValueError, match="does not exist; create it first"):
        check_output_path("log", tmp_path / "no" / "x.txt")
    with pytest.raises(TypeError, match="log must be a path"):
        check_output_path("log", 3)
    with pytest.raises(TypeError, match="log must be a path"):
        check_output_path("log", b"/tmp/x")
    with pytest.raises(ValueError, match="empty path"):
        check_output_path("log", "")


def test_input_path(tmp_path: Path) -> None:
    f = tmp_path / "in.bin"
    f.write_bytes(b"x")
    assert check_input_path("file", f) == f
    with pytest.raises(FileNotFoundError, match="file: no such file"):
        check_input_path("file", tmp_path / "missing")
    with pytest.raises(ValueError, match="is a directory; pass a file"):
        check_input_path("file", tmp_path)


# ------------------------------------------------------ a Recorder's configuration

DEFAULTS = dict(
    capacity=1 << 16,
    significant_figures=3,
    lowest_ns=1,
    highest_ns=3_600_000_000_000,
    warmup_steps=None,
    warmup_s=None,
    window_steps=1000,
    max_windows=512,
    max_counters=32,
    clock="monotonic",
)


def test_every_refusal_is_a_gyreprof_error_and_the_builtin() -> None:
    with pytest.raises(GyreprofError) as info:
        check_int("n", True)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ArgumentTypeError)
    with pytest.raises(GyreprofError) as info:
        check_positive_number("t", math.nan)
    assert isinstance(info.value, ValueError) and isinstance(info.value, InvalidValueError)


def test_recorder_config_is_what_a_recorder_takes() -> None:
    cfg = check_recorder_config(**DEFAULTS)
    assert cfg["warmup_steps"] == 0 and cfg["warmup_ns"] == 0
    rec = Recorder(2, **cfg)  # the checked form is the Recorder's own keyword set
    assert rec is not None
    assert check_recorder_config(**{**DEFAULTS, "warmup_s": 0.5})["warmup_ns"] == 500_000_000
    assert check_recorder_config(**{**DEFAULTS, "capacity": np.int32(8)})["capacity"] == 8


@pytest.mark.parametrize(
    ("change", "builtin", "words"),
    [
        ({"capacity": 0}, ValueError, "capacity must be >= 1"),
        ({"capacity": True}, TypeError, "capacity must be an int"),
        ({"capacity": 1 << 31}, ValueError, "capacity must be <="),
        ({"significant_figures": 6}, ValueError, "significant_figures must be <= 5"),
        ({"lowest_ns": 10, "highest_ns": 19}, ValueError, "at least 2 \\* lowest_ns"),
        ({"warmup_steps": 1, "warmup_s": 1.0}, ValueError, "not both"),
        ({"warmup_s": math.nan}, ValueError, "warmup_s must be a finite number"),
        ({"warmup_s": -1.0}, ValueError, "warmup_s must be >= 0"),
        ({"warmup_steps": -1}, ValueError, "warmup_steps must be >= 0"),
        ({"window_steps": 0}, ValueError, "window_steps must be >= 1"),
        ({"max_windows": 2.0}, TypeError, "max_windows must be an int"),
        ({"max_counters": -1}, ValueError, "max_counters must be >= 0"),
        ({"clock": "wall"}, ValueError, "clock must be 'monotonic', 'tsc' or 'auto'"),
        ({"clock": None}, TypeError, "clock must be"),
    ],
)
def test_recorder_config_refusals_name_the_argument(
    change: dict[str, object], builtin: type[Exception], words: str
) -> None:
    import gyreprof as gp

    with pytest.raises(builtin, match=words) as checked:
        check_recorder_config(**{**DEFAULTS, **change})
    assert isinstance(checked.value, GyreprofError)
    # the Profiler checks its configuration here and nowhere else: the same words
    with pytest.raises(builtin) as built:
        gp.Profiler(["env"], **change)  # type: ignore[arg-type]
    assert str(built.value) == str(checked.value)


def test_live_is_true_false_or_a_name() -> None:
    assert check_live(True) is True and check_live(False) is False
    assert check_live("seg") == "seg"
    for bad in (1, 0, None, b"seg", 1.0):
        with pytest.raises(ArgumentTypeError, match="live must be True, False or a segment name"):
            check_live(bad)
