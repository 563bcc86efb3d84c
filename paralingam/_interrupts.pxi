# Ctrl-C in the compiled OpenMP regions (docs/design/runtime.rst), shared by
# _cpu, _lasso and _multi_group through `include`, after their extern block
# that declares pl_load_int, pl_store_int and pl_wall_seconds (_runtime.h).
#
# The thread that called in polls Python's signal handlers at most every
# POLL_INTERVAL while its region runs; an exception from a handler is kept and
# ``stop`` set, every thread leaves at its next task, the region ends, and
# raise_stopped raises the exception.

from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.ref cimport PyObject

import threading

cdef extern from "Python.h":
    # Without an exception clause: poll_signals fetches the exception itself.
    int pl_check_signals "PyErr_CheckSignals" ()

cdef double POLL_INTERVAL = 0.01


ctypedef struct Interrupt:
    int stop            # 1 once a signal handler raised: every thread leaves (atomic)
    bint poll           # the calling thread is Python's main thread (it runs the handlers)
    double next_poll    # wall time of its next check
    PyObject *exc_type  # the handler's exception, raised when the region unwinds
    PyObject *exc_value
    PyObject *exc_tb


cdef void interrupt_start(Interrupt *it):
    """Clear ``it`` before a region; only Python's main thread runs handlers."""
    it.stop = 0
    it.poll = threading.current_thread() is threading.main_thread()
    it.next_poll = pl_wall_seconds() + POLL_INTERVAL
    it.exc_type = it.exc_value = it.exc_tb = NULL


cdef void poll_signals(Interrupt *it) noexcept nogil:
    """The calling thread only: run Python's signal handlers every POLL_INTERVAL."""
    cdef double now
    if not it.poll or pl_load_int(&it.stop):
        return
    now = pl_wall_seconds()
    if now < it.next_poll:
        return
    it.next_poll = now + POLL_INTERVAL
    with gil:
        if pl_check_signals() != 0:
            PyErr_Fetch(&it.exc_type, &it.exc_value, &it.exc_tb)
            pl_store_int(&it.stop, 1)


cdef int raise_stopped(Interrupt *it) except -1:
    """Raise the exception that stopped the region (KeyboardInterrupt without one)."""
    if it.exc_type == NULL:
        raise KeyboardInterrupt
    PyErr_Restore(it.exc_type, it.exc_value, it.exc_tb)  # (steals the references)
    it.exc_type = it.exc_value = it.exc_tb = NULL
    return -1
