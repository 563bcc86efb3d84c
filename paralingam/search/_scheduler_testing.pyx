# cython: language_level=3, boundscheck=False, wraparound=False
"""Profiling hooks of the CUDA scheduler (``tools/profile_launch.py``).

Compiled apart from the scheduler, whose launch and status wait they time
(cimported from ``_scheduler.pxd``): the product module carries none of
them. Reached through :mod:`paralingam._testing`.
"""

import time

from libc.stdint cimport uintptr_t

cimport numpy as cnp

from ._scheduler cimport K_SELECT, Module, PlStatus, launch, wait_status

cnp.import_array()


def empty_launch_and_poll(Module m, dict dev, cnp.ndarray status_host, int repeats):
    """Launch + poll round trips of the scheduler.

    Launches ``select_root`` on a finished search state (it only republishes
    the status) and spins until the status arrives, ``repeats`` times.

    Returns
    -------
    float
        Seconds per launch + poll round trip.
    """
    cdef unsigned long long d_search = dev["search"]
    cdef void *params[1]
    params[0] = &d_search
    cdef PlStatus *st = <PlStatus *><uintptr_t>status_host.ctypes.data
    cdef int seq = st.seq, k
    t0 = time.perf_counter()
    with nogil:
        for k in range(repeats):
            launch(m, K_SELECT, 1, 1, 1024, 1, params)
            seq += 1
            wait_status(st, seq)
    return (time.perf_counter() - t0) / repeats


def launch_only(Module m, dict dev, int repeats):
    """Host cost of one launch of ``select_root`` by the scheduler (seconds).

    The launches are queued without waiting; the stream is synchronised
    (outside the timing) before this returns.
    """
    import pycuda.driver as drv

    cdef unsigned long long d_search = dev["search"]
    cdef void *params[1]
    params[0] = &d_search
    cdef int k
    t0 = time.perf_counter()
    with nogil:
        for k in range(repeats):
            launch(m, K_SELECT, 1, 1, 1024, 1, params)
    elapsed = time.perf_counter() - t0
    drv.Context.synchronize()
    return elapsed / repeats
