# cython: language_level=3, boundscheck=False, wraparound=False
"""Profiling hooks of the CUDA scheduler (``tools/profile_launch.py``, and the
engines' diagnostic sums of ``benchmarks/bench_multi_gpu.py``).

Compiled apart from the scheduler, whose launch and status wait they time
and whose loaded modules they read (cimported from ``_scheduler.pxd``):
the product module carries none of them. Reached through
:mod:`paralingam._testing`.
"""

import time

from libc.stdint cimport uintptr_t

cimport numpy as cnp

from ._scheduler cimport CUmodule, K_SELECT, Module, PlStatus, launch, wait_status

cnp.import_array()

cdef extern from "dlfcn.h" nogil:
    void *dlopen(const char *filename, int flag)
    void *dlsym(void *handle, const char *symbol)
    int RTLD_NOW
    int RTLD_GLOBAL

ctypedef int (*fn_get_global)(unsigned long long *, size_t *, CUmodule, const char *) noexcept nogil


def module_global(Module m, str name not None):
    """Device address and size in bytes of module ``m``'s ``__device__`` variable ``name``.

    For the diagnostic build's sums (``kernels/engine_stats.cu``): the
    module is the one the search loaded. Raises RuntimeError where libcuda
    or the variable cannot be found.
    """
    cdef void *lib = dlopen(b"libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)
    if lib == NULL:
        raise RuntimeError("cannot load libcuda.so.1")
    cdef fn_get_global get_global = <fn_get_global>dlsym(lib, b"cuModuleGetGlobal_v2")
    if get_global == NULL:
        raise RuntimeError("libcuda has no cuModuleGetGlobal_v2")
    cdef unsigned long long ptr = 0
    cdef size_t size = 0
    cdef bytes encoded = name.encode()
    cdef int rc = get_global(&ptr, &size, m.mod, encoded)
    if rc != 0:
        raise RuntimeError(f"cuModuleGetGlobal({name!r}) failed with CUDA error {rc} (is the "
                           "module a diagnostic build with that variable?)")
    return int(ptr), int(size)


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
