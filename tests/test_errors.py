"""gyreprof._errors: one exception type per kind, each also the built-in callers catch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gyreprof._errors import (
    CorruptDataError,
    GyreprofError,
    MissingExtraError,
    UnknownPhaseError,
    UsageError,
)


def test_each_kind_is_also_the_builtin_people_catch() -> None:
    assert issubclass(UsageError, GyreprofError)
    assert issubclass(UnknownPhaseError, KeyError) and issubclass(UnknownPhaseError, ValueError)
    assert issubclass(CorruptDataError, ValueError)
    assert issubclass(MissingExtraError, ImportError)
    for kind in (UsageError, UnknownPhaseError, CorruptDataError, MissingExtraError):
        assert issubclass(kind, GyreprofError)


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
        "from gyreprof._errors import MissingExtraError\n"
        "try:\n"
        f"    import gyreprof.integrations.{module}\n"
        "except MissingExtraError as e:\n"
        "    print('ok', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ") and f"pip install 'gyreprof[{module}]'" in out.stdout
