# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Host scheduler of the CUDA backend: the per-iteration loop in C.

PyCUDA owns the context, the memory and the compilation (its disk cache);
this module loads the compiled cubin into the current context and launches
the kernels through the CUDA driver API, which it binds at run time with
dlopen, so it builds and imports on machines without CUDA. Inside the loop
there are no Python objects: launches, the threshold rounds (launch the
worker kernel, then ``select_root``; one stream synchronisation; read the
result from mapped pinned memory; raise gamma by c) and the data and
covariance updates. Python is re-entered only to re-derive a drifted
covariance (rare).

NVTX ranges (``iteration k``, ``round gamma=...``) are compiled in when the
NVTX3 headers were found at build time; they cost nothing unless a profiler
such as Nsight Systems is attached.
"""

from libc.stdint cimport uintptr_t
from libc.string cimport memset
from libc.stdio cimport snprintf
from libc.math cimport INFINITY

import numpy as np
cimport numpy as cnp

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
    """
    void PL_RANGE_PUSH(const char *name) nogil
    void PL_RANGE_POP() nogil

ctypedef int CUresult
ctypedef void *CUmodule
ctypedef void *CUfunction
ctypedef void *CUstream
ctypedef unsigned long long CUdeviceptr

ctypedef CUresult (*fn_launch)(CUfunction, unsigned int, unsigned int, unsigned int,
                               unsigned int, unsigned int, unsigned int, unsigned int,
                               CUstream, void **, void **) noexcept nogil
ctypedef CUresult (*fn_module_load)(CUmodule *, const void *) noexcept nogil
ctypedef CUresult (*fn_module_unload)(CUmodule) noexcept nogil
ctypedef CUresult (*fn_get_function)(CUfunction *, CUmodule, const char *) noexcept nogil
ctypedef CUresult (*fn_sync)(CUstream) noexcept nogil
ctypedef CUresult (*fn_memset32)(CUdeviceptr, unsigned int, size_t, CUstream) noexcept nogil
ctypedef CUresult (*fn_htod)(CUdeviceptr, const void *, size_t) noexcept nogil
ctypedef CUresult (*fn_error_name)(CUresult, const char **) noexcept nogil

cdef struct Driver:
    fn_launch launch
    fn_module_load module_load
    fn_module_unload module_unload
    fn_get_function get_function
    fn_sync sync
    fn_memset32 memset32
    fn_htod htod
    fn_error_name error_name

cdef Driver drv
cdef bint drv_loaded = False


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message names the call or kernel."""


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
    drv.module_load = <fn_module_load>_sym(lib, b"cuModuleLoadData")
    drv.module_unload = <fn_module_unload>_sym(lib, b"cuModuleUnload")
    drv.get_function = <fn_get_function>_sym(lib, b"cuModuleGetFunction")
    drv.sync = <fn_sync>_sym(lib, b"cuStreamSynchronize")
    drv.memset32 = <fn_memset32>_sym(lib, b"cuMemsetD32Async")
    drv.htod = <fn_htod>_sym(lib, b"cuMemcpyHtoD_v2")
    drv.error_name = <fn_error_name>_sym(lib, b"cuGetErrorName")
    drv_loaded = True


cdef str error_text(CUresult rc):
    cdef const char *name = NULL
    drv.error_name(rc, &name)
    return name.decode() if name != NULL else f"CUDA error {rc}"


cdef int check(CUresult rc, const char *what) except -1 with gil:
    if rc != 0:
        raise CudaError(f"{what.decode()}: {error_text(rc)}")
    return 0


DEF N_KERNELS = 7
cdef const char *KERNEL_NAMES[N_KERNELS]
KERNEL_NAMES[:] = [b"row_entropy", b"worker", b"select_root", b"update_data", b"update_cov",
                   b"standardise", b"covariance"]
DEF K_ENTROPY = 0
DEF K_WORKER = 1
DEF K_SELECT = 2
DEF K_UPDATE_DATA = 3
DEF K_UPDATE_COV = 4
DEF K_STANDARDISE = 5
DEF K_COVARIANCE = 6


cdef class Module:
    """A cubin loaded into the current CUDA context, with its kernels."""
    cdef CUmodule mod
    cdef CUfunction fn[N_KERNELS]
    cdef public int block
    cdef bytes image

    def __cinit__(self, bytes cubin, int block):
        load_driver()
        self.image = cubin
        self.block = block
        check(drv.module_load(&self.mod, <const char *>self.image), b"cuModuleLoadData")
        for k in range(N_KERNELS):
            check(drv.get_function(&self.fn[k], self.mod, KERNEL_NAMES[k]),
                  b"cuModuleGetFunction")

    def unload(self):
        if self.mod != NULL:
            drv.module_unload(self.mod)
            self.mod = NULL

    def launch(self, str name, grid, block, args):
        """Launch a kernel with integer/float arguments (setup paths only)."""
        cdef int k = [n.decode() for n in KERNEL_NAMES[:N_KERNELS]].index(name)
        cdef void *params[32]
        holders = []
        for j, (kind, value) in enumerate(args):
            arr = np.array([value], dtype={"p": np.uint64, "i": np.int32, "d": np.float64}[kind])
            holders.append(arr)
            params[j] = <void *><uintptr_t>arr.ctypes.data
        gx, gy = (grid + (1,))[:2]
        bx, by = (block + (1,))[:2]
        check(drv.launch(self.fn[k], gx, gy, 1, bx, by, 1, 0, NULL, params, NULL),
              KERNEL_NAMES[k])


cdef int launch(CUfunction *fns, int k, unsigned int gx, unsigned int gy, unsigned int bx,
                unsigned int by, void **params) except -1 nogil:
    return check(drv.launch(fns[k], gx, gy, 1, bx, by, 1, 0, NULL, params, NULL),
                 KERNEL_NAMES[k])


cdef int sync(const char *after) except -1 nogil:
    # An asynchronous kernel fault surfaces here; name the kernel it followed.
    return check(drv.sync(NULL), after)


cdef int find_group(int *parent, int k) noexcept nogil:
    while parent[k] != k:
        parent[k] = parent[parent[k]]
        k = parent[k]
    return k


def search(Module m32, Module m64, dict dev, dict host, int p, int n, int ld, *,
           bint threshold, double gamma0, double c, double collinear_tol,
           double explained_tol, double drift_tol, double eps, int pair_cap, rederive):
    """Run the causal-order search on data already standardised on the device.

    Parameters
    ----------
    m32, m64 : Module
        Kernels compiled with REAL=float and REAL=double. ``m32`` may be the
        same object as ``m64`` (``dtype="float64"``); then ``eps`` is 0.
    dev : dict of int
        Device pointers: X32, X64, cov, idx, weight, alive, hx, state, stat,
        score, absneg, ndone, cursor, final_score, frac.
    host : dict of ndarray
        Mapped pinned arrays (device pointers under ``<name>_dev``): finish
        (int32[1]), out (float64[2]), iout (int32[3]), compared (uint64[1]),
        explained (int32[p]), drift (float64[p]), n_pairs (int32[1]),
        pairs (int32[2 * pair_cap]).
    rederive : callable(alive) -> None
        Re-standardise the rows ``alive`` and recompute their covariance.

    Returns
    -------
    order, explained, per_iteration, n_rederived
    """
    cdef CUdeviceptr X32 = dev["X32"], X64 = dev["X64"], cov = dev["cov"]
    cdef CUdeviceptr d_idx = dev["idx"], d_weight = dev["weight"], d_alive = dev["alive"]
    cdef CUdeviceptr d_hx = dev["hx"], d_state = dev["state"], d_stat = dev["stat"]
    cdef CUdeviceptr d_score = dev["score"], d_absneg = dev["absneg"]
    cdef CUdeviceptr d_ndone = dev["ndone"], d_cursor = dev["cursor"]
    cdef CUdeviceptr d_final = dev["final_score"], d_frac = dev["frac"]
    cdef CUdeviceptr h_finish = host["finish_dev"], h_out = host["out_dev"]
    cdef CUdeviceptr h_iout = host["iout_dev"], h_compared = host["compared_dev"]
    cdef CUdeviceptr h_explained = host["explained_dev"], h_drift = host["drift_dev"]
    cdef CUdeviceptr h_npairs = host["n_pairs_dev"], h_pairs = host["pairs_dev"]
    cdef int[::1] finish = host["finish"]
    cdef double[::1] out = host["out"]
    cdef int[::1] iout = host["iout"]
    cdef unsigned long long[::1] compared = host["compared"]
    cdef int[::1] explained_flag = host["explained"]
    cdef double[::1] drift = host["drift"]
    cdef int[::1] n_pairs = host["n_pairs"]
    cdef int[::1] pairs = host["pairs"]

    alive_arr = np.arange(p, dtype=np.int32)
    idx_arr = np.zeros(p, dtype=np.int32)
    weight_arr = np.zeros(p, dtype=np.float64)
    parent_arr = np.zeros(p, dtype=np.int32)
    group_arr = np.zeros(p, dtype=np.int32)
    order_arr = np.zeros(p, dtype=np.int32)
    expl_root_arr = np.full(p, -1, dtype=np.int32)
    it_remaining = np.zeros(p, dtype=np.int64)
    it_compared = np.zeros(p, dtype=np.int64)
    it_gamma = np.zeros(p, dtype=np.float64)
    it_rounds = np.zeros(p, dtype=np.int64)
    it_fp64 = np.zeros(p, dtype=np.int8)
    cdef int[::1] alive = alive_arr
    cdef int[::1] idx = idx_arr
    cdef double[::1] weight = weight_arr
    cdef int[::1] parent = parent_arr
    cdef int[::1] group = group_arr
    cdef int[::1] order = order_arr
    cdef int[::1] expl_root = expl_root_arr
    cdef long long[::1] v_remaining = it_remaining
    cdef long long[::1] v_compared = it_compared
    cdef double[::1] v_gamma = it_gamma
    cdef long long[::1] v_rounds = it_rounds
    cdef signed char[::1] v_fp64 = it_fp64

    cdef int r = p, n_order = 0, n_iter = 0, nw, k, j, ga, gb, root, rounds, passes
    cdef int root_local, tile, n_rederived = 0
    cdef double gamma, wsum, max_drift, eps_now
    cdef CUfunction *f32 = &m32.fn[0]
    cdef CUfunction *f64 = &m64.fn[0]
    cdef CUfunction *fcur
    cdef int blk32 = m32.block, blk64 = m64.block, blk
    cdef bint only64 = m32 is m64, use64
    cdef char label[96]
    cdef void *params[24]
    # kernel-argument storage (cuLaunchKernel takes pointers to the values)
    cdef int a_ld = ld, a_n = n, a_p = p, a_r, a_root, a_cap = pair_cap, a_nw
    cdef double a_gamma, a_tol = collinear_tol, a_etol = explained_tol, a_eps, a_wsum
    cdef CUdeviceptr a_X

    # Collinear scan of the full covariance (update_cov with root = -1).
    with nogil:
        check(drv.htod(d_alive, &alive[0], p * sizeof(int)), b"cuMemcpyHtoD")
        n_pairs[0] = 0
        a_r = r
        a_root = -1
        params[0] = &cov; params[1] = &a_p; params[2] = &d_alive; params[3] = &a_r
        params[4] = &a_root; params[5] = &a_tol; params[6] = &h_npairs; params[7] = &h_pairs
        params[8] = &a_cap
        tile = 16
        launch(f64, K_UPDATE_COV, (r + tile - 1) // tile, (r + tile - 1) // tile, tile, tile,
               params)
        sync(b"update_cov")

    while r > 0:
        if r == 1:
            order[n_order] = alive[0]
            n_order += 1
            break
        with nogil:
            snprintf(label, sizeof(label), b"iteration %d (r=%d)", n_iter, r)
            PL_RANGE_PUSH(label)
            # Workers: one per collinear group (its first member).
            for k in range(r):
                parent[k] = k
            if n_pairs[0] > pair_cap:
                with gil:
                    raise CudaError(f"more than {pair_cap} collinear pairs; raise pair_cap")
            for j in range(n_pairs[0]):
                ga = find_group(&parent[0], pairs[2 * j])
                gb = find_group(&parent[0], pairs[2 * j + 1])
                if ga < gb:
                    parent[gb] = ga
                elif gb < ga:
                    parent[ga] = gb
            for k in range(r):
                group[k] = find_group(&parent[0], k)
            nw = 0
            for k in range(r):
                if group[k] == k:
                    parent[k] = nw
                    idx[nw] = alive[k]
                    weight[nw] = 0.0
                    nw += 1
            for k in range(r):
                weight[parent[group[k]]] += 1.0
            check(drv.htod(d_idx, &idx[0], nw * sizeof(int)), b"cuMemcpyHtoD")
            check(drv.htod(d_weight, &weight[0], nw * sizeof(double)), b"cuMemcpyHtoD")
            wsum = r

            # ParaFindRoot: fp32 rounds (or fp64), certified or redone in fp64.
            use64 = only64
            eps_now = 0.0 if only64 else eps
            passes = 0
            rounds = 0
            root_local = -1
            while True:
                passes += 1
                fcur = f64 if use64 else f32
                blk = blk64 if use64 else blk32
                a_X = X64 if use64 else X32
                check(drv.memset32(d_state, 0, <size_t>nw * nw, NULL), b"cuMemsetD32")
                check(drv.memset32(d_stat, 0, <size_t>2 * nw * nw, NULL), b"cuMemsetD32")
                check(drv.memset32(d_score, 0, <size_t>2 * nw, NULL), b"cuMemsetD32")
                check(drv.memset32(d_absneg, 0, <size_t>2 * nw, NULL), b"cuMemsetD32")
                check(drv.memset32(d_ndone, 0, <size_t>nw, NULL), b"cuMemsetD32")
                check(drv.memset32(d_cursor, 0, <size_t>nw, NULL), b"cuMemsetD32")
                compared[0] = 0 if passes == 1 else compared[0]
                params[0] = &a_X; params[1] = &a_ld; params[2] = &a_n; params[3] = &d_idx
                params[4] = &d_hx
                launch(fcur, K_ENTROPY, nw, 1, blk, 1, params)
                gamma = gamma0 if threshold else INFINITY
                a_nw = nw
                while True:
                    rounds += 1
                    snprintf(label, sizeof(label), b"round gamma=%.3g", gamma)
                    PL_RANGE_PUSH(label)
                    finish[0] = 0
                    a_gamma = gamma
                    params[0] = &a_X; params[1] = &X64; params[2] = &a_ld; params[3] = &a_n
                    params[4] = &d_idx; params[5] = &d_weight; params[6] = &d_hx
                    params[7] = &cov; params[8] = &a_p; params[9] = &a_nw
                    params[10] = &d_state; params[11] = &d_stat; params[12] = &d_score
                    params[13] = &d_absneg; params[14] = &d_ndone; params[15] = &d_cursor
                    params[16] = &a_gamma; params[17] = &a_tol; params[18] = &h_finish
                    params[19] = &h_compared
                    launch(fcur, K_WORKER, nw, 1, blk, 1, params)
                    a_eps = eps_now
                    a_wsum = wsum
                    params[0] = &d_stat; params[1] = &d_weight; params[2] = &d_score
                    params[3] = &d_absneg; params[4] = &d_ndone; params[5] = &a_nw
                    params[6] = &a_eps; params[7] = &a_wsum; params[8] = &h_out
                    params[9] = &h_iout; params[10] = &d_final
                    launch(fcur, K_SELECT, 1, 1, blk, 1, params)
                    sync(b"worker/select_root")
                    PL_RANGE_POP()
                    if iout[0] >= 0 and (out[0] <= gamma or iout[1] == nw):
                        break
                    if rounds > 100000:
                        with gil:
                            raise CudaError("threshold rounds do not terminate")
                    while out[1] > gamma:
                        gamma = gamma * c
                root_local = iout[0]
                if iout[2] or use64:
                    break
                use64 = True  # too close for float32: decide this iteration in float64
                eps_now = 0.0
            root = idx[root_local]
            PL_RANGE_POP()

        order[n_order] = root
        n_order += 1
        v_remaining[n_iter] = r
        v_compared[n_iter] = compared[0]
        v_gamma[n_iter] = gamma
        v_rounds[n_iter] = rounds
        v_fp64[n_iter] = passes > 1
        n_iter += 1

        with nogil:
            # UpdateData: regress the root out of every remaining row.
            a_root = root
            a_r = r
            params[0] = &X64; params[1] = &X32; params[2] = &a_ld; params[3] = &a_n
            params[4] = &d_alive; params[5] = &a_root; params[6] = &cov; params[7] = &a_p
            params[8] = &d_frac; params[9] = &a_etol; params[10] = &h_explained
            params[11] = &h_drift
            launch(f64, K_UPDATE_DATA, r, 1, blk64, 1, params)
            sync(b"update_data")
            j = 0
            max_drift = 0.0
            for k in range(r):
                if alive[k] == root:
                    continue
                if explained_flag[k]:
                    order[n_order] = alive[k]
                    n_order += 1
                    expl_root[alive[k]] = root
                else:
                    if drift[k] > max_drift:
                        max_drift = drift[k]
                    alive[j] = alive[k]
                    j += 1
            r = j
            if r > 0:
                # UpdateCovMat on the new block, with its collinear scan.
                check(drv.htod(d_alive, &alive[0], r * sizeof(int)), b"cuMemcpyHtoD")
                n_pairs[0] = 0
                a_r = r
                params[0] = &cov; params[1] = &a_p; params[2] = &d_alive; params[3] = &a_r
                params[4] = &a_root; params[5] = &a_tol; params[6] = &h_npairs
                params[7] = &h_pairs; params[8] = &a_cap
                launch(f64, K_UPDATE_COV, (r + tile - 1) // tile, (r + tile - 1) // tile,
                       tile, tile, params)
                sync(b"update_cov")
        if r > 1 and max_drift > drift_tol:
            rederive(alive_arr[:r].copy())
            n_rederived += 1
            with nogil:
                n_pairs[0] = 0
                a_root = -1
                params[4] = &a_root
                launch(f64, K_UPDATE_COV, (r + tile - 1) // tile, (r + tile - 1) // tile,
                       tile, tile, params)
                sync(b"update_cov")

    explained = {int(v): int(expl_root_arr[v]) for v in np.flatnonzero(expl_root_arr >= 0)}
    per_iteration = {
        "remaining": it_remaining[:n_iter].tolist(),
        "compared": it_compared[:n_iter].tolist(),
        "gamma": it_gamma[:n_iter].tolist(),
        "rounds": it_rounds[:n_iter].tolist(),
        "float64_redo": it_fp64[:n_iter].astype(bool).tolist(),
    }
    return order_arr[:n_order].tolist(), explained, per_iteration, n_rederived
