# cython: language_level=3, embedsignature=True
"""A patched method's pass-through in compiled code: :class:`Gate` calls the original
method straight away when a cheap check says the instrumentation has nothing to do, and
the Python wrapper otherwise.

The layers under a client that owns its request (urllib3's and ``http.client``'s
``request`` / ``getresponse`` under ``requests``' send) only pass through; as Python
wrappers each one was a frame and the call's arguments packed and unpacked again. The
checks (either or both):

- ``var``: a ``contextvars.ContextVar`` whose value is not None (a layer above owns the
  request);
- ``attr``: an attribute name whose value on the instance (the first argument) is None or
  missing (no request of this layer was opened on it).

``Gate(original, wrapper, var=None, attr=None)``: ``wrapper(*args, **kwargs)`` takes the
same arguments as ``original``. It binds as a method (``__get__``) like a function and
keeps metadata (``__wrapped__``, ``__name__``...) in its ``__dict__``. The checks never
raise: an attribute that raises on reading means "call the wrapper".
"""

cimport cython
from cpython.contextvars cimport PyContextVar_CheckExact, get_value
from cpython.object cimport PyObject, PyObject_GetAttr
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_SIZE

from gyreprof._core.vcall cimport gyre_vc_call, gyre_vc_nargs, gyre_vc_t, gyre_vc_type_setup

from types import MethodType


cdef PyObject* _gate_vectorcall(PyObject* callable, PyObject** args, size_t nargsf,
                                PyObject* kwnames) except NULL:
    cdef Gate g = <Gate>callable
    cdef Py_ssize_t n = gyre_vc_nargs(nargsf)
    cdef object first = <object>args[0] if n > 0 else None
    target = g.original if g._passes(n > 0, first) else g.wrapper
    res = gyre_vc_call(target, args, nargsf, kwnames)
    Py_INCREF(res)
    return <PyObject*>res


@cython.final
cdef class Gate:
    """``original`` when the check passes, else ``wrapper`` (see the module doc)."""

    cdef gyre_vc_t vc  # the vectorcall entry (the type's tp_vectorcall_offset)
    cdef readonly object original
    cdef readonly object wrapper
    cdef object var
    cdef object attr
    cdef dict __dict__

    def __cinit__(self, original, wrapper, var=None, attr=None):
        if not callable(original) or not callable(wrapper):
            raise ValueError("Gate needs a callable original and wrapper")
        if var is not None and not PyContextVar_CheckExact(var):
            raise ValueError(f"var must be a contextvars.ContextVar, got {type(var).__name__}")
        if attr is not None and not isinstance(attr, str):
            raise ValueError(f"attr must be an attribute name, got {type(attr).__name__}")
        if var is None and attr is None:
            raise ValueError("Gate needs a check: var, attr or both")
        self.original = original
        self.wrapper = wrapper
        self.var = var
        self.attr = attr
        self.vc = <gyre_vc_t>_gate_vectorcall

    cdef bint _passes(self, bint has_first, object first):
        if self.var is not None and get_value(self.var) is not None:
            return True
        if self.attr is not None and has_first:
            try:
                return PyObject_GetAttr(first, self.attr) is None
            except AttributeError:
                return True
            except Exception:
                return False
        return False

    def __call__(self, *args, **kwargs):
        # the tp_call path (a caller that does not use vectorcall)
        if self._passes(PyTuple_GET_SIZE(args) > 0, args[0] if args else None):
            return self.original(*args, **kwargs)
        return self.wrapper(*args, **kwargs)

    def __get__(self, obj, objtype):
        if obj is None:
            return self
        return MethodType(self, obj)


cdef Py_ssize_t _vc_offset():
    cdef Gate probe = Gate(print, print, attr="_")
    return <Py_ssize_t>(<char*>&probe.vc - <char*><PyObject*>probe)


gyre_vc_type_setup(Gate, _vc_offset())
