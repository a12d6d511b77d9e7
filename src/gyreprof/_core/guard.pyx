# cython: language_level=3, embedsignature=True
"""The env-call guard in C: what gymnasium's patched ``step``/``reset`` and a vector
env's ``step_async``/``step_wait`` do per call, without a Python frame of their own.

Contracts:
- ``Guard(fn, kind, guarded)`` calls ``fn`` with the arguments it was given, unchanged
  (vectorcall: no argument tuple or dict is built), and returns what ``fn`` returns or
  lets what it raises propagate. ``kind`` is the index of the calling thread's timer
  (``KINDS``); ``guarded``: only the outermost of nested guarded calls on a thread is
  timed (the thread's nesting flag ``inside``), as the tests' Python reference of the
  wrappers does.
- What the guard reads of a thread is a :class:`Binding`, this module's own type: the
  nesting flag and the four timers, read as C fields. The thread's state (``configure``'s
  ``thread()``) owns one as its ``guard_binding`` attribute; a state without one is
  read through ``getattr``/``setattr`` (``inside`` and the timers by their names).
- It binds like a function: the type is a method descriptor, so ``obj.step(a)``
  calls it with ``obj`` first and makes no bound method; ``__get__`` gives a bound
  method where an attribute is read without a call.
- The calling thread's Binding comes from a C thread-local slot (a strong
  reference), valid while its generation equals the module's. ``forget()`` (called
  when any ThreadState is created, and in a forked child) bumps the generation: every
  thread then asks the Python side once (``configure``'s ``thread``) and keeps the
  answer. The last calling thread's slot is also kept in a static, keyed by its
  PyThreadState and that state's unique ``id`` (a dead thread's address may be
  reused, its id never is): a call from the same thread reads no thread-local.
- Each call is counted in the thread's sampler Recorder counters named by the
  ``configure``'s ``bind`` callable (one ``timed`` and one ``inner`` counter per
  kind): what ``overhead_share`` prices the wrapper by. A failure to count is
  never an error of the call.
- GIL held throughout; single writer per thread (the thread's own Recorder).
"""

cimport cython
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport int64_t, uint64_t

from gyreprof._core.recorder cimport Recorder

import os
import sys

cdef extern from *:
    """
    #include <Python.h>
    #define GYRE_KINDS 4

    /* what a Guard holds, as C sees it (the Cython class keeps one of these first) */
    typedef struct {
        vectorcallfunc vc;       /* the instance's vectorcall (tp_vectorcall_offset) */
        PyObject *fn;            /* borrowed: the Guard's ``fn`` attribute owns it */
        int kind;                /* timer index (KINDS) */
        int guarded;             /* 1: outermost only (nesting guard) */
        void *fixed;             /* a gyre_slot of its own (calibration), else NULL */
    } gyre_guard_fields;

    /* what a Binding holds, as C sees it (the Cython class keeps one of these first) */
    typedef struct {
        int inside;                      /* the nesting flag: inside a guarded call */
        PyObject *timers[GYRE_KINDS];    /* strong: the timer of each kind (KINDS) */
    } gyre_binding_fields;

    /* one thread's slot: what the guard reads of it (its Binding, or another object read
       by attribute), the Recorder that counts its calls */
    typedef struct {
        uint64_t gen;
        PyObject *state;         /* strong */
        PyObject *rec;           /* strong, or NULL: calls not counted */
        Py_ssize_t slots[2 * GYRE_KINDS];  /* counter slot per (kind, timed/inner), -1 */
        int fast;                /* state is a Binding: its C fields */
    } gyre_slot;

    static uint64_t gyre_gen = 1;
    static __thread gyre_slot gyre_tls_slot;  /* zero-initialised: gen 0 never valid */
    static Py_ssize_t gyre_fields_off = 0;
    static PyTypeObject *gyre_binding_type = NULL;
    static Py_ssize_t gyre_binding_off = 0;
    static PyObject *gyre_name_binding = NULL;  /* "guard_binding" */
    static PyObject *gyre_name_inside = NULL;
    static PyObject *gyre_name_timer[GYRE_KINDS] = {NULL, NULL, NULL, NULL};
    static PyObject *gyre_thread_fn = NULL;   /* () -> the thread's state (a ThreadState) */
    static PyObject *gyre_bind_fn = NULL;     /* (state) -> (Recorder, slots) | None */
    static PyTypeObject *gyre_timer_type = NULL;
    static PyObject *gyre_enter_descr = NULL, *gyre_exit_descr = NULL;
    static PyCFunction gyre_enter_meth = NULL;        /* METH_NOARGS */
    static _PyCFunctionFastWithKeywords gyre_exit_meth = NULL;  /* FASTCALL|KEYWORDS */
    static void (*gyre_count_fn)(PyObject *rec, Py_ssize_t slot) = NULL;

    static inline gyre_guard_fields *gyre_fields(PyObject *self) {
        return (gyre_guard_fields *)((char *)self + gyre_fields_off);
    }

    static inline gyre_binding_fields *gyre_binding(PyObject *b) {
        return (gyre_binding_fields *)((char *)b + gyre_binding_off);
    }

    static void gyre_slot_clear(gyre_slot *s) {
        Py_CLEAR(s->state);
        Py_CLEAR(s->rec);
        for (int i = 0; i < 2 * GYRE_KINDS; i++) s->slots[i] = -1;
        s->fast = 0;
    }

    /* ``s`` reads ``state``'s Binding (its ``guard_binding``) when it has one, else
       ``state`` itself by attribute */
    static void gyre_slot_set_plain(gyre_slot *s, PyObject *state) {
        PyObject *b = NULL;
        if (gyre_binding_type != NULL && Py_TYPE(state) == gyre_binding_type) {
            b = state;
            Py_INCREF(b);
        } else if (gyre_name_binding != NULL) {
            b = PyObject_GetAttr(state, gyre_name_binding);
            if (b == NULL) {
                PyErr_Clear();
            } else if (Py_TYPE(b) != gyre_binding_type) {
                Py_CLEAR(b);
            }
        }
        if (b == NULL) {
            b = state;
            Py_INCREF(b);
        }
        gyre_slot_clear(s);
        s->state = b;
        s->fast = Py_TYPE(b) == gyre_binding_type;
    }

    static void gyre_set_counters(gyre_slot *s, PyObject *rec, Py_ssize_t *slots) {
        Py_XINCREF(rec);
        Py_XSETREF(s->rec, rec);
        for (int i = 0; i < 2 * GYRE_KINDS; i++) s->slots[i] = slots[i];
    }

    /* bind ``s`` to ``state``: its counters through gyre_bind_fn (failures: uncounted) */
    static int gyre_slot_set(gyre_slot *s, PyObject *state) {
        gyre_slot_set_plain(s, state);
        if (gyre_bind_fn != NULL) {
            PyObject *r = PyObject_CallOneArg(gyre_bind_fn, state);
            if (r == NULL) {
                PyErr_Clear();
            } else {
                if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2
                        && PyTuple_Check(PyTuple_GET_ITEM(r, 1))
                        && PyTuple_GET_SIZE(PyTuple_GET_ITEM(r, 1)) == 2 * GYRE_KINDS) {
                    PyObject *sl = PyTuple_GET_ITEM(r, 1);
                    int ok = 1;
                    for (int i = 0; i < 2 * GYRE_KINDS; i++) {
                        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(sl, i));
                        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); ok = 0; break; }
                        s->slots[i] = v;
                    }
                    if (ok) {
                        s->rec = PyTuple_GET_ITEM(r, 0);
                        Py_INCREF(s->rec);
                    } else {
                        for (int i = 0; i < 2 * GYRE_KINDS; i++) s->slots[i] = -1;
                    }
                }
                Py_DECREF(r);
            }
        }
        return 0;
    }

    static gyre_slot *gyre_thread_slot_slow(void) {
        gyre_slot *s = &gyre_tls_slot;
        if (gyre_thread_fn == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "gyreprof guard used before configure()");
            return NULL;
        }
        PyObject *t = PyObject_CallNoArgs(gyre_thread_fn);
        if (t == NULL) return NULL;
        gyre_slot_set(s, t);
        Py_DECREF(t);
        s->gen = gyre_gen;
        return s;
    }

    /* the last thread that called a guard: its PyThreadState (and that state's unique
       id, since a dead thread's PyThreadState address can be reused) and its slot, so a
       call from the same thread again reads no thread-local (``__tls_get_addr`` in a
       shared object); statics are safe under the GIL */
    static PyThreadState *gyre_last_ts = NULL;
    static uint64_t gyre_last_id = 0;
    static gyre_slot *gyre_last_slot = NULL;

    static inline gyre_slot *gyre_thread_slot(void) {
        PyThreadState *ts = PyThreadState_Get();
        gyre_slot *s = gyre_last_slot;
        if (ts == gyre_last_ts && ts->id == gyre_last_id && s->gen == gyre_gen) return s;
        s = &gyre_tls_slot;
        if (s->gen != gyre_gen && gyre_thread_slot_slow() == NULL) return NULL;
        gyre_last_ts = ts;
        gyre_last_id = ts->id;
        gyre_last_slot = s;
        return s;
    }

    /* ``fn(*args)`` through its vectorcall slot directly when it has one (a Python
       function): what PyObject_Vectorcall does, less its result check */
    static inline PyObject *gyre_call(PyObject *fn, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames) {
        vectorcallfunc vc = PyVectorcall_Function(fn);
        if (vc != NULL) return vc(fn, args, nargsf, kwnames);
        return PyObject_Vectorcall(fn, args, nargsf, kwnames);
    }

    static inline void gyre_count(gyre_slot *s, int i) {
        Py_ssize_t slot = s->slots[i];
        if (slot >= 0 && s->rec != NULL) gyre_count_fn(s->rec, slot);
    }

    /* 1 inside, 0 not, -1 error */
    static inline int gyre_inside(PyObject *state, int fast) {
        if (fast) return gyre_binding(state)->inside;
        PyObject *v = PyObject_GetAttr(state, gyre_name_inside);
        if (v == NULL) return -1;
        int r = PyObject_IsTrue(v);
        Py_DECREF(v);
        return r;
    }

    static inline int gyre_set_inside(PyObject *state, int fast, int on) {
        if (fast) {
            gyre_binding(state)->inside = on;
            return 0;
        }
        return PyObject_SetAttr(state, gyre_name_inside, on ? Py_True : Py_False);
    }

    /* the kind's timer of the thread: a new reference, or NULL with an error */
    static inline PyObject *gyre_timer(PyObject *state, int fast, int kind) {
        if (fast) {
            PyObject *v = gyre_binding(state)->timers[kind];
            Py_INCREF(v);
            return v;
        }
        return PyObject_GetAttr(state, gyre_name_timer[kind]);
    }

    static inline int gyre_enter(PyObject *timer) {
        PyObject *r;
        if (gyre_enter_meth != NULL && Py_TYPE(timer) == gyre_timer_type) {
            r = gyre_enter_meth(timer, NULL);
        } else if (Py_TYPE(timer) == gyre_timer_type) {  /* a Cython function: unbound */
            r = PyObject_Vectorcall(gyre_enter_descr, &timer, 1, NULL);
        } else {
            r = PyObject_CallMethod(timer, "__enter__", NULL);
        }
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }

    static inline int gyre_exit(PyObject *timer) {
        PyObject *r;
        PyObject *a[4] = {NULL, Py_None, Py_None, Py_None};
        if (gyre_exit_meth != NULL && Py_TYPE(timer) == gyre_timer_type) {
            r = gyre_exit_meth(timer, a + 1, 3, NULL);
        } else if (Py_TYPE(timer) == gyre_timer_type) {
            a[0] = timer;
            r = PyObject_Vectorcall(gyre_exit_descr, a, 4, NULL);
        } else {
            PyObject *m = PyObject_GetAttrString(timer, "__exit__");
            if (m == NULL) return -1;
            r = PyObject_Vectorcall(m, a + 1, 3, NULL);
            Py_DECREF(m);
        }
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }

    /* the Guard's call: what patch_gym's Python wrappers do, in C */
    static PyObject *gyre_guard_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
        gyre_guard_fields *f = gyre_fields(self);
        gyre_slot *s = f->fixed != NULL ? (gyre_slot *)f->fixed : gyre_thread_slot();
        if (s == NULL) return NULL;
        PyObject *state = s->state;
        int fast = s->fast, kind = f->kind, guarded = f->guarded;
        if (guarded) {
            int in = gyre_inside(state, fast);
            if (in < 0) return NULL;
            if (in) {
                gyre_count(s, 2 * kind + 1);
                return gyre_call(f->fn, args, nargsf, kwnames);
            }
        }
        Py_INCREF(state);  /* the thread's slot may be rebound during the call */
        if (guarded && gyre_set_inside(state, fast, 1) < 0) { Py_DECREF(state); return NULL; }
        PyObject *res = NULL;
        PyObject *timer = gyre_timer(state, fast, kind);
        if (timer != NULL) {
            if (gyre_enter(timer) == 0) {
                gyre_count(s, 2 * kind);
                res = gyre_call(f->fn, args, nargsf, kwnames);
                if (res == NULL) {
                    PyObject *et, *ev, *tb;
                    PyErr_Fetch(&et, &ev, &tb);
                    if (gyre_exit(timer) < 0) PyErr_Clear();  /* the call's error wins */
                    PyErr_Restore(et, ev, tb);
                } else if (gyre_exit(timer) < 0) {
                    Py_CLEAR(res);
                }
            }
            Py_DECREF(timer);
        }
        if (guarded) {  /* ``finally: t.inside = False`` */
            PyObject *et = NULL, *ev = NULL, *tb = NULL;
            int failed = res == NULL;
            if (failed) PyErr_Fetch(&et, &ev, &tb);
            if (gyre_set_inside(state, fast, 0) < 0) {
                if (failed) PyErr_Clear(); else Py_CLEAR(res);
            }
            if (failed) PyErr_Restore(et, ev, tb);
        }
        Py_DECREF(state);
        return res;
    }

    /* the C function behind a method: a method descriptor's, or a Cython function's
       (its object starts with a PyCFunctionObject outside the limited API); NULL: none,
       the method is then called through Python */
    static PyMethodDef *gyre_methoddef(PyObject *f) {
        if (Py_IS_TYPE(f, &PyMethodDescr_Type)) return ((PyMethodDescrObject *)f)->d_method;
    #if !defined(Py_LIMITED_API)
        const char *want = "cython_function_or_method";
        const char *name = Py_TYPE(f)->tp_name;
        size_t n = strlen(name), k = strlen(want);
        if (n >= k && strcmp(name + n - k, want) == 0) return ((PyCFunctionObject *)f)->m_ml;
    #endif
        return NULL;
    }

    static void gyre_setup_timer(PyTypeObject *tp, PyObject *enter, PyObject *exit_) {
        gyre_timer_type = tp;
        Py_INCREF(enter);
        Py_XSETREF(gyre_enter_descr, enter);
        Py_INCREF(exit_);
        Py_XSETREF(gyre_exit_descr, exit_);
        gyre_enter_meth = NULL;
        gyre_exit_meth = NULL;
        PyMethodDef *d = gyre_methoddef(enter);
        if (d != NULL && (d->ml_flags & ~METH_COEXIST) == METH_NOARGS) gyre_enter_meth = d->ml_meth;
        d = gyre_methoddef(exit_);
        if (d != NULL && (d->ml_flags & ~METH_COEXIST) == (METH_FASTCALL | METH_KEYWORDS))
            gyre_exit_meth = (_PyCFunctionFastWithKeywords)(void (*)(void))d->ml_meth;
    }

    static void gyre_setup_type(PyTypeObject *tp, Py_ssize_t fields_off) {
        gyre_fields_off = fields_off;
        tp->tp_vectorcall_offset = fields_off + offsetof(gyre_guard_fields, vc);
        tp->tp_call = PyVectorcall_Call;
        tp->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
        PyType_Modified(tp);
    }

    static void gyre_setup_binding(PyTypeObject *tp, Py_ssize_t off, PyObject *name) {
        gyre_binding_type = tp;
        gyre_binding_off = off;
        Py_INCREF(name);
        Py_XSETREF(gyre_name_binding, name);
    }

    static void gyre_set_names(PyObject *inside, PyObject *timers /* tuple */) {
        Py_INCREF(inside);
        Py_XSETREF(gyre_name_inside, inside);
        for (int i = 0; i < GYRE_KINDS; i++) {
            PyObject *n = PyTuple_GET_ITEM(timers, i);
            Py_INCREF(n);
            Py_XSETREF(gyre_name_timer[i], n);
        }
    }

    static void gyre_set_callables(PyObject *thread, PyObject *bind) {
        Py_XINCREF(thread);
        Py_XSETREF(gyre_thread_fn, thread);
        Py_XINCREF(bind);
        Py_XSETREF(gyre_bind_fn, bind);
    }
    """
    const int GYRE_KINDS
    ctypedef struct gyre_guard_fields:
        void* vc
        PyObject* fn
        int kind
        int guarded
        void* fixed
    ctypedef struct gyre_binding_fields:
        int inside
        PyObject* timers[4]
    ctypedef struct gyre_slot:
        uint64_t gen
        PyObject* state
        PyObject* rec
        int fast
    uint64_t gyre_gen
    void (*gyre_count_fn)(PyObject* rec, Py_ssize_t slot) noexcept
    void* gyre_guard_call
    void gyre_slot_clear(gyre_slot* s) noexcept
    int gyre_slot_set(gyre_slot* s, PyObject* state) noexcept
    void gyre_slot_set_plain(gyre_slot* s, PyObject* state) noexcept
    void gyre_set_counters(gyre_slot* s, PyObject* rec, Py_ssize_t* slots) noexcept
    void gyre_setup_binding(PyTypeObject* tp, Py_ssize_t off, PyObject* name) noexcept
    void gyre_setup_timer(PyTypeObject* tp, PyObject* enter, PyObject* exit_) noexcept
    void gyre_setup_type(PyTypeObject* tp, Py_ssize_t fields_off) noexcept
    void gyre_set_names(PyObject* inside, PyObject* timers) noexcept
    void gyre_set_callables(PyObject* thread, PyObject* bind) noexcept

cdef extern from "Python.h":
    object PyMethod_New(object func, object self)

#: the timer of each kind (a Binding's timers, in this order; by attribute: these names)
KINDS = ("env_step", "env_reset", "step_async", "step_wait")
#: the attribute of a thread's state that holds its Binding
BINDING_ATTR = "guard_binding"


@cython.final
cdef class Binding:
    """What the guard reads of one thread: its nesting flag ``inside`` (set around the
    outermost guarded call) and the timer of each kind (``KINDS``: objects with
    ``__enter__`` / ``__exit__``, PhaseTimers in a run). A thread's state owns one as its
    ``guard_binding`` attribute; the guard reads it as C fields.

    Contract: the timers are fixed at creation; ``inside`` is read and written by the
    guarded calls of the owning thread (GIL held)."""
    cdef gyre_binding_fields b

    def __cinit__(self, env_step, env_reset, step_async, step_wait):
        timers = (env_step, env_reset, step_async, step_wait)
        for i in range(GYRE_KINDS):
            t = timers[i]
            if not (hasattr(t, "__enter__") and hasattr(t, "__exit__")):
                raise TypeError(f"the {KINDS[i]} timer must be a context manager, "
                                f"got {type(t).__name__}")
        self.b.inside = 0
        for i in range(GYRE_KINDS):
            Py_INCREF(timers[i])
            self.b.timers[i] = <PyObject*>timers[i]

    def __dealloc__(self):
        for i in range(GYRE_KINDS):
            Py_XDECREF(self.b.timers[i])
            self.b.timers[i] = NULL

    @property
    def inside(self):
        """Inside a guarded call of this thread (only the outermost one is timed)."""
        return bool(self.b.inside)

    @inside.setter
    def inside(self, value):
        self.b.inside = 1 if value else 0

    def timer(self, str kind):
        """The timer of ``kind`` (one of ``KINDS``)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        return <object>self.b.timers[KINDS.index(kind)]


def _binding_offset():
    cdef Binding b = Binding(_NULL_TIMER, _NULL_TIMER, _NULL_TIMER, _NULL_TIMER)
    return <Py_ssize_t>(<char*>&b.b - <char*><PyObject*>b)


class _NullTimer:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL_TIMER = _NullTimer()
cdef object _binding_name = BINDING_ATTR
gyre_setup_binding(<PyTypeObject*>Binding, _binding_offset(), <PyObject*>_binding_name)


cdef void _count(PyObject* rec, Py_ssize_t slot) noexcept:
    cdef Recorder r = <Recorder>rec
    if 0 <= slot < r.max_counters:
        r.counters[slot] += 1


gyre_count_fn = _count


@cython.final
cdef class CalibrationSlot:
    """A fixed binding for Guards made to measure the guard's cost: ``state`` (a
    ThreadState: its Binding; another object: read by attribute) instead of the calling
    thread's, its calls counted in ``recorder``'s counters ``slots`` (2 per kind: timed,
    inner; -1: not counted)."""
    cdef gyre_slot s

    def __cinit__(self, state, Recorder recorder not None, slots):
        gyre_slot_clear(&self.s)
        gyre_slot_set_plain(&self.s, <PyObject*>state)
        _set_counters(&self.s, recorder, slots)

    def __dealloc__(self):
        gyre_slot_clear(&self.s)


@cython.final
cdef class Guard:
    """``fn`` called through the env-call guard (see the module's contracts)."""
    cdef gyre_guard_fields f
    cdef readonly object fn
    cdef readonly str kind
    cdef readonly bint guarded
    cdef object _own       # a calibration binding (CalibrationSlot) or None
    cdef dict __dict__

    def __cinit__(self, fn, str kind, bint guarded=True, CalibrationSlot slot=None):
        if not callable(fn):
            raise TypeError(f"Guard wraps a callable, got {type(fn).__name__}")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.fn = fn
        self.kind = kind
        self.guarded = guarded
        self._own = slot
        self.f.vc = gyre_guard_call
        self.f.fn = <PyObject*>fn
        self.f.kind = KINDS.index(kind)
        self.f.guarded = guarded
        self.f.fixed = <void*>&slot.s if slot is not None else NULL

    def __get__(self, obj, objtype):
        if obj is None:
            return self
        return PyMethod_New(self, obj)

    def __reduce__(self):
        # by reference where its name finds it (the class attribute it replaced), as the
        # Python wrapper pickles; else (a class pickled by value) rebuilt around ``fn``
        d = getattr(self, "__dict__", None) or {}
        module, qualname = d.get("__module__"), d.get("__qualname__")
        # (never for ``__main__``: a class there is pickled by value, e.g. by cloudpickle
        # for a Ray actor, and the process that loads it has another ``__main__``)
        if isinstance(module, str) and isinstance(qualname, str) and module != "__main__":
            found = sys.modules.get(module)
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if found is self:
                return qualname
        return (_remake, (self.fn, self.kind, self.guarded), d or None)

    def __repr__(self):
        return f"<gyreprof guard {self.kind} of {self.fn!r}>"


def _remake(fn, kind, guarded):
    return Guard(fn, kind, guarded)


cdef _set_counters(gyre_slot* s, Recorder recorder, slots):
    cdef Py_ssize_t sl[8]
    vals = tuple(slots)
    if len(vals) != 2 * GYRE_KINDS:
        raise ValueError(f"slots: {2 * GYRE_KINDS} counter slots, got {len(vals)}")
    for i in range(2 * GYRE_KINDS):
        sl[i] = vals[i]
    gyre_set_counters(s, <PyObject*>recorder, sl)


def _offset_of_fields():
    cdef Guard g = Guard(_noop, "env_step", True)
    return <Py_ssize_t>(<char*>&g.f - <char*><PyObject*>g)


def _noop(*args, **kwargs):
    return None


gyre_setup_type(<PyTypeObject*>Guard, _offset_of_fields())


_state_type = None


def configure(state_type, timer_type, thread, bind=None):
    """Tell the guard where things are: ``state_type`` (the class of the threads' state:
    its instances carry a :class:`Binding` as ``guard_binding``), ``timer_type``
    (PhaseTimer: its ``__enter__``/``__exit__`` called in C), ``thread()`` (the calling
    thread's state, creating it), ``bind(state)`` (``(Recorder, slots)`` to count that
    thread's calls in, or None). Every thread binds afresh afterwards."""
    global _state_type
    if not isinstance(state_type, type) or not isinstance(timer_type, type):
        raise TypeError("configure() takes the ThreadState and PhaseTimer types")
    if not callable(thread) or (bind is not None and not callable(bind)):
        raise TypeError("configure(): thread and bind must be callables")
    _state_type = state_type
    cdef object inside_name = "inside"
    cdef object kinds = KINDS
    gyre_set_names(<PyObject*>inside_name, <PyObject*>kinds)
    enter = timer_type.__dict__.get("__enter__")
    exit_ = timer_type.__dict__.get("__exit__")
    if enter is None or exit_ is None:
        raise TypeError(f"{timer_type.__name__} is not a context manager type")
    global _keep
    _keep = (state_type, timer_type, enter, exit_, thread, bind)  # alive while configured
    gyre_setup_timer(<PyTypeObject*>timer_type, <PyObject*>enter, <PyObject*>exit_)
    cdef PyObject* bind_p = NULL
    if bind is not None:
        bind_p = <PyObject*>bind
    gyre_set_callables(<PyObject*>thread, bind_p)
    forget()


_keep = None


def forget():
    """Every thread's slot is stale from now: each asks ``thread()`` again on its next
    call (a ThreadState was created, or a new session / forked child began)."""
    global gyre_gen
    gyre_gen += 1


def fast_layout():
    """True when the configured state type carries a :class:`Binding` (its instances'
    flag and timers are read as C fields, not by attribute)."""
    return _state_type is not None and hasattr(_state_type, BINDING_ATTR)


os.register_at_fork(after_in_child=forget)



cdef extern from *:
    """
    static int gyre_timer_direct(void) {
        return (gyre_enter_meth != NULL) + 2 * (gyre_exit_meth != NULL);
    }
    static int gyre_thread_reads_binding(void) {
        return gyre_tls_slot.gen == gyre_gen && gyre_tls_slot.fast;
    }
    """
    int gyre_timer_direct() noexcept
    int gyre_thread_reads_binding() noexcept


def timer_direct():
    """How PhaseTimer is entered and left: 3 when both ``__enter__`` and ``__exit__``
    are called as C functions (else through Python: slower, the same result)."""
    return gyre_timer_direct()


def thread_reads_binding():
    """True when the calling thread's slot (bound at its last guarded call, still
    current) reads a :class:`Binding`'s C fields, not its state's attributes."""
    return bool(gyre_thread_reads_binding())
