# cython: language_level=3, embedsignature=True
"""A thread's request log, its per-request path in compiled code: a *plain* request (one
synchronous attempt, no stream) opened and recorded in one call each, as a row of
``rollout_log.ROW_FIELDS`` (``integrations/_auto/rollout_log.py`` says what the row, the
outcomes and the retries mean; its ThreadLog is a :class:`RequestLog`).

In Python the two steps were some sixty bytecodes per request around the compiled body
scan and the core span; here they are the same reads and writes with no interpreter in
between. :class:`PlainSend` goes one step further: it is the patched ``send`` itself, so a
plain request's whole bookkeeping (its endpoint, the thread's log, the row, the trainer's
wait on it) runs around the original with no Python frame of ours.

Contract: the methods run on the log's thread (the core span's recorder refuses another
writer; that refusal, like any failure of the core, leaves the row to the clock read
here, as the Python path did). ``bind_plain`` comes first; an unbound log raises
ValueError, never reads memory. ``last_failure`` is a ``contextvars.ContextVar``.
"""

cimport cython
from cpython.contextvars cimport (
    PyContextVar_CheckExact,
    PyContextVar_Reset,
    PyContextVar_Set,
    get_value,
)
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_SIZE
from libc.stdint cimport int64_t

from contextvars import ContextVar
from types import MethodType

from gyreprof._core.bodyscan import scan_body

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from gyreprof._core.bodyscan cimport _scan
from gyreprof._core.clock cimport gyre_mono_ns
from gyreprof._core.recorder cimport Spans
from gyreprof._core.vcall cimport gyre_vc_call, gyre_vc_nargs, gyre_vc_t, gyre_vc_type_setup

cdef enum:
    REQUEST = 0  # the core span's phase (rollout_log.PHASES)


cdef class RequestLog:
    """The compiled part of one thread's request log (see the module doc). A subclass
    provides ``add(row)`` (a kept span appended, older ones folded), called when a row
    fills the kept spans to ``span_cap``."""

    cdef public object ident         # the thread's ident (the row's thread column)
    cdef public list spans           # kept spans: rows, or requests whose body may come
    cdef public bint core_ok         # the core span (``spans_core``) is usable
    cdef public Spans spans_core     # the core span over the log's Recorder (None: no core)
    cdef object last_failure         # ContextVar: (endpoint, outcome) of the last failure
    cdef object scan                 # the body scan: scan(body, cap) -> (p, c, empty, flag)
    cdef object body_cap
    cdef Py_ssize_t span_cap
    cdef bint scan_c                 # ``scan`` is bodyscan's: its C function is called
    cdef Py_ssize_t cap_c            # ``body_cap`` as a C integer (when scan_c)

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
        # the compiled scan, called in C, when it is the one given and the cap fits
        self.scan_c = (scan is scan_body and isinstance(body_cap, int)
                       and 0 <= body_cap < (1 << 62))
        self.cap_c = body_cap if self.scan_c else 0

    cdef inline int _bound(self) except -1:
        if self.last_failure is None or self.spans is None:
            raise ValueError("this RequestLog is not bound (bind_plain, and its spans list)")
        return 0

    def open_plain(self, ep):
        """A plain request to ``ep`` starts: ``(start, retried)``, its start (ns, the core
        span's token, else CLOCK_MONOTONIC now) and the retried classes (the context's
        last failure when it was at this endpoint)."""
        self._bound()
        retried = self._retried(ep)
        return self._begin(), retried

    def record_plain(self, ep, client, int64_t start, retried, outcome, data,
                     bytes_out):
        """Record the plain request opened at ``start``: ``outcome`` its status class or
        failure, ``data`` its whole answer body (None: not read). Appends its row, ends
        the core span, sets the context's last failure; returns its end (ns)."""
        self._bound()
        return self._record(ep, client, start, retried, outcome, data, bytes_out)

    cdef object _retried(self, ep):
        if ep:
            prev = get_value(self.last_failure)
            if prev is not None and prev[0] == ep:
                return (prev[1],)
        return ()

    cdef int64_t _begin(self) except? -1:
        if self.core_ok and self.spans_core is not None:  # a cdef call on None: no check
            return self.spans_core._begin()
        return gyre_mono_ns()

    cdef int64_t _record(self, ep, client, int64_t start, retried, outcome, data,
                         bytes_out) except? -1:
        p = c = -1
        empty = None
        flag = 0
        n = 0
        if data is not None:
            n = len(data)
            if self.scan_c and type(data) is bytes:
                p, c, empty, flag = _scan(<const unsigned char*>PyBytes_AS_STRING(data),
                                          PyBytes_GET_SIZE(data), self.cap_c)
            else:
                p, c, empty, flag = self.scan(data, self.body_cap)
            if empty is not None:
                if outcome == "ok":
                    outcome = "empty"
                else:
                    empty = None
        cdef int64_t end = -1
        if self.core_ok and self.spans_core is not None:
            try:
                end = start + self.spans_core._end(REQUEST, start)
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


# ------------------------------------------------------------------ the patched send


cdef PyObject* _plain_vectorcall(PyObject* callable, PyObject** args, size_t nargsf,
                                 PyObject* kwnames) except NULL:
    cdef PlainSend ps = <PlainSend>callable
    cdef Py_ssize_t n = gyre_vc_nargs(nargsf)
    if n == 2 and ps._is_plain(kwnames, args + 2):
        res = ps._send(<object>args[0], <object>args[1], args, nargsf, kwnames, (), None)
    else:
        res = gyre_vc_call(ps.wrapper, args, nargsf, kwnames)
    Py_INCREF(res)
    return <PyObject*>res


@cython.final
cdef class PlainSend:
    """A client's patched ``send(client, request, **kwargs)`` (see the module doc, and
    ``patch_http``): a plain request, when no layer above owns it (``active`` is None) and
    ``stream`` is not asked for, is sent and recorded here: its endpoint (``cache`` by the
    URL, or the URL's ``key_attr``; ``endpoint(url)`` on a miss), the calling thread's log
    (``logs``: rollout_log's namespace, its ``_tls`` and ``thread_log``), the bytes sent
    (the request's ``body_attr`` when bytes or str, else ``sent_else(request)``), the row,
    and the trainer's wait on it (``state``: the state module's namespace, its ``tls``
    and ``_default_main``; a thread with no training state yet goes through
    ``wait(start, end, "http")``, a probe endpoint in ``probes`` is no wait). ``layer``
    (not None) is set in ``active`` while the original runs, for the layers below. A send
    that raised is ``failed(log, ep, client, start, retried, sent, exc)``'s.

    Every other call goes to ``wrapper(client, request, *args, **kwargs)``, which may hand
    a plain request back to :meth:`plain`. The bookkeeping never raises into the caller:
    when it fails before the send, the original is called uninstrumented; after it, the
    answer is returned as it came."""

    cdef gyre_vc_t vc  # the vectorcall entry (the type's tp_vectorcall_offset)
    cdef readonly object original
    cdef readonly object wrapper
    cdef object active
    cdef object layer
    cdef readonly str client
    cdef dict cache
    cdef object key_attr
    cdef object endpoint
    cdef str body_attr
    cdef object sent_else
    cdef dict logs
    cdef dict state
    cdef object probes
    cdef object wait
    cdef object failed
    cdef dict __dict__

    def __cinit__(self, original, wrapper, *, active, layer, client, cache, key_attr,
                  endpoint, body_attr, sent_else, logs, state, probes, wait, failed):
        for name, fn in (("original", original), ("wrapper", wrapper), ("endpoint", endpoint),
                         ("wait", wait), ("failed", failed)):
            if not callable(fn):
                raise ValueError(f"PlainSend needs a callable {name}")
        if sent_else is not None and not callable(sent_else):
            raise ValueError("sent_else must be callable or None")
        if not PyContextVar_CheckExact(active):
            raise ValueError(f"active must be a contextvars.ContextVar, got "
                             f"{type(active).__name__}")
        if not isinstance(client, str) or not isinstance(body_attr, str):
            raise ValueError("client and body_attr must be strings")
        if key_attr is not None and not isinstance(key_attr, str):
            raise ValueError("key_attr must be an attribute name or None")
        for name, d in (("cache", cache), ("logs", logs), ("state", state)):
            if not isinstance(d, dict):
                raise ValueError(f"{name} must be a dict, got {type(d).__name__}")
        if not isinstance(probes, (set, frozenset)):
            raise ValueError(f"probes must be a set, got {type(probes).__name__}")
        self.original = original
        self.wrapper = wrapper
        self.active = active
        self.layer = layer
        self.client = client
        self.cache = cache
        self.key_attr = key_attr
        self.endpoint = endpoint
        self.body_attr = body_attr
        self.sent_else = sent_else
        self.logs = logs
        self.state = state
        self.probes = probes
        self.wait = wait
        self.failed = failed
        self.vc = <gyre_vc_t>_plain_vectorcall

    cdef int _is_plain(self, PyObject* kwnames, PyObject** kwvalues) except -1:
        if get_value(self.active) is not None:
            return False  # a layer above owns the request
        cdef Py_ssize_t i
        if kwnames != NULL:
            names = <tuple>kwnames
            for i in range(PyTuple_GET_SIZE(names)):
                if names[i] == "stream":
                    return not <object>kwvalues[i]
        return True

    def plain(self, client, request, tuple args, dict kwargs):
        """Send and record ``request`` as a plain one (the wrapper's call for a request it
        found plain): ``original(client, request, *args, **kwargs)``'s result."""
        return self._send(client, request, NULL, 0, NULL, args, kwargs)

    cdef object _call(self, client, request, PyObject** args, size_t nargsf,
                      PyObject* kwnames, tuple rest, dict kwargs):
        if args != NULL:
            return gyre_vc_call(self.original, args, nargsf, kwnames)
        return self.original(client, request, *rest, **kwargs)

    cdef object _send(self, client, request, PyObject** args, size_t nargsf,
                      PyObject* kwnames, tuple rest, dict kwargs):
        cdef RequestLog log
        cdef int64_t start
        try:
            ep = self._endpoint(request.url)
            log = self._log()
            retried = log._retried(ep)
            start = log._begin()
            sent = self._sent(request)
        except Exception:  # uninstrumented rather than broken
            return self._call(client, request, args, nargsf, kwnames, rest, kwargs)
        token = None
        if self.layer is not None:
            token = PyContextVar_Set(self.active, self.layer)
        try:
            resp = self._call(client, request, args, nargsf, kwnames, rest, kwargs)
        except BaseException as exc:
            if token is not None:
                PyContextVar_Reset(self.active, token)
            self.failed(log, ep, self.client, start, retried, sent, exc)
            raise
        if token is not None:
            PyContextVar_Reset(self.active, token)
        try:
            self._answered(log, ep, start, retried, resp, sent)
        except Exception:  # never into the user's code
            pass
        return resp

    cdef object _endpoint(self, url):
        if self.key_attr is None:
            key = url if isinstance(url, str) else None
        else:
            key = getattr(url, self.key_attr, None)
        if key is not None:
            ep = self.cache.get(key)
            if ep is not None:
                return ep
        return self.endpoint(url)  # it caches what it finds

    cdef RequestLog _log(self):
        log = getattr(self.logs["_tls"], "log", None)
        if log is None:
            log = self.logs["thread_log"]()
        cdef RequestLog rl = <RequestLog?>log
        rl._bound()
        return rl

    cdef object _sent(self, request):
        body = getattr(request, self.body_attr, None)
        if isinstance(body, (bytes, str)):
            return len(body)
        if self.sent_else is not None:
            return self.sent_else(request)
        return 0

    cdef int _answered(self, RequestLog log, ep, int64_t start, retried, resp,
                       sent) except -1:
        status = resp.status_code
        if status >= 500:
            outcome = "5xx"
        elif status >= 400:
            outcome = "4xx"
        else:
            outcome = "ok"
        data = getattr(resp, "_content", None)
        if not isinstance(data, bytes):
            data = None
        cdef int64_t end = log._record(ep, self.client, start, retried, outcome, data, sent)
        t = getattr(self.state["tls"], "t", None)
        if t is None:  # no training state on this thread yet: the Python rule decides
            self.wait(start, end, "http")
        elif not (self.probes and ep in self.probes):  # a metadata probe is no wait
            t.request_wait(start, end, self.state["_default_main"])
        return 0

    def __call__(self, *args, **kwargs):
        # the tp_call path (a caller that does not use vectorcall): the wrapper decides
        return self.wrapper(*args, **kwargs)

    def __get__(self, obj, objtype):
        if obj is None:
            return self
        return MethodType(self, obj)


cdef Py_ssize_t _plain_vc_offset():
    cdef PlainSend probe = PlainSend.__new__(
        PlainSend, print, print, active=_PROBE_VAR, layer=None, client="", cache={},
        key_attr=None, endpoint=print, body_attr="", sent_else=None, logs={}, state={},
        probes=set(), wait=print, failed=print)
    return <Py_ssize_t>(<char*>&probe.vc - <char*><PyObject*>probe)


_PROBE_VAR = ContextVar("gyreprof_plain_send_probe", default=None)
gyre_vc_type_setup(PlainSend, _plain_vc_offset())
