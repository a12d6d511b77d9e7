"""The compiled body scanner (``gyreprof._core.bodyscan``) against its pure-Python twin
(``helpers.body_scan_reference``, the regular-expression scan it replaced): the same answer
on every input, and no exception for any bytes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gyreprof._core.bodyscan import scan_body as native
from gyreprof.integrations._auto import rollout_log as rl

from helpers.body_scan_reference import scan_body_reference

KEYS = ["usage", "prompt_tokens", "completion_tokens", "choices", "data", "total_tokens", "x"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**15), max_value=10**15)
    | st.sampled_from(KEYS)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=24,
)

# the pieces a body is made of where the scanner's rules bite: the keys (also inside
# strings), the separators with every kind of whitespace, digits runs of 1..14
PIECES = [
    b'"usage"',
    b'"prompt_tokens"',
    b'"completion_tokens"',
    b'"choices"',
    b'"data"',
    b":",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b'"',
    b" ",
    b"\t",
    b"\n",
    b"\r",
    b"\x0b",
    b"\x0c",
    b"\xa0",
    b"\x85",
    b"\xff",
    b"\x00",
    b"7",
    b"123456789012",
    b"1234567890123",
    b"-1",
    b"_tokens",
    b'"prompt',
]


def same(body: Any) -> None:
    assert native(body, rl.BODY_CAP) == scan_body_reference(body)
    assert rl.scan_body(body) == scan_body_reference(body)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.sampled_from([None, 0, 1, 2]), st.data())
def test_json_bodies_and_their_truncations(value: Any, indent: int | None, data: Any) -> None:
    body = json.dumps(value, indent=indent).encode()
    same(body)
    cut = data.draw(st.integers(min_value=0, max_value=len(body)))
    same(body[:cut])
    same(body[cut:])


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.binary(max_size=3), max_size=40))
@example([b'{"choices"', b" \x0b", b":", b"\t[", b" ", b"]"])
@example([b'{"usage": {"prompt_tokens"', b'"completion_tokens": 4'])
@example([b'{"prompt_tokens": 1, "usage": {"prompt_tokens": 123456789012', b"3}"])
@example([b"  [] \n"])
@example([b"[ ]"])
@example([b" " * 64, b"{}"])
@example([b" " * 63, b"[]"])
def test_pieces(parts: list[bytes]) -> None:
    body = b"".join(parts)
    same(body)
    same(b"{" + body)
    same(b"{" + body + b'"usage": {"prompt_tokens": 5}')


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes(body: bytes) -> None:
    same(body)
    same(bytearray(body))


def test_answers_on_hand_made_bodies() -> None:
    """Each rule, on the case where a looser rule gets it wrong."""
    # the last "usage" key counts: a prompt_tokens before it is not read
    body = b'{"prompt_tokens": 9, "usage": {"completion_tokens": 2}}'
    assert native(body, 99) == (-1, 2, None, 0)
    # the last of each kind wins; a key in a string is read too (the body is not parsed)
    assert native(b'{"usage": {"prompt_tokens": 1, "prompt_tokens": 2}}', 99)[0] == 2
    # at most 12 digits are read
    assert native(b'{"usage": {"prompt_tokens": 1234567890123}}', 99)[0] == 123456789012
    # only the first "choices" is read: a later empty one is not the result list
    assert native(b'{"choices": [{"choices": []}]}', 99)[2] is None
    # "data" only when there is no "choices"
    assert native(b'{"choices": [1], "data": []}', 99)[2] is None
    assert native(b'{"data" :\t[ \n]}', 99)[2] == "data"
    # a top-level empty list, whitespace around it but none inside
    assert native(b" []\n", 99) == (-1, -1, "(list)", 0)
    assert native(b"[ ]", 99) == (-1, -1, None, 0)
    # the first non-blank byte within 64 decides: 64 blanks then "{" is not JSON
    assert native(b" " * 64 + b"{}", 999)[3] == 1
    assert native(b" " * 63 + b"{}", 999)[3] == 0
    # too long: not scanned; anything but bytes is not JSON
    assert native(b"{}", 1)[3] == 2
    assert native("{}", 99)[3] == 1
    assert native(None, 99)[3] == 1
    assert native(memoryview(b'{"choices": []}'), 99)[2] == "choices"
