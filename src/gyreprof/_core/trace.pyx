# cython: language_level=3, embedsignature=True
"""The start-up trail's trace function in C (Python 3.10-3.11).

``integrations/_auto/trail.py`` owns what is recorded and how it is written; this
module is only the hot part, the function ``PyEval_SetTrace`` installs. On a call
it sets the frame's ``f_trace_lines`` to 0 (no line events) and returns; on an
exception in a frame outside the standard library it decides whether the
exception is new or the one followed so far reaching its next frame (known by the
number it carries in ``__gyreprof_trail__``, as the trail's ``sys.monitoring``
callback does on 3.12+), and calls back into Python for the few it records: at most
``max_new`` new exceptions, one more call at the cap, and ``max_up`` frames followed
for each. Which code objects
are traced is asked of Python once per code object and kept in the code object's
extra slot (PEP 523's ``_PyCode_SetExtra``). On 3.12+ nothing is installed
(``available()`` is False: the trail uses ``sys.monitoring`` there).

Contract: every function here runs with the GIL held; nothing raises out of the
trace function (an error in a callback is cleared, the call goes on).
"""

from cpython.object cimport PyObject

cdef extern from *:
    """
    #include "frameobject.h"
    #include <time.h>

    #if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030C0000
    #define GP_HAVE 1
    #else
    #define GP_HAVE 0
    #endif

    #if GP_HAVE
    #if PY_VERSION_HEX >= 0x030B0000
    /* 3.11: PyFrameObject's layout is internal (pycore_frame.h); its head is mirrored
       here for the one field written: f_trace_lines. */
    struct gp_frame_head {
        PyObject_HEAD
        PyFrameObject *f_back;
        void *f_frame;
        PyObject *f_trace;
        int f_lineno;
        char f_trace_lines;
        char f_trace_opcodes;
    };
    #define GP_NO_LINES(f) (((struct gp_frame_head *)(f))->f_trace_lines = 0)
    #else
    #define GP_NO_LINES(f) ((f)->f_trace_lines = 0)  /* 3.10: cpython/frameobject.h */
    #endif

    static int gp_on = 0;
    static PyObject *gp_sink = NULL;      /* sink(frame, exc, n, up) */
    static PyObject *gp_classify = NULL;  /* classify(filename) -> true: traced */
    static PyObject *gp_timeout = NULL;   /* timeout(): the deadline passed */
    static PyObject *gp_shim = NULL;      /* the trace object: reinstalls gp_trace */
    static Py_ssize_t gp_extra = -1;      /* the code-extra slot: 1 traced, 2 not */
    static long gp_new = 0, gp_max_new = 0;
    static long gp_ups = 0, gp_max_up = 0;
    static PyObject *gp_last = NULL;      /* borrowed, compared by identity only */
    static unsigned long gp_calls = 0;
    static long long gp_deadline_ns = 0;

    static long long gp_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }

    /* 1 when the code's frames are traced (not the standard library, not gyreprof) */
    static int gp_traced(PyFrameObject *frame) {
        PyCodeObject *code = PyFrame_GetCode(frame);  /* strong */
        void *v = NULL;
        int r = 1;
        if (gp_extra >= 0 && _PyCode_GetExtra((PyObject *)code, gp_extra, &v) == 0 && v) {
            Py_DECREF(code);
            return v == (void *)1;
        }
        PyErr_Clear();
        if (gp_classify != NULL) {
            PyObject *res = PyObject_CallOneArg(gp_classify, code->co_filename);
            if (res == NULL) {
                PyErr_Clear();
            } else {
                r = PyObject_IsTrue(res);
                Py_DECREF(res);
                if (r < 0) { PyErr_Clear(); r = 1; }
            }
        }
        if (gp_extra >= 0 && _PyCode_SetExtra((PyObject *)code, gp_extra,
                                              r ? (void *)1 : (void *)2) < 0) {
            PyErr_Clear();
        }
        Py_DECREF(code);
        return r;
    }

    static void gp_call_sink(PyFrameObject *frame, PyObject *exc, long n, int up) {
        PyObject *res = PyObject_CallFunction(gp_sink, "OOli", (PyObject *)frame, exc, n, up);
        if (res == NULL) PyErr_Clear(); else Py_DECREF(res);
    }

    static void gp_fire_timeout(void) {
        PyObject *cb = gp_timeout;
        gp_timeout = NULL;
        if (cb == NULL) return;
        PyObject *res = PyObject_CallNoArgs(cb);
        if (res == NULL) PyErr_Clear(); else Py_DECREF(res);
        Py_DECREF(cb);
    }

    /* An exception is known again by the number it carries in __gyreprof_trail__ (as
       the trail's sys.monitoring callback does): its address alone is often the last one's, freed. */
    static PyObject *gp_mark_name = NULL;

    static int gp_mark(PyObject *exc) {
        PyObject *n = PyLong_FromLong(gp_new);
        int ok = n != NULL && PyObject_SetAttr(exc, gp_mark_name, n) == 0;
        Py_XDECREF(n);
        if (!ok) PyErr_Clear();
        return ok;
    }

    static int gp_marked(PyObject *exc) {
        PyObject *d = ((PyBaseExceptionObject *)exc)->dict;
        if (d == NULL) return 0;
        PyObject *v = PyDict_GetItemWithError(d, gp_mark_name);  /* borrowed */
        if (v == NULL) { PyErr_Clear(); return 0; }
        if (!PyLong_CheckExact(v)) return 0;
        long n = PyLong_AsLong(v);
        if (n == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        return n == gp_new;
    }

    static int gp_skipped(PyObject *exc) {
        PyTypeObject *tp = Py_TYPE(exc);
        return PyType_IsSubtype(tp, (PyTypeObject *)PyExc_StopIteration)
            || PyType_IsSubtype(tp, (PyTypeObject *)PyExc_StopAsyncIteration)
            || PyType_IsSubtype(tp, (PyTypeObject *)PyExc_GeneratorExit);
    }

    static int gp_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
        if (what == PyTrace_CALL) {
            if (!gp_on) {
                PyEval_SetTrace(NULL, NULL);  /* this thread drops it at its next call */
                return 0;
            }
            GP_NO_LINES(frame);
            if (!(++gp_calls & 0xFFF) && gp_deadline_ns && gp_now_ns() > gp_deadline_ns) {
                gp_fire_timeout();
            }
            return 0;
        }
        if (what != PyTrace_EXCEPTION || !gp_on || gp_sink == NULL) return 0;
        if (arg == NULL || !PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) < 3) return 0;
        PyObject *exc = PyTuple_GET_ITEM(arg, 1);
        if (exc == NULL || exc == Py_None || !PyExceptionInstance_Check(exc) || gp_skipped(exc)) {
            return 0;
        }
        if (!gp_traced(frame)) return 0;
        if (exc == gp_last && gp_marked(exc)) {  /* the followed one, in its next frame */
            if (gp_ups >= gp_max_up) return 0;
            gp_ups++;
            gp_call_sink(frame, exc, gp_new, 1);
            return 0;
        }
        if (gp_new > gp_max_new) return 0;  /* the cap was written */
        gp_new++;
        gp_ups = 0;
        gp_last = NULL;
        if (gp_new <= gp_max_new && gp_mark(exc)) gp_last = exc;
        gp_call_sink(frame, exc, gp_new, 0);
        return 0;
    }

    static int gp_install(void) {
        if (!gp_on) return 0;
        PyEval_SetTrace(gp_trace, gp_shim);
        return 1;
    }

    static int gp_pause(void) {
        PyThreadState *ts = PyThreadState_Get();
        if (ts->c_tracefunc != gp_trace) return 0;
        PyEval_SetTrace(NULL, NULL);
        return 1;
    }

    static int gp_active(void) {
        return PyThreadState_Get()->c_tracefunc == gp_trace;
    }

    static int gp_start(PyObject *sink, PyObject *classify, PyObject *timeout,
                        PyObject *shim, double limit_s, long max_new, long max_up) {
        if (gp_mark_name == NULL) {
            gp_mark_name = PyUnicode_InternFromString("__gyreprof_trail__");
            if (gp_mark_name == NULL) { PyErr_Clear(); return 0; }
        }
        if (gp_extra < 0) {
            gp_extra = _PyEval_RequestCodeExtraIndex(NULL);
            if (gp_extra < 0) PyErr_Clear();
        }
        Py_XINCREF(sink); Py_XSETREF(gp_sink, sink);
        Py_XINCREF(classify); Py_XSETREF(gp_classify, classify);
        Py_XINCREF(timeout); Py_XSETREF(gp_timeout, timeout);
        Py_XINCREF(shim); Py_XSETREF(gp_shim, shim);
        gp_max_new = max_new;
        gp_max_up = max_up;
        gp_new = 0; gp_ups = 0; gp_last = NULL; gp_calls = 0;
        gp_deadline_ns = limit_s > 0 ? gp_now_ns() + (long long)(limit_s * 1e9) : 0;
        gp_on = 1;
        return gp_install();
    }

    static void gp_stop(void) {
        gp_on = 0;
        gp_pause();
    }

    static void gp_forked(void) {
        gp_new = 0; gp_ups = 0; gp_last = NULL;
    }
    #else
    static int gp_on = 0;
    static int gp_install(void) { return 0; }
    static int gp_pause(void) { return 0; }
    static int gp_active(void) { return 0; }
    static int gp_start(PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                        double e, long f, long g) { return 0; }
    static void gp_stop(void) {}
    static void gp_forked(void) {}
    #endif
    """
    int GP_HAVE
    int gp_on
    int gp_install()
    int gp_pause()
    int gp_active()
    int gp_start(PyObject *sink, PyObject *classify, PyObject *timeout, PyObject *shim,
                 double limit_s, long max_new, long max_up)
    void gp_stop()
    void gp_forked()


def available() -> bool:
    """True where the C trace function exists (Python 3.10 and 3.11)."""
    return bool(GP_HAVE)


def tracer(frame, event, arg):
    """The trace object: called as a Python trace function (a new thread's, set by
    ``threading.settrace``, or one restored through ``sys.settrace(sys.gettrace())``),
    it puts the C trace function in its place for this thread."""
    gp_install()
    return None


def start(sink, classify, timeout, double limit_s, long max_new, long max_up) -> bool:
    """Install the C trace function in this thread; other threads through :func:`tracer`.

    ``sink(frame, exc, n, up)``: exception ``n`` (1-based) raised in ``frame``
    (``up`` False), or reaching its next traced frame (``up`` True); ``n`` is
    ``max_new + 1`` once, at the cap. ``classify(filename)``: true when that file's
    frames are traced. ``timeout()``: called once when ``limit_s`` passed (checked
    every 4096 calls).
    """
    return bool(gp_start(<PyObject *>sink, <PyObject *>classify, <PyObject *>timeout,
                         <PyObject *>tracer, limit_s, max_new, max_up))


def stop() -> None:
    """Tracing off: this thread now, every other thread at its next call."""
    gp_stop()


def pause() -> bool:
    """Remove the C trace function from this thread; True if it was there."""
    return bool(gp_pause())


def resume() -> bool:
    """Put it back in this thread, unless tracing was stopped; True if it was put."""
    return bool(gp_install())


def active() -> bool:
    """True while this thread runs the C trace function."""
    return bool(gp_active())


def forked() -> None:
    """In a forked child: count the exceptions from zero again."""
    gp_forked()
