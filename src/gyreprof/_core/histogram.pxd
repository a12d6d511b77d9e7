# cython: language_level=3
"""Standalone log-linear histogram (HDR layout) with exact count/sum/min/max.

Thread-safety: none; one writer, and readers only in the same thread (or under
the GIL, which every method holds). Units: whatever the caller records; the
profiler records nanoseconds.
"""

from libc.stdint cimport int64_t

from gyreprof._core.hdr cimport HdrLayout


cdef class Histogram:
    cdef HdrLayout layout
    cdef object _counts          # numpy int64 array, owns the memory
    cdef int64_t* counts         # points into _counts
    cdef readonly int64_t total  # values recorded into buckets
    cdef readonly double sum     # exact sum of recorded values (before clamping)
    cdef readonly int64_t min    # exact, -1 while empty
    cdef readonly int64_t max    # exact, -1 while empty
    cdef readonly int64_t out_of_range  # values above highest (clamped into the top bucket)
    cdef readonly int64_t negative      # negative values (counted, not recorded)

    cdef void record_value(self, int64_t v, int64_t n) noexcept
