# cython: language_level=3
"""Clock reads for the hot path.

Contract:
- ``gyre_mono_ns()`` returns CLOCK_MONOTONIC in nanoseconds (the clock behind
  ``time.perf_counter_ns`` / ``time.monotonic_ns`` on Linux). No GIL needed,
  never fails, never allocates.
- ``gyre_thread_token()`` returns a value unique to the calling OS thread while
  it lives (the address of a thread-local byte): a load and an add off the
  thread pointer, no call.
- ``gyre_rdtsc()`` returns the raw time-stamp counter in ticks (x86 only;
  ``GYRE_HAVE_TSC`` is 0 elsewhere and the function returns 0). Converting
  ticks to ns needs a calibrated ratio (see recorder.pyx); only meaningful on
  CPUs whose TSC is invariant (``constant_tsc`` and ``nonstop_tsc``).
"""

from libc.stdint cimport int64_t, uint64_t

cdef extern from *:
    """
    #include <time.h>
    #include <stdint.h>
    #if defined(__x86_64__) || defined(__i386__)
    #include <x86intrin.h>
    #define GYRE_HAVE_TSC 1
    static inline uint64_t gyre_rdtsc(void) { return (uint64_t)__rdtsc(); }
    #else
    #define GYRE_HAVE_TSC 0
    static inline uint64_t gyre_rdtsc(void) { return 0; }
    #endif
    /* A per-thread token: the address of a thread-local byte, read off the thread
       pointer (initial-exec TLS) with no call, unlike pthread_self(). */
    static __thread char gyre_tls_marker __attribute__((tls_model("initial-exec")));
    static inline unsigned long gyre_thread_token(void) {
        return (unsigned long)(uintptr_t)&gyre_tls_marker;
    }
    static inline int64_t gyre_mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
    }
    """
    const int GYRE_HAVE_TSC
    uint64_t gyre_rdtsc() noexcept nogil
    int64_t gyre_mono_ns() noexcept nogil
    unsigned long gyre_thread_token() noexcept nogil
