# The scheduler's C-level names that its test and profiling hooks
# (_scheduler_testing.pyx, reached through paralingam._testing) cimport, so
# that they measure the scheduler's own launch and wait instead of copies.

cdef extern from "search_state.h":
    ctypedef struct PlStatus:
        int seq, state, iteration, r, nw, n_cand, root
        int detail[3]
        int n_rederived, n_order, band_at

ctypedef void *CUmodule
ctypedef void *CUfunction

# Kernels of kernels/paralingam.cu: indices into Module.fn and KERNEL_NAMES.
cdef enum:
    K_INIT = 0
    K_STANDARDISE = 1
    K_COVARIANCE = 2
    K_PREP = 3
    K_SETUP32 = 4
    K_SETUP64 = 5
    K_WORKER32 = 6
    K_WORKER64 = 7
    K_SELECT = 8
    K_ENTROPY64 = 9
    K_PAIRS64 = 10
    K_SELECT64 = 11
    K_UPDATE_DATA = 12
    K_UPDATE_COV = 13
    K_ALL_PAIRS32 = 14
    K_ALL_PAIRS64 = 15
    K_UPDATE_DATA_H64 = 16
    K_UPDATE_DATA_FUSED = 17
    K_UPDATE_SUMS = 18
    K_UPDATE_ROWS = 19
    K_UPDATE_ROWS_H64 = 20
    K_UPDATE_FINISH = 21
    # the kernels before this index are in every build; the rest only in the
    # PL_PEERS one (Module's peers)
    N_ONE_GPU_KERNELS = 22
    K_COPY_TO_PEERS = 22
    N_KERNELS = 23


cdef class Module:
    cdef CUmodule mod
    cdef CUfunction fn[N_KERNELS]
    cdef readonly int warps
    cdef readonly bint programmatic
    cdef readonly bytes image  # the cubin, kept alive while the module is loaded
    # dynamic shared memory update_data may be given
    cdef readonly unsigned int row_smem


cdef int launch(Module m, int k, unsigned int gx, unsigned int gy, unsigned int bx,
                unsigned int by, void **params, unsigned int shared=*) except -1 nogil
cdef int wait_status(PlStatus *st, int seq, bint poll=*) except -1 nogil
