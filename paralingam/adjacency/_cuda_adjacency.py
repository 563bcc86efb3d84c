"""The adjacency step on the GPU (``kernels/adjacency.cu``).

* :func:`ols_on_predecessors`: least squares of every variable on all earlier
  ones from one blocked Cholesky factor computed on the device (the
  ``adjacency="ols"`` matrix, and the adaptive lasso's weights);
* :func:`lars_rows`: the adaptive lasso's LARS paths, one block per
  target, all targets in one launch, then the refit of each target on the
  predictors of its BIC-best point (the host's refit, to rounding);
* ``gather_centred``: the data's columns in causal order, centred, from the
  CUDA search's copy of the data (launched by :mod:`._cuda_qr`).

The kernels are compiled once per context with PyCUDA (disk cache keyed by
source and options) and launched as prepared calls; the LARS work buffers are
kept per shape, so bootstrap resamples reuse them.
"""

import functools
import time

import numpy as np

from .. import _constants, _gpu

THREADS = 256        # kernels/adjacency.cu: TPB
PANEL = 32           # kernels/adjacency.cu: PANEL, columns per Cholesky panel
MIN_BLOCKS = 4       # resident blocks per SM the kernel is compiled for
MAX_ACTIVE = 500     # LassoLarsIC's max_iter bounds the active set

_BUFFERS = {}
# lars_rows keeps its arrays of p variables (the Gram matrix, the
# weights, ...) on the device between calls up to this many bytes (p of about
# 1,400): larger ones are freed after each call, whose paths then take far
# longer than the allocations
KEPT_ARRAYS_BYTES = 64 << 20


@functools.lru_cache(maxsize=None)
def kernel_jobs():
    """This step's kernels, as :func:`paralingam._gpu.compile_soon` takes them."""
    return ((_constants.kernel_text("adjacency.cu"),
             (f"-DLARS_MIN_BLOCKS={MIN_BLOCKS}", "-std=c++17", "-O3")),)


@functools.lru_cache(maxsize=None)
def _kernels(ctx_handle):
    """The compiled kernels for one context, prepared for launches."""
    import pycuda.driver as drv

    (src, options), = kernel_jobs()
    mod = drv.module_from_buffer(_gpu.cubin(src, options, _gpu.arch()))
    fns = {"module": mod}
    for name, sig in (("lars_paths", "PiPiPPddiPPPPP"), ("refit_rows", "PiPiPdPqPPP"),
                      ("chol_panel", "PiiPdP"), ("chol_trailing", "PiiP"), ("ols_rows", "PiPPPPP"),
                      ("gather_centred", "PqiPPd"), ("upper_columns", "PqiPPP"),
                      ("sums_of_squares", "PqPPP"), ("min_norm_rows", "PqiiPPPP"),
                      ("placed_scaled", "PiPPPP"), ("divided_columns", "PqiP")):
        fns[name] = mod.get_function(name)
        fns[name].prepare(sig)
    return fns


def _blocks_for(p):
    import pycuda.driver as drv

    sms = drv.Context.get_device().get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    return max(1, min(p - 1, sms * MIN_BLOCKS))


@_gpu.exclusive
def ols_on_predecessors(gram, tol):
    """Least squares of every variable on all earlier ones, on the GPU.

    Parameters
    ----------
    gram : ndarray, shape (p, p)
        Gram or covariance matrix in causal order.
    tol : float
        A Cholesky pivot that keeps no more than ``tol`` of its diagonal entry
        stops the factorisation (``paralingam.adjacency.SINGULAR_TOL``).

    Returns
    -------
    coef : ndarray, shape (p, p)
        Row ``k``: the coefficients of variable ``k`` on ``0..k-1``.
    rss : ndarray, shape (p,)
        Residual sums of squares, in ``gram``'s scale.
    solved : ndarray of bool, shape (p,)
        Variables before the first failed pivot, with finite results (the
        others are left to the caller). The host's ``_ols_on_predecessors``
        also solves the variable at the failed pivot when LAPACK completed
        its row; here it goes to the caller too, with the same result.
    """
    import pycuda.driver as drv

    ctx = _gpu.context()
    fns = _kernels(ctx.handle)
    p = gram.shape[0]
    blocks = _blocks_for(p)
    free, _ = drv.mem_get_info()
    # the factor and the coefficients (8 p^2 each), one work row per block
    need = 16 * p * p + 8 * blocks * p + 16 * p + (64 << 20)
    if need > free:
        raise _gpu.GPUMemoryError(
            f"least squares of p={p} variables need {need / 2**20:.0f} MiB of GPU memory; "
            f"{max(free, 0) / 2**20:.0f} MiB are free")
    return _guarded(_ols_launch, fns, gram, tol, blocks)


def _ols_launch(fns, gram, tol, blocks):
    """Upload, factor panel by panel, solve every row, download."""
    import pycuda.driver as drv

    p = gram.shape[0]
    gram = np.ascontiguousarray(gram, dtype=np.float64)
    d_A = drv.to_device(gram)
    d_diag = drv.to_device(np.ascontiguousarray(np.diag(gram)))
    d_info = drv.to_device(np.full(1, -1, dtype=np.int32))
    for j0 in range(0, p, PANEL):
        fns["chol_panel"].prepared_call((1, 1, 1), (THREADS, 1, 1), d_A, np.int32(p),
                                        np.int32(j0), d_diag, np.float64(tol), d_info)
        if j0 + PANEL < p:
            tiles = -(-(p - j0 - PANEL) // PANEL)
            fns["chol_trailing"].prepared_call((tiles, tiles, 1), (THREADS, 1, 1), d_A,
                                               np.int32(p), np.int32(j0), d_info)
    d_coef = drv.mem_alloc(8 * p * p)
    drv.memset_d8(d_coef, 0, 8 * p * p)
    d_rss = drv.to_device(np.zeros(p))
    d_ws = drv.mem_alloc(8 * blocks * p)
    d_next = drv.to_device(np.zeros(1, dtype=np.uint32))
    fns["ols_rows"].prepared_call((blocks, 1, 1), (THREADS, 1, 1), d_A, np.int32(p), d_info,
                                  d_coef, d_rss, d_ws, d_next)
    coef = np.empty((p, p))
    rss = np.empty(p)
    info = np.empty(1, dtype=np.int32)
    wait_interruptibly(d_next)
    drv.memcpy_dtoh(coef, d_coef)
    drv.memcpy_dtoh(rss, d_rss)
    drv.memcpy_dtoh(info, d_info)
    limit = int(info[0]) if info[0] >= 0 else p
    # as the host: a row that overflowed (extreme column scales) is not solved
    solved = (np.arange(p) < limit) & np.isfinite(coef).all(axis=1) & np.isfinite(rss)
    return coef, rss, solved


# A task index past every target: a block of a task loop (lars_paths,
# ols_rows) that draws it returns. Below 2**31, as the kernels read it as int.
ABORT_TASK = 1 << 30


# wait_interruptibly queries the device back to back for this long (seconds)
# before it sleeps between queries: the adaptive lasso's kernels of a few
# hundred variables end within a millisecond or two, where sleeps of growing
# length saw their end up to twice as late (docs/design/adjacency.rst, "Waiting
# for the kernels").
SPIN_SECONDS = 2e-3
# ... then sleeps of at most this share of the time waited so far (and of
# ``interval``): the end of a kernel is seen at most about that much late.
LATE_SHARE = 0.125

# wait_interruptibly(progress=...) reads the task counter at most this often
PROGRESS_INTERVAL = 0.1


def wait_interruptibly(next_task=None, interval=1e-3, progress=None):
    """Wait for the work queued on the device, answering Ctrl-C meanwhile.

    A blocking copy or synchronisation runs in C and would hold a
    ``KeyboardInterrupt`` until the kernels end (seconds at large p).
    Querying an event from Python lets the signal handler run. On an
    interrupt, ``next_task`` (the task counter of the running task loop) is
    set past the last task from a stream that runs beside the kernel, so
    every block returns after its current target; the queued work then
    drains (milliseconds) and the interrupt is raised with the device idle
    and the context usable.

    With ``progress``, ``progress(drawn)`` is called at most every
    PROGRESS_INTERVAL with the value of ``next_task`` (tasks drawn by the
    blocks so far, each block drawing one past the last at its end), read by
    a copy on a stream that runs beside the kernel.

    The event is queried back to back for ``SPIN_SECONDS``, then between
    sleeps of ``LATE_SHARE`` of the time waited so far, at most
    ``interval``: small problems' kernels end within a millisecond, which
    any sleep would have lengthened, and long ones leave the core idle.
    """
    import pycuda.driver as drv

    done = drv.Event(drv.event_flags.DISABLE_TIMING)
    done.record()
    reader = None
    start = time.perf_counter()
    if progress is not None and next_task is not None:
        reader = drv.Stream(1), drv.pagelocked_empty(1, np.uint32)
        next_report = start + PROGRESS_INTERVAL
    try:
        while not done.query():
            now = time.perf_counter()
            waited = now - start
            if waited >= SPIN_SECONDS:
                time.sleep(min(LATE_SHARE * waited, interval))
            if reader is not None and now >= next_report:
                side, drawn = reader
                # CU_STREAM_NON_BLOCKING: the copy is not ordered after the kernel
                drv.memcpy_dtoh_async(drawn, next_task, side)
                side.synchronize()
                progress(int(drawn[0]))
                next_report = time.perf_counter() + PROGRESS_INTERVAL
    except KeyboardInterrupt:
        if next_task is not None:
            stop = drv.pagelocked_empty(1, np.uint32)
            stop[0] = ABORT_TASK
            side = drv.Stream(1)  # CU_STREAM_NON_BLOCKING: not ordered after the kernel
            drv.memcpy_htod_async(next_task, stop, side)
            side.synchronize()
        done.synchronize()
        raise


_guarded = _gpu.guarded  # (the name the launches and hsic use)


def _buffer_sizes(p, blocks, m):
    """Bytes of the LARS work buffers of one launch shape: doubles, then ints."""
    return 8 * blocks * (m * m + 8 * p), 4 * blocks * p


def _array_sizes(p):
    """Bytes of each array :func:`_launch` sends or reads back, for ``p`` variables."""
    return {"gram": 8 * p * p, "scatter": 8 * p * p, "coef": 8 * p * p, "rss": 8 * p,
            "targets": 4 * p, "kept": p * p, "rows": 8 * p * p, "status": 4 * p, "next": 4,
            "refit_next": 4}


def _sizes(key):
    """Bytes of each buffer :func:`_buffers` holds for ``key = (p, blocks, m)``."""
    work_bytes, iwork_bytes = _buffer_sizes(*key)
    return {"work": work_bytes, "iwork": iwork_bytes, **_array_sizes(key[0])}


def _kept_bytes(key):
    """Device bytes held now for ``key``."""
    sizes = _sizes(key)
    return sum(sizes[name] for name in _BUFFERS[key])


def _buffers(p, blocks, m):
    """The work buffers of one launch shape and the arrays of ``p`` variables, by name.

    Kept between calls (:func:`_release_arrays` frees large arrays after
    each): a fit's adjacency step launches the paths once, and allocating
    and freeing a dozen buffers each time cost more than the paths of a few
    hundred variables.
    """
    import pycuda.driver as drv

    key = (p, blocks, m)
    if key not in _BUFFERS:
        clear_cache()  # one shape at a time: a new shape frees the old buffers
        _BUFFERS[key] = {}
    bufs = _BUFFERS[key]
    for name, nbytes in _sizes(key).items():
        if name not in bufs:
            bufs[name] = drv.mem_alloc(max(nbytes, 8))
    return bufs


def _release_arrays(key):
    """Free the arrays of p variables kept for ``key`` above ``KEPT_ARRAYS_BYTES``."""
    sizes, bufs = _array_sizes(key[0]), _BUFFERS.get(key, {})
    if sum(sizes.values()) > KEPT_ARRAYS_BYTES:
        for name in sizes:
            if name in bufs:
                bufs.pop(name).free()


@_gpu.register_cache
def clear_cache(after_fault=False):
    """Free the kept buffers (after a fault their memory went with the context)."""
    for bufs in _BUFFERS.values():
        for buf in bufs.values():
            if not after_fault:
                buf.free()
    _BUFFERS.clear()


@_gpu.exclusive
def lars_rows(gram, scatter, targets, ols_coef, ols_rss, n_samples, gamma, tol, progress=None):
    """The adaptive lasso's rows of each target, on the GPU: LARS path, then refit.

    Parameters
    ----------
    gram : ndarray, shape (p, p)
        Gram matrix of the standardised data in causal order.
    scatter : ndarray, shape (p, p)
        Scatter matrix ``Xc.T @ Xc`` of the data in causal order (the refit's scale).
    targets : ndarray of int
        Positions ``k``; target ``k`` regresses on positions ``0..k-1``.
    ols_coef, ols_rss : ndarray, shape (p, p) and (p,)
        Least-squares coefficients (row ``k``) and residual sums of squares of
        each target on all earlier positions, in ``gram``'s scale.
    n_samples : int
    gamma : float
        Exponent of the adaptive weights.
    tol : float
        The refit's singularity bound (``SINGULAR_TOL``): a Cholesky pivot
        that keeps no more than ``tol`` of its diagonal entry hands the
        target back.
    progress : callable, optional
        ``progress(done)``: a lower bound of the targets finished, at most
        every 0.1 s while the kernel runs, and ``len(targets)`` at its end.

    Returns
    -------
    B : ndarray, shape (p, p)
        Row ``k``: the least squares of target ``k`` on the predictors kept
        at its BIC-best point, on ``scatter``'s scale (zero where not ``ok``
        and outside the targets).
    ok : ndarray of bool
        Per target: its row is here (False: a branch of the path the port
        leaves to scikit-learn, or kept predictors singular to ``tol``;
        recompute that target on the CPU).
    """
    import pycuda.driver as drv

    ctx = _gpu.context()
    fns = _kernels(ctx.handle)
    p = gram.shape[0]
    targets = np.asarray(targets, dtype=np.int32)
    ok = np.zeros(len(targets), dtype=bool)
    if len(targets) == 0:
        return np.zeros((p, p)), ok
    m = max(1, min(int(targets.max()), MAX_ACTIVE))
    blocks = min(len(targets), _blocks_for(p))
    free, _ = drv.mem_get_info()
    # buffers kept from an earlier call are reused or freed: count them as free,
    # so the block count does not depend on what the last call left behind
    free += sum(_kept_bytes(key) for key in _BUFFERS)
    per_block = sum(_buffer_sizes(p, 1, m))
    budget = free - sum(_array_sizes(p).values()) - (64 << 20)
    if budget < per_block:
        raise _gpu.GPUMemoryError(
            f"the adaptive lasso of p={p} variables needs {per_block / 2**20:.0f} MiB of GPU "
            f"memory per block; {max(free, 0) / 2**20:.0f} MiB are free")
    blocks = min(blocks, budget // per_block)
    key = (p, blocks, m)
    try:
        bufs = _buffers(*key)
        B = np.empty((p, p))  # (every entry downloaded)
        return _guarded(_launch, fns, gram, scatter, targets, ols_coef, ols_rss, n_samples,
                        gamma, tol, m, blocks, bufs, progress, B, ok)
    finally:
        _release_arrays(key)  # (after a fault none are kept: their memory went with the context)


def _queue_kernels(fns, bufs, p, n_targets, n_samples, gamma, tol, m, blocks, events=None):
    """Reset the counters, kept sets, rows and statuses in ``bufs``, then queue ``lars_paths``
    and ``refit_rows`` after it over the ``n_targets`` targets in ``bufs["targets"]``.

    ``events``: three pycuda Events, recorded before the paths, between the
    kernels and after the refits (``benchmarks/probe_lars_wait.py``).
    """
    import pycuda.driver as drv

    drv.memset_d32(bufs["next"], 0, 1)
    drv.memset_d32(bufs["refit_next"], 0, 1)
    drv.memset_d8(bufs["kept"], 0, p * p)
    drv.memset_d32(bufs["rows"], 0, 2 * p * p)
    drv.memset_d32(bufs["status"], 1, n_targets)
    grid, block = (int(blocks), 1, 1), (THREADS, 1, 1)
    if events is not None:
        events[0].record()
    fns["lars_paths"].prepared_call(
        grid, block, bufs["gram"], np.int32(p), bufs["targets"], np.int32(n_targets),
        bufs["coef"], bufs["rss"], np.float64(n_samples), np.float64(gamma), np.int32(m),
        bufs["work"], bufs["iwork"], bufs["next"], bufs["kept"], bufs["status"])
    if events is not None:
        events[1].record()
    # (queued after the paths; each block's factor in the paths' workspace)
    fns["refit_rows"].prepared_call(
        grid, block, bufs["scatter"], np.int32(p), bufs["targets"], np.int32(n_targets),
        bufs["kept"], np.float64(tol), bufs["work"], np.int64(_buffer_sizes(p, 1, m)[0] // 8),
        bufs["refit_next"], bufs["rows"], bufs["status"])
    if events is not None:
        events[2].record()


def _launch(fns, gram, scatter, targets, ols_coef, ols_rss, n_samples, gamma, tol, m, blocks,
            bufs, progress, B, ok):
    """Upload into ``bufs``, run ``lars_paths`` over all targets and ``refit_rows`` after
    it, download ``B`` and ``ok``."""
    import pycuda.driver as drv

    p = gram.shape[0]
    n_targets = len(targets)
    # largest targets first: they take longest
    order = np.argsort(-targets, kind="stable")
    drv.memcpy_htod(bufs["gram"], np.ascontiguousarray(gram, dtype=np.float64))
    drv.memcpy_htod(bufs["scatter"], np.ascontiguousarray(scatter, dtype=np.float64))
    drv.memcpy_htod(bufs["targets"], np.ascontiguousarray(targets[order]))
    drv.memcpy_htod(bufs["coef"], np.ascontiguousarray(ols_coef, dtype=np.float64))
    drv.memcpy_htod(bufs["rss"], np.ascontiguousarray(ols_rss, dtype=np.float64))
    _queue_kernels(fns, bufs, p, n_targets, n_samples, gamma, tol, m, blocks)
    d_next, d_status = bufs["next"], bufs["status"]
    status = np.empty(n_targets, dtype=np.int32)

    def finished(drawn):
        # every block holds at most one unfinished target it drew
        progress(max(0, min(drawn, n_targets) - int(blocks)))

    # (an interrupt stops the paths' blocks; the refits of the paths done then run)
    wait_interruptibly(d_next, progress=finished if progress is not None else None)
    drv.memcpy_dtoh(status, d_status)
    drv.memcpy_dtoh(B, bufs["rows"])
    ok[order] = status == 0
    if progress is not None:
        progress(n_targets)
    return B, ok
