# cython: language_level=3, embedsignature=True
"""Compact encoding of histogram counts.

The scheme is HdrHistogram's V2 counts encoding: each entry is a ZigZag LEB128
varint (at most 9 bytes, the 9th carrying 8 bits); a positive value is a
count, a negative value ``-k`` stands for ``k`` consecutive zero counts. The
snapshot format and the HdrHistogram log export share it.

Decoding checks every byte: truncated input, a varint longer than 9 bytes,
a run past the declared length or a negative count raise ValueError.
"""

cimport cython
import numpy as np
from libc.stdint cimport int64_t, uint64_t


cdef inline uint64_t _zigzag(int64_t v) noexcept:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline int64_t _unzigzag(uint64_t u) noexcept:
    return <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))


cdef inline Py_ssize_t _put(unsigned char* out, Py_ssize_t pos, int64_t value) noexcept:
    cdef uint64_t u = _zigzag(value)
    cdef int i
    for i in range(8):
        if u < 0x80:
            out[pos] = <unsigned char>u
            return pos + 1
        out[pos] = <unsigned char>((u & 0x7F) | 0x80)
        u >>= 7
        pos += 1
    out[pos] = <unsigned char>(u & 0xFF)
    return pos + 1


@cython.boundscheck(False)
def encode_counts(const int64_t[::1] counts, Py_ssize_t length=-1):
    """Encode ``counts[:length]`` (trailing zeros dropped); returns bytes."""
    cdef Py_ssize_t n = counts.shape[0] if length < 0 else min(length, counts.shape[0])
    while n > 0 and counts[n - 1] == 0:
        n -= 1
    buf = bytearray(9 * (n + 1))
    cdef unsigned char* out = buf
    cdef Py_ssize_t pos = 0, i = 0, j
    cdef int64_t c
    while i < n:
        c = counts[i]
        if c < 0:
            raise ValueError(f"negative count {c} at index {i}")
        if c == 0:
            j = i
            while j < n and counts[j] == 0:
                j += 1
            if j - i == 1:
                pos = _put(out, pos, 0)
            else:
                pos = _put(out, pos, -(<int64_t>(j - i)))
            i = j
        else:
            pos = _put(out, pos, c)
            i += 1
    return bytes(buf[:pos])


@cython.boundscheck(False)
cdef int _decode(
    const unsigned char[::1] data,
    Py_ssize_t length,
    int64_t[::1] o,
    uint64_t* total_lo,
    uint64_t* total_hi,
    Py_ssize_t* first,
    Py_ssize_t* last,
) except -1:
    """Decode into ``o`` (zeroed, ``length`` entries); the counts written add up to
    ``total_hi * 2**64 + total_lo`` (exact: no int64 wrap), ``first`` / ``last`` the
    first and last bucket holding a count (-1 when none), in the same pass."""
    cdef Py_ssize_t pos = 0, n = data.shape[0], idx = 0
    cdef uint64_t u, lo = 0, hi = 0
    cdef int64_t v
    cdef Py_ssize_t i0 = -1, i1 = -1
    cdef int shift, k
    while pos < n:
        u = 0
        shift = 0
        k = 0
        while True:
            if pos >= n:
                raise ValueError("truncated counts: a varint runs past the end of the data")
            if k == 8:
                u |= (<uint64_t>data[pos]) << 56
                pos += 1
                break
            u |= (<uint64_t>(data[pos] & 0x7F)) << shift
            pos += 1
            k += 1
            if not (data[pos - 1] & 0x80):
                break
            shift += 7
        v = _unzigzag(u)
        if v < 0:
            # compare without negating: -INT64_MIN does not exist
            if v < -(<int64_t>(length - idx)):
                raise ValueError(
                    f"corrupted counts: a run of {-(<object>v)} zeros passes the end "
                    f"({length} buckets)")
            idx -= v
        else:
            if idx < 0 or idx >= length:
                raise ValueError(f"corrupted counts: more than {length} buckets")
            o[idx] = v
            if v > 0:
                if i0 < 0:
                    i0 = idx
                i1 = idx
                lo += <uint64_t>v
                if lo < <uint64_t>v:  # carried out of the low word
                    hi += 1
            idx += 1
    total_lo[0] = lo
    total_hi[0] = hi
    first[0] = i0
    last[0] = i1
    return 0


def _out_array(Py_ssize_t length, out):
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    if out is None:
        return np.zeros(length, dtype=np.int64)
    if out.shape[0] != length:
        raise ValueError(f"out has {out.shape[0]} entries, {length} needed")
    return out


def decode_counts(const unsigned char[::1] data, Py_ssize_t length, out=None):
    """Decode into an int64 array of ``length`` counts; ValueError on malformed input.

    ``out``: an optional zeroed, contiguous int64 array of ``length`` to decode into.
    """
    out = _out_array(length, out)
    cdef uint64_t lo, hi
    cdef Py_ssize_t i0, i1
    _decode(data, length, out, &lo, &hi, &i0, &i1)
    return out


def decode_counts_into(const unsigned char[::1] data, Py_ssize_t length, out):
    """Decode into ``out`` (a zeroed, contiguous int64 array of ``length``) and return
    ``(total, first, last)``: the counts' exact sum (a Python int, never wrapped) and
    the first and last bucket holding a count (-1, -1 for an empty row), found in the
    decoding pass itself (no second pass over the row)."""
    out = _out_array(length, out)
    cdef uint64_t lo, hi
    cdef Py_ssize_t i0, i1
    _decode(data, length, out, &lo, &hi, &i0, &i1)
    return ((<object>hi) << 64) + <object>lo, i0, i1
