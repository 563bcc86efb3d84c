"""Edge weights once the causal order is known.

Two estimators of ``B`` (``B[i, j]`` the direct effect of column ``j`` on
column ``i``), each regressing every variable on the variables before it in
the causal order:

* :func:`ols_adjacency`: least squares, all targets from one Cholesky
  factorisation of the covariance;
* :func:`adaptive_lasso_adjacency`: lingam's default (``predict_adaptive_lasso``
  in lingam 1.13): adaptive-lasso pruning selected by BIC, then least squares
  on the kept predictors.

:func:`estimate_adjacency` picks one by name and applies an optional
coefficient threshold. Prior knowledge, where given, removes the predictors
that lingam removes: ``prior_knowledge[target, j] == 0`` ("no directed path
from ``j`` to ``target``").

Both work from the scatter matrix ``Xc.T @ Xc`` of the centred data, computed
once per call: a regression never touches the samples again, except least
squares over linearly dependent predecessors, whose basis comes from the data
(the covariance squares their condition number).

The public functions check their input as ``paralingam.fit`` does and
rescale columns by exact powers of two (``_common``). While they run,
numpy's and scipy's BLAS take the thread limits of ``fit``'s adjacency step
after a CUDA search (``paralingam._blas.for_adjacency``: every BLAS on the
calling thread below ``_blas.THREADED_BLAS_MIN_FEATURES`` variables, else
scipy's own BLAS alone; ``fit``'s step also keeps every BLAS there where
fewer than ``_blas.THREADED_BLAS_MIN_BASIS`` variables are not exactly
explained, a count the functions do not have); the limits hold for the
whole process while a call runs. The implementation is
in private modules, one per part:

* ``_common``: the checks, the rescaling, the scatter matrix and the names
  every route shares (``SINGULAR_TOL``, :class:`AdjacencyWarning`);
* ``_least_squares``: :func:`ols_adjacency`, the Cholesky rows on the host
  or the GPU;
* ``_min_norm``: minimum-norm rows past a dependent variable (Gram-Schmidt
  on the data);
* ``_adaptive_lasso``: :func:`adaptive_lasso_adjacency` with its compiled,
  CUDA and sklearn routes;
* ``_prior``: :func:`allowed_predictors` and least-squares rows without
  excluded predictors;
* ``_lasso`` / ``_linalg`` (compiled) and ``_cuda_adjacency`` (GPU).

The constants are re-exported here to be read; a test or a tuning that
changes one sets it on the module that uses it (for instance
``_adaptive_lasso.CUDA_LASSO_MIN_FEATURES``).
"""

import numpy as np

from .. import _blas
from .._progress import check_progress
from .._validation import check_coef_threshold
from ._adaptive_lasso import (CUDA_LASSO_MIN_FEATURES, _adaptive_lasso_adjacency,
                              adaptive_lasso_adjacency)
from ._common import (ADJACENCY_BACKENDS, ADJACENCY_METHODS, SHARED_SCALE_SPAN, SINGULAR_TOL,
                      AdjacencyWarning, _checked_inputs, _scaled_back)
from ._least_squares import CUDA_OLS_MIN_FEATURES, _ols_adjacency, ols_adjacency
from ._min_norm import MIN_NORM_REFINED, MIN_NORM_REFINEMENTS
from ._prior import SCHUR_MAX_EXCLUDED, SCHUR_MIN_PIVOT, allowed_predictors

__all__ = [
    "estimate_adjacency", "ols_adjacency", "adaptive_lasso_adjacency", "allowed_predictors",
    "AdjacencyWarning", "ADJACENCY_METHODS", "ADJACENCY_BACKENDS", "SINGULAR_TOL",
    "SHARED_SCALE_SPAN", "CUDA_LASSO_MIN_FEATURES", "CUDA_OLS_MIN_FEATURES", "MIN_NORM_REFINEMENTS",
    "MIN_NORM_REFINED", "SCHUR_MAX_EXCLUDED", "SCHUR_MIN_PIVOT",
]


def estimate_adjacency(
    X,
    causal_order,
    *,
    method="adaptive_lasso",
    prior_knowledge=None,
    coef_threshold=None,
    backend=None,
    n_threads=None,
    scatter=None,
    progress=False,
):
    """Estimate the adjacency matrix of ``X`` given its causal order.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
        The data, float64.
    causal_order : sequence of int
        Column indices, root first.
    method : {"adaptive_lasso", "ols"}
        ``"adaptive_lasso"`` (lingam's default) or ``"ols"`` (least squares on
        every earlier variable).
    prior_knowledge : array-like, shape (n_features, n_features), optional
        lingam's prior-knowledge matrix; ``prior_knowledge[i, j] == 0`` keeps
        ``j`` out of the regression of ``i``.
    coef_threshold : float, optional
        Coefficients with ``|b| < coef_threshold`` are set to zero; a finite
        number >= 0, as for ``DirectLiNGAM``.
    backend : {None, "cpu", "cuda"}
        Where the adaptive lasso's paths run (see :func:`adaptive_lasso_adjacency`).
    n_threads : int, optional
        CPU threads of the adaptive lasso, and with ``backend="cuda"`` of the
        data's QR on rank-deficient data, 1..1024 (default: all cores, or
        ``OMP_NUM_THREADS`` up to the number of cores).
    scatter : ndarray, shape (n_features, n_features), optional
        ``Xc.T @ Xc`` of the centred data, when already known.
    progress : bool or {"auto"}, default False
        A bar of the adaptive lasso's targets on stderr (:mod:`paralingam._progress`):
        ``True`` always, ``"auto"`` on a terminal after a second, ``False``
        never. Least squares (one factorisation) reports none.

    Returns
    -------
    B : ndarray, shape (n_features, n_features)

    Notes
    -----
    numpy's and scipy's BLAS threads are limited during the call (see
    :mod:`paralingam.adjacency`).
    """
    coef_threshold = check_coef_threshold(coef_threshold)  # DirectLiNGAM's rule
    check_progress(progress)
    X, order, scatter, exponents, names = _checked_inputs(X, causal_order, scatter, n_threads)
    with _blas.for_adjacency(len(order)):  # (as fit's step after a CUDA search)
        B = _estimate_adjacency(X, order, method=method, prior_knowledge=prior_knowledge,
                                backend=backend, n_threads=n_threads, scatter=scatter,
                                progress=progress)
    B = _scaled_back(B, exponents, names, n_threads)
    if coef_threshold is not None:  # on the data's own scale
        B[np.abs(B) < coef_threshold] = 0.0
    return B


def _estimate_adjacency(X, order, *, method, prior_knowledge=None, backend=None,
                        n_threads=None, scatter=None, progress=False, dependent=False,
                        first_explained=None, device_copy=None, explained=()):
    """:func:`estimate_adjacency` on checked input (float64 ``X``, ``order`` a permutation).

    No ``coef_threshold``: the callers apply it on the data's own scale.
    ``dependent``: the search found variables that others explain (least
    squares may then start the data's QR early: ``_least_squares.qr_ahead``);
    ``first_explained``: the position in ``order`` of the first of them
    (after a CUDA search, least squares and the adaptive lasso's weights
    then factorise only the covariance's leading block:
    ``_least_squares._hinted_factor``).
    ``device_copy``: the CUDA search's copy of ``X`` on the device
    (``paralingam.search._cuda.DeviceCopy``), which the data's QR on the GPU
    then reads instead of uploading ``X`` (:mod:`._cuda_qr`); ``explained``:
    the variables that search found explained, whose complement the
    adaptive lasso's weights then factorise alone
    (:func:`._cuda_low_rank.weights_of_copy`).
    """
    if method == "adaptive_lasso":
        B = _adaptive_lasso_adjacency(X, order, prior_knowledge=prior_knowledge,
                                      n_threads=n_threads, backend=backend, scatter=scatter,
                                      progress=progress, first_explained=first_explained,
                                      device_copy=device_copy, explained=explained)
    elif method == "ols":
        B = _ols_adjacency(X, order, prior_knowledge=prior_knowledge, backend=backend,
                           scatter=scatter, n_threads=n_threads, dependent=dependent,
                           first_explained=first_explained, device_copy=device_copy)
    else:
        raise ValueError(f"adjacency must be one of {ADJACENCY_METHODS}; got {method!r}")
    return B
