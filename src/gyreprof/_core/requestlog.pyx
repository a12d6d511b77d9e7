# cython: language_level=3, embedsignature=True
"""A thread's request log, its per-request path in compiled code: a *plain* request (one
synchronous attempt, no stream) opened and recorded in one call each, as a row of
``rollout_log.ROW_FIELDS`` (``integrations/_auto/rollout_log.py`` says what the row, the
outcomes and the retries mean; its ThreadLog is a :class:`RequestLog`).

In Python the two steps were some sixty bytecodes per request around the compiled body
scan and the core span; here they are the same reads and writes with no interpreter in
between.

Contract: the methods run on the log's thread (the core span's recorder refuses another
writer; that refusal, like any failure of the core, leaves the row to the clock read
here, as the Python path did). ``bind_plain`` comes first; an unbound log raises
ValueError, never reads memory. ``last_failure`` is a ``contextvars.ContextVar``.
"""

from cpython.contextvars cimport PyContextVar_CheckExact, PyContextVar_Set, get_value
from libc.stdint cimport int64_t

from gyreprof._core.clock cimport gyre_mono_ns

cdef enum:
    REQUEST = 0  # the core span's phase (rollout_log.PHASES)


cdef class RequestLog:
    """The compiled part of one thread's request log (see the module doc). A subclass
    provides ``add(row)`` (a kept span appended, older ones folded), called when a row
    fills the kept spans to ``span_cap``."""

    cdef public object ident         # the thread's ident (the row's thread column)
    cdef public list spans           # kept spans: rows, or requests whose body may come
    cdef public bint core_ok         # the core span (``spans_core``) is usable
    cdef public object spans_core    # gyreprof._core.recorder.Spans over the log's Recorder
    cdef object last_failure         # ContextVar: (endpoint, outcome) of the last failure
    cdef object scan                 # the body scan: scan(body, cap) -> (p, c, empty, flag)
    cdef object body_cap
    cdef Py_ssize_t span_cap

    def bind_plain(self, last_failure, scan, body_cap, Py_ssize_t span_cap):
        """The context variable of the last failure, the body scan and its cap, and the
        number of kept spans at which ``add`` folds (at least 2)."""
        if not PyContextVar_CheckExact(last_failure):
            raise ValueError(f"last_failure must be a contextvars.ContextVar, got "
                             f"{type(last_failure).__name__}")
        if not callable(scan):
            raise ValueError("scan must be callable")
        if span_cap < 2:
            raise ValueError(f"span_cap must be at least 2, got {span_cap}")
        self.last_failure = last_failure
        self.scan = scan
        self.body_cap = body_cap
        self.span_cap = span_cap

    cdef inline int _bound(self) except -1:
        if self.last_failure is None or self.spans is None:
            raise ValueError("this RequestLog is not bound (bind_plain, and its spans list)")
        return 0

    def open_plain(self, ep):
        """A plain request to ``ep`` starts: ``(start, retried)``, its start (ns, the core
        span's token, else CLOCK_MONOTONIC now) and the retried classes (the context's
        last failure when it was at this endpoint)."""
        self._bound()
        retried = ()
        if ep:
            prev = get_value(self.last_failure)
            if prev is not None and prev[0] == ep:
                retried = (prev[1],)
        if self.core_ok:
            return self.spans_core.begin(), retried
        return gyre_mono_ns(), retried

    def record_plain(self, ep, client, int64_t start, retried, outcome, data,
                     bytes_out):
        """Record the plain request opened at ``start``: ``outcome`` its status class or
        failure, ``data`` its whole answer body (None: not read). Appends its row, ends
        the core span, sets the context's last failure; returns its end (ns)."""
        self._bound()
        p = c = -1
        empty = None
        flag = 0
        n = 0
        if data is not None:
            n = len(data)
            p, c, empty, flag = self.scan(data, self.body_cap)
            if empty is not None:
                if outcome == "ok":
                    outcome = "empty"
                else:
                    empty = None
        cdef int64_t end = -1
        if self.core_ok:
            try:
                end = start + <int64_t>self.spans_core.end(REQUEST, start)
            except Exception:  # the core refused: the span still counts
                end = -1
        if end < 0:
            end = gyre_mono_ns()
        # the row of ROW_FIELDS: no ttft, no chunks, one attempt, not a stream
        row = (ep, start, end, outcome, p, c, -1, 0, 1, retried, n, bytes_out, False, empty,
               flag, self.ident, client)
        if len(self.spans) + 1 >= self.span_cap:
            self.add(row)  # the fold of the older spans: Python
        else:
            self.spans.append(row)
        if outcome != "ok":
            PyContextVar_Set(self.last_failure, (ep, outcome))
        elif get_value(self.last_failure) is not None:
            PyContextVar_Set(self.last_failure, None)
        return end
