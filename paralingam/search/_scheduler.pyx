# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Host scheduler of the CUDA backend: the threshold loop in C, no Python inside.

PyCUDA owns the context, the memory and the compilation (its disk cache);
this module loads the compiled cubin into the current context and launches
kernels through the CUDA driver API, which it binds at run time with dlopen:
it builds and imports on machines without CUDA (CI).

The search state lives on the device (``kernels/search_state.h``). Per
iteration the scheduler launches ``prep`` and ``setup`` (entropies, partner
orders), then threshold rounds: one ``worker`` launch each, whose last block
to finish selects the root (``select_root``'s body) and publishes the status
in mapped pinned memory; the host waits for it with a spin on one word (no
driver call). Behind each round it queues the update kernels speculatively:
they run only if the root was decided, so the GPU updates the data while the
host is still polling. While the status says "running" it launches the next
round (the selection has already raised gamma by c on the device); if the
float root was not certified it launches the re-decision kernels and the
updates again (the speculative ones did nothing); then the next iteration's
kernels, without waiting: they queue behind the updates.

NVTX ranges (``iteration k``, ``round k``) are compiled in when the NVTX3
headers were found at build time; they cost nothing unless a profiler such
as Nsight Systems is attached.
"""

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy, memset
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

import threading

import numpy as np
cimport numpy as cnp

from . import _cuda_state

cnp.import_array()

cdef extern from "dlfcn.h" nogil:
    void *dlopen(const char *filename, int flag)
    void *dlsym(void *handle, const char *symbol)
    const char *dlerror()
    int RTLD_NOW
    int RTLD_GLOBAL

cdef extern from *:
    """
    #ifdef PARALINGAM_NVTX
    #include <nvtx3/nvToolsExt.h>
    #define PL_RANGE_PUSH(name) nvtxRangePushA(name)
    #define PL_RANGE_POP() nvtxRangePop()
    #else
    #define PL_RANGE_PUSH(name) ((void)(name))
    #define PL_RANGE_POP() ((void)0)
    #endif
    #include <string.h>
    static inline int pl_load_acquire(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    /* cuLaunchKernelEx's CUlaunchConfig and CUlaunchAttribute (cuda.h, CUDA 12+),
       with the one attribute this module sets */
    typedef struct {
        int id;
        char pad[4];
        union { char bytes[64]; int value; unsigned long long align; } v;
    } pl_launch_attr;
    typedef struct {
        unsigned int gx, gy, gz, bx, by, bz, smem;
        void *stream;
        pl_launch_attr *attrs;
        unsigned int n_attrs;
    } pl_launch_config;
    static inline void pl_attr_programmatic(pl_launch_attr *a)
    {
        memset(a, 0, sizeof *a);
        a->id = 6;  /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
        a->v.value = 1;
    }
    static inline void pl_cpu_relax(void) { __builtin_ia32_pause(); }
    """
    ctypedef struct pl_launch_attr:
        pass
    ctypedef struct pl_launch_config:
        unsigned int gx, gy, gz, bx, by, bz, smem
        void *stream
        pl_launch_attr *attrs
        unsigned int n_attrs
    void pl_attr_programmatic(pl_launch_attr *a) nogil
    void PL_RANGE_PUSH(const char *name) nogil
    void PL_RANGE_POP() nogil
    int pl_load_acquire(const int *p) nogil
    void pl_cpu_relax() nogil

cdef extern from "stdio.h" nogil:
    int snprintf(char *s, size_t n, const char *fmt, ...)

cdef extern from "search_state.h":
    enum:
        PL_OTHER
        PL_IN_VJ
        PL_CANDIDATE
    enum:
        PL_RUNNING
        PL_DECIDED
        PL_REDO
        PL_FINISHED
        PL_DEGENERATE
        PL_FAILED
    ctypedef struct PlControl:
        int r, done, state
    # Opaque here: its fields are filled from _cuda_state.pack (the header's layout).
    ctypedef struct PlSearch:
        pass
    int PL_PREP_ALL_PAIRS
    enum:
        PL_PEER_COPIES
        PL_COPY_THREADS
    ctypedef struct PlCopies:
        unsigned long long dst[PL_PEER_COPIES]
        unsigned long long src[PL_PEER_COPIES]
        long long words[PL_PEER_COPIES]
        long long n

cdef extern from "pl_constants.h":
    int PL_HX64_IN_UPDATE_MIN_N
    int PL_FUSED_COV_MAX_R
    int PL_UPDATE_SPLIT_MIN_N
    int PL_UPDATE_CHUNK
    int PL_REDO_CHUNK_MIN
    int PL_UPDATE_MAX_CHUNKS
    int PL_FUSED_COV_SMEM

ctypedef int CUresult
ctypedef void *CUcontext
ctypedef int CUdevice
ctypedef void *CUstream
ctypedef void *CUevent
ctypedef unsigned long long CUdeviceptr

ctypedef CUresult (*fn_launch)(CUfunction, unsigned int, unsigned int, unsigned int,
                               unsigned int, unsigned int, unsigned int, unsigned int,
                               CUstream, void **, void **) noexcept nogil
ctypedef CUresult (*fn_launch_ex)(const pl_launch_config *, CUfunction, void **,
                                  void **) noexcept nogil
ctypedef CUresult (*fn_module_load)(CUmodule *, const void *) noexcept nogil
ctypedef CUresult (*fn_module_unload)(CUmodule) noexcept nogil
ctypedef CUresult (*fn_get_function)(CUfunction *, CUmodule, const char *) noexcept nogil
ctypedef CUresult (*fn_stream)(CUstream) noexcept nogil
ctypedef CUresult (*fn_htod)(CUdeviceptr, const void *, size_t) noexcept nogil
ctypedef CUresult (*fn_dtoh)(void *, CUdeviceptr, size_t) noexcept nogil
ctypedef CUresult (*fn_memset32)(CUdeviceptr, unsigned int, size_t) noexcept nogil
ctypedef CUresult (*fn_dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream) noexcept nogil
ctypedef CUresult (*fn_error_name)(CUresult, const char **) noexcept nogil
ctypedef CUresult (*fn_occupancy)(int *, CUfunction, int, size_t) noexcept nogil
ctypedef CUresult (*fn_func_set_attribute)(CUfunction, int, int) noexcept nogil
ctypedef CUresult (*fn_event_create)(CUevent *, unsigned int) noexcept nogil
ctypedef CUresult (*fn_event_record)(CUevent, CUstream) noexcept nogil
ctypedef CUresult (*fn_event_elapsed)(float *, CUevent, CUevent) noexcept nogil
ctypedef CUresult (*fn_event_destroy)(CUevent) noexcept nogil
# one search on several devices (search_multi)
ctypedef CUresult (*fn_ctx_set_current)(CUcontext) noexcept nogil
ctypedef CUresult (*fn_ctx_get_current)(CUcontext *) noexcept nogil
ctypedef CUresult (*fn_ctx_enable_peer)(CUcontext, unsigned int) noexcept nogil
ctypedef CUresult (*fn_stream_wait_event)(CUstream, CUevent, unsigned int) noexcept nogil
ctypedef CUresult (*fn_memcpy_peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                          CUstream) noexcept nogil
ctypedef CUresult (*fn_device_get)(CUdevice *, int) noexcept nogil
ctypedef CUresult (*fn_can_access_peer)(int *, CUdevice, CUdevice) noexcept nogil
ctypedef CUresult (*fn_p2p_attribute)(int *, int, CUdevice, CUdevice) noexcept nogil

cdef struct Driver:
    fn_launch launch
    fn_launch_ex launch_ex  # NULL before CUDA 12: no programmatic launches
    fn_module_load module_load
    fn_module_unload module_unload
    fn_get_function get_function
    fn_stream stream_sync
    fn_stream stream_query
    fn_htod htod
    fn_dtoh dtoh
    fn_memset32 memset32
    fn_dtod dtod
    fn_error_name error_name
    fn_occupancy occupancy
    fn_func_set_attribute func_set_attribute
    fn_event_create event_create
    fn_event_record event_record
    fn_event_elapsed event_elapsed
    fn_event_destroy event_destroy
    fn_ctx_set_current ctx_set_current
    fn_ctx_get_current ctx_get_current
    fn_ctx_enable_peer ctx_enable_peer
    fn_stream_wait_event stream_wait_event
    fn_memcpy_peer_async memcpy_peer_async
    fn_device_get device_get
    fn_can_access_peer can_access_peer
    fn_p2p_attribute p2p_attribute

cdef Driver drv
cdef bint drv_loaded = False
DEF CUDA_ERROR_NOT_READY = 600
DEF CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEF MAX_ROW_CACHE = 98304  # bytes of shared memory update_data may take for a row
# Dynamic shared memory every device grants without an opt-in: 48 KB less a
# margin for the kernel's own static shared memory (update_data: 3.3 KB;
# update_data_h64, 4.0 KB, takes no row cache: its rows are too long).
DEF DEFAULT_DYNAMIC_SMEM = 45056
# prep is one block whose phases are short loops over the remaining variables
# between barriers: a block of about r threads passes each barrier sooner than
# 1024 threads of which most have nothing to do (prep_threads; the minimum is
# the measured best, docs/design/gpu_search.rst, "The iteration's other kernels").
DEF PREP_MIN_THREADS = 256
DEF PREP_MAX_THREADS = 1024


class CudaError(RuntimeError):
    """A CUDA driver call or kernel failed; the message names the call or kernel.

    ``code`` is the CUDA driver error code.
    """

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code


cdef void *_sym(void *lib, const char *name) except NULL:
    cdef void *f = dlsym(lib, name)
    if f == NULL:
        raise CudaError(f"libcuda has no symbol {name.decode()}")
    return f


def load_driver():
    """Bind the CUDA driver library (libcuda.so.1) at run time."""
    global drv_loaded
    if drv_loaded:
        return
    cdef void *lib = dlopen(b"libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)
    if lib == NULL:
        raise CudaError(f"cannot load libcuda.so.1: {(<bytes>dlerror()).decode()}")
    drv.launch = <fn_launch>_sym(lib, b"cuLaunchKernel")
    drv.launch_ex = <fn_launch_ex>dlsym(lib, b"cuLaunchKernelEx")
    drv.module_load = <fn_module_load>_sym(lib, b"cuModuleLoadData")
    drv.module_unload = <fn_module_unload>_sym(lib, b"cuModuleUnload")
    drv.get_function = <fn_get_function>_sym(lib, b"cuModuleGetFunction")
    drv.stream_sync = <fn_stream>_sym(lib, b"cuStreamSynchronize")
    drv.stream_query = <fn_stream>_sym(lib, b"cuStreamQuery")
    drv.htod = <fn_htod>_sym(lib, b"cuMemcpyHtoD_v2")
    drv.dtoh = <fn_dtoh>_sym(lib, b"cuMemcpyDtoH_v2")
    drv.memset32 = <fn_memset32>_sym(lib, b"cuMemsetD32_v2")
    drv.dtod = <fn_dtod>_sym(lib, b"cuMemcpyDtoDAsync_v2")
    drv.error_name = <fn_error_name>_sym(lib, b"cuGetErrorName")
    drv.occupancy = <fn_occupancy>_sym(lib, b"cuOccupancyMaxActiveBlocksPerMultiprocessor")
    drv.func_set_attribute = <fn_func_set_attribute>_sym(lib, b"cuFuncSetAttribute")
    drv.event_create = <fn_event_create>_sym(lib, b"cuEventCreate")
    drv.event_record = <fn_event_record>_sym(lib, b"cuEventRecord")
    drv.event_elapsed = <fn_event_elapsed>_sym(lib, b"cuEventElapsedTime")
    drv.event_destroy = <fn_event_destroy>_sym(lib, b"cuEventDestroy_v2")
    drv.ctx_set_current = <fn_ctx_set_current>_sym(lib, b"cuCtxSetCurrent")
    drv.ctx_get_current = <fn_ctx_get_current>_sym(lib, b"cuCtxGetCurrent")
    drv.ctx_enable_peer = <fn_ctx_enable_peer>_sym(lib, b"cuCtxEnablePeerAccess")
    drv.stream_wait_event = <fn_stream_wait_event>_sym(lib, b"cuStreamWaitEvent")
    drv.memcpy_peer_async = <fn_memcpy_peer_async>_sym(lib, b"cuMemcpyPeerAsync")
    drv.device_get = <fn_device_get>_sym(lib, b"cuDeviceGet")
    drv.can_access_peer = <fn_can_access_peer>_sym(lib, b"cuDeviceCanAccessPeer")
    drv.p2p_attribute = <fn_p2p_attribute>_sym(lib, b"cuDeviceGetP2PAttribute")
    drv_loaded = True


cdef str error_text(CUresult rc):
    cdef const char *name = NULL
    drv.error_name(rc, &name)
    return name.decode() if name != NULL else f"CUDA error {rc}"


cdef int check(CUresult rc, const char *what) except -1 with gil:
    if rc != 0:
        raise CudaError(f"{what.decode()}: {error_text(rc)}", rc)
    return 0


# Kernels of kernels/paralingam.cu, in the order of the K_* constants
# (_scheduler.pxd).
cdef const char *KERNEL_NAMES[N_KERNELS]
KERNEL_NAMES[:] = [b"init_search", b"standardise", b"covariance", b"prep", b"setup_f32",
                   b"setup_f64", b"worker_f32", b"worker_f64", b"select_root",
                   b"entropy64", b"pairs64", b"select64", b"update_data",
                   b"update_cov", b"all_pairs_f32", b"all_pairs_f64", b"update_data_h64",
                   b"update_data_fused", b"update_sums", b"update_rows", b"update_rows_h64",
                   b"update_finish", b"copy_to_peers"]


cdef class Module:
    """A cubin loaded into the current CUDA context, with its kernels.

    Parameters
    ----------
    cubin : bytes
        Compiled ``kernels/paralingam.cu``.
    warps : int
        Warps per block of the worker kernel (the WARPS it was compiled with).
    programmatic : bool
        Launch every kernel as a programmatic dependent launch (compute
        capability 9.0 and later): its blocks are scheduled while the
        previous kernel still runs and wait for it on the device
        (``pl_enter`` in the kernels). Ignored if the driver lacks
        ``cuLaunchKernelEx``.
    peers : bool
        The cubin is the ``PL_PEERS`` build (a search over several devices),
        whose kernels from ``K_COPY_TO_PEERS`` on the one-GPU build lacks.
    """
    # (attributes: _scheduler.pxd)

    def __cinit__(self, bytes cubin, int warps, bint programmatic=False, bint peers=False):
        load_driver()
        self.image = cubin
        self.warps = warps
        self.programmatic = programmatic and drv.launch_ex != NULL
        self.mod = NULL
        check(drv.module_load(&self.mod, <const char *>self.image), b"cuModuleLoadData")
        for k in range(N_KERNELS):
            self.fn[k] = NULL
            if k >= N_ONE_GPU_KERNELS and not peers:
                continue
            check(drv.get_function(&self.fn[k], self.mod, KERNEL_NAMES[k]),
                  b"cuModuleGetFunction")
        # The row cache of update_data wants more than the 48 KB of dynamic
        # shared memory any device grants. A device that refuses the opt-in
        # (less shared memory per block than asked, as before Hopper and
        # Ampere) keeps the default: longer rows are then read twice, with
        # the same results.
        cdef unsigned int row_want = MAX_ROW_CACHE
        self.row_smem = row_want
        for k in (K_UPDATE_DATA, K_UPDATE_DATA_H64, K_UPDATE_DATA_FUSED):
            if drv.func_set_attribute(self.fn[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      row_want) != 0:
                self.row_smem = DEFAULT_DYNAMIC_SMEM

    def worker_blocks_per_sm(self, bint use_float):
        """Resident worker blocks per multiprocessor (occupancy)."""
        cdef int blocks = 0
        check(drv.occupancy(&blocks, self.fn[K_WORKER32 if use_float else K_WORKER64],
                            self.warps * 32, 0), b"cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return blocks

    def unload(self):
        """Unload the module (the handle is invalid afterwards)."""
        if self.mod != NULL:
            drv.module_unload(self.mod)
            self.mod = NULL


# Kernels launched since the last status arrived: an asynchronous fault is
# reported against them (it cannot be pinned on one kernel).
cdef char inflight[512]
cdef size_t inflight_len = 0


cdef void note_launch(const char *name) noexcept nogil:
    global inflight_len
    cdef int k
    if inflight_len + 24 >= sizeof(inflight):
        return
    k = snprintf(inflight + inflight_len, sizeof(inflight) - inflight_len,
                 b"%s%s", b", " if inflight_len else b"", name)
    if k > 0:
        inflight_len += k


cdef int launch_fn(CUfunction f, int k, unsigned int gx, unsigned int gy, unsigned int bx,
                   unsigned int by, void **params, unsigned int shared,
                   bint programmatic) except -1 nogil:
    """Kernel ``k`` (function ``f``) on the current context's default stream,
    as a programmatic dependent launch if ``programmatic`` (see Module)."""
    cdef pl_launch_config cfg
    cdef pl_launch_attr attr
    note_launch(KERNEL_NAMES[k])
    if not programmatic:
        return check(drv.launch(f, gx, gy, 1, bx, by, 1, shared, NULL, params, NULL),
                     KERNEL_NAMES[k])
    pl_attr_programmatic(&attr)
    cfg.gx = gx; cfg.gy = gy; cfg.gz = 1
    cfg.bx = bx; cfg.by = by; cfg.bz = 1
    cfg.smem = shared
    cfg.stream = NULL
    cfg.attrs = &attr
    cfg.n_attrs = 1
    return check(drv.launch_ex(&cfg, f, params, NULL), KERNEL_NAMES[k])


cdef int launch(Module m, int k, unsigned int gx, unsigned int gy, unsigned int bx,
                unsigned int by, void **params, unsigned int shared=0) except -1 nogil:
    return launch_fn(m.fn[k], k, gx, gy, bx, by, params, shared, m.programmatic)


cpdef unsigned int row_cache_bytes(int n, unsigned int cap) noexcept nogil:
    """Shared memory of ``update_data``: the row, if it fits in ``cap`` bytes (else 0: it is read twice)."""
    return n * 8 if <unsigned int>n * 8 <= cap else 0


cpdef unsigned int update_cov_rows(int r, bint band) noexcept nogil:
    """Rows of 16 threads in each block of ``update_cov`` over ``r`` positions.

    One row per row of the block's 16 x 16 tile. When a recent covariance
    pass decided pairs on the data (``band``, :func:`recent_band`) and the
    tiles that hold pairs are too few to fill the GPU, 2 or 4 times as many
    rows, whose extra warps share the tile's band pairs (kernels/paralingam.cu,
    update_cov, whose __launch_bounds__ allow 1024 threads a block); on other
    data the extra warps would only cost their launch.
    """
    cdef int tiles = (r + 15) // 16
    cdef int active = tiles * (tiles + 1) // 2
    if not band:
        return 16
    if active <= 64:
        return 64
    if active <= 256:
        return 32
    return 16


cdef inline bint recent_band(const PlStatus *st) noexcept nogil:
    """A covariance pass of the last two iterations listed band pairs (the status's ``band_at``).

    Also true for the first iteration's updates, queued before the first
    status arrives (the zeroed status says iteration 0, band_at 0): one
    launch with the larger blocks, which the kernel handles as any other.
    """
    return st.iteration - st.band_at <= 2


cpdef int update_data_kernel(int n, bint use_float) noexcept nogil:
    """The UpdateData kernel of a search: ``update_data_h64`` where the rows'
    double entropies come from their update (long rows, float comparisons:
    ``PL_HX64_IN_UPDATE_MIN_N``, the kernels' own test ``hx64_in_update``),
    else ``update_data`` (which then keeps its registers for the rows it
    caches)."""
    return K_UPDATE_DATA_H64 if use_float and n >= PL_HX64_IN_UPDATE_MIN_N else K_UPDATE_DATA


cdef inline int prep_threads(int r) noexcept nogil:
    """Threads of ``prep`` for at most ``r`` remaining variables (whole warps)."""
    cdef int t = (r + 31) // 32 * 32
    return min(PREP_MAX_THREADS, max(PREP_MIN_THREADS, t))


cpdef int update_chunks(long long n) noexcept nogil:
    """Chunks of ``PL_UPDATE_CHUNK`` samples that UpdateData splits each row of
    ``n`` samples into (``update_sums``, ``update_rows``, ``update_finish``),
    or 0 (a block per row) below ``PL_UPDATE_SPLIT_MIN_N`` samples and above
    ``PL_UPDATE_MAX_CHUNKS`` chunks (kernels/pl_constants.h)."""
    cdef long long chunks = (n + PL_UPDATE_CHUNK - 1) // PL_UPDATE_CHUNK
    if n < PL_UPDATE_SPLIT_MIN_N or chunks > PL_UPDATE_MAX_CHUNKS:
        return 0
    return <int>chunks


cpdef int redo_chunks(int n_cand, int nw, long long n, long long part_doubles,
                      long long target_blocks) noexcept nogil:
    """Blocks of ``pairs64`` per pair of a re-decision of ``n_cand`` candidates
    against ``nw`` workers of ``n`` samples (its grid's y: ``n_cand`` times this).

    The pairs are split into chunks of at least ``PL_REDO_CHUNK_MIN``
    samples until the grid holds about ``target_blocks`` blocks (the search's
    ``redo_blocks``; 0: one block a pair), as far as their sums (6 doubles a
    chunk) fit the ``part_doubles`` of ``upd_part`` (long rows only) and the
    grid's y allows. The split depends on the re-decision alone, not on the
    GPU or the number of GPUs: their sums are added in one order everywhere.
    """
    cdef long long pairs = <long long>n_cand * nw
    cdef long long chunks
    if pairs <= 0 or target_blocks <= pairs:
        return 1
    chunks = (target_blocks + pairs - 1) // pairs
    chunks = min(chunks, n // PL_REDO_CHUNK_MIN)
    chunks = min(chunks, part_doubles // (6 * pairs))
    chunks = min(chunks, 65535 // n_cand)
    return <int>max(1, chunks)


cdef inline int rows_kernel(int k_update) noexcept nogil:
    """The chunked counterpart of UpdateData kernel ``k_update``: ``update_rows_h64``
    for ``update_data_h64`` (the rows' double entropies too), else ``update_rows``."""
    return K_UPDATE_ROWS_H64 if k_update == K_UPDATE_DATA_H64 else K_UPDATE_ROWS


# One kernel launch of an iteration's updates (update_plan): the kernel, its
# grid, its block and its dynamic shared memory.
cdef struct UpdateLaunch:
    int k
    unsigned int gx, gy, bx, by, shared

# Launches of one update at most: the chunked UpdateData's three, then UpdateCovMat.
DEF UPDATE_PLAN_MAX = 4


cdef inline int put_launch(UpdateLaunch *plan, int i, int k, unsigned int gx, unsigned int gy,
                           unsigned int bx, unsigned int by, unsigned int shared=0) noexcept nogil:
    plan[i].k = k
    plan[i].gx = gx; plan[i].gy = gy
    plan[i].bx = bx; plan[i].by = by
    plan[i].shared = shared
    return i + 1


cdef int update_plan(UpdateLaunch *plan, int k_update, int r, int n, unsigned int row_smem,
                     bint band, bint fused) noexcept nogil:
    """The launches of UpdateData (kernel ``k_update``, with re-standardisation
    after drift) and UpdateCovMat over ``r`` positions, into ``plan``; returns
    their count (at most UPDATE_PLAN_MAX).

    Two kernels; for rows of ``PL_UPDATE_SPLIT_MIN_N`` samples and more,
    UpdateData in chunks (:func:`update_chunks`: three kernels); with
    ``fused`` (one GPU), for at most ``PL_FUSED_COV_MAX_R`` positions one,
    ``update_data_fused``. ``row_smem``: the shared memory a row may take.
    Each kernel does nothing unless the device state is PL_DECIDED, and
    skips positions at or past the device's own r.
    """
    cdef int chunks = update_chunks(n)
    cdef int i = 0
    if chunks:
        i = put_launch(plan, i, K_UPDATE_SUMS, r, chunks, 256, 1)
        i = put_launch(plan, i, rows_kernel(k_update), r, chunks, 256, 1)
        i = put_launch(plan, i, K_UPDATE_FINISH, r, 1, 256, 1)
    elif fused and k_update == K_UPDATE_DATA and r <= PL_FUSED_COV_MAX_R:  # (pl_constants.h)
        return put_launch(plan, i, K_UPDATE_DATA_FUSED, r, 1, 256, 1,
                          max(row_cache_bytes(n, row_smem), <unsigned int>PL_FUSED_COV_SMEM))
    else:
        i = put_launch(plan, i, k_update, r, 1, 256, 1, row_cache_bytes(n, row_smem))
    return put_launch(plan, i, K_UPDATE_COV, (r + 15) // 16, (r + 15) // 16, 16,
                      update_cov_rows(r, band))


def update_launches(int k_update, int r, int n, unsigned int row_smem, bint band, bint fused):
    """:func:`update_plan` for tests: a list of (kernel name, grid x, grid y,
    block x, block y, shared bytes)."""
    cdef UpdateLaunch plan[UPDATE_PLAN_MAX]
    cdef int count = update_plan(plan, k_update, r, n, row_smem, band, fused)
    return [((<bytes>KERNEL_NAMES[plan[i].k]).decode(), plan[i].gx, plan[i].gy, plan[i].bx,
             plan[i].by, plan[i].shared) for i in range(count)]


cdef int launch_updates(Module m, int k_update, int r, int n, void **params,
                        bint band) except -1 nogil:
    """The update's launches (:func:`update_plan`, fused where it applies) on one GPU."""
    cdef UpdateLaunch plan[UPDATE_PLAN_MAX]
    cdef int i, count = update_plan(plan, k_update, r, n, m.row_smem, band, True)
    for i in range(count):
        launch(m, plan[i].k, plan[i].gx, plan[i].gy, plan[i].bx, plan[i].by, params,
               plan[i].shared)
    return 0


cdef int fail_in_flight(CUresult rc) except -1 with gil:
    names = (<bytes>inflight[:inflight_len]).decode()
    raise CudaError(f"CUDA error in one of the kernels [{names}]: {error_text(rc)}", rc)


# Ctrl-C (docs/design/runtime.rst): while it waits for a status, the host
# runs Python's signal handlers at most this often (from Python's main thread
# only, the one that can run them). An exception from a handler ends the wait;
# search() then lets the queued kernels finish before raising it.
cdef double POLL_INTERVAL = 0.01
# search(progress=...) is called at most this often: the GIL and a redraw
# per iteration would cost more than the small iterations themselves.
cdef double PROGRESS_INTERVAL = 0.1


cdef inline double now_seconds() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <double>t.tv_sec + 1e-9 * <double>t.tv_nsec


cdef int check_signals() except -1 with gil:
    PyErr_CheckSignals()
    return 0


cdef int wait_status(PlStatus *st, int seq, bint poll=False) except -1 nogil:
    """Spin until the device publishes status number ``seq``.

    Every few thousand spins the stream is queried: a kernel fault surfaces
    there (named after the kernels in flight), and an idle stream with no new
    status would be a scheduler bug, not something to wait for. With
    ``poll``, Python's signal handlers run every POLL_INTERVAL, and an
    exception they raise (KeyboardInterrupt) is raised from here.
    """
    global inflight_len
    cdef long spins = 0
    cdef CUresult rc
    cdef double next_poll = now_seconds() + POLL_INTERVAL if poll else 0.0
    while pl_load_acquire(&st.seq) < seq:
        spins += 1
        if spins & 4095 == 0:
            rc = drv.stream_query(NULL)
            if rc == 0:
                if pl_load_acquire(&st.seq) >= seq:
                    break
                with gil:
                    raise CudaError(f"the stream went idle without publishing status {seq} "
                                    f"(have {st.seq}) after [{(<bytes>inflight[:inflight_len]).decode()}]")
            elif rc != CUDA_ERROR_NOT_READY:
                fail_in_flight(rc)
            if poll and now_seconds() >= next_poll:
                next_poll = now_seconds() + POLL_INTERVAL
                check_signals()
        pl_cpu_relax()
    inflight_len = 0
    return 0


STATE_RUNNING = PL_RUNNING
STATE_DECIDED = PL_DECIDED
STATE_REDO = PL_REDO
STATE_FINISHED = PL_FINISHED
STATE_DEGENERATE = PL_DEGENERATE
STATE_FAILED = PL_FAILED


def layout_size():
    """sizeof(PlSearch) as this extension sees it (checked against the kernels)."""
    return sizeof(PlSearch)


cdef fill_search(PlSearch *h, dict dev, dict cfg):
    """``*h``: buffers from ``dev``, settings from ``cfg``, laid out by ``_cuda_state.pack``."""
    cdef bytes state = _cuda_state.pack(dev, cfg)
    if len(state) != sizeof(PlSearch):
        raise RuntimeError(f"_cuda_state lays out {len(state)} bytes of PlSearch; the compiled "
                           f"scheduler's struct has {sizeof(PlSearch)}: rebuild the extension")
    memcpy(h, <const char *>state, sizeof(PlSearch))


# An iteration whose pairs hold at most cfg["all_pairs_work"] sample pairs
# compares every pair in one round (see _cuda.ALL_PAIRS_WORK); the all-pairs
# kernels count pairs in 32 bits, hence the cap.
cdef long long MAX_ALL_PAIRS = (1LL << 31) - 1


cdef inline bint all_pairs_iteration(int r_now, int n, double all_pairs_work,
                                     long long *n_pairs) noexcept nogil:
    """Whether an iteration over at most ``r_now`` variables compares every
    pair in one round; ``n_pairs``: its pairs."""
    n_pairs[0] = <long long>r_now * (r_now - 1) // 2
    return <double>n_pairs[0] * n <= all_pairs_work and n_pairs[0] <= MAX_ALL_PAIRS


cdef inline int all_pairs_grid(int grid, long long n_pairs, int engines_per_block) noexcept nogil:
    """An all-pairs round's worker blocks: at most ``grid``, and no more than
    engines for its ``n_pairs`` pairs (at least one)."""
    return <int>min(<long long>grid,
                    max(<long long>1, (n_pairs + engines_per_block - 1) // engines_per_block))


cdef int prior_statuses(CUdeviceptr d_ctl, CUdeviceptr d_alive, CUdeviceptr d_pk, candidates,
                        int[::1] alive_host, signed char[::1] pk_host) except -1 nogil:
    """Prior knowledge, between the two halves of ``prep`` (the first queued):
    the remaining set from the device, ``candidates`` of it, their statuses
    to ``d_pk``; nothing once the search is over."""
    cdef PlControl ctl
    check(drv.stream_sync(NULL), b"prep")
    check(drv.dtoh(&ctl, d_ctl, sizeof(PlControl)), b"cuMemcpyDtoH(control)")
    # (done is still set by the previous iteration's root)
    if ctl.state != PL_FINISHED and ctl.state != PL_DEGENERATE and ctl.r > 1:
        check(drv.dtoh(&alive_host[0], d_alive, ctl.r * sizeof(int)), b"cuMemcpyDtoH(alive)")
        ask_candidates(candidates, alive_host, pk_host, ctl.r)
        check(drv.htod(d_pk, &pk_host[0], ctl.r), b"cuMemcpyHtoD(prior knowledge)")
    return 0


cdef int ask_candidates(candidates, int[::1] alive_host, signed char[::1] pk_host,
                        int r) except -1 with gil:
    """pk_host[:r]: the statuses ``candidates`` gives the remaining variables alive_host[:r]."""
    is_cand, in_vj = candidates(np.asarray(alive_host)[:r].copy())
    np.asarray(pk_host)[:r] = np.where(is_cand, PL_CANDIDATE, np.where(in_vj, PL_IN_VJ, PL_OTHER))
    return 0


cdef int all_pairs_undecided(int it) except -1 with gil:
    raise CudaError(f"the all-pairs round of iteration {it} left the root undecided; "
                    "please report this")


cdef int too_many_iterations(int p) except -1 with gil:
    raise CudaError(f"the search did not finish within {p} iterations")


cdef dict final_status(PlStatus *st, int state, int rounds, all_pairs_of, chunks_of):
    """The statistics both searches return from the last status (and the
    loop's own: all-pairs iterations, re-decided pairs' chunks)."""
    return {
        "state": int(state),
        "detail": [int(st.detail[0]), int(st.detail[1]), int(st.detail[2])],
        "iterations": int(st.iteration),
        "r": int(st.r),
        "n_rederived": int(st.n_rederived),
        "n_order": int(st.n_order),
        "rounds": rounds,
        "all_pairs": all_pairs_of,
        "redo_chunks": chunks_of,
    }


cdef struct LoopSettings:
    # what both searches' loops read of their settings, module and callbacks
    int p, n
    bint use_float
    int k_setup, k_worker, k_all_pairs  # the kernels of the precision
    int k_update_data  # update_data, or update_data_h64 (the rows' double entropies too)
    double all_pairs_work  # the bound of an all-pairs iteration (all_pairs_iteration)
    long long redo_blocks  # pairs64's target grid (redo_chunks)
    long long part_doubles  # doubles of upd_part (redo_chunks)
    int engines_per_block  # pair engines per worker block
    int wthreads  # threads per worker block
    int tiles  # 16 x 16 tiles per side of the correlation matrix
    bint use_prior  # candidates given
    bint poll  # Python's main thread: it runs the signal handlers (Ctrl-C) while it waits
    bint report  # progress given


cdef int loop_settings(LoopSettings *s, dict cfg, Module m, candidates, progress) except -1:
    """``*s`` from the search's settings ``cfg``, its (device 0's) module and callbacks."""
    s.p = cfg["p"]
    s.n = cfg["n"]
    s.use_float = cfg["use_float"]
    s.k_setup = K_SETUP32 if s.use_float else K_SETUP64
    s.k_worker = K_WORKER32 if s.use_float else K_WORKER64
    s.k_all_pairs = K_ALL_PAIRS32 if s.use_float else K_ALL_PAIRS64
    s.k_update_data = update_data_kernel(s.n, s.use_float)
    s.all_pairs_work = cfg.get("all_pairs_work", 0.0)
    s.redo_blocks = cfg.get("redo_blocks", 0)
    s.part_doubles = s.p * _cuda_state.chunk_parts(cfg.get("ld", s.n))
    s.engines_per_block = m.warps // cfg.get("group_warps", 1)
    s.wthreads = m.warps * 32
    s.tiles = (s.p + 15) // 16
    s.use_prior = candidates is not None
    s.poll = threading.current_thread() is threading.main_thread()
    s.report = progress is not None
    return 0


cdef int report_progress(const LoopSettings *s, progress, const PlStatus *st,
                         double *next_report) except -1 nogil:
    """``progress(n_ordered)`` from the last status, unless the last call was
    less than PROGRESS_INTERVAL ago (``*next_report``: when the next may come)."""
    cdef int n_ordered
    if s.report and now_seconds() >= next_report[0]:
        next_report[0] = now_seconds() + PROGRESS_INTERVAL
        n_ordered = st.n_order
        with gil:
            progress(n_ordered)
    return 0


# Phases timed with CUDA events when profiling; several GPUs add their
# streams' waits for another device's event, device 0's selections and
# copies to the replicas, and the time a stream is idle (its work done
# before the host queued the next).
PHASES = ("prepare", "rounds", "redo", "update")
MULTI_PHASES = PHASES + ("wait", "select", "copy", "idle")
cdef enum:  # indices into MULTI_PHASES (PHASES: the first four)
    PH_PREPARE = 0
    PH_ROUNDS = 1
    PH_REDO = 2
    PH_UPDATE = 3
    PH_WAIT = 4
    PH_SELECT = 5
    PH_COPY = 6
    PH_IDLE = 7


cdef int mark_phase(bint profile, cnp.uintp_t *ev, signed char *ph, int *n_events,
                    int max_events, signed char phase) except -1 nogil:
    """Profiling: record the next CUDA event (created in the current context at
    its first use; ``ev`` starts zeroed), where ``phase`` begins (else nothing)."""
    cdef CUevent e
    if profile and n_events[0] < max_events:
        if ev[n_events[0]] == 0:
            check(drv.event_create(&e, 0), b"cuEventCreate")
            ev[n_events[0]] = <cnp.uintp_t>e
        ph[n_events[0]] = phase
        check(drv.event_record(<CUevent>ev[n_events[0]], NULL), b"cuEventRecord")
        n_events[0] += 1
    return 0


cdef void destroy_events(cnp.uintp_t *ev, size_t count) noexcept nogil:
    """Profiling: destroy the events :func:`mark_phase` created among ``ev[:count]``
    (their context current)."""
    cdef size_t k
    for k in range(count):
        if ev[k] != 0:
            drv.event_destroy(<CUevent>ev[k])


cdef tuple phase_times(cnp.uintp_t[::1] ev, signed char[::1] ph, int n_events,
                       tuple names=PHASES):
    """Profiling: :func:`sum_phases` of the recorded events' intervals."""
    cdef float ms
    cdef int k
    seconds = np.zeros(max(n_events - 1, 0))
    for k in range(n_events - 1):
        check(drv.event_elapsed(&ms, <CUevent>ev[k], <CUevent>ev[k + 1]), b"cuEventElapsedTime")
        seconds[k] = ms * 1e-3
    return sum_phases(seconds, np.asarray(ph[:max(n_events - 1, 0)]), names)


def sum_phases(seconds, phases, tuple names=PHASES):
    """Seconds per phase (dict over ``names``) and of each iteration's rounds
    (list), from the intervals between profiling events: interval ``k``
    lasts ``seconds[k]`` and belongs to phase ``phases[k]`` (an index into
    ``names``). An iteration starts at the first prepare after rounds (or
    the first prepare of all): on several devices an iteration's prepare
    is split by device 0's copies and another device's wait."""
    gpu_time = {name: 0.0 for name in names}
    gpu_rounds = []
    rounds_seen = True
    for secs, phase in zip(seconds, phases):
        gpu_time[names[phase]] += secs
        if phase == PH_PREPARE and rounds_seen:
            gpu_rounds.append(0.0)
            rounds_seen = False
        elif phase == PH_ROUNDS and gpu_rounds:
            rounds_seen = True
            gpu_rounds[len(gpu_rounds) - 1] += secs
    return gpu_time, gpu_rounds


def search(Module m, dict dev, dict cfg, cnp.ndarray status_host, *, int worker_blocks,
           bint profile=False, candidates=None, progress=None):
    """Run a causal-order search; the data are already on the device (X64).

    Parameters
    ----------
    m : Module
    dev : dict of int
        Device addresses of every buffer of ``PlSearch`` (see ``_cuda.py``),
        plus ``"search"``: where to upload the filled ``PlSearch``.
    cfg : dict
        Sizes (``p``, ``n``, ``ld``) and parameters (``gamma0``, ``c``,
        tolerances, ``moment_err``, ``use_float``, ``stop_on_degenerate``).
    status_host : ndarray of int32
        Mapped pinned memory holding the ``PlStatus`` (its device address is
        ``dev["status_dev"]``).
    worker_blocks : int
        Grid of the persistent worker kernel.
    profile : bool
        Time the phases with CUDA events (``stats["gpu_time"]``).
    candidates : callable, optional
        Prior knowledge (``cfg["use_prior"]``): ``candidates(alive)`` gives
        two bool arrays over the remaining variables ``alive`` (ascending):
        candidates for the root and members of V_j. Called once per
        iteration, between the two halves of ``prep``.
    progress : callable, optional
        ``progress(n_ordered)`` (variables ordered so far) after an
        iteration's root is decided, at most every PROGRESS_INTERVAL.

    Returns
    -------
    dict
        ``state`` and ``detail`` (the final status), ``rounds`` (total),
        ``gpu_time`` (seconds per phase when profiling).
    """
    load_driver()
    cdef PlSearch h
    fill_search(&h, dev, cfg)
    cdef CUdeviceptr d_search = dev["search"]
    cdef PlStatus *st = <PlStatus *><uintptr_t>status_host.ctypes.data
    cdef LoopSettings loop
    loop_settings(&loop, cfg, m, candidates, progress)
    cdef bint all_pairs = False
    all_pairs_of = np.zeros(loop.p + 2, dtype=np.int8)  # per iteration, for the stats
    cdef signed char[::1] all_pairs_v = all_pairs_of
    chunks_of = np.zeros(loop.p + 2, dtype=np.int32)  # per iteration: redo_chunks, 0 without
    cdef int[::1] chunks_v = chunks_of
    cdef long long n_pairs
    cdef int r_now
    cdef int grid_all_pairs
    cdef const char *ALL_PAIRS_NOTE = b", all pairs"
    cdef const char *NO_NOTE = b""
    cdef int grid = worker_blocks
    cdef int r_host = loop.p, nw = loop.p, n_cand, state = PL_RUNNING, seq = 0, it = 0, rounds = 0
    cdef int chunks = 1  # pairs64's blocks per pair in a re-decision (redo_chunks)
    cdef char label[64]
    cdef void *params[1]
    params[0] = &d_search
    cdef int prep_mode = 3
    cdef void *prep_params[2]
    prep_params[0] = &d_search
    prep_params[1] = &prep_mode
    cdef CUdeviceptr d_ctl = dev["ctl"], d_alive = dev["alive"], d_pk = dev["pk_status"]
    cdef CUdeviceptr d_cov = dev["cov"], d_corr0 = dev["corr0"]
    cdef int[::1] alive_host = np.zeros(max(loop.p, 1), dtype=np.int32)
    cdef signed char[::1] pk_host = np.zeros(max(loop.p, 1), dtype=np.int8)
    # profiling: one event per phase boundary, elapsed summed per phase
    # (two events per round, three more per iteration, a few rounds at most)
    cdef int n_events = 0, max_events = 12 * (loop.p + 2) if profile else 0
    events = np.zeros(max(max_events, 1), dtype=np.uintp)
    phase_of = np.zeros(max(max_events, 1), dtype=np.int8)
    cdef cnp.uintp_t[::1] ev = events
    cdef signed char[::1] ph = phase_of
    cdef CUresult rc_end
    cdef double next_report = 0.0
    gpu_rounds = None
    global inflight_len
    inflight_len = 0

    memset(st, 0, sizeof(PlStatus))
    try:
        with nogil:
            check(drv.htod(d_search, &h, sizeof(PlSearch)), b"cuMemcpyHtoD(search state)")
            launch(m, K_INIT, (loop.p + 255) // 256, 1, 256, 1, params)
            launch(m, K_STANDARDISE, loop.p, 1, 256, 1, params)
            launch(m, K_COVARIANCE, loop.tiles, loop.tiles, 16, 16, params)
            # keep the first correlation matrix: the updates overwrite cov
            check(drv.dtod(d_corr0, d_cov, <size_t>loop.p * loop.p * sizeof(double), NULL),
                  b"cuMemcpyDtoDAsync(correlation)")
            while True:
                # this iteration's r is at most r_host (the last status's r)
                # less the root that status decided
                r_now = r_host - 1 if it > 0 else r_host
                all_pairs = all_pairs_iteration(r_now, loop.n, loop.all_pairs_work, &n_pairs)
                all_pairs_v[it] = all_pairs
                grid_all_pairs = all_pairs_grid(grid, n_pairs, loop.engines_per_block)
                snprintf(label, sizeof(label), b"iteration %d (r<=%d%s)", it, r_now,
                         ALL_PAIRS_NOTE if all_pairs else NO_NOTE)
                PL_RANGE_PUSH(label)
                mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_PREPARE)
                if loop.use_prior:
                    # order and remaining set, then the host's prior-knowledge
                    # statuses of the remaining variables, then the workers
                    prep_mode = 1
                    launch(m, K_PREP, 1, 1, prep_threads(r_host), 1, prep_params)
                    prior_statuses(d_ctl, d_alive, d_pk, candidates, alive_host, pk_host)
                    prep_mode = 2 | (PL_PREP_ALL_PAIRS if all_pairs else 0)
                    launch(m, K_PREP, 1, 1, prep_threads(r_host), 1, prep_params)
                else:
                    prep_mode = 3 | (PL_PREP_ALL_PAIRS if all_pairs else 0)
                    launch(m, K_PREP, 1, 1, prep_threads(r_host), 1, prep_params)
                # a block per worker: entropies (double) and partner orders; an
                # all-pairs round walks no partner order, and prep took the
                # float entropies
                if not (all_pairs and loop.use_float):
                    launch(m, loop.k_setup, r_host, 1, 512, 1, params)
                mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_ROUNDS)
                while True:
                    snprintf(label, sizeof(label), b"round %d", rounds)
                    PL_RANGE_PUSH(label)
                    # (the worker kernel's last block selects the root)
                    if all_pairs:
                        launch(m, loop.k_all_pairs, grid_all_pairs, 1, loop.wthreads, 1, params)
                    else:
                        launch(m, loop.k_worker, grid, 1, loop.wthreads, 1, params)
                    mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_UPDATE)
                    # Speculative: the update kernels run only if the round
                    # decided the root (they check the state on the device), so
                    # the GPU updates the data while the host is still polling
                    # the status. r_host (the last status's r) bounds this
                    # iteration's r, and the kernels skip positions past it.
                    launch_updates(m, loop.k_update_data, r_host, loop.n, params, recent_band(st))
                    seq += 1
                    rounds += 1
                    wait_status(st, seq, loop.poll)
                    PL_RANGE_POP()
                    state = st.state
                    if state != PL_RUNNING:
                        break
                    if all_pairs:  # every candidate finished: select must have decided
                        all_pairs_undecided(it)
                    mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_ROUNDS)
                r_host = st.r
                nw = st.nw
                report_progress(&loop, progress, st, &next_report)
                if state == PL_FINISHED or state == PL_DEGENERATE or state == PL_FAILED:
                    PL_RANGE_POP()
                    break
                if state == PL_REDO:
                    # the speculative updates did nothing (the root was not
                    # decided): re-decide in double, then update for real
                    mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_REDO)
                    n_cand = st.n_cand
                    chunks = redo_chunks(n_cand, nw, loop.n, loop.part_doubles, loop.redo_blocks)
                    chunks_v[it] = chunks
                    launch(m, K_ENTROPY64, nw, 1, 256, 1, params)
                    launch(m, K_PAIRS64, nw, n_cand * chunks, 256, 1, params)
                    launch(m, K_SELECT64, 1, 1, 1024, 1, params)
                    mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_UPDATE)
                    launch_updates(m, loop.k_update_data, r_host, loop.n, params, recent_band(st))
                # (PL_DECIDED: the speculative updates are already queued)
                PL_RANGE_POP()
                it += 1
                if it > loop.p + 1:
                    too_many_iterations(loop.p)
            mark_phase(profile, &ev[0], &ph[0], &n_events, max_events, PH_PREPARE)
            rc_end = drv.stream_sync(NULL)
            if rc_end != 0:
                fail_in_flight(rc_end)
        gpu_time, gpu_rounds = phase_times(ev, ph, n_events)
    except BaseException as exc:
        if not isinstance(exc, CudaError):
            # Interrupted (KeyboardInterrupt from wait_status) or a callback
            # failed: this search's kernels may still be queued. Let them
            # finish (at most a round and its updates), so that the context,
            # the cached workspaces and the next search start clean; the next
            # search re-initialises the whole device state.
            with nogil:
                rc_end = drv.stream_sync(NULL)
            if rc_end != 0:
                fail_in_flight(rc_end)  # a fault outranks the interrupt
            inflight_len = 0
        raise
    finally:
        if profile:
            destroy_events(&ev[0], max_events)
    stats = final_status(st, state, rounds, all_pairs_of, chunks_of)
    stats["gpu_time"] = gpu_time if profile else None
    stats["gpu_rounds"] = gpu_rounds if profile else None
    return stats


# ---------------------------------------------------------------- one search on several GPUs

DEF MAX_DEVICES = 64
DEF CU_EVENT_DISABLE_TIMING = 2
DEF CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
DEF CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 2
DEF CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 3


def peer_support(int a, int b):
    """Whether kernels on device ``a`` can reach device ``b``'s memory: (access, native atomics).

    ``a`` and ``b`` are device ordinals. Native atomics: an atomic on the
    peer's memory is one atomic operation of the link (NVLink), which the
    multi-device search's score messages and pair claims need.
    """
    load_driver()
    cdef CUdevice da, db
    cdef int can = 0, access = 0, atomics = 0
    check(drv.device_get(&da, a), b"cuDeviceGet")
    check(drv.device_get(&db, b), b"cuDeviceGet")
    check(drv.can_access_peer(&can, da, db), b"cuDeviceCanAccessPeer")
    check(drv.p2p_attribute(&access, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, da, db),
          b"cuDeviceGetP2PAttribute")
    check(drv.p2p_attribute(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, da, db),
          b"cuDeviceGetP2PAttribute")
    return bool(can and access), bool(atomics)


def enable_peer_access(uintptr_t ctx, uintptr_t peer):
    """Let the kernels of context ``ctx`` access the memory of context ``peer`` (idempotent)."""
    load_driver()
    cdef CUcontext prev = NULL
    cdef CUresult rc
    check(drv.ctx_get_current(&prev), b"cuCtxGetCurrent")
    check(drv.ctx_set_current(<CUcontext>ctx), b"cuCtxSetCurrent")
    rc = drv.ctx_enable_peer(<CUcontext>peer, 0)
    drv.ctx_set_current(prev)
    if rc != 0 and rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
        raise CudaError(f"cuCtxEnablePeerAccess: {error_text(rc)}", rc)


cdef int set_ctx(CUcontext c) except -1 nogil:
    return check(drv.ctx_set_current(c), b"cuCtxSetCurrent")


# Whether search_multi's launches are programmatic (its modules' setting,
# the same for every device; set at the start of each search).
cdef bint multi_programmatic = False


cdef int launch_on(CUfunction f, int k, unsigned int gx, unsigned int gy, unsigned int bx,
                   unsigned int by, void **params, unsigned int shared=0) except -1 nogil:
    """A launch of search_multi in the current context. A programmatic
    launch overlaps only the kernel before it in the stream; a kernel
    queued behind another device's event waits for that event as any."""
    return launch_fn(f, k, gx, gy, bx, by, params, shared, multi_programmatic)


cdef int queue_copy(CUfunction f, PlCopies *jobs, CUdeviceptr dst, CUdeviceptr src,
                    size_t nbytes) except -1 nogil:
    """Adds a copy of ``nbytes`` (a multiple of 4) to ``jobs``, launching
    device 0's ``copy_to_peers`` (``f``; device 0's context current) when
    they are full. :func:`flush_copies` launches the rest."""
    if nbytes % 4:
        with gil:
            raise ValueError(f"copy_to_peers copies 4-byte words, not {nbytes} bytes")
    if nbytes == 0:
        return 0
    if jobs.n == PL_PEER_COPIES:
        flush_copies(f, jobs)
    jobs.dst[jobs.n] = dst
    jobs.src[jobs.n] = src
    jobs.words[jobs.n] = nbytes // 4
    jobs.n += 1
    return 0


cdef int send_to_replica(bint copy_kernel, CUfunction f, PlCopies *jobs, CUcontext *ctx, int d,
                         CUdeviceptr dst, CUdeviceptr src, size_t nbytes,
                         const char *what) except -1 nogil:
    """Device 0's ``nbytes`` at ``src`` to ``dst`` on device ``d`` (device 0's
    context current): queued for its ``copy_to_peers`` (``f``;
    :func:`flush_copies` launches what is queued), or unless ``copy_kernel``
    by the copy engine (``what`` names the call in an error)."""
    if copy_kernel:
        return queue_copy(f, jobs, dst, src, nbytes)
    if nbytes:
        check(drv.memcpy_peer_async(dst, ctx[d], src, ctx[0], nbytes, NULL), what)
    return 0


# Blocks per copy job at most (each thread then stores several words of a long job).
DEF COPY_BLOCKS_MAX = 64


cdef int flush_copies(CUfunction f, PlCopies *jobs) except -1 nogil:
    """One ``copy_to_peers`` launch for the queued ``jobs`` (then empty)."""
    cdef long long most = 0
    cdef int j
    cdef void *params[1]
    if jobs.n == 0:
        return 0
    for j in range(jobs.n):
        most = max(most, jobs.words[j])
    params[0] = jobs
    launch_on(f, K_COPY_TO_PEERS,
              <unsigned int>min(max((most + PL_COPY_THREADS - 1) // PL_COPY_THREADS, 1),
                                COPY_BLOCKS_MAX),
              <unsigned int>jobs.n, PL_COPY_THREADS, 1, params)
    jobs.n = 0
    return 0


cdef struct Marks:
    # Profiling several devices: each device's CUDA events (created in its
    # context) and the phase each begins, ``max_events`` per device.
    bint on
    int max_events
    cnp.uintp_t *ev
    signed char *ph
    int n[MAX_DEVICES]


cdef int mark(Marks *mk, int d, signed char phase) except -1 nogil:
    """Profiling: :func:`mark_phase` on device ``d``'s events (its context current)."""
    return mark_phase(mk.on, &mk.ev[<size_t>d * mk.max_events], &mk.ph[<size_t>d * mk.max_events],
                      &mk.n[d], mk.max_events, phase)


cdef CUresult sync_all(int n_dev, CUcontext *ctx) noexcept nogil:
    """Synchronise every device's stream; the first error, or 0 (device 0's context current after)."""
    cdef CUresult rc, first = 0
    cdef int d
    for d in range(n_dev):
        drv.ctx_set_current(ctx[d])
        rc = drv.stream_sync(NULL)
        if rc != 0 and first == 0:
            first = rc
    drv.ctx_set_current(ctx[0])
    return first


cdef int wait_status_multi(PlStatus *st, int seq, bint poll, int n_dev,
                           CUcontext *ctx) except -1 nogil:
    """wait_status over several devices: a fault on any of them ends the wait,
    and only every stream idle without the status is a scheduler bug."""
    global inflight_len
    cdef long spins = 0
    cdef CUresult rc
    cdef bint idle
    cdef int d
    cdef double next_poll = now_seconds() + POLL_INTERVAL if poll else 0.0
    while pl_load_acquire(&st.seq) < seq:
        spins += 1
        if spins & 4095 == 0:
            idle = True
            for d in range(n_dev):
                drv.ctx_set_current(ctx[d])
                rc = drv.stream_query(NULL)
                if rc == CUDA_ERROR_NOT_READY:
                    idle = False
                elif rc != 0:
                    drv.ctx_set_current(ctx[0])
                    fail_in_flight(rc)
            drv.ctx_set_current(ctx[0])
            if idle:
                if pl_load_acquire(&st.seq) >= seq:
                    break
                with gil:
                    raise CudaError(f"every device went idle without publishing status {seq} "
                                    f"(have {st.seq}) after [{(<bytes>inflight[:inflight_len]).decode()}]")
            if poll and now_seconds() >= next_poll:
                next_poll = now_seconds() + POLL_INTERVAL
                check_signals()
        pl_cpu_relax()
    inflight_len = 0
    return 0


cdef int launch_updates_on(CUfunction *fn, int k_update, unsigned int row_smem, int r, int n,
                           void **params, bint band) except -1 nogil:
    """The update's launches (:func:`update_plan`, no fused kernel) with one
    device's kernels (current context)."""
    cdef UpdateLaunch plan[UPDATE_PLAN_MAX]
    cdef int i, count = update_plan(plan, k_update, r, n, row_smem, band, False)
    for i in range(count):
        launch_on(fn[plan[i].k], plan[i].k, plan[i].gx, plan[i].gy, plan[i].bx, plan[i].by,
                  params, plan[i].shared)
    return 0


# Buffers of device 0 that a worker view on another device takes from its own
# replica: the data and correlations, the workers' per-iteration constants,
# copied from device 0 after prep, and the entropies and partner orders,
# which the device's own setup derives from them (all read on every pair);
# and the double entropies its share of a re-decision computes (entropy64),
# from the rows' own where its updates computed them (hx64_var); and its own
# count of the pairs its share compared in double (pairs64: no atomics over
# the link, which a PCIe peer may lack).
WORKER_LOCAL = ("X32", "X64", "cov", "idx", "weight", "kind", "hx", "hx_err", "partner", "hx64",
                "hx64_var", "it_pairs64")
# Buffers of the replicas the update kernels (and the first standardisation
# and covariance) read and write: all of them on the replica's device.
REPLICA_LOCAL = ("X32", "X64", "cov", "alive", "gone", "frac", "noise", "linked", "order",
                 "explained_by", "hx_var", "hx_var_err", "hx64_var", "pk_status", "label", "scratch",
                 "idx", "weight", "kind", "hx", "hx_err", "hx64", "score", "err", "ndone",
                 "cursor", "live", "active", "final_score", "final_err", "cand", "it_r",
                 "it_rounds", "it_redo", "it_pairs64", "it_compared", "it_gamma", "it_score", "ctl",
                 "partner", "upd_part")


def search_multi(list mods, list contexts, list devs, dict cfg, cnp.ndarray status_host,
                 list status_devs, list worker_blocks, *, candidates=None, double spread_work=0.0,
                 bint copy_kernel=True, progress=None, bint profile=False, int select_blocks=1):
    """One causal-order search on several devices of one host (peer memory).

    Device 0 holds the state the threshold rounds share and alone runs
    ``prep`` and the root selections (``select_root``, ``select64``); the
    float64 re-decisions' pairs are shared among the devices in iterations
    whose rounds are; every device holds a
    replica of the data and correlations, which the same update kernels keep
    equal, and runs ``setup`` on it; the worker kernels of every device claim
    pairs and message scores in device 0's state (docs/design/multi_gpu.rst). Iterations whose pairs
    hold at most ``spread_work`` sample pairs run their rounds on device 0
    alone (the replicas are still updated).

    Parameters
    ----------
    mods : list of Module
        The kernels compiled with ``PL_PEERS``, loaded into each device's context.
    contexts : list of int
        The CUDA contexts (``CUcontext``), device 0's first; kernels of every
        other context can access device 0's memory (``enable_peer_access``).
    devs : list of dict
        Device addresses of each device's buffers (``_cuda._Workspace``):
        device 0's full workspace, then the replicas; each has ``"search"``
        (room for three ``PlSearch``) and ``"mirror"`` (``idx`` to ``hx_err``,
        one block of ``"mirror_bytes"`` bytes).
    cfg, status_host, candidates, progress
        As for ``search``.
    status_devs : list of int
        The status word's device address in each context (portable mapped memory).
    worker_blocks : list of int
        Resident worker blocks of each device.
    copy_kernel : bool
        Device 0's control block, remaining set and workers go to the other
        devices through its ``copy_to_peers`` kernel (peer stores); False:
        through the copy engine (``cuMemcpyPeerAsync``).
    select_blocks : int
        At most this many blocks of ``select_root`` (the caller passes
        device 0's multiprocessors), which first sum the rows of the workers
        a round finished, a warp each; at most one per 32 remaining
        variables.
    profile : bool
        Time each device's phases with CUDA events on its stream
        (``MULTI_PHASES``, from each device's first kernel after the
        initial standardisation and correlations, as on one GPU):
        ``stats["gpu_time"]`` is then a list with a dict per device, and
        ``stats["gpu_rounds"]`` a list per device of its worker kernels'
        time per iteration it took part in (device 0: every iteration; its
        selections are not in it, unlike one GPU's rounds). The events
        between kernels stop them overlapping, so a profiled search takes
        somewhat longer.

    Returns
    -------
    dict
        As ``search`` (``gpu_time`` and ``gpu_rounds`` per device when
        profiling, else None), and ``redo_spread`` (float64 re-decisions
        shared among the devices) and ``status_wait_s`` (host seconds spent
        waiting for the rounds' statuses; the rest of the search's host time
        is the loop's own).
    """
    load_driver()
    cdef int n_dev = len(mods)
    if not 2 <= n_dev <= MAX_DEVICES or len(contexts) != n_dev or len(devs) != n_dev \
            or len(status_devs) != n_dev or len(worker_blocks) != n_dev:
        raise ValueError(f"search_multi needs 2 to {MAX_DEVICES} devices, each with a module, "
                         "a context, buffers, a status address and a worker grid")
    cdef CUcontext ctx[MAX_DEVICES]
    cdef CUfunction fns[MAX_DEVICES][N_KERNELS]
    cdef unsigned int row_smem[MAX_DEVICES]
    cdef int grid[MAX_DEVICES]
    cdef int nb[MAX_DEVICES]
    cdef int block0[MAX_DEVICES]
    cdef CUdeviceptr d_local[MAX_DEVICES]
    cdef CUdeviceptr d_worker[MAX_DEVICES]
    cdef CUdeviceptr d_setup[MAX_DEVICES]
    cdef CUdeviceptr d_ctl[MAX_DEVICES]
    cdef CUdeviceptr d_alive[MAX_DEVICES]
    cdef CUdeviceptr d_mirror[MAX_DEVICES]
    cdef CUevent ev_worker[MAX_DEVICES]
    cdef CUevent ev_ready = NULL, ev_decided = NULL
    cdef void *lparams[MAX_DEVICES][1]
    cdef void *wparams[MAX_DEVICES][3]
    cdef void *sparams[MAX_DEVICES][1]
    cdef void *rparams[MAX_DEVICES][3]
    cdef int redo_block0[MAX_DEVICES]
    cdef int redo_nb[MAX_DEVICES]
    cdef int redo_total = 0, redo_spread = 0
    cdef double t_wait, wait_s = 0.0  # host time spent waiting for round statuses
    cdef double next_report = 0.0
    cdef PlSearch hl[MAX_DEVICES]
    cdef PlSearch hw[MAX_DEVICES]
    cdef PlSearch hs[MAX_DEVICES]
    cdef PlCopies jobs
    cdef Module m
    cdef int d, k, total
    cdef Marks mk
    global multi_programmatic
    jobs.n = 0
    multi_programmatic = (<Module>mods[0]).programmatic
    cdef size_t mirror_bytes = devs[0]["mirror_bytes"]
    cdef size_t layout = sizeof(PlSearch)
    for d in range(n_dev):
        m = mods[d]
        if m.programmatic != multi_programmatic or m.fn[K_COPY_TO_PEERS] == NULL:
            raise ValueError("search_multi needs PL_PEERS modules with one launch setting")
        ctx[d] = <CUcontext><uintptr_t>contexts[d]
        for k in range(N_KERNELS):
            fns[d][k] = m.fn[k]
        row_smem[d] = m.row_smem
        grid[d] = worker_blocks[d]
        ev_worker[d] = NULL
        # the replica's own view (device 0: the only one), and the worker view
        local = dict(devs[0])
        if d > 0:
            local.update({name: devs[d][name] for name in REPLICA_LOCAL})
        local["status_dev"] = status_devs[d]
        fill_search(&hl[d], local, cfg)
        worker = dict(devs[0])
        if d > 0:
            worker.update({name: devs[d][name] for name in WORKER_LOCAL})
        worker["status_dev"] = status_devs[d]
        fill_search(&hw[d], worker, cfg)
        # the setup view: the replica's own buffers, device 0's control block
        setup = dict(local)
        setup["ctl"] = devs[0]["ctl"]
        fill_search(&hs[d], setup, cfg)
        d_local[d] = devs[d]["search"]
        d_worker[d] = devs[d]["search"] + layout if d > 0 else d_local[d]
        d_setup[d] = devs[d]["search"] + 2 * layout if d > 0 else d_local[d]
        d_ctl[d] = devs[d]["ctl"]
        d_alive[d] = devs[d]["alive"]
        d_mirror[d] = devs[d]["mirror"]
        lparams[d][0] = &d_local[d]
        wparams[d][0] = &d_worker[d]
        wparams[d][1] = &block0[d]
        wparams[d][2] = &total
        sparams[d][0] = &d_setup[d]
        # pairs64 (and entropy64 on the other devices): the worker view, its
        # first partner and the partners' count
        rparams[d][0] = &d_worker[d]
        rparams[d][1] = &redo_block0[d]
        rparams[d][2] = &redo_total
    cdef PlStatus *st = <PlStatus *><uintptr_t>status_host.ctypes.data
    cdef LoopSettings loop
    loop_settings(&loop, cfg, mods[0], candidates, progress)
    cdef bint all_pairs = False, spread = False, first_round
    all_pairs_of = np.zeros(loop.p + 2, dtype=np.int8)
    cdef signed char[::1] all_pairs_v = all_pairs_of
    chunks_of = np.zeros(loop.p + 2, dtype=np.int32)
    cdef int[::1] chunks_v = chunks_of
    cdef long long n_pairs
    cdef int r_now, grid_sum = 0, kw
    cdef int r_host = loop.p, nw = loop.p, n_cand, state = PL_RUNNING, seq = 0, it = 0, rounds = 0
    cdef int chunks = 1  # pairs64's blocks per pair in a re-decision (redo_chunks)
    cdef int prep_mode = 3
    cdef void *prep_params[2]
    prep_params[0] = &d_local[0]
    prep_params[1] = &prep_mode
    cdef CUdeviceptr d_pk = devs[0]["pk_status"]
    cdef CUdeviceptr d_cov = devs[0]["cov"], d_corr0 = devs[0]["corr0"]
    cdef int[::1] alive_host = np.zeros(max(loop.p, 1), dtype=np.int32)
    cdef signed char[::1] pk_host = np.zeros(max(loop.p, 1), dtype=np.int8)
    cdef CUresult rc_end
    global inflight_len
    inflight_len = 0
    for d in range(n_dev):
        grid_sum += grid[d]
    # profiling: six events per round on device 0 and four on the others,
    # and a few per iteration and re-decision; a search that runs out stops
    # marking (gpu_events_full)
    memset(&mk, 0, sizeof(Marks))
    mk.on = profile
    mk.max_events = 48 * (loop.p + 2) if profile else 1
    events = np.zeros(n_dev * mk.max_events, dtype=np.uintp)
    phase_of = np.zeros(n_dev * mk.max_events, dtype=np.int8)
    cdef cnp.uintp_t[::1] ev_all = events
    cdef signed char[::1] ph_all = phase_of
    mk.ev = &ev_all[0]
    mk.ph = &ph_all[0]

    memset(st, 0, sizeof(PlStatus))
    try:
        with nogil:
            for d in range(n_dev):
                set_ctx(ctx[d])
                check(drv.event_create(&ev_worker[d], CU_EVENT_DISABLE_TIMING), b"cuEventCreate")
                if d == 0:
                    check(drv.event_create(&ev_ready, CU_EVENT_DISABLE_TIMING), b"cuEventCreate")
                    check(drv.event_create(&ev_decided, CU_EVENT_DISABLE_TIMING), b"cuEventCreate")
                check(drv.htod(d_local[d], &hl[d], sizeof(PlSearch)), b"cuMemcpyHtoD(search state)")
                if d > 0:
                    check(drv.htod(d_worker[d], &hw[d], sizeof(PlSearch)),
                          b"cuMemcpyHtoD(worker view)")
                    check(drv.htod(d_setup[d], &hs[d], sizeof(PlSearch)),
                          b"cuMemcpyHtoD(setup view)")
                # every replica standardises and correlates its own copy of the data
                launch_on(fns[d][K_INIT], K_INIT, (loop.p + 255) // 256, 1, 256, 1, lparams[d])
                launch_on(fns[d][K_STANDARDISE], K_STANDARDISE, loop.p, 1, 256, 1, lparams[d])
                launch_on(fns[d][K_COVARIANCE], K_COVARIANCE, loop.tiles, loop.tiles, 16, 16,
                          lparams[d])
            set_ctx(ctx[0])
            check(drv.dtod(d_corr0, d_cov, <size_t>loop.p * loop.p * sizeof(double), NULL),
                  b"cuMemcpyDtoDAsync(correlation)")
            while True:
                r_now = r_host - 1 if it > 0 else r_host
                all_pairs = all_pairs_iteration(r_now, loop.n, loop.all_pairs_work, &n_pairs)
                all_pairs_v[it] = all_pairs
                spread = <double>n_pairs * loop.n > spread_work
                # device 0: the order, the remaining set and the workers
                mark(&mk, 0, PH_PREPARE)
                if loop.use_prior:
                    prep_mode = 1
                    launch_on(fns[0][K_PREP], K_PREP, 1, 1, prep_threads(r_host), 1, prep_params)
                    prior_statuses(d_ctl[0], d_alive[0], d_pk, candidates, alive_host, pk_host)
                    prep_mode = 2 | (PL_PREP_ALL_PAIRS if all_pairs else 0)
                    launch_on(fns[0][K_PREP], K_PREP, 1, 1, prep_threads(r_host), 1, prep_params)
                else:
                    prep_mode = 3 | (PL_PREP_ALL_PAIRS if all_pairs else 0)
                    launch_on(fns[0][K_PREP], K_PREP, 1, 1, prep_threads(r_host), 1, prep_params)
                if spread:
                    # the workers of this iteration to every replica, whose own
                    # setup (below) then derives the same entropies and partner
                    # orders as device 0's (all-pairs float rounds have no
                    # setup: prep took their entropies, copied with them). No
                    # wait for the replicas' queued update kernels: they never
                    # touch these buffers, and the replicas' last readers of
                    # them (setup, workers, entropy64, pairs64) ran before
                    # device 0's select waited for them.
                    mark(&mk, 0, PH_COPY)
                    for d in range(1, n_dev):
                        send_to_replica(copy_kernel, fns[0][K_COPY_TO_PEERS], &jobs, ctx, d,
                                        d_mirror[d], d_mirror[0], mirror_bytes,
                                        b"cuMemcpyPeerAsync(workers)")
                    flush_copies(fns[0][K_COPY_TO_PEERS], &jobs)
                    check(drv.event_record(ev_ready, NULL), b"cuEventRecord")
                    mark(&mk, 0, PH_PREPARE)
                if not (all_pairs and loop.use_float):
                    launch_on(fns[0][loop.k_setup], loop.k_setup, r_host, 1, 512, 1, lparams[0])
                first_round = True
                while True:
                    # this round's worker blocks: on every device, or on device 0 alone
                    total = split_round(n_dev, grid, grid_sum, spread, all_pairs, n_pairs,
                                        loop.engines_per_block, nb, block0)
                    kw = loop.k_all_pairs if all_pairs else loop.k_worker
                    # (the other devices first: their first round waits on the
                    # device for device 0's prep and setup, so all start together)
                    for d in range(n_dev - 1, -1, -1):
                        if nb[d] == 0:
                            continue
                        set_ctx(ctx[d])
                        if d > 0 and first_round:
                            mark(&mk, d, PH_WAIT)
                            check(drv.stream_wait_event(NULL, ev_ready, 0), b"cuStreamWaitEvent")
                            mark(&mk, d, PH_PREPARE)
                            if not (all_pairs and loop.use_float):
                                launch_on(fns[d][loop.k_setup], loop.k_setup, r_host, 1, 512, 1,
                                          sparams[d])
                        mark(&mk, d, PH_ROUNDS)
                        launch_on(fns[d][kw], kw, nb[d], 1, loop.wthreads, 1, wparams[d])
                    first_round = False
                    # Device 0 selects the root (or the next round's workers) in
                    # its own memory once every device's workers have finished
                    # (the PL_PEERS worker kernels leave the selection to it,
                    # and in threshold rounds the finalizing of the workers
                    # they finished).
                    wait_for_others(n_dev, ctx, ev_worker, &mk)
                    mark(&mk, 0, PH_SELECT)
                    launch_on(fns[0][K_SELECT], K_SELECT,
                              max(1, min(select_blocks, (r_host + 31) // 32)), 1, 1024, 1,
                              lparams[0])
                    # Speculative, as on one device: every replica is updated if
                    # the round decided the root (the kernels check the state),
                    # from device 0's control block and remaining set.
                    sync_replicas(n_dev, ctx, d_ctl, d_alive, r_host, ev_worker, ev_decided, fns,
                                  row_smem, lparams, loop.k_update_data, loop.n, False,
                                  recent_band(st), copy_kernel, &jobs, &mk)
                    seq += 1
                    rounds += 1
                    t_wait = now_seconds()
                    wait_status_multi(st, seq, loop.poll, n_dev, ctx)
                    wait_s += now_seconds() - t_wait
                    state = st.state
                    if state != PL_RUNNING:
                        break
                    if all_pairs:
                        all_pairs_undecided(it)
                r_host = st.r
                nw = st.nw
                report_progress(&loop, progress, st, &next_report)
                if state == PL_FINISHED or state == PL_DEGENERATE or state == PL_FAILED:
                    break
                if state == PL_REDO:
                    # a re-decision in double, then every replica is updated
                    # for real
                    n_cand = st.n_cand
                    chunks = redo_chunks(n_cand, nw, loop.n, loop.part_doubles, loop.redo_blocks)
                    chunks_v[it] = chunks
                    redo_total = nw
                    if spread:
                        # The candidates' pairs64 grid, split by partners in
                        # proportion to the worker grids; each device needs
                        # the double entropies of every worker (the
                        # candidates') and computes them from its replica
                        # (this iteration's workers were copied to it). Each
                        # device's stream follows device 0's select_root (it
                        # waited for the round's decided event).
                        redo_spread += 1
                        split_redo(n_dev, grid, grid_sum, nw, redo_nb, redo_block0)
                        for d in range(n_dev - 1, -1, -1):
                            # (device 0's select64 adds chunked pairs' sums
                            # with its own double entropies)
                            if redo_nb[d] == 0 and not (d == 0 and chunks > 1):
                                continue
                            set_ctx(ctx[d])
                            mark(&mk, d, PH_REDO)
                            launch_on(fns[d][K_ENTROPY64], K_ENTROPY64, nw, 1, 256, 1, rparams[d])
                            if redo_nb[d] > 0:
                                launch_on(fns[d][K_PAIRS64], K_PAIRS64, redo_nb[d], n_cand * chunks,
                                          256, 1, rparams[d])
                        # device 0 selects once every device's statistics are in
                        wait_for_others(n_dev, ctx, ev_worker, &mk)
                        mark(&mk, 0, PH_REDO)
                        launch_on(fns[0][K_SELECT64], K_SELECT64, 1, 1, 1024, 1, lparams[0])
                        sync_replicas(n_dev, ctx, d_ctl, d_alive, r_host, ev_worker, ev_decided,
                                      fns, row_smem, lparams, loop.k_update_data, loop.n, False,
                                      recent_band(st), copy_kernel, &jobs, &mk)
                    else:
                        # device 0 alone (after every device's workers: its
                        # stream waited for them)
                        redo_block0[0] = 0
                        set_ctx(ctx[0])
                        mark(&mk, 0, PH_REDO)
                        launch_on(fns[0][K_ENTROPY64], K_ENTROPY64, nw, 1, 256, 1, lparams[0])
                        launch_on(fns[0][K_PAIRS64], K_PAIRS64, nw, n_cand * chunks, 256, 1,
                                  rparams[0])
                        launch_on(fns[0][K_SELECT64], K_SELECT64, 1, 1, 1024, 1, lparams[0])
                        sync_replicas(n_dev, ctx, d_ctl, d_alive, r_host, ev_worker, ev_decided,
                                      fns, row_smem, lparams, loop.k_update_data, loop.n, True,
                                      recent_band(st), copy_kernel, &jobs, &mk)
                it += 1
                if it > loop.p + 1:
                    too_many_iterations(loop.p)
            rc_end = sync_all(n_dev, ctx)
            if rc_end != 0:
                fail_in_flight(rc_end)
        gpu_time = gpu_rounds = None
        if profile:
            gpu_time, gpu_rounds = [], []
            for d in range(n_dev):
                set_ctx(ctx[d])
                t, r = phase_times(events[d * mk.max_events:(d + 1) * mk.max_events],
                                   phase_of[d * mk.max_events:(d + 1) * mk.max_events], mk.n[d],
                                   MULTI_PHASES)
                gpu_time.append(t)
                gpu_rounds.append(r)
            set_ctx(ctx[0])
    except BaseException as exc:
        if not isinstance(exc, CudaError):
            # as search(): let every device's queued kernels finish
            with nogil:
                rc_end = sync_all(n_dev, ctx)
            if rc_end != 0:
                fail_in_flight(rc_end)
            inflight_len = 0
        raise
    finally:
        if profile:
            for d in range(n_dev):
                drv.ctx_set_current(ctx[d])
                destroy_events(&mk.ev[<size_t>d * mk.max_events], mk.max_events)
        for d in range(n_dev):
            if ev_worker[d] != NULL:
                drv.ctx_set_current(ctx[d])
                drv.event_destroy(ev_worker[d])
        drv.ctx_set_current(ctx[0])
        if ev_ready != NULL:
            drv.event_destroy(ev_ready)
        if ev_decided != NULL:
            drv.event_destroy(ev_decided)
        drv.ctx_set_current(ctx[0])
    cdef bint events_full = False
    for d in range(n_dev):
        events_full |= profile and mk.n[d] >= mk.max_events
    stats = final_status(st, state, rounds, all_pairs_of, chunks_of)
    stats.update(gpu_time=gpu_time, gpu_rounds=gpu_rounds, redo_spread=redo_spread,
                 status_wait_s=wait_s, gpu_events_full=events_full)
    return stats


cdef int split_round(int n_dev, const int *grid, int grid_sum, bint spread, bint all_pairs,
                     long long n_pairs, int engines_per_block, int *nb, int *block0) noexcept nogil:
    """A threshold round's worker blocks: ``nb[d]`` on device ``d``, the
    first of them block ``block0[d]`` of the round; every device's grid
    (``spread``) or device 0's, and no more blocks than engines for the pairs
    in an all-pairs round. Returns the round's blocks."""
    cdef int total = grid_sum if spread else grid[0]
    cdef int base = 0, d
    if all_pairs:
        total = all_pairs_grid(total, n_pairs, engines_per_block)
    for d in range(n_dev):
        nb[d] = min(grid[d], total - base) if (spread or d == 0) else 0
        if nb[d] < 0:
            nb[d] = 0
        block0[d] = base
        base += nb[d]
    return total


cdef void split_redo(int n_dev, const int *grid, int grid_sum, int nw, int *redo_nb,
                     int *redo_block0) noexcept nogil:
    """A shared float64 re-decision's ``nw`` partners: ``redo_nb[d]`` of them
    on device ``d`` from partner ``redo_block0[d]``, in proportion to the
    worker grids."""
    cdef int base = 0, d
    for d in range(n_dev):
        redo_block0[d] = base
        base += grid[d]
        redo_nb[d] = <int>(<long long>nw * base // grid_sum) - \
            <int>(<long long>nw * redo_block0[d] // grid_sum)
        redo_block0[d] = <int>(<long long>nw * redo_block0[d] // grid_sum)


cdef int wait_for_others(int n_dev, CUcontext *ctx, CUevent *ev_done, Marks *mk) except -1 nogil:
    """Device 0's stream waits for everything queued so far on the other
    devices (device 0's context current after)."""
    cdef int d
    for d in range(1, n_dev):
        set_ctx(ctx[d])
        check(drv.event_record(ev_done[d], NULL), b"cuEventRecord")
    set_ctx(ctx[0])
    mark(mk, 0, PH_WAIT)
    for d in range(1, n_dev):
        check(drv.stream_wait_event(NULL, ev_done[d], 0), b"cuStreamWaitEvent")
    return 0


cdef int sync_replicas(int n_dev, CUcontext *ctx, CUdeviceptr *d_ctl, CUdeviceptr *d_alive,
                       int r_host, CUevent *ev_done, CUevent ev_decided,
                       CUfunction (*fns)[N_KERNELS], unsigned int *row_smem,
                       void *(*lparams)[1], int k_update, int n, bint wait_others,
                       bint band, bint copy_kernel, PlCopies *jobs, Marks *mk) except -1 nogil:
    """Device 0's control block and remaining set to every replica (by
    ``copy_to_peers``, or the copy engine unless ``copy_kernel``), then the
    update kernels on every device (device 0's context current after).

    Device 0's stream must first wait for everything queued on the other
    devices (``wait_others``, or the caller did): their workers, which the
    control block must follow, and their earlier update kernels, which read
    the buffers the copies overwrite.
    """
    cdef int d
    if wait_others:
        wait_for_others(n_dev, ctx, ev_done, mk)
    set_ctx(ctx[0])
    mark(mk, 0, PH_COPY)
    for d in range(1, n_dev):
        send_to_replica(copy_kernel, fns[0][K_COPY_TO_PEERS], jobs, ctx, d, d_ctl[d], d_ctl[0],
                        sizeof(PlControl), b"cuMemcpyPeerAsync(control)")
        send_to_replica(copy_kernel, fns[0][K_COPY_TO_PEERS], jobs, ctx, d, d_alive[d],
                        d_alive[0], <size_t>max(r_host, 0) * sizeof(int),
                        b"cuMemcpyPeerAsync(remaining)")
    flush_copies(fns[0][K_COPY_TO_PEERS], jobs)
    check(drv.event_record(ev_decided, NULL), b"cuEventRecord")
    for d in range(1, n_dev):
        set_ctx(ctx[d])
        mark(mk, d, PH_WAIT)
        check(drv.stream_wait_event(NULL, ev_decided, 0), b"cuStreamWaitEvent")
        mark(mk, d, PH_UPDATE)
        launch_updates_on(fns[d], k_update, row_smem[d], r_host, n, lparams[d], band)
        mark(mk, d, PH_IDLE)
    set_ctx(ctx[0])
    mark(mk, 0, PH_UPDATE)
    launch_updates_on(fns[0], k_update, row_smem[0], r_host, n, lparams[0], band)
    mark(mk, 0, PH_IDLE)
    return 0

