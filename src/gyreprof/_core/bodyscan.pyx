# cython: language_level=3, embedsignature=True
"""One-pass scan of an HTTP answer body for the fields the rollout log reads.

:func:`scan_body` gives exactly what the regular-expression scan of
``scan_body_reference`` in the tests' ``helpers/body_scan_reference.py`` gives, on every
input (the property tests compare the two), at a fraction of its cost: it reads
the bytes in place, allocates nothing but its answer, and never raises for any
bytes. What it reads, never parsing the body:

- the token counts: after the *last* ``"usage"`` key, every
  ``"prompt_tokens"`` / ``"completion_tokens"`` key followed by
  ``\\s*:\\s*`` and 1 to 12 digits, the last of each kind winning;
- the empty result list: the *first* ``"choices"`` key followed by
  ``\\s*:\\s*[\\s*]``; when the body has no ``"choices"`` key, the same for
  the first ``"data"`` key; a body that is a bare ``[]`` (whitespace around it, none inside).

Whitespace is the ASCII one of a bytes pattern's ``\\s`` (space, ``\\t\\n\\v\\f\\r``).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.string cimport memchr, memcmp
from libc.stdint cimport int64_t


cdef extern from "string.h" nogil:
    # GNU extensions (Python.h defines _GNU_SOURCE before string.h is read): glibc's
    # are vectorised, several bytes a cycle where the loops they replace read one
    void* memmem(const void* hay, size_t n, const void* needle, size_t k)
    void* memrchr(const void* s, int c, size_t n)


cdef inline bint _space(unsigned char ch) noexcept nogil:
    return ch == 32 or (9 <= ch <= 13)


cdef inline Py_ssize_t _skip(const unsigned char* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and _space(s[i]):
        i += 1
    return i


cdef Py_ssize_t _find(
    const unsigned char* s, Py_ssize_t n, Py_ssize_t start, const char* key, Py_ssize_t k
) noexcept nogil:
    """The first index >= start of ``key`` (k bytes) in ``s[:n]``, or -1."""
    cdef const void* at
    if start + k > n:
        return -1
    at = memmem(s + start, <size_t>(n - start), key, <size_t>k)
    return -1 if at == NULL else <const unsigned char*>at - s


cdef Py_ssize_t _rfind(const unsigned char* s, Py_ssize_t n, const char* key, Py_ssize_t k) noexcept nogil:
    """The last index of ``key`` (k bytes) in ``s[:n]``, or -1."""
    cdef Py_ssize_t i = n - k
    cdef const void* at
    while i >= 0:
        at = memrchr(s, key[0], <size_t>(i + 1))  # the last first byte at or before i
        if at == NULL:
            return -1
        i = <const unsigned char*>at - s
        if memcmp(s + i, key, k) == 0:
            return i
        i -= 1
    return -1


cdef int _empty_list(const unsigned char* s, Py_ssize_t n, const char* key, Py_ssize_t k) noexcept nogil:
    """-1 when ``key`` is not in ``s``; else 1 when its first occurrence is followed by
    an empty list (``\\s*:\\s*[\\s*]``), 0 when not."""
    cdef Py_ssize_t i = _find(s, n, 0, key, k)
    if i < 0:
        return -1
    i = _skip(s, i + k, n)
    if i >= n or s[i] != 58:  # ':'
        return 0
    i = _skip(s, i + 1, n)
    if i >= n or s[i] != 91:  # '['
        return 0
    i = _skip(s, i + 1, n)
    return 1 if i < n and s[i] == 93 else 0  # ']'


@cython.boundscheck(False)
@cython.wraparound(False)
cdef tuple _scan(const unsigned char* s, Py_ssize_t n, Py_ssize_t cap):
    cdef Py_ssize_t i, j, u, k, d
    cdef const void* at
    cdef int64_t p = -1, c = -1, v
    cdef bint prompt
    cdef int e
    if n > cap:
        return (-1, -1, None, 2)
    if n == 0 or s[0] != 123:  # '{'
        i = _skip(s, 0, n if n < 64 else 64)
        if i < n and i < 64 and s[i] == 91:  # '[': a bare [] (whitespace around it)?
            if i + 1 < n and s[i + 1] == 93 and _skip(s, i + 2, n) == n:
                return (-1, -1, "(list)", 0)
            return (-1, -1, None, 0)
        if not (i < n and i < 64 and s[i] == 123):
            return (-1, -1, None, 1)
    u = _rfind(s, n, b'"usage"', 7)
    if u >= 0:
        i = u
        while i < n:
            at = memchr(s + i, 34, <size_t>(n - i))  # the next '"'
            if at == NULL:
                break
            i = <const unsigned char*>at - s
            if i + 15 <= n and memcmp(s + i, b'"prompt_tokens"', 15) == 0:
                prompt = True
                k = 15
            elif i + 19 <= n and memcmp(s + i, b'"completion_tokens"', 19) == 0:
                prompt = False
                k = 19
            else:
                i += 1
                continue
            j = _skip(s, i + k, n)
            if j < n and s[j] == 58:  # ':'
                j = _skip(s, j + 1, n)
                d = 0
                v = 0
                while d < 12 and j + d < n and 48 <= s[j + d] <= 57:
                    v = v * 10 + (s[j + d] - 48)
                    d += 1
                if d > 0:
                    if prompt:
                        p = v
                    else:
                        c = v
                    i = j + d
                    continue
            i += 1
    e = _empty_list(s, n, b'"choices"', 9)
    if e == 1:
        return (p, c, "choices", 0)
    if e < 0 and _empty_list(s, n, b'"data"', 6) == 1:
        return (p, c, "data", 0)
    return (p, c, None, 0)


def scan_body(object body, Py_ssize_t cap):
    """``(prompt_tokens, completion_tokens, empty_field, flag)`` of an answer body (see
    the module doc): tokens -1 when not found; ``empty_field`` ``"choices"``, ``"data"``,
    ``"(list)"`` or None; ``flag`` 0 scanned, 1 not JSON, 2 longer than ``cap`` bytes
    (not scanned). ``body`` is bytes (a bytearray or memoryview is read as its bytes);
    anything else is not JSON. Never raises for any bytes."""
    cdef bytes b
    if type(body) is bytes:
        b = <bytes>body
    elif isinstance(body, (bytearray, memoryview)):
        b = bytes(body)
    else:
        return (-1, -1, None, 1)
    return _scan(<const unsigned char*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), cap)


# ------------------------------------------------------------------ streams

# the states of StreamScan (what the bytes read so far leave it inside)
DEF _IDLE = 0     # between keys: the next '"' may open one
DEF _KEY = 1      # after a '"': reading what may be one of the keys
DEF _COLON = 2    # after a whole key: whitespace, then ':'
DEF _VALUE = 3    # after the ':': whitespace, then a digit (tokens) or '[' (choices)
DEF _NUM = 4      # reading the digits of a token count
DEF _LIST = 5     # after "choices": [ : whitespace, then ']' (empty) or anything else

# the keys, without their opening quote, closing quote included
cdef const char* _K_PROMPT = b'prompt_tokens"'
cdef const char* _K_COMPLETION = b'completion_tokens"'
cdef const char* _K_CHOICES = b'choices"'
DEF _LEN_PROMPT = 14
DEF _LEN_COMPLETION = 18
DEF _LEN_CHOICES = 8
DEF _ALL = 7  # candidate bits: 1 prompt, 2 completion, 4 choices


cdef class StreamScan:
    """The token counts and the non-empty result list of a streamed answer, read chunk
    by chunk as it arrives: the scan's state carries over from one chunk to the next, so
    a key, its whitespace or a number cut anywhere between two chunks is read whole.

    What it reads is what the regular expressions
    ``"(prompt|completion)_tokens"\\s*:\\s*(\\d{1,12})`` (every match, the last of each
    kind winning; a number still being read when the stream ends counts) and
    ``"choices"\\s*:\\s*\\[\\s*[^\\]\\s]`` (any match: :attr:`saw_choice`) find in the
    concatenated chunks, whatever the cuts. It reads each byte once, jumping between
    quotes with ``memchr``, keeps no bytes and never raises for any bytes."""

    cdef int state
    cdef int cand      # the keys still possible in _KEY
    cdef int klen      # bytes of the key read after its opening quote
    cdef int kind      # the key read: 1 prompt, 2 completion, 4 choices
    cdef bint fresh    # _COLON right after the key's closing quote (it may open a key)
    cdef int digits
    cdef int64_t value
    cdef int64_t _prompt
    cdef int64_t _completion
    cdef public bint saw_choice

    def __cinit__(self):
        self.state = _IDLE
        self._prompt = -1
        self._completion = -1
        self.saw_choice = False

    @property
    def prompt_tokens(self):
        """The last prompt token count read (-1: none)."""
        if self.state == _NUM and self.kind == 1:
            return self.value
        return self._prompt

    @property
    def completion_tokens(self):
        """The last completion token count read (-1: none)."""
        if self.state == _NUM and self.kind == 2:
            return self.value
        return self._completion

    cpdef void feed(self, object data) noexcept:
        """Read the next chunk (bytes; a bytearray or memoryview as its bytes; anything
        else is skipped)."""
        cdef bytes b
        if type(data) is bytes:
            b = <bytes>data
        elif isinstance(data, (bytearray, memoryview)):
            try:
                b = bytes(data)
            except Exception:  # a memoryview that cannot be read as bytes
                return
        else:
            return
        self._feed(<const unsigned char*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef void _feed(self, const unsigned char* s, Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i = 0, j
        cdef const void* at
        cdef unsigned char ch
        cdef int state = self.state
        cdef int cand = self.cand, klen = self.klen
        while i < n:
            if state == _IDLE:
                if self.saw_choice and n - i > 64:
                    # only the token keys are left to find: to the first '_tokens"' (its
                    # key's quote is at most 11 bytes before it), else to the bytes at the
                    # chunk's end where a key may be cut
                    at = memmem(s + i, <size_t>(n - i), b'_tokens"', 8)
                    j = (n - _LEN_COMPLETION - 1) if at == NULL else (
                        (<const unsigned char*>at - s) - 11)
                    if j > i:
                        i = j
                at = memchr(s + i, 34, <size_t>(n - i))  # the next '"'
                if at == NULL:
                    break
                i = (<const unsigned char*>at - s) + 1
                if i + _LEN_COMPLETION <= n:  # the whole key is here: compared at once
                    ch = s[i]
                    if ch == 112 and memcmp(s + i, _K_PROMPT, _LEN_PROMPT) == 0:  # 'p'
                        self.kind = 1
                        i += _LEN_PROMPT
                    elif ch == 99 and memcmp(s + i, _K_COMPLETION, _LEN_COMPLETION) == 0:
                        self.kind = 2
                        i += _LEN_COMPLETION
                    elif ch == 99 and memcmp(s + i, _K_CHOICES, _LEN_CHOICES) == 0:
                        self.kind = 4
                        i += _LEN_CHOICES
                    else:
                        continue  # no key opens here (a '"' at i is the next one tried)
                    state = _COLON
                    self.fresh = True
                    continue
                state = _KEY
                cand = _ALL
                klen = 0
                continue
            ch = s[i]
            if state == _KEY:
                if cand & 1 and (klen >= _LEN_PROMPT or _K_PROMPT[klen] != ch):
                    cand &= ~1
                if cand & 2 and (klen >= _LEN_COMPLETION or _K_COMPLETION[klen] != ch):
                    cand &= ~2
                if cand & 4 and (klen >= _LEN_CHOICES or _K_CHOICES[klen] != ch):
                    cand &= ~4
                if cand == 0:
                    state = _IDLE  # this byte again: a '"' opens the next key
                    continue
                klen += 1
                i += 1
                if (cand & 1 and klen == _LEN_PROMPT) or (cand & 2 and klen == _LEN_COMPLETION) or (
                    cand & 4 and klen == _LEN_CHOICES
                ):
                    self.kind = cand
                    state = _COLON
                    self.fresh = True
                continue
            if state == _COLON:
                if _space(ch):
                    self.fresh = False
                    i += 1
                elif ch == 58:  # ':'
                    state = _VALUE
                    i += 1
                elif self.fresh:  # the key's closing quote opens another key
                    state = _KEY
                    cand = _ALL
                    klen = 0
                else:
                    state = _IDLE
                continue
            if state == _VALUE:
                if _space(ch):
                    i += 1
                elif self.kind == 4:
                    if ch == 91:  # '['
                        state = _LIST
                        i += 1
                    else:
                        state = _IDLE
                elif 48 <= ch <= 57:
                    state = _NUM
                    self.value = ch - 48
                    self.digits = 1
                    i += 1
                else:
                    state = _IDLE
                continue
            if state == _NUM:
                if 48 <= ch <= 57 and self.digits < 12:
                    self.value = self.value * 10 + (ch - 48)
                    self.digits += 1
                    i += 1
                    continue
                if self.kind == 1:
                    self._prompt = self.value
                else:
                    self._completion = self.value
                state = _IDLE
                continue
            # _LIST
            if _space(ch):
                i += 1
                continue
            if ch != 93:  # not ']': a list with something in it
                self.saw_choice = True
            state = _IDLE
        self.state = state
        self.cand = cand
        self.klen = klen
