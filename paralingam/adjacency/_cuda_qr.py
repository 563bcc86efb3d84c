"""The data's QR on the GPU (cuSOLVER ``geqrf``), for the minimum-norm rows after a CUDA search.

Rank-deficient data need ``R`` of the QR decomposition of the centred data
in causal order (:func:`._least_squares._data_vectors`); on the host that
QR was most of the CUDA route's adjacency step (docs/design/adjacency.rst,
"The data's QR on the GPU"). Here the centred columns in causal order fill
one column-major array on device 0 (PyCUDA, in the context every GPU step
shares), which cuSOLVER's ``dgeqrf`` factorises in place through CuPy's
thin binding (``cupy_backends``: the library's own wrapper, without CuPy's
arrays or runtime-compiled kernels); the upper triangle is copied back.

The columns come from the CUDA search's copy of the data on the device
where ``fit`` kept one (:func:`centred_triangular_factor_of_copy`: one
kernel gathers, centres and scales them), else from the host, uploaded in
blocks of centred rows (:func:`centred_triangular_factor`).

CuPy is optional: without it, or for data cuSOLVER's 32-bit sizes cannot
hold, the host computes ``R`` as before (:func:`suits`). Any failure on the
GPU (memory, a CUDA error) also leaves ``R`` to the host, with a warning
(:func:`._least_squares._on_gpu`).
"""

import functools

import numpy as np

from .. import _gpu

# Bytes of host rows per upload (one block of centred rows in Fortran order).
UPLOAD_BYTES = 32 << 20

# Bytes per block when several threads prepare the blocks (a gather in causal
# order, the exact rescaling, the centring: memory-bound passes that one
# thread ran at a third of the step's time at p=1000, n=8192). At most two
# blocks per thread are in flight. Data of no more than two such blocks are
# prepared on the calling thread: on E. coli's 7 MB the pool cost more than
# it saved (docs/design/adjacency.rst, "The data's QR on the GPU").
PREPARE_BYTES = 8 << 20

# Whether the adjacency step starts the data's QR on the GPU before its host
# steps, where it will need it (start_factor_of_copy; False: where it did,
# after them, with the same calls and bits).
START_AHEAD = True

# cuSOLVER's dense API takes 32-bit sizes; the array's element count must fit.
INT32_MAX = 2**31 - 1

# Device memory kept free beside the factor and its workspace.
SLACK_BYTES = 64 << 20

_HANDLES = {}  # context handle -> cuSOLVER dense handle, made on first use


@functools.lru_cache(maxsize=None)
def _cusolver():
    """CuPy's cuSOLVER binding, or None where CuPy (or its cuSOLVER) cannot be loaded."""
    try:
        # (the import loads libcusolver: a missing library fails here, not mid-step)
        from cupy_backends.cuda.libs import cusolver
    except Exception:  # not installed, or installed without its CUDA libraries
        return None
    return cusolver


def _driver():
    """PyCUDA's driver module (the allocations and copies)."""
    import pycuda.driver as drv

    return drv


def suits(n, p):
    """Whether the QR of ``n`` rows and ``p`` columns can run here on the GPU.

    More rows than columns (otherwise the data are used directly, with no
    QR), an element count cuSOLVER's 32-bit sizes hold, and CuPy installed.
    """
    return n > p and n * p <= INT32_MAX and _cusolver() is not None


def copy_holds(device_copy, shape):
    """Whether ``device_copy`` (a ``paralingam.search._cuda.DeviceCopy``) still holds data of ``shape``."""
    return device_copy.valid() and (device_copy.n, device_copy.p) == tuple(shape)


def device_bytes(n, p, lwork):
    """Device memory of the factorisation: the data, ``tau``, the workspace and the info word."""
    return 8 * n * p + 8 * p + 8 * lwork + 8


@_gpu.exclusive
def centred_triangular_factor(shape, rows_of, n_threads=1, rows_from=None, divisor=None):
    """``R`` of the QR of the centred data in causal order, over ``sqrt(n)``, on the GPU.

    Parameters
    ----------
    shape : tuple of int
        ``(n, p)``: the rows and the columns ``rows_of`` gives.
    rows_of : callable
        ``rows_of(start, stop)``: rows ``start:stop`` centred, over
        ``sqrt(n)``, in causal order, as a Fortran-ordered float64 array
        (the host route's blocks, :func:`._least_squares._centred_rows`).
    n_threads : int
        Threads that prepare the blocks (the copies and the factorisation
        stay on the calling thread); the result does not depend on it.
    rows_from : int, optional
        Also try the minimum-norm rows of the variables from ``rows_from``
        on, on the device (:func:`._cuda_min_norm.rows_on_device`).
    divisor : ndarray, shape (p,), optional
        With ``rows_from``: those rows are of ``R``'s columns divided by
        these (the adaptive lasso's standardised variables).

    Returns
    -------
    R : ndarray, shape (p, p)
        Upper triangular, ``R^T R`` the covariance of the data in causal order (as the
        host's ``R``, to rounding; the signs of its rows may differ). With
        ``rows_from``: the pair ``(R, None)``, or ``(None, rows)`` where the
        device computed the rows (``_min_norm._min_norm_rows``'s, to rounding)
        of ``R / divisor`` (each column divided by its entry; by default ``R``).

    Raises
    ------
    paralingam.InsufficientMemoryError
        The data do not fit in the device's free memory (its subclass
        ``GPUMemoryError``).
    """
    n, p = shape

    def fill(drv, d_a, buffers):  # the host's blocks of rows, each one 2-D copy
        for start, block in _blocks(n, p, rows_of, n_threads):
            _copy_2d(drv, block, int(d_a) + 8 * start, 8 * n, to_device=True)

    return _factor_in_context(n, p, fill, rows_from, divisor)


@_gpu.exclusive
def centred_triangular_factor_of_copy(device_copy, order, rows_from=None, divisor=None):
    """:func:`centred_triangular_factor` of the CUDA search's copy of the data, in ``order``.

    Parameters
    ----------
    device_copy : paralingam.search._cuda.DeviceCopy
        The data as the search's upload left them on the device (exactly
        the host's values, one variable per row); it must still hold them
        (:func:`copy_holds`).
    order : sequence of int
        The columns, in causal order (all of them, or some).
    rows_from, divisor : optional
        As :func:`centred_triangular_factor`'s.

    Returns
    -------
    R : ndarray, shape (len(order), len(order))
        As :func:`centred_triangular_factor`'s (with ``rows_from``, its
        pair). Each column's mean is summed on the device
        (``kernels/adjacency.cu``: ``gather_centred``), in another order than
        the host's: the centred values, and ``R``, agree with the host's to
        rounding. Where :func:`start_factor_of_copy` queued this QR (the
        same copy and ``order``), it is waited for instead of started: the
        same calls, the same bits.

    Raises
    ------
    paralingam.InsufficientMemoryError
        As :func:`centred_triangular_factor`.
    """
    ahead = _take_ahead(device_copy, order)
    if ahead is not None:
        _gpu.context()
        return _gpu.guarded(ahead.result, rows_from, divisor)
    n, p = device_copy.n, len(order)
    return _factor_in_context(n, p, _gather_fill(device_copy, order), rows_from, divisor)


@_gpu.exclusive
def start_factor_of_copy(device_copy, order):
    """Queue :func:`centred_triangular_factor_of_copy`'s QR on the GPU and return at once.

    After a CUDA search that found explained variables, the adjacency step
    starts the data's QR here, before its host steps (the scatter matrix,
    the covariance in causal order, its leading factor), so that cuSOLVER
    factorises while the host works; the step's
    :func:`centred_triangular_factor_of_copy` with the same copy and
    ``order`` then only waits for it (docs/design/adjacency.rst, "The data's
    QR started ahead on the GPU"). The QR is held on ``device_copy`` until
    then, or until :func:`drop_factor_ahead`.

    Returns
    -------
    bool
        Whether it started. Not where the QR cannot run on the GPU
        (:func:`suits`), the copy no longer holds the data, or the device
        lacks the memory or fails: the step then runs its QR where it did,
        and reports any failure there.
    """
    n, p = device_copy.n, len(order)
    # (one QR ahead on a copy at a time: another stays with the step)
    if (not START_AHEAD or not (suits(n, p) and device_copy.valid())
            or getattr(device_copy, "factor_ahead", None) is not None):
        return False
    drv, cusolver = _driver(), _cusolver()
    try:
        factorisation = _gpu.guarded(_Factorisation, drv, cusolver, _handle(cusolver), n, p,
                                     _gather_fill(device_copy, order))
    except Exception:  # (memory, a CUDA error: the step's own QR meets it again)
        return False
    device_copy.factor_ahead = (np.array(order, dtype=np.intp), factorisation)
    return True


def drop_factor_ahead(device_copy):
    """Free the QR :func:`start_factor_of_copy` queued on ``device_copy``, where the step did not take it."""
    held = getattr(device_copy, "factor_ahead", None)
    if held is None:
        return
    device_copy.factor_ahead = None
    _gpu.context()
    try:
        _gpu.guarded(held[1].free)
    except Exception:  # (a fault, noted by guarded: the caller's own error or result stands)
        pass


def _take_ahead(device_copy, order):
    """The :class:`_Factorisation` queued for ``order`` on ``device_copy`` (taken off it), or None."""
    held = getattr(device_copy, "factor_ahead", None)
    if held is None or not np.array_equal(held[0], np.asarray(order)):
        return None
    device_copy.factor_ahead = None
    return held[1]


def _gather_fill(device_copy, order):
    """``fill`` of :func:`_factor_in_context` that gathers ``order``'s columns from the device copy.

    One kernel: block k gathers, centres and scales column ``order[k]``.
    """
    from . import _cuda_adjacency

    n, p = device_copy.n, len(order)
    order = np.ascontiguousarray(order, dtype=np.int32)

    def fill(drv, d_a, buffers):
        gather = _cuda_adjacency._kernels(_gpu.context().handle)["gather_centred"]
        d_order = drv.to_device(order)
        buffers.append(d_order)
        gather.prepared_call((p, 1, 1), (_cuda_adjacency.THREADS, 1, 1), device_copy.ptr,
                             np.int64(device_copy.ld), np.int32(n), d_order, d_a,
                             np.float64(1.0 / np.sqrt(n)))

    return fill


def _factor_in_context(n, p, fill, rows_from=None, divisor=None):
    """``R`` of the ``n x p`` array that ``fill(drv, device_array, buffers)`` writes, in device 0's context.

    ``fill`` appends any device buffer it allocates to ``buffers``; they are
    freed with the factorisation's own, after it. ``rows_from``,
    ``divisor``: as :func:`centred_triangular_factor`'s (the result is then
    a pair).
    """
    drv, cusolver = _driver(), _cusolver()
    return _gpu.guarded(_factor, drv, cusolver, _handle(cusolver), n, p, fill, rows_from,
                        divisor)


def _handle(cusolver):
    """The cuSOLVER dense handle of device 0's context (made current), made on first use."""
    ctx = _gpu.context()
    handle = _HANDLES.get(ctx.handle)
    if handle is None:
        handle = _HANDLES[ctx.handle] = cusolver.create()
    return handle


def _factor(drv, cusolver, handle, n, p, fill, rows_from=None, divisor=None):
    """:func:`_factor_in_context` in the current context (errors: the caller's)."""
    return _Factorisation(drv, cusolver, handle, n, p, fill).result(rows_from, divisor)


class _Factorisation:
    """The data's ``dgeqrf`` queued on the device with its buffers; :meth:`result` waits for it.

    Made in the current context (errors: the caller's). ``fill(drv, d_a,
    buffers)`` writes the ``n x p`` array (appending any buffer it
    allocates); ``dgeqrf`` is then queued after all work before it
    (``_gpu.in_order`` without its wait) and the host goes on. The buffers
    are freed by :meth:`result` or :meth:`free`.
    """

    def __init__(self, drv, cusolver, handle, n, p, fill):
        self._drv, self._cusolver, self._handle, self.n, self.p = drv, cusolver, handle, n, p
        _require(drv, 8 * n * p, n, p)
        self._buffers = [drv.mem_alloc(8 * n * p)]
        try:
            self._d_a = d_a = self._buffers[0]
            lwork = cusolver.dgeqrf_bufferSize(handle, n, p, int(d_a), n)
            _require(drv, device_bytes(n, p, lwork) - 8 * n * p, n, p)
            d_tau, d_work, self._d_info = (drv.mem_alloc(size)
                                           for size in (8 * p, max(8 * lwork, 8), 8))
            self._buffers += [d_tau, d_work, self._d_info]
            fill(drv, d_a, self._buffers)
            _gpu.in_order(drv, cusolver.dgeqrf, handle, n, p, int(d_a), n, int(d_tau),
                          int(d_work), lwork, int(self._d_info), wait=False)
        except BaseException:
            self._release()
            raise

    def result(self, rows_from=None, divisor=None):
        """:func:`_factor_in_context`'s result, once the QR is done; the buffers are then freed."""
        drv, n, p = self._drv, self.n, self.p
        try:
            drv.Context.synchronize()  # (the wait in_order left out: the QR is done)
            info = np.zeros(1, dtype=np.int32)
            drv.memcpy_dtoh(info, self._d_info)
            if info[0] != 0:
                raise RuntimeError(f"cuSOLVER dgeqrf failed (info={info[0]})")
            if rows_from is not None:
                from . import _cuda_min_norm

                rows = _cuda_min_norm.rows_on_device(drv, self._cusolver, self._handle,
                                                     self._d_a, n, p, rows_from, divisor)
                if rows is not None:
                    return None, rows
            R = np.empty((p, p), order="F")
            _copy_2d(drv, R, int(self._d_a), 8 * n, to_device=False)  # the top p rows
        finally:
            self._release()  # (synchronised above, or the context failed)
        if not np.isfinite(R).all():
            raise FloatingPointError("the data's QR on the GPU gave non-finite values")
        return np.triu(R) if rows_from is None else (np.triu(R), None)

    def free(self):
        """Free the buffers unused, once the queued QR is done (the context is synchronised first)."""
        if not self._buffers:
            return
        try:
            self._drv.Context.synchronize()
        finally:
            self._release()

    def _release(self):
        buffers, self._buffers = self._buffers, []
        for buf in buffers:
            buf.free()


def _blocks(n, p, rows_of, n_threads):
    """``(start, rows_of(start, stop))`` over the rows in order, prepared on ``n_threads`` threads.

    Each block is prepared once whatever the threads, so the blocks (and the
    factor) are the same on any number of them.
    """
    if n_threads <= 1 or 8 * n * p <= 2 * PREPARE_BYTES:
        step = max(1, UPLOAD_BYTES // (8 * p))
        for start in range(0, n, step):
            yield start, rows_of(start, min(n, start + step))
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    step = max(1, PREPARE_BYTES // (8 * p))
    pending = deque()
    with ThreadPoolExecutor(n_threads, thread_name_prefix="paralingam-qr-rows") as pool:
        try:
            for start in range(0, n, step):
                pending.append((start, pool.submit(rows_of, start, min(n, start + step))))
                if len(pending) >= 2 * n_threads:
                    start, block = pending.popleft()
                    yield start, block.result()
            while pending:
                start, block = pending.popleft()
                yield start, block.result()
        finally:  # (an error, Ctrl-C or a closed generator: drop the blocks not started)
            for _, block in pending:
                block.cancel()


def _require(drv, nbytes, n, p):
    """Raise GPUMemoryError unless ``nbytes`` (and the slack) fit in the free device memory."""
    free, _ = drv.mem_get_info()
    if nbytes + SLACK_BYTES > free:
        raise _gpu.GPUMemoryError(
            f"the data's QR ({n} x {p}) needs {(nbytes + SLACK_BYTES) / 2**20:.0f} MiB more "
            f"GPU memory; {max(free, 0) / 2**20:.0f} MiB are free")


def _copy_2d(drv, host, device_ptr, device_pitch, to_device):
    """Copy a Fortran-ordered host block to (or from) rows of a column-major device array.

    The block's columns (``8 * rows`` bytes each, contiguous) go to columns
    ``device_pitch`` bytes apart from ``device_ptr``: one 2-D copy.
    """
    rows, cols = host.shape
    if not (host.flags.f_contiguous and host.dtype == np.float64):
        raise ValueError("the QR's host blocks are Fortran-ordered float64 arrays")
    flat = host.reshape(-1, order="F")  # (a view of the block)
    copy = drv.Memcpy2D()
    if to_device:
        copy.set_src_host(flat)
        copy.src_pitch = 8 * rows
        copy.set_dst_device(device_ptr)
        copy.dst_pitch = device_pitch
    else:
        copy.set_src_device(device_ptr)
        copy.src_pitch = device_pitch
        copy.set_dst_host(flat)
        copy.dst_pitch = 8 * rows
    copy.width_in_bytes = 8 * rows
    copy.height = cols
    copy(aligned=True)


@_gpu.register_cache
def clear_cache(after_fault=False):
    """Destroy the kept cuSOLVER handles (after a fault, forget them with their context)."""
    cusolver = _cusolver() if _HANDLES else None
    for handle in _HANDLES.values():
        if not after_fault:
            try:
                cusolver.destroy(handle)
            except Exception:  # (its context may be gone already at exit)
                pass
    _HANDLES.clear()
