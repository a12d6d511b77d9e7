"""The regular-expression scan of an answer body that the compiled scanner
(``gyreprof._core.bodyscan``) replaced: the oracle its property tests compare it with."""

from __future__ import annotations

import re

from gyreprof.integrations._auto import rollout_log as rl

_LIST = re.compile(rb"\s*:\s*\[\s*(\]?)")
_TOKENS = re.compile(rb'"(prompt|completion)_tokens"\s*:\s*(\d{1,12})')


def _empty_list(body: bytes, key: bytes) -> bool | None:
    """None when ``key`` is not in ``body``; else whether its list is empty."""
    i = body.find(key)
    if i < 0:
        return None
    m = _LIST.match(body, i + len(key))
    return bool(m and m.group(1))


def scan_body_reference(body: bytes) -> tuple[int, int, str | None, int]:
    """The pure-Python twin of ``rollout_log.scan_body`` (``tests/test_body_scan.py`` compares
    the two).

    ``(prompt_tokens, completion_tokens, empty_field, flag)`` of an answer body:
    tokens (read after its last ``"usage"`` key) -1 when not found; ``empty_field``
    names the result list found empty (``choices``, else ``data`` when the body has no
    ``choices``, or ``(list)`` for a top-level ``[]``), else None; ``flag`` 0 scanned,
    1 not JSON, 2 oversized (not scanned)."""
    if len(body) > rl.BODY_CAP:
        return -1, -1, None, 2
    if body[:1] != b"{":
        head = body[:64].lstrip()[:1]
        if head == b"[":
            return -1, -1, ("(list)" if body.strip() == b"[]" else None), 0
        if head != b"{":
            return -1, -1, None, 1
    p = c = -1
    u = body.rfind(b'"usage"')
    if u >= 0:
        for key, value in _TOKENS.findall(body, u):
            if key == b"prompt":
                p = int(value)
            else:
                c = int(value)
    empty = None
    choices = _empty_list(body, b'"choices"')
    if choices:
        empty = "choices"
    elif choices is None and _empty_list(body, b'"data"'):
        empty = "data"
    return p, c, empty, 0
