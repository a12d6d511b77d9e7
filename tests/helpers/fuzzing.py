"""The slow twins of the decoder fuzzers (tests/adversarial).

Each fuzzer runs a few hundred examples in the default suite; its twin, marked
``slow`` (``.ci/run``'s second step, ``-m slow``), runs the same property on the
same strategies for :data:`DEEP_EXAMPLES` examples. Both are derandomized (a
fixed seed from the test's name) and keep no example database, so each run
tries the same inputs.
"""

from __future__ import annotations

from hypothesis import settings

DEEP_EXAMPLES = 3000


def deep(base: settings, examples: int = DEEP_EXAMPLES) -> settings:
    """``base`` with ``examples`` examples, derandomized, no database, no deadline."""
    return settings(base, max_examples=examples, derandomize=True, database=None, deadline=None)
