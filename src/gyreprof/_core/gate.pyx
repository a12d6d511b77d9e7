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

from types import MethodType

from cpython.contextvars cimport PyContextVar_CheckExact, get_value
from cpython.object cimport PyObject_GetAttr
from cpython.tuple cimport PyTuple_GET_SIZE


cdef class Gate:
    """``original`` when the check passes, else ``wrapper`` (see the module doc)."""

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

    cdef bint _passes(self, tuple args):
        if self.var is not None and get_value(self.var) is not None:
            return True
        if self.attr is not None and PyTuple_GET_SIZE(args) > 0:
            try:
                return PyObject_GetAttr(args[0], self.attr) is None
            except AttributeError:
                return True
            except Exception:
                return False
        return False

    def __call__(self, *args, **kwargs):
        if self._passes(args):
            return self.original(*args, **kwargs)
        return self.wrapper(*args, **kwargs)

    def __get__(self, obj, objtype):
        if obj is None:
            return self
        return MethodType(self, obj)
