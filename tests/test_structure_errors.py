"""Every refusal the library raises on purpose is a GyreprofError (issue 21 item 5).

The error classes of ``gyreprof._support.errors`` are also the builtins they stand for
(``InvalidValueError`` is a ValueError, ``ArgumentTypeError`` a TypeError,
``MissingKeyError`` a KeyError), so a caller can catch either. A bare
``raise ValueError(...)`` in the source is a refusal that a caller catching
``GyreprofError`` would miss; the two below are not refusals but the protocol of the
code around them.
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gyreprof"
BARE = re.compile(r"\braise (ValueError|TypeError|KeyError)\(")

#: (file, the raising line): raised and caught inside the same function, or a mapping's
#: own "no such key" that typing.get_type_hints expects
ALLOWED = {
    ("model/_serial.py", "raise KeyError(name)"),
    ("live/_layout.py", 'raise ValueError("out of range")'),
    # the start-up trail's JSON writer answers as json.dumps does for a key it cannot
    # write; the trail loads no other gyreprof module before the user's code runs
    (
        "integrations/_auto/trail.py",
        'raise TypeError(f"keys must be str, int, float, bool or None, not {type(k)}")',
    ),
}


def test_no_bare_builtin_refusals() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if BARE.search(line) and (rel, line.strip()) not in ALLOWED:
                found.append(f"{rel}:{i}: {line.strip()}")
    assert found == [], (
        "raise a gyreprof._support.errors class (also the builtin) instead:\n" + "\n".join(found)
    )


def test_the_rule_sees_a_bare_raise(tmp_path: Path) -> None:
    assert BARE.search('        raise ValueError("bad")')
    assert not BARE.search('        raise InvalidValueError("bad")')
