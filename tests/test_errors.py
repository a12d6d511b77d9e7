"""gyreprof._support.errors: one exception type per kind, each also the built-in callers catch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gyreprof._support.errors import (
    ArgumentTypeError,
    CorruptDataError,
    GyreprofError,
    InvalidValueError,
    MissingExtraError,
    MissingFileError,
    MissingKeyError,
    UnknownPhaseError,
    UsageError,
)


def test_each_kind_is_also_the_builtin_people_catch() -> None:
    assert issubclass(UsageError, GyreprofError)
    assert issubclass(UnknownPhaseError, KeyError) and issubclass(UnknownPhaseError, ValueError)
    assert issubclass(CorruptDataError, ValueError)
    assert issubclass(MissingExtraError, ImportError)
    assert issubclass(InvalidValueError, ValueError)
    assert issubclass(ArgumentTypeError, TypeError)
    assert issubclass(MissingFileError, FileNotFoundError)
    assert issubclass(MissingKeyError, KeyError)
    for kind in (
        UsageError,
        UnknownPhaseError,
        CorruptDataError,
        MissingExtraError,
        InvalidValueError,
        ArgumentTypeError,
        MissingFileError,
        MissingKeyError,
    ):
        assert issubclass(kind, GyreprofError)


def test_there_is_one_unknown_phase_error_and_every_lookup_raises_it() -> None:
    import gyreprof as gp
    from gyreprof.recording import profiler

    assert profiler.UnknownPhaseError is UnknownPhaseError  # the one class, re-exported
    prof = gp.Profiler(["env", "fwd"])
    with prof.phase("env"):
        pass
    for lookup in (lambda: prof.phase("zz"), lambda: prof.ids("zz"), lambda: prof.summary()["zz"]):
        with pytest.raises(
            UnknownPhaseError, match=r"unknown phase 'zz'; known phases: \['env', 'fwd'\]"
        ):
            lookup()


def test_the_other_named_errors_are_gyreprof_errors() -> None:
    from gyreprof._support.sample_count import NotACount
    from gyreprof.analysis.sweep.factory import SweepUsageError
    from gyreprof.live._layout import SegmentReadError, UntrustedSegmentError

    for kind in (NotACount, SweepUsageError, SegmentReadError, UntrustedSegmentError):
        assert issubclass(kind, GyreprofError) and issubclass(kind, ValueError)
    ray_actor = pytest.importorskip("gyreprof.integrations.ray.actor")
    assert issubclass(ray_actor.NoProfilerError, GyreprofError)
    assert issubclass(ray_actor.NoProfilerError, RuntimeError)


def test_unknown_phase_message_is_not_quoted_like_a_keyerror() -> None:
    err = UnknownPhaseError("unknown phase 'x'; known phases: ['a']")
    assert str(err) == "unknown phase 'x'; known phases: ['a']"  # KeyError would add quotes
    with pytest.raises(KeyError):
        raise err


def test_missing_extra_names_the_install() -> None:
    err = MissingExtraError("gyreprof.integrations.gym", "gymnasium", extra="gym")
    assert str(err) == (
        "gyreprof.integrations.gym needs gymnasium, which is not installed: "
        "pip install 'gyreprof[gym]'"
    )
    assert err.name == "gymnasium"
    plain = MissingExtraError("plots", "matplotlib", note="(or use --format text)")
    assert str(plain).endswith("pip install matplotlib (or use --format text)")


def test_usage_error_stays_importable_from_the_cli() -> None:
    from gyreprof import cli

    assert cli.UsageError is UsageError


@pytest.mark.parametrize("module", ["gym", "torch"])
def test_integrations_raise_missing_extra_when_their_package_is_absent(module: str) -> None:
    blocked = {"gym": "gymnasium", "torch": "torch"}[module]
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from gyreprof._support.errors import MissingExtraError\n"
        "try:\n"
        f"    import gyreprof.integrations.{module}\n"
        "except MissingExtraError as e:\n"
        "    print('ok', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ") and f"pip install 'gyreprof[{module}]'" in out.stdout
