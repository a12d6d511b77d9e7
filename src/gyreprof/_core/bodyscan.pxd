# cython: language_level=3
"""The body scan (bodyscan.pyx says what it reads): declared here so that compiled
callers (requestlog's row) scan a bytes body with no Python call."""


cdef tuple _scan(const unsigned char* s, Py_ssize_t n, Py_ssize_t cap)
