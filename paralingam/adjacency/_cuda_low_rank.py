"""Least squares of data of small rank wholly on the GPU, from the CUDA search's copy of the data.

``fit``'s least-squares matrix (:func:`ols_of_copy`, below) and the
adaptive lasso's minimum-norm weights (:func:`weights_of_copy`: steps 1 to
4, each column divided by its standard deviation, the rows downloaded into
the weights) share the steps.

After a CUDA search that found variables explained by earlier ones, the
host's route (:mod:`._least_squares`) makes the scatter matrix, the
covariance in causal order and its leading Cholesky factor, then the data's
QR on the GPU (:mod:`._cuda_qr`) and the minimum-norm rows
(:mod:`._cuda_min_norm`), and places and scales the rows back: passes
over p x p arrays on the host, and a QR of all ``p`` columns whose rank is
a small part of them. Where the search's hint leaves
a basis of at most ``MAX_BASIS`` variables, ``fit``'s least squares run
here instead, and only the finished matrix comes back
(docs/design/adjacency.rst, "Data of small rank on the device"):

1. The *basis* is the variables the search did not find explained, in
   causal order. Their columns of the search's copy, centred and over
   ``sqrt(n)`` (``gather_centred``, as :mod:`._cuda_qr` reads them), are
   factorised by cuSOLVER's ``dgeqrf``: ``n x m`` for ``m`` of them, where
   the host's route factorises all ``p``.
2. All ``p`` columns, gathered the same way, are turned by that ``Q^T``
   (``dormqr``): the first ``m`` entries of a column are its coordinates on
   the basis vectors, the rest its residual on all of them; these are the
   coordinates :mod:`._cuda_min_norm` reaches from ``R``.
3. The basis is checked as there, for every variable: each must join
   exactly when its residual on the basis vectors before it keeps more than
   ``SINGULAR_TOL`` of its squared norm, the test of the host's Gram-Schmidt
   (:func:`._min_norm._joins`). A hint that fails it declines.
4. One block per variable solves its minimum-norm row (``min_norm_rows``;
   the rows before the first explained variable are then least squares on
   independent predecessors, which the host's route takes from the
   covariance's Cholesky factor).
5. ``placed_scaled`` puts each row in the data's order and scales it back
   (``ldexp`` by the columns' exponents, as :func:`._common._scaled_back`).

The rows agree with the host route's to rounding (as the minimum-norm rows
on the GPU do with the host's). The route declines (None: the caller runs
the host's route, which reports any failure) where :func:`suits` does not
hold, where the device lacks the memory, where the check of step 3 or a
pivot fails, where a coefficient is not finite before or after the
scaling (the host's route then raises its error naming the columns), or
where an allocation, a launch or a cuSOLVER call fails.
"""

import numpy as np

from .. import _gpu
from . import _cuda_min_norm

# Whether fit's least squares and the adaptive lasso's weights after a CUDA
# search run here where they can (False: the host's route and the whole QR's,
# for A/B runs and tests).
ENABLED = True

# Device memory kept free beside the route's arrays and cuSOLVER's workspace.
SLACK_BYTES = 64 << 20

# Fewest variables of fit's least squares here. The adaptive lasso's weights
# keep the minimum-norm rows' _cuda_min_norm.MIN_FEATURES (its LARS paths
# move with the rows' rounding on data with near copies); fit's matrix has
# no paths, and the host's route (the whole QR, the rows on one core) took
# 1.6-3.0 ms where this one took 0.8-0.9 ms, from 16 variables (the fewest
# measured) to E. coli's 87 (docs/design/adjacency.rst, "Data of small rank
# on the device").
OLS_MIN_FEATURES = 16


def suits(n, p, m, min_features=None):
    """Whether ``n`` samples of ``p`` variables with a basis of ``m`` can take this route.

    At least ``min_features`` variables (default: the minimum-norm rows'
    ``MIN_FEATURES``, the adaptive lasso's weights; ``fit``'s least squares
    pass ``OLS_MIN_FEATURES``) and a basis of at most ``MAX_BASIS`` (the
    block's shared memory); fewer basis vectors than samples; sizes that
    cuSOLVER's 32-bit API holds.
    """
    from ._cuda_qr import INT32_MAX

    if min_features is None:
        min_features = _cuda_min_norm.MIN_FEATURES
    return (ENABLED and p >= min_features and 0 < m <= _cuda_min_norm.MAX_BASIS
            and m < n and n * p <= INT32_MAX)


def device_bytes(n, p, m, placed=True):
    """Device memory of the route, less cuSOLVER's workspace: the columns, the basis's, the rows
    and (``placed``: ``fit``'s) the placed matrix."""
    return 8 * (n * p + n * m + (2 if placed else 1) * p * p) + 64 * p


def _basis(device_copy, order, explained, min_features=None):
    """``joins`` of the search's hint, or None where the route does not suit the data.

    ``joins``: per position of the causal order, whether the variable is in
    the basis (not explained). The first variable must be in it, and at
    least one explained. ``min_features`` as for :func:`suits`.
    """
    from . import _cuda_qr

    order = np.asarray(order)
    p, n = len(order), device_copy.n
    is_explained = np.zeros(p, dtype=bool)
    is_explained[np.fromiter(explained, dtype=np.intp)] = True
    joins = ~is_explained[order]
    first = int(np.argmin(joins)) if not joins.all() else p
    if not (0 < first < p and suits(n, p, int(joins.sum()), min_features)
            and _cuda_qr.copy_holds(device_copy, (n, p))):
        return None
    return joins


def applies(device_copy, order, explained):
    """Whether the search's hint leaves a basis the adaptive lasso's weights take here (before
    the route's own checks)."""
    return device_copy is not None and bool(explained) and \
        _basis(device_copy, order, explained) is not None


def _run(device_copy, order, explained, min_features, body, *args):
    """``body(drv, cusolver, handle, device_copy, order, joins, *args)`` in the context, or
    None where the route declines before or in it."""
    from . import _cuda_qr

    joins = _basis(device_copy, order, explained, min_features)
    if joins is None:
        return None
    cusolver = _cuda_qr._cusolver()
    if cusolver is None or not hasattr(cusolver, "dormqr"):
        return None
    drv = _cuda_qr._driver()
    _gpu.context()
    try:
        return _gpu.guarded(body, drv, cusolver, _cuda_qr._handle(cusolver), device_copy,
                            np.asarray(order, dtype=np.int32), joins, *args)
    except (drv.Error, MemoryError, RuntimeError):
        # (an allocation or a cuSOLVER call that failed: the host's route
        # runs, and a fault that broke the context raises again there)
        return None


@_gpu.exclusive
def ols_of_copy(device_copy, order, explained, exponents):
    """``fit``'s least-squares adjacency matrix, computed on the device from the search's copy.

    Parameters
    ----------
    device_copy : paralingam.search._cuda.DeviceCopy
        The data the search uploaded, rescaled by ``exponents`` (exactly
        the host's rescaled columns).
    order : ndarray of int, shape (p,)
        The causal order.
    explained : collection of int
        The variables the search found explained by earlier ones (its hint).
    exponents : ndarray of int, shape (p,)
        The columns' rescaling (:func:`._common._scaled_back`'s).

    Returns
    -------
    B : ndarray, shape (p, p) or None
        On the data's scale and in its order, as :func:`._least_squares._ols_adjacency`
        followed by :func:`._common._scaled_back` gives it (to rounding); None
        where the route declines (the module's list).
    """
    return _run(device_copy, order, explained, OLS_MIN_FEATURES, _ols, exponents)


@_gpu.exclusive
def weights_of_copy(device_copy, order, explained, divisor, rows_from, out):
    """The adaptive lasso's minimum-norm weights, computed on the device from the search's copy.

    The least squares of every variable from position ``rows_from`` on, on
    all variables before it in the causal order, on the standardised scale
    (the columns divided by ``divisor``): the rows
    :func:`._adaptive_lasso._min_norm_weights` takes from
    :func:`._cuda_min_norm.rows_on_device` after the data's whole QR, here
    from the basis's QR (steps 1 to 4 of the module, each column divided by
    its ``divisor`` after the gathering).

    Parameters
    ----------
    device_copy, order, explained
        As for :func:`ols_of_copy`.
    divisor : ndarray, shape (p,)
        The columns' standard deviations, in causal order.
    rows_from : int
        The first position whose row is computed (0 <= rows_from < p).
    out : ndarray of float64, shape (p - rows_from, p), C-ordered
        Where the rows go (also where the route declines after the
        download: the caller then overwrites them).

    Returns
    -------
    out : ndarray or None
        ``out`` with the rows, to rounding those of the data's whole QR;
        None where the route declines (the module's list).
    """
    return _run(device_copy, order, explained, None, _weights, divisor, rows_from, out)


def _every_row(dev, cusolver, handle, device_copy, order, joins, divisor=None):
    """Steps 1 to 4 of the module: every variable's row (p x p, C order, on the device), or
    None where cuSOLVER fails, a norm is not finite, the hint fails its check (for every
    variable) or a pivot fails.

    ``divisor``: each of the ``p`` gathered columns divided by its entry
    before ``Q^T`` turns it (not the basis's columns, whose ``Q`` spans the
    same space either way).
    """
    n, p, m = device_copy.n, len(order), int(joins.sum())
    scale = np.float64(1.0 / np.sqrt(n))
    d_a, d_w = dev.alloc(8 * n * p), dev.alloc(8 * n * m)
    for d_out, cols in ((d_w, order[joins]), (d_a, order)):  # (the same bits per column)
        dev.launch("gather_centred", len(cols), device_copy.ptr, np.int64(device_copy.ld),
                   np.int32(n), dev.upload(np.ascontiguousarray(cols)), d_out, scale)
    if divisor is not None:
        dev.launch("divided_columns", p, d_a, np.int64(n), np.int32(n),
                   dev.upload(np.ascontiguousarray(divisor, dtype=np.float64)))
    if not dev.qr_applied(cusolver, handle, d_w, n, m, d_a, p):
        return None
    sq_norm = dev.squares(d_a, n, np.zeros(p), np.full(p, n))
    if not np.isfinite(sq_norm).all():
        return None
    return dev.checked_rows(d_a, n, n, 0, joins, sq_norm)


def _weights(drv, cusolver, handle, device_copy, order, joins, divisor, rows_from, out):
    """:func:`weights_of_copy` in the current context (errors: the caller's)."""
    n, p, m = device_copy.n, len(order), int(joins.sum())
    if not 0 <= rows_from < p or out.shape != (p - rows_from, p) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-ordered {p - rows_from} x {p} array")
    if device_bytes(n, p, m, placed=False) + SLACK_BYTES > drv.mem_get_info()[0]:
        return None
    dev = _cuda_min_norm.DeviceWork(drv)
    try:
        d_coef = _every_row(dev, cusolver, handle, device_copy, order, joins, divisor)
        if d_coef is None:
            return None
        drv.memcpy_dtoh(out, int(d_coef) + 8 * p * rows_from)
        return out if np.isfinite(out).all() else None
    finally:
        dev.free()


def _ols(drv, cusolver, handle, device_copy, order, joins, exponents):
    """:func:`ols_of_copy` in the current context (errors: the caller's)."""
    n, p, m = device_copy.n, len(order), int(joins.sum())
    if device_bytes(n, p, m) + SLACK_BYTES > drv.mem_get_info()[0]:
        return None
    dev = _cuda_min_norm.DeviceWork(drv)
    try:
        d_coef = _every_row(dev, cusolver, handle, device_copy, order, joins)
        if d_coef is None:
            return None
        d_out = dev.alloc(8 * p * p)
        d_status = dev.upload(np.zeros(1, dtype=np.int32))
        dev.launch("placed_scaled", p, d_coef, np.int32(p), dev.upload(order),
                   dev.upload(np.ascontiguousarray(exponents, dtype=np.int32)), d_out, d_status)
        status = np.empty(1, dtype=np.int32)
        drv.memcpy_dtoh(status, d_status)
        if status[0]:
            return None
        B = np.empty((p, p))
        drv.memcpy_dtoh(B, d_out)
        return B
    finally:
        dev.free()
