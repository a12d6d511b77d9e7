# cython: language_level=3
# Vectorcall (PEP 590) for a compiled callable that stands in for a patched method (gate.Gate,
# requestlog.PlainSend): a call's arguments go on to the target as they came, with no tuple
# or dict made, and the type is a method descriptor, so ``obj.method(...)`` calls
# ``callable(obj, ...)`` with no bound method made. A type sets itself up once, with the
# offset of its ``gyre_vc_t`` field: ``gyre_vc_type_setup(Type, offset)``.

from cpython.object cimport PyObject

cdef extern from *:
    """
    typedef PyObject* (*gyre_vc_t)(PyObject*, PyObject**, size_t, PyObject*);
    static void gyre_vc_type_setup(PyTypeObject* t, Py_ssize_t offset) {
        t->tp_vectorcall_offset = offset;
        t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
        PyType_Modified(t);
    }
    #define gyre_vc_nargs(n) PyVectorcall_NARGS(n)
    #define gyre_vc_call(f, a, n, k) PyObject_Vectorcall((f), (PyObject* const*)(a), (n), (k))
    """
    ctypedef void* gyre_vc_t
    void gyre_vc_type_setup(type t, Py_ssize_t offset)
    Py_ssize_t gyre_vc_nargs(size_t nargsf)
    object gyre_vc_call(object f, PyObject** args, size_t nargsf, PyObject* kwnames)
