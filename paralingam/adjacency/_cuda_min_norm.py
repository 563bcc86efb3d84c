"""Minimum-norm rows of data of small rank on the GPU, from the data's QR on the device.

After the data's QR on the GPU (:mod:`._cuda_qr`), the rows of the variables
past the first dependent one (:func:`._min_norm._min_norm_rows`, on the
host) need ``R``, the p x p triangular factor. Where the data's rank is
small (at most ``MAX_BASIS`` independent variables: stoichiometric fluxes,
data with many exact combinations), the rows are computed on the device
instead, and only they come back (docs/design/adjacency.rst, "Minimum-norm
rows on the GPU"):

1. ``V``, the factor's upper triangle (each column divided by the
   caller's ``divisor``, where given), and each column's squared norm and
   squared diagonal entry (``kernels/adjacency.cu``: ``upper_columns``,
   ``sums_of_squares``). A variable whose diagonal entry keeps more than
   ``SINGULAR_TOL`` of its squared norm is taken as a member of the *basis*
   (the host's test, :func:`._min_norm._joins`; the variables before
   ``first`` are members, the caller's word).
2. The QR of the basis's columns of ``V`` (cuSOLVER ``dgeqrf``), whose
   ``Q^T`` turns ``V`` into the coordinates ``C`` (``dormqr``): the first
   entries of a column are its coordinates on the basis vectors, in causal
   order; the rest, its residual on all of them.
3. The basis is checked: each variable from ``first`` on must join exactly
   when its residual on the basis vectors before it (the squared tail of
   its column of ``C`` from that count on) keeps more than ``SINGULAR_TOL``
   of its squared norm. Then the host's Gram-Schmidt in causal order, which
   decides variable by variable on the basis as it stands, would choose the
   same basis (the spans before each variable are the same). Otherwise the
   route declines.
4. One block per variable ``k`` (``min_norm_rows``): ``G = C_k C_k^T`` over
   the coordinates of the variables before ``k``, its Cholesky factor, the
   solution ``y`` of ``G y = l_k`` and the row ``C_k^T y``: the normal
   equations the host's loop solves (with a factor updated by rotations).

The route declines (None: the caller downloads ``R`` and the host computes
the rows) for fewer than ``MIN_FEATURES`` variables, where the basis is
larger than ``MAX_BASIS``, the check of step 3 fails, a pivot of step 4 is
not positive, the results are not finite, the device lacks the memory, or
an allocation, a launch or a cuSOLVER call fails.
"""

import numpy as np

from .. import _gpu
from ._common import SINGULAR_TOL
from ._min_norm import _joins

# Most basis vectors of this route: a block holds G (m x m) and a tile of
# MN_TILE columns in shared memory, 8 (m^2 + 35 m) bytes: 163 KiB at 128.
MAX_BASIS = 128

# Fewest variables of this route. Below it the host's rows take about a
# millisecond, and on data with near copies (E. coli's fluxes, p=87) the
# estimator's LARS paths move with the rows' rounding: there the route took
# the adjacency step from 4.9 to 4.4 ms but the estimator from 19.2 to 21.6 ms
# (benchmarks/results/probe_min_norm_gpu_h100.json, section run_12be663). As
# the Cholesky rows' CUDA_OLS_MIN_FEATURES (._least_squares).
MIN_FEATURES = 256
MN_TILE = 32          # kernels/adjacency.cu: MN_TILE
DEFAULT_SHARED = 48 << 10  # dynamic shared memory a kernel gets without asking

# DeviceWork allocates from a pool kept between calls (PyCUDA's
# DeviceMemoryPool): allocating and freeing a small fit's fifteen or so
# buffers cost 0.6 ms of its 1.5 ms adjacency step at p=300 (cuMemFree waits
# for the device). Blocks held after a call are released where they exceed this.
POOL_KEPT_BYTES = 64 << 20
_POOLS = {}  # context handle -> DeviceMemoryPool

CUBLAS_SIDE_LEFT = 0  # cublasSideMode_t
CUBLAS_OP_T = 1       # cublasOperation_t


def shared_bytes(m):
    """Dynamic shared memory of ``min_norm_rows`` for a basis of ``m`` vectors."""
    return 8 * (m * m + (MN_TILE + 3) * m)


def device_bytes(p, m, lwork):
    """Device memory of the route beside the data: V, the basis's columns, tau, the
    workspace, the rows and the small vectors."""
    return 8 * p * p + 8 * p * m + 8 * m + 8 * lwork + 8 * p * p + 64 * p + 64


def basis_guess(diag2, sq_norm, first):
    """Whether each variable joins the basis, read off the data's triangular factor.

    ``diag2``: its squared diagonal entries (each variable's residual on all
    the variables before it); ``sq_norm``: its columns' squared norms. The
    variables before ``first`` join (the caller's word). Step 3 of the module
    checks the guess.
    """
    joins = _joins(diag2, sq_norm)
    joins[:first] = True
    return joins


def rows_on_device(drv, cusolver, handle, d_a, lda, p, first, divisor=None):
    """The minimum-norm rows of the variables from ``first`` on, from the factor in ``d_a``.

    Parameters
    ----------
    drv, cusolver, handle
        PyCUDA's driver, CuPy's cuSOLVER binding and a dense handle of the
        current context (:mod:`._cuda_qr`).
    d_a : DeviceAllocation
        The data's QR as ``dgeqrf`` left it (column-major, ``lda`` rows):
        ``R`` in the upper triangle of the top ``p`` rows.
    lda : int
    p : int
        Variables (columns), in causal order.
    first : int
        The variables before ``first`` are independent (their rows are known).
    divisor : ndarray, shape (p,), optional
        The rows of ``V / divisor`` (each column divided by its entry): the
        adaptive lasso's standardised variables.

    Returns
    -------
    coef : ndarray, shape (p - first, p) or None
        As :func:`._min_norm._min_norm_rows` returns them (to rounding);
        None where the route declines (the module's list).
    """
    if first >= p:
        return np.empty((0, p))
    if p < MIN_FEATURES or not hasattr(cusolver, "dormqr"):
        return None
    dev = DeviceWork(drv)
    try:
        free, _ = drv.mem_get_info()
        if device_bytes(p, MAX_BASIS, 0) + (64 << 20) > free:
            return None
        cols = np.arange(p)
        d_v = dev.alloc(8 * p * p)  # V: the factor's upper triangle, p x p, ld p
        d_divisor = np.intp(0) if divisor is None else dev.upload(
            np.ascontiguousarray(divisor, dtype=np.float64))
        dev.launch("upper_columns", p, d_a, np.int64(lda), np.int32(p), np.intp(0), d_divisor,
                   d_v)
        sq_norm = dev.squares(d_v, p, np.zeros(p), cols + 1)
        diag2 = dev.squares(d_v, p, cols, cols + 1)
        with np.errstate(invalid="ignore"):
            joins = basis_guess(diag2, sq_norm, first)
        basis = np.flatnonzero(joins).astype(np.int32)
        m = len(basis)
        if m == 0 or m > MAX_BASIS or not np.isfinite(sq_norm).all():
            return None
        # the basis's columns, their QR, and C = Q^T V in place of V
        d_w = dev.alloc(8 * p * m)
        dev.launch("upper_columns", m, d_v, np.int64(p), np.int32(p), dev.upload(basis),
                   np.intp(0), d_w)
        if not dev.qr_applied(cusolver, handle, d_w, p, m, d_v, p):
            return None
        d_coef = dev.checked_rows(d_v, p, p, first, joins, sq_norm)
        if d_coef is None:
            return None
        coef = np.empty((p - first, p))
        drv.memcpy_dtoh(coef, d_coef)
        return coef if np.isfinite(coef).all() else None
    except (drv.Error, MemoryError, RuntimeError):
        # (an allocation or a cuSOLVER call that failed: the QR in d_a stands,
        # and the caller downloads R; a fault that broke the context raises
        # again there, for _gpu.guarded)
        return None
    finally:
        dev.free()


def _pool():
    """The package context's pool of device memory for :class:`DeviceWork`."""
    from pycuda.tools import DeviceMemoryPool

    key = _gpu.context().handle
    if key not in _POOLS:
        _POOLS[key] = DeviceMemoryPool()
    return _POOLS[key]


@_gpu.register_cache
def clear_cache(after_fault=False):
    """Release the pools' held blocks (after a fault their memory went with the context)."""
    for pool in _POOLS.values():
        if not after_fault:
            pool.free_held()
    _POOLS.clear()


class DeviceWork:
    """The route's device buffers (returned to the pool together by :meth:`free`) and its steps, in
    the package's context.

    Shared with :mod:`._cuda_low_rank`, which reaches the same coordinates
    from the data's columns instead of ``R``.
    """

    def __init__(self, drv):
        from . import _cuda_adjacency

        self.drv, self.buffers, self.bytes = drv, [], 0
        self.pool = _pool()
        self.fns = _cuda_adjacency._kernels(_gpu.context().handle)
        self.threads = (_cuda_adjacency.THREADS, 1, 1)

    def alloc(self, nbytes):
        nbytes = max(int(nbytes), 8)
        self.buffers.append(self.pool.allocate(nbytes))
        self.bytes += nbytes
        return self.buffers[-1]

    def upload(self, array):
        array = np.ascontiguousarray(array)
        buf = self.alloc(array.nbytes)
        self.drv.memcpy_htod(buf, array)
        return buf

    def launch(self, kernel, blocks, *args, **kw):
        self.fns[kernel].prepared_call((blocks, 1, 1), self.threads, *args, **kw)

    def squares(self, d_src, ld, lo, hi):
        """``sums_of_squares`` of the columns of ``d_src`` (ld ``ld``), rows ``lo..hi-1``, on the host."""
        p = len(lo)
        d_out = self.alloc(8 * p)
        self.launch("sums_of_squares", p, d_src, np.int64(ld), self.upload(lo.astype(np.int32)),
                    self.upload(hi.astype(np.int32)), d_out)
        out = np.empty(p)
        self.drv.memcpy_dtoh(out, d_out)
        return out

    def qr_applied(self, cusolver, handle, d_w, rows, m, d_c, cols):
        """``Q^T C`` in place of ``C`` (``rows x cols``), ``Q`` from the QR of ``W`` (``rows x m``).

        Both column-major with ``rows`` rows; ``W`` is factorised in place
        (cuSOLVER ``dgeqrf``, then ``dormqr``). False where cuSOLVER reports
        an error.
        """
        d_tau, d_info = self.alloc(8 * m), self.alloc(8)
        lwork = max(cusolver.dgeqrf_bufferSize(handle, rows, m, int(d_w), rows),
                    cusolver.dormqr_bufferSize(handle, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, rows, cols,
                                               m, int(d_w), rows, int(d_tau), int(d_c), rows))
        d_work = self.alloc(8 * lwork)
        _gpu.in_order(self.drv, cusolver.dgeqrf, handle, rows, m, int(d_w), rows, int(d_tau),
                      int(d_work), lwork, int(d_info))
        _gpu.in_order(self.drv, cusolver.dormqr, handle, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, rows,
                      cols, m, int(d_w), rows, int(d_tau), int(d_c), rows, int(d_work), lwork,
                      int(d_info))
        info = np.zeros(1, dtype=np.int32)
        self.drv.memcpy_dtoh(info, d_info)
        return info[0] == 0

    def checked_rows(self, d_c, ldc, length, first, joins, sq_norm):
        """Steps 3 and 4 of the module on the coordinates ``C`` in ``d_c``: the rows on the device.

        ``C``: ``length`` rows (ld ``ldc``), one column per variable in
        causal order, ``Q^T`` of the data's columns for ``Q`` from the QR of
        the basis's (``joins``) columns; ``sq_norm``: the columns' squared
        norms. Returns the device array of the rows of the variables from
        ``first`` on (``p - first`` rows of ``p``, C order), or None where
        the basis fails its check (from ``first`` on) or a pivot fails.
        """
        drv, p = self.drv, len(joins)
        before = (np.cumsum(joins) - joins).astype(np.int32)
        res2 = self.squares(d_c, ldc, before, np.full(p, length))
        with np.errstate(invalid="ignore"):
            checked = _joins(res2, sq_norm)
        if not np.array_equal(checked[first:], joins[first:]):
            return None
        width = (before + joins).astype(np.int32)
        shared = shared_bytes(int(before[first:].max()))
        if shared > DEFAULT_SHARED:
            try:
                self.fns["min_norm_rows"].set_attribute(
                    drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            except (AttributeError, drv.Error):  # (an older PyCUDA or device: the host's rows)
                return None
        d_coef = self.alloc(8 * (p - first) * p)
        d_status = self.upload(np.zeros(p - first, dtype=np.int32))
        self.launch("min_norm_rows", p - first, d_c, np.int64(ldc), np.int32(p), np.int32(first),
                    self.upload(before), self.upload(width), d_coef, d_status,
                    shared_size=shared)
        status = np.empty(p - first, dtype=np.int32)
        drv.memcpy_dtoh(status, d_status)
        return None if status.any() else d_coef

    def free(self):
        """Return the buffers to the pool; release its held blocks past ``POOL_KEPT_BYTES``."""
        buffers, self.buffers = self.buffers, []
        for buf in buffers:
            buf.free()
        if self.bytes > POOL_KEPT_BYTES:
            self.pool.free_held()
        self.bytes = 0
