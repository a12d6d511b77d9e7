"""Fuzzed run records and envcheck declarations (issue 25 item 11): what the decoders
accept can be used, and what they refuse is a ValueError, never another exception.

Run records (``<pid>.start.json`` / ``<pid>.done.json`` in a `gyreprof run` folder) are
read by ``read_record``; declarations (requirements files, pyproject.toml,
environment.yml) by ``envcheck``, which lists a malformed one in ``errors`` and raises
only a ValueError for a file it cannot take at all.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gyreprof.diagnostics.envcheck import envcheck
from gyreprof.integrations._auto.records import ProcessRecord, read_record

from helpers.fuzzing import deep

FAST = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same inputs on every run
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
DEEP = deep(FAST)  # the slow twins: a few thousand examples each (helpers/fuzzing.py)

GOOD = ProcessRecord(pid=4242, role="child", ppid=1, how="exit").to_json()

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=12,
)


def _mutations() -> st.SearchStrategy[bytes]:
    base = json.loads(GOOD)
    edited = st.builds(
        lambda k, v: json.dumps({**base, k: v}, allow_nan=True).encode(),
        st.sampled_from(sorted(base)),
        _json,
    )
    dropped = st.builds(
        lambda k: json.dumps({x: y for x, y in base.items() if x != k}).encode(),
        st.sampled_from(sorted(base)),
    )
    cut = st.integers(0, len(GOOD)).map(lambda n: GOOD.encode()[:n])
    flipped = st.builds(
        lambda i, b: GOOD.encode()[:i] + bytes([b]) + GOOD.encode()[i + 1 :],
        st.integers(0, len(GOOD) - 1),
        st.integers(0, 255),
    )
    return edited | dropped | cut | flipped | st.binary(max_size=64)


@FAST
@given(data=_mutations())
def test_a_run_record_is_read_whole_or_refused_as_a_value_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "4242.start.json"
        path.write_bytes(data)
        try:
            rec = read_record(path)
        except ValueError:
            return
        # accepted: every field is what the declaration says, and it writes back the same
        assert isinstance(rec.pid, int) and isinstance(rec.role, str) and isinstance(rec.ppid, int)
        assert all(isinstance(x, str) for x in (*rec.loops, *rec.notes))
        assert ProcessRecord.from_json(rec.to_json()) == rec


@pytest.mark.slow
@DEEP
@given(data=_mutations())
def test_a_run_record_is_read_whole_or_refused_as_a_value_error_deep(data: bytes) -> None:
    test_a_run_record_is_read_whole_or_refused_as_a_value_error.hypothesis.inner_test(data)


def test_deep_and_non_finite_records_are_refused(tmp_path: Path) -> None:
    for text in ("[" * 50_000 + "]" * 50_000, GOOD.replace('"ppid": 1', '"ppid": Infinity')):
        p = tmp_path / "1.start.json"
        p.write_text(text)
        with pytest.raises(ValueError):
            read_record(p)


_lines = st.lists(
    st.sampled_from(
        [
            "numpy>=1.24",
            "psutil",
            "-r other.txt",
            "-c constraints.txt",
            "gymnasium[classic-control]==1.0",
            "torch @ https://example.invalid/x.whl",
            "not a requirement !!",
            "--index-url https://example.invalid",
            "pkg ; python_version < '3'",
            "",
            "# comment",
        ]
    )
    | st.text(max_size=30),
    max_size=12,
)


_DECLARATIONS: dict[str, st.SearchStrategy[Any]] = {
    "lines": _lines,
    "name": st.sampled_from(["requirements.txt", "environment.yml", "pyproject.toml"]),
}


@FAST
@given(**_DECLARATIONS)
def test_envcheck_reads_any_declaration_or_refuses_it_as_a_value_error(
    lines: list[str], name: str
) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        if name == "environment.yml":
            body = "dependencies:\n" + "".join(f"  - {json.dumps(x)}\n" for x in lines)
        elif name == "pyproject.toml":
            body = "[project]\nname = 'x'\ndependencies = " + json.dumps(lines) + "\n"
        else:
            body = "\n".join(lines) + "\n"
        p.write_text(body, encoding="utf-8", errors="replace")
        try:
            report = envcheck(p, broken=False)
        except ValueError:
            return
        # accepted: the report renders and serialises
        assert isinstance(str(report), str)
        assert json.loads(report.to_json())["format"].startswith("gyreprof.envcheck")


@pytest.mark.slow
@DEEP
@given(**_DECLARATIONS)
def test_envcheck_reads_any_declaration_or_refuses_it_as_a_value_error_deep(
    lines: list[str], name: str
) -> None:
    test_envcheck_reads_any_declaration_or_refuses_it_as_a_value_error.hypothesis.inner_test(
        lines, name
    )
