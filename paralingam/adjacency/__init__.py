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

The three public functions check their input as ``paralingam.fit`` does
(a 2-D table of finite numbers; constant columns are allowed here) and that
``causal_order`` lists every column once, with errors that name the
problem; ``fit`` and the estimator call the private ones on checked data.
Like ``fit``, they regress on columns rescaled by powers of two (exactly, see
``_column_exponents``) and scale the coefficients back, so that tiny data
(``|x|`` ~ 1e-170, whose squares underflow) give the coefficients of the same
data at ordinary scale.
"""

import warnings

import numpy as np

from .. import _memory
from .._preparation import column_exponents
from .._progress import Progress, check_progress
from .._validation import (MAX_THREADS, _list, _name, as_data_matrix, check_coef_threshold,
                          check_int, check_order, check_positive, default_threads,
                          user_stacklevel)
from ..prior import _as_matrix as _prior_matrix

ADJACENCY_METHODS = ("adaptive_lasso", "ols")

# The public functions rescale columns within 2**SHARED_SCALE_SPAN of the
# largest by its power of two (see _column_exponents): after scaling, their
# centred values (a spread of at least 8 eps of their maximum, else they are
# constant) stay above 2**-450 and their squares above 2**-900, clear of
# float64's smallest normal number, 2**-1022.
SHARED_SCALE_SPAN = 400

# Backends of the adjacency step: "cuda" factorises the covariance (least
# squares, the adaptive lasso's weights) and runs the LARS paths on the GPU.
ADJACENCY_BACKENDS = (None, "cpu", "cuda")

# Least-squares systems whose Cholesky pivot keeps no more than this fraction
# of its diagonal (1 - R^2 of a predictor on the others) are solved as
# minimum-norm least squares instead: the same bound as the order search's
# collinear_tol (paralingam.search.policy).
SINGULAR_TOL = 1e-10

# The GPU runs the adaptive lasso (weights factor and paths) from this many
# variables on: one block per target wins once paths are long (H100,
# benchmarks/bench_adjacency_h100.log: p=500 0.10 s against 0.43 s on 16 host
# cores), while at p=100 a resample's paths took ~12 ms on the GPU against
# ~5 ms on the host (bench_bootstrap).
CUDA_LASSO_MIN_FEATURES = 256

_EPS = np.finfo(np.float64).eps

# The adaptive lasso's minimum-norm weights reduce the data to p rows by QR
# first (O(n p^2)) only when the rank exceeds p / MIN_NORM_QR_RANK; below it,
# Gram-Schmidt on the n-row columns (O(n p r)) costs less.
MIN_NORM_QR_RANK = 4

# Refinement steps of a block of dependent variables (_dependent_block): each
# multiplies the error by about eps * cond of the block start's factor.
MIN_NORM_REFINEMENTS = 3
MIN_NORM_REFINED = 1e-12

# Targets whose predictors prior knowledge restricts: with at most this
# fraction of their predecessors excluded, the row comes from the inverse
# factor of the whole order (_row_without, O(k^2 |E|)) instead of a
# factorisation per target (O(k^3)), where that factor's pivots all keep more
# than SCHUR_MIN_PIVOT of their variance.
SCHUR_MAX_EXCLUDED = 0.125
SCHUR_MIN_PIVOT = 1e-6

# sklearn's LassoLarsIC defaults, which lingam uses unchanged.
_LARS_MAX_ITER = 500
_LARS_EPS = np.finfo(np.float64).eps


class AdjacencyWarning(UserWarning):
    """A regression of the adjacency step was numerically degenerate."""


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
        CPU threads of the adaptive lasso, 1..1024 (default: all cores, or
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
    """
    coef_threshold = check_coef_threshold(coef_threshold)  # DirectLiNGAM's rule
    check_progress(progress)
    X, order, scatter, exponents, names = _checked_inputs(X, causal_order, scatter, n_threads)
    B = _estimate_adjacency(X, order, method=method, prior_knowledge=prior_knowledge,
                            backend=backend, n_threads=n_threads, scatter=scatter,
                            progress=progress)
    B = _scaled_back(B, exponents, names)
    if coef_threshold is not None:  # on the data's own scale
        B[np.abs(B) < coef_threshold] = 0.0
    return B


def _estimate_adjacency(X, order, *, method, prior_knowledge=None, backend=None,
                        n_threads=None, scatter=None, progress=False):
    """:func:`estimate_adjacency` on checked input (float64 ``X``, ``order`` a permutation).

    No ``coef_threshold``: the callers apply it on the data's own scale.
    """
    if method == "adaptive_lasso":
        B = _adaptive_lasso_adjacency(X, order, prior_knowledge=prior_knowledge,
                                      n_threads=n_threads, backend=backend, scatter=scatter,
                                      progress=progress)
    elif method == "ols":
        B = _ols_adjacency(X, order, prior_knowledge=prior_knowledge, backend=backend,
                           scatter=scatter)
    else:
        raise ValueError(f"adjacency must be one of {ADJACENCY_METHODS}; got {method!r}")
    return B


def _checked_inputs(X, causal_order, scatter, n_threads=None):
    """Checked input of the public functions, with ``X``'s columns rescaled.

    The public functions take user input; ``paralingam.fit`` and the
    estimator pass data they have already checked (and rescaled) to the
    private ones. Constant columns are accepted here: as predictors they get
    coefficient zero, as targets a zero row. ``n_threads``, where given, must
    be an integer in 1..``MAX_THREADS``.

    Returns
    -------
    data : ndarray of float64
        ``X`` with column ``j`` scaled by ``2**-exponents[j]`` (exactly; see
        :func:`_column_exponents`): the scatter matrix of columns ~1e-170
        would underflow to zero, and with it every coefficient.
    order : ndarray of intp
        ``causal_order``, a permutation of the columns.
    scatter : ndarray or None
        The given scatter matrix, rescaled as ``data``.
    exponents : ndarray of int
        For :func:`_scaled_back`.
    names : list of str or None
        The column names, for messages.
    """
    if n_threads is not None:  # 0 or -1 would be OpenMP's default, 10**6 a crash
        check_int("n_threads", n_threads, high=MAX_THREADS)
    data, names = as_data_matrix(X, allow_constant=True)
    order = check_order(causal_order, data.shape[1])
    if scatter is not None:
        scatter = _checked_scatter(scatter, data.shape[1])
    exponents = _column_exponents(data)
    data = np.ldexp(data, -exponents, out=data)  # as_data_matrix's copy: ours to change
    if scatter is not None:
        scatter = np.ldexp(scatter, -(exponents[:, None] + exponents[None, :]))
    return data, order, scatter, exponents, names


def _checked_scatter(scatter, p):
    """A given scatter matrix as float64, checked to be (p, p) and finite."""
    try:
        S = np.asarray(scatter, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"scatter must be a numeric (n_features, n_features) matrix: "
                         f"{exc}") from None
    if S.shape != (p, p):
        raise ValueError(f"scatter must have shape (n_features, n_features) = "
                         f"({p}, {p}); got {S.shape}")
    # NaN reached LAPACK: a LinAlgError, and a "DLASCL" line on stderr
    bad = ~np.isfinite(S)
    if bad.any():
        where = [f"[{i}, {j}] = {float(S[i, j])!r}" for i, j in zip(*np.nonzero(bad))]
        raise ValueError(f"scatter must hold finite numbers; got NaN or infinite entries at "
                         f"{_list(where)}")
    return S


def _column_exponents(X):
    """Per column ``e``: ``X[:, j] * 2**-e[j]`` is ``X`` rescaled without underflow.

    Scaling by powers of two is exact. ``paralingam.fit`` scales every column
    to a maximum in [0.5, 1); here all columns within
    ``2**SHARED_SCALE_SPAN`` of the largest share its exponent, because one
    power of two for all changes no least-squares solution, while separate
    ones change the minimum-norm rows of rank-deficient (wide) data, whose
    norm depends on the columns' relative scales and which
    :func:`ols_adjacency` matches to ``numpy.linalg.lstsq`` on the data. Only
    smaller columns, whose squares would underflow, get their own exponent.
    """
    own = column_exponents(X)  # max |X[:, j]| * 2**-own[j] in [0.5, 1)
    if own.size == 0:
        return own
    shared = own.max()
    return np.where(own >= shared - SHARED_SCALE_SPAN, shared, own)


def _scaled_back(B, exponents, names):
    """Coefficients on rescaled columns (:func:`_checked_inputs`) on the data's scale.

    Raises
    ------
    ValueError
        When a coefficient exceeds float64 (columns whose scales are more
        than float64's range apart), naming the two columns.
    """
    with np.errstate(over="ignore"):
        B = np.ldexp(B, exponents[:, None] - exponents[None, :])
    if not np.isfinite(B).all():
        i, j = np.argwhere(~np.isfinite(B))[0]
        raise ValueError(
            f"the edge weight of {_name(names, j)} on {_name(names, i)} exceeds float64: their "
            "scales differ by more than float64's range; rescale them")
    return B


def ols_adjacency(X, causal_order, *, prior_knowledge=None, backend=None, scatter=None):
    """Least-squares regression of each variable on all earlier ones.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    causal_order : sequence of int
    prior_knowledge : array-like, shape (n_features, n_features), optional
        ``prior_knowledge[i, j] == 0`` removes ``j`` from the predictors of
        ``i`` (lingam's convention).
    backend : {None, "cpu", "cuda"}
        ``"cuda"``: the Cholesky factor and the rows come from the GPU
        (``kernels/adjacency.cu``); when a pivot is singular to
        ``SINGULAR_TOL``, or the GPU cannot run (a warning says why), the
        host computes them. The O(n p^2) part, the scatter matrix, can come
        from the GPU search through ``scatter``.
    scatter : ndarray, shape (n_features, n_features), optional
        The scatter matrix ``Xc.T @ Xc`` of the centred data when it is
        already known (``paralingam.fit`` passes the one the CUDA backend
        computed); by default it is computed from ``X``.

    Returns
    -------
    B : ndarray, shape (n_features, n_features)
        ``B[i, j]`` the coefficient of column ``j`` in the regression of
        column ``i``; zero where ``j`` is not before ``i``.

    Notes
    -----
    With the covariance in causal order factorised as ``L D L^T`` (unit lower
    ``L``), the regressions of all variables on their predecessors are
    ``I - L^{-1}``: one Cholesky factorisation gives every row. Rank-deficient
    data (a variable that is an exact combination of earlier ones: its pivot
    keeps no more than ``SINGULAR_TOL`` of its variance, as with wide data
    after n - 1 variables) has no Cholesky factor; then each row is the
    minimum-norm least-squares solution, all rows from one in-order basis of
    the data in O(p^2 r) for rank r (:func:`_min_norm_rows`).
    Targets whose predictors prior knowledge restricts take their row from
    the whole order's inverse factor when few predictors are excluded
    (:func:`_row_without`), else as the last row of the same computation on
    their kept predictors.
    """
    X, order, scatter, exponents, names = _checked_inputs(X, causal_order, scatter)
    B = _ols_adjacency(X, order, prior_knowledge=prior_knowledge, backend=backend,
                       scatter=scatter)
    return _scaled_back(B, exponents, names)


def _ols_adjacency(X, order, *, prior_knowledge=None, backend=None, scatter=None):
    """:func:`ols_adjacency` on checked input (float64 ``X``, ``order`` a permutation)."""
    if backend not in ADJACENCY_BACKENDS:
        raise ValueError(f"backend must be one of {ADJACENCY_BACKENDS[1:]}; got {backend!r}")
    n, p = X.shape
    _memory.require("the adjacency step (least squares)",
                    _memory.ols_bytes(n, p, scatter_given=scatter is not None), _memory.FEWER)
    if scatter is None:
        scatter = _scatter(X)[1]
    cov = scatter[np.ix_(order, order)] / X.shape[0]
    B_ord = None
    if backend == "cuda":  # the factor on the GPU; any failed pivot: the host's path
        coef, rss, solved = _least_squares_factor(cov, True)
        if solved.all() and (rss > _pivot_noise(cov, coef)).all():
            B_ord = coef
    if B_ord is None:
        B_ord = _ols_rows_host(cov, X, order)
    B = np.zeros((p, p))
    B[np.ix_(order, order)] = B_ord

    allowed = allowed_predictors(prior_knowledge, p)
    if allowed is not None:
        W = _inverse_factor(cov, B_ord)
        for k in range(1, p):
            target, earlier = order[k], order[:k]
            kept = allowed[target, earlier]
            if kept.all():
                continue  # nothing excluded: the Cholesky row stands
            B[target, :] = 0.0
            keep = earlier[kept]
            excluded = np.flatnonzero(~kept)
            if not len(keep):
                continue
            row = None
            if k <= len(W) and len(excluded) <= k * SCHUR_MAX_EXCLUDED:
                row = _row_without(W[:k, :k], cov[:k, :k], cov[:k, k], excluded)
            if row is not None:
                B[target, keep] = row[kept]
            else:  # the last row of the same solve on keep + [target]
                cols = np.append(keep, target)
                rows = _ols_rows_host(scatter[np.ix_(cols, cols)] / X.shape[0], X, cols)
                B[target, keep] = rows[-1, :-1]
    return B


def _inverse_factor(cov, coef):
    """``inv(L)`` for ``cov = L L^T`` (causal order), over its well-conditioned start.

    With ``coef`` the regressions on predecessors and ``d`` their residual
    variances, ``inv(L) = diag(d)^(-1/2) (I - coef)``. Only the leading
    variables whose residual keeps more than ``SCHUR_MIN_PIVOT`` of their
    variance are returned: past a nearly dependent one the inverse factor
    would carry its rounding.
    """
    d = np.diag(cov) - np.einsum("ij,ij->i", coef, cov)
    good = d > SCHUR_MIN_PIVOT * np.diag(cov)
    m = int(np.argmin(good)) if not good.all() else len(d)
    return (np.eye(m) - coef[:m, :m]) / np.sqrt(d[:m])[:, None]


def _row_without(W, C, c, excluded):
    """Regression of a target on all its predecessors except ``excluded``, or None.

    ``C`` is the predecessors' covariance, ``W = inv(L)`` for ``C = L L^T``,
    and ``c`` their covariance with the target: with ``M = inv(C) = W^T W``
    and ``K`` the kept predictors, ``inv(C_KK) = M_KK - M_KE inv(M_EE) M_EK``
    (a Schur complement), so the row costs O(k^2 |E|) instead of a
    factorisation of ``C_KK``. That route carries the rounding of ``inv(C)``,
    whose condition can be far worse than ``C_KK``'s (near copies among the
    excluded and kept predictors): the row is returned only when it solves
    ``C_KK b = c_K`` to the rounding of that product, else None.

    Returns
    -------
    b : ndarray, shape (k,), or None
        The coefficients over all predecessors, zero on ``excluded``.
    """
    c = c.copy()
    c[excluded] = 0.0
    mc = W.T @ (W @ c)                # inv(C) c, c zero on E
    m_e = W.T @ W[:, excluded]        # inv(C)[:, E]
    b = mc - m_e @ np.linalg.solve(m_e[excluded], mc[excluded])
    b[excluded] = 0.0
    residual = C @ b - c
    residual[excluded] = 0.0
    rounding = len(c) * _EPS * (np.abs(C) @ np.abs(b) + np.abs(c))
    # benign data: at most ~0.03 of the rounding bound; near copies across E
    # and K: 1e9 of it (benchmarks/NOTES.md)
    return b if (np.abs(residual) <= rounding).all() else None


def _ols_rows_host(cov, X, order):
    """Row ``k``: least squares of variable ``k`` on ``0..k-1`` (``cov`` in causal order).

    One Cholesky factorisation of ``cov`` gives the rows up to the first
    dependent variable; the rows after it, where the predecessors are rank
    deficient, come from the data (:func:`_min_norm_rows`).
    """
    p = cov.shape[0]
    coef, rss, solved = _ols_on_predecessors(cov)
    rows = int(np.argmin(solved)) if not solved.all() else p
    noise = _pivot_noise(cov[:rows, :rows], coef[:rows, :rows])
    ok = rss[:rows] > np.maximum(noise, SINGULAR_TOL * np.diag(cov)[:rows])
    first = rows if ok.all() else int(np.argmin(ok))
    if first < p:
        _memory.require("the adjacency step's minimum-norm least squares (dependent columns)",
                        _memory.min_norm_bytes(X.shape[0], p), _memory.FEWER)
        V = _data_vectors(X, order)
        first = min(first, V.shape[0])  # no more independent columns than rows
        coef[first:] = _min_norm_rows(V, first)
    return coef


def _pivot_noise(gram, coef):
    """Rounding error of each Cholesky pivot of ``gram`` (rows ``coef`` of the regressions).

    The pivot of an exact combination ``x_k = X a`` is not zero but the
    rounding of ``gram``, about ``eps (|x_k| + sum_i |a_i| |x_i|)^2`` per term:
    with ill-conditioned predecessors (large ``a``) that exceeds
    ``SINGULAR_TOL`` of the variance, and such a pivot must count as zero.
    """
    sd = np.sqrt(np.diag(gram))
    terms = np.abs(np.tril(coef, -1)) @ sd  # row k: sum over i < k of |a_i| |x_i|
    return np.maximum(np.arange(len(sd)), 1) * _EPS * (sd + terms) ** 2


def _data_vectors(X, order):
    """Columns whose inner products are the covariance of ``X[:, order]``.

    The centred data over ``sqrt(n)``, or, with more samples than variables,
    the triangular factor of their QR decomposition (same inner products,
    ``p`` rows instead of ``n``).
    """
    n, p = X.shape
    Xc = np.array(X[:, order], dtype=np.float64)  # one copy, centred and scaled in place
    Xc -= Xc.mean(axis=0)
    Xc /= np.sqrt(n)
    return np.linalg.qr(Xc, mode="r") if n > p else Xc


def _min_norm_rows(V, first, block=256):
    """Minimum-norm least squares of each variable from ``first`` on its predecessors.

    The variables are the columns of ``V`` (in causal order); a variable whose
    residual on the variables before it keeps no more than ``SINGULAR_TOL`` of
    its squared norm is *dependent*, an exact combination of the *basis*: the
    independent variables before it. Gram-Schmidt in causal order (twice, as
    one pass loses orthogonality) gives the basis orthonormal vectors ``U``
    and each variable ``j`` its coordinates ``l_j = U^T v_j``. With ``C_k``
    the coordinates of the variables before ``k`` as columns, the regression
    of ``k`` on them is ``pinv(C_k) l_k = C_k^T y_k`` with
    ``(C_k C_k^T) y_k = l_k``; ``C_k C_k^T`` gains ``l_j l_j^T`` with each
    variable, so its Cholesky factor is updated by Givens rotations
    (``_linalg.cholesky_add``) instead of refactorised. All rows cost
    O(p^2 r + d p r) for rank r, where a least-squares solve per target costs
    O(p^4) (p=1000, n=100: 300 s that way on two cores, under a second this
    way).

    The basis comes from the data, not from the covariance: the residual of
    an exact combination ``x_k = X a`` is then at ``eps |a| |X|``, where a
    covariance pivot is at its square and, after a nearly dependent variable,
    reaches ``SINGULAR_TOL`` (benchmarks/NOTES.md).

    Parameters
    ----------
    V : ndarray, shape (d, p)
        Vectors of the variables in causal order (:func:`_data_vectors`).
    first : int
        The variables before ``first`` are independent (their rows are known).
    block : int
        Variables projected on the basis at once (one BLAS-3 product).

    Returns
    -------
    coef : ndarray, shape (p - first, p)
        Row ``i``: the coefficients of variable ``first + i`` on the
        variables before it.
    """
    from ._linalg import cholesky_add

    d, p = V.shape
    sq_norm = np.einsum("ij,ij->j", V, V)
    lead, lead_rows = first, None
    if first:
        # one QR past `first`: the independent variables that follow (the
        # loop's test on the QR's diagonal) get their rows from its factor,
        # in BLAS-3, instead of one rotation sweep each
        end = min(d, p, 2 * first + block)
        Q, T = np.linalg.qr(V[:, :end])
        diag2 = np.diag(T) ** 2
        joins = (diag2 > SINGULAR_TOL * sq_norm[:end]) & np.isfinite(diag2)
        joins[:first] = True  # the caller's word
        lead = int(np.argmin(joins)) if not joins.all() else end
        if lead > first:
            lead_rows = _independent_rows(T[:lead, :lead], first)
            if lead_rows is None:
                lead = first
    cap = max(lead, min(p, d, 64))
    U = np.zeros((d, cap))    # orthonormal basis, in the order its variables came
    C = np.zeros((cap, p))    # column j: l_j, the coordinates of variable j
    R = np.zeros((cap, cap))  # upper, R^T R = C_k C_k^T
    Y = np.zeros((p, cap))    # row k: y_k
    m = lead
    direct = {}  # rows solved by lstsq where the factor R is singular
    G = None     # C_k C_k^T at a block's start, for _dependent_block
    if lead:
        U[:, :lead], C[:lead, :lead] = Q[:, :lead], T[:lead, :lead]
        R[:lead, :lead] = np.linalg.qr(C[:lead, :lead].T, mode="r")
    k0 = lead
    while k0 < p:
        cols = np.arange(k0, min(k0 + block, p))
        m0 = m
        A = V[:, cols].copy()
        L = np.zeros((m0, len(cols)))
        for _ in range(2):  # the block on the basis as it stands
            step = U[:, :m0].T @ A
            A -= U[:, :m0] @ step
            L += step
        if m0 and not direct:
            # no variable of the block would join the basis (the test of the
            # loop below, before any vector is added): all its rows at once
            res2 = np.einsum("ij,ij->j", A, A)
            joins = (m0 < d) & (res2 > SINGULAR_TOL * sq_norm[cols]) & np.isfinite(res2)
            Yb = None
            if not joins.any():
                if G is None or len(G) != m0:  # C_k C_k^T, kept while the basis stands
                    G = C[:m0, :k0] @ C[:m0, :k0].T
                Yb = _dependent_block(R[:m0, :m0], G, L)
            if Yb is not None:
                C[:m0, cols] = L
                Y[cols, :m0] = Yb.T
                G += L @ L.T
                k0 += len(cols)
                if k0 < p:  # the next block's factor
                    R[:m0, :m0] = _factor_add_rows(R[:m0, :m0], L.T)
                continue
            if joins.any():
                # the variables after the last that may join are dependent:
                # the next block starts there (a variable's residual only
                # shrinks on the vectors the loop adds before it)
                last = int(np.flatnonzero(joins)[-1]) + 1
                cols, A, L = cols[:last], A[:, :last], L[:, :last]
        G = None  # the loop below changes C_k C_k^T variable by variable
        k0 += len(cols)
        for i, k in enumerate(cols):
            a = A[:, i]
            l = np.zeros(cap)
            l[:m0] = L[:, i]
            for _ in range(2):  # on the basis vectors added inside this block
                step = U[:, m0:m].T @ a
                a -= U[:, m0:m] @ step
                l[m0:m] += step
            if m:
                try:
                    w = _solve_upper(R[:m, :m], l[:m], trans="T")
                    Y[k, :m] = _solve_upper(R[:m, :m], w)
                except np.linalg.LinAlgError:
                    # R lost rank in floating point (predecessors whose scales
                    # differ by ~1e16 or more): pinv(C_k) l_k directly
                    direct[k] = np.linalg.lstsq(C[:m, :k], l[:m], rcond=None)[0]
            res2 = a @ a
            if m < d and res2 > SINGULAR_TOL * sq_norm[k] and np.isfinite(res2):
                if m == cap:
                    cap = min(2 * cap, p, d)
                    U, C = _grown(U, (d, cap)), _grown(C, (cap, p))
                    R, Y, l = _grown(R, (cap, cap)), _grown(Y, (p, cap)), _grown(l, (cap,))
                l[m] = np.sqrt(res2)
                U[:, m] = a / l[m]
                m += 1
            C[:m, k] = l[:m]
            cholesky_add(R, l, m)
    # row k: C_k^T y_k, the columns before k of Y C (one BLAS-3 product per chunk)
    coef = np.zeros((p - first, p))
    for r0 in range(first, p, 1024):
        r1 = min(r0 + 1024, p)
        coef[r0 - first:r1 - first] = np.tril(Y[r0:r1] @ C, r0 - 1)
    for k, row in direct.items():
        coef[k - first, :k] = row
    if lead_rows is not None:
        coef[:lead - first, :lead] = lead_rows
    return coef


def _independent_rows(T, first):
    """Least squares of variables ``first..k-1`` on their predecessors, from ``V = Q T``.

    With ``T`` upper triangular and nonsingular (independent variables),
    ``T^T`` is a Cholesky factor of their Gram matrix, and the rows follow
    as in :func:`_ols_on_predecessors`: row ``k`` is ``-T[k, k] inv(T)[:k, k]``.
    None if the inverse is not finite.
    """
    from scipy.linalg.lapack import dtrtri

    Tinv, info = dtrtri(T, lower=0)
    if info != 0 or not np.isfinite(Tinv).all():
        return None
    return np.tril(Tinv.T[first:], first - 1) * -np.diag(T)[first:, None]


def _dependent_block(R0, G0, W, refinements=MIN_NORM_REFINEMENTS):
    """``y_k`` of :func:`_min_norm_rows` for a block of dependent variables, in BLAS-3.

    The block's variables ``k0 + i`` (coordinates ``W[:, i]``) are all exact
    combinations of a basis that stays as it is. Their systems
    ``G_k y = l_k`` share ``G_k = R0^T R0 + W_<i W_<i^T`` (``W_<i``: the
    block's columns before ``i``), which the loop of :func:`_min_norm_rows`
    updates by one rotation sweep per variable, O(m^2) each from memory. With
    ``What = R0^{-T} W``, the Woodbury form reduces every system to the
    regression of a column of ``[What; I]`` on the columns before it (a
    ridge regression on a matrix whose eigenvalues are >= 1): one Cholesky
    factor of ``What^T What + I`` and its inverse give all of them, and
    ``y = R0^{-1} (h_hat - What_<i c)``. That carries the conditioning of
    ``R0`` (the block's start), which can be far worse than ``G_k``'s, so the
    solutions are refined against the residuals ``l_k - G_k y`` computed
    from ``G0 = C_k0 C_k0^T`` and ``W`` themselves: each step multiplies the
    error by about ``eps cond(R0^T R0)``, down to the rounding of the
    residuals, which is that of the loop's normal equations.

    Parameters
    ----------
    R0 : ndarray, shape (m, m)
        Upper triangular, ``R0^T R0 = G0`` (to rounding: it only
        preconditions).
    G0 : ndarray, shape (m, m)
        ``C_k0 C_k0^T``, the coordinates of the variables before the block.
    W : ndarray, shape (m, b)
        Coordinates of the block's variables.
    refinements : int
        Most refinement steps.

    Returns
    -------
    Y : ndarray, shape (m, b) or None
        Column ``i``: ``y`` of variable ``k0 + i``. None when the block's
        systems are too ill-conditioned for this route (``R0`` singular, or
        the refinement does not converge): the caller then takes the loop.
    """
    from scipy.linalg import LinAlgError

    try:
        with np.errstate(all="ignore"):
            return _dependent_block_solve(R0, G0, W, refinements)
    except LinAlgError:  # R0 singular: the loop's own treatment
        return None


def _dependent_block_solve(R0, G0, W, refinements):
    """:func:`_dependent_block` (which catches LinAlgError and floating-point states)."""
    from scipy.linalg import cholesky, solve_triangular

    b = W.shape[1]
    What = solve_triangular(R0, W, trans="T", check_finite=False)
    if not np.isfinite(What).all():
        return None
    ridge = What.T @ What
    ridge[np.diag_indices(b)] += 1.0
    Lg = cholesky(ridge, lower=True, check_finite=False)  # LinAlgError: the caller's
    Linv = solve_triangular(Lg, np.eye(b), lower=True, check_finite=False)

    def solve(H):  # approximately G_k y_i = H[:, i], every i
        Hh = solve_triangular(R0, H, trans="T", check_finite=False)
        T = np.triu(Linv @ np.triu(What.T @ Hh, 1), 1)
        c = np.triu(Linv.T @ T, 1)  # column i: the ridge row over columns < i
        return solve_triangular(R0, Hh - What @ c, check_finite=False)

    def residual(Y):  # H - G_k y_i from the coordinates
        return W - G0 @ Y - W @ np.triu(W.T @ Y, 1)

    Y = solve(W)
    sizes = []
    for _ in range(refinements):
        if not np.isfinite(Y).all():
            return None
        step = solve(residual(Y))
        if not np.isfinite(step).all():
            return None
        sizes.append(np.max(np.abs(step).max(axis=0)
                            / np.maximum(np.abs(Y).max(axis=0), np.finfo(float).tiny)))
        Y += step
        # done: the last step was tiny (the error left is that times the
        # contraction), or the steps stall at the residuals' rounding
        if sizes[-1] <= MIN_NORM_REFINED or (len(sizes) > 1
                                             and sizes[-1] > 0.1 * sizes[-2]):
            break
    # a step of 1e-10 or more that did not shrink 1000-fold: not converging
    if sizes and sizes[-1] > max(MIN_NORM_REFINED, 1e-3 * sizes[0], 1e-10):
        return None
    return Y


def _factor_add_rows(R, X):
    """Upper ``R'`` with ``R'^T R' = R^T R + X^T X`` (one QR of ``[R; X]``, O(m^2 b))."""
    from scipy.linalg.lapack import dtpqrt

    m = R.shape[0]
    Rn, _, _, info = dtpqrt(0, max(1, min(64, m)), np.array(R, order="F"),
                            np.array(X, order="F"))
    if info != 0:
        raise np.linalg.LinAlgError(f"dtpqrt failed (info={info})")
    return np.triu(Rn)


def _solve_upper(R, b, trans="N"):
    """``R^{-1} b`` (or ``R^{-T} b``) for upper triangular ``R``."""
    from scipy.linalg import solve_triangular

    return solve_triangular(R, b, trans=trans, check_finite=False)


def _grown(A, shape):
    """``A`` in the leading corner of a larger zero array."""
    out = np.zeros(shape)
    out[tuple(slice(0, s) for s in A.shape)] = A
    return out


def adaptive_lasso_adjacency(X, causal_order, *, prior_knowledge=None, gamma=1.0,
                             n_threads=None, engine="auto", backend=None, scatter=None):
    """lingam's adaptive-lasso adjacency matrix, computed from one scatter matrix.

    For each variable (after the first) in the causal order, with the earlier
    variables as predictors, on standardised data:

    1. least squares gives weights ``w = |b_ols| ** gamma``;
    2. the lasso path of the target on the weighted predictors (LARS) is
       scored with BIC (noise variance from the least-squares fit), and the
       predictors active at the best point are kept;
    3. the target is regressed on the kept predictors on the original scale.

    This is lingam 1.13's ``predict_adaptive_lasso`` step for step (sklearn's
    ``LassoLarsIC(criterion="bic")`` path and criterion), but the data are
    standardised once and every regression is solved from the scatter matrix
    instead of from the samples: the LARS path takes the Gram matrix sklearn
    would compute itself, and the residual sums of squares along the path come
    from the Gram matrix too.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    causal_order : sequence of int
    prior_knowledge : array-like, shape (n_features, n_features), optional
        ``prior_knowledge[i, j] == 0`` removes ``j`` from the predictors of ``i``.
    gamma : float
        Exponent of the adaptive weights, a finite number > 0 (lingam's
        default 1).
    n_threads : int, optional
        Threads of the compiled engine, 1..1024 (default: all cores, or
        ``OMP_NUM_THREADS`` up to the number of cores).
    engine : {"auto", "compiled", "sklearn"}
        ``"compiled"``: paralingam's port of sklearn's LARS path
        (``paralingam.adjacency._lasso``), all targets in parallel threads; the rare
        targets where sklearn would take a degenerate branch are recomputed
        with sklearn. ``"sklearn"``: sklearn's ``lars_path_gram`` for every
        target (the reference). ``"auto"``: compiled when built, else sklearn.
    backend : {None, "cpu", "cuda"}
        ``"cuda"``: from ``CUDA_LASSO_MIN_FEATURES`` variables on, the LARS
        paths of the compiled engine run on the GPU, one block per target
        (``kernels/adjacency.cu``), for every target whose predictors are all
        earlier variables; the small least-squares refits,
        targets under prior knowledge and paths the GPU hands back run on
        the CPU. Without a usable GPU this warns and runs on the CPU.
    scatter : ndarray, shape (n_features, n_features), optional
        The scatter matrix ``Xc.T @ Xc`` of the centred data when it is
        already known (``paralingam.fit`` passes the CUDA search's); by
        default it is computed from ``X``.

    Returns
    -------
    B : ndarray, shape (n_features, n_features)

    Raises
    ------
    ValueError
        When a target has ``n_samples <= n_predictors + 1``: BIC's noise
        variance cannot be estimated (lingam raises there too).
    """
    # NaN failed deep in sklearn; inf gave weights of 0 or inf, hence a zero matrix
    gamma = check_positive("gamma", gamma)
    X, order, scatter, exponents, names = _checked_inputs(X, causal_order, scatter, n_threads)
    B = _adaptive_lasso_adjacency(X, order, prior_knowledge=prior_knowledge, gamma=gamma,
                                  n_threads=n_threads, engine=engine, backend=backend,
                                  scatter=scatter)
    return _scaled_back(B, exponents, names)


def _adaptive_lasso_adjacency(X, order, *, prior_knowledge=None, gamma=1.0, n_threads=None,
                              engine="auto", backend=None, scatter=None, progress=False):
    """:func:`adaptive_lasso_adjacency` on checked input (float64 ``X``, ``order``
    a permutation); ``progress``: a bar of the targets (:func:`estimate_adjacency`)."""
    with Progress(max(X.shape[1] - 1, 0), progress, desc="adjacency", unit="target") as bar:
        return _adaptive_lasso_rows_all(X, order, prior_knowledge, gamma, n_threads, engine,
                                        backend, scatter, bar)


def _adaptive_lasso_rows_all(X, order, prior_knowledge, gamma, n_threads, engine, backend,
                             scatter, bar):
    """The body of :func:`_adaptive_lasso_adjacency`, counting its targets on ``bar``."""
    if engine not in ("auto", "compiled", "sklearn"):
        raise ValueError(f"engine must be 'auto', 'compiled' or 'sklearn'; got {engine!r}")
    if backend not in ADJACENCY_BACKENDS:
        raise ValueError(f"backend must be one of {ADJACENCY_BACKENDS[1:]}; got {backend!r}")
    n, p = X.shape
    threads = n_threads or default_threads()
    _memory.require(
        "the adjacency step (adaptive lasso)",
        _memory.adaptive_lasso_bytes(n, p, threads, scatter_given=scatter is not None),
        _memory.FEWER + ", fewer threads (n_threads: each holds an n_features^2 scratch), "
        "or adjacency='ols'")
    if scatter is None:
        scatter = _scatter(X)[1]
    # The Gram matrix Z.T @ Z of the standardised data Z (sklearn's StandardScaler:
    # population std), i.e. n times the correlation matrix. The LARS path and its
    # stopping tolerance depend on this scale. A constant column keeps scale 1, as
    # in StandardScaler.
    std = np.sqrt(np.diag(scatter) / n)
    std[std == 0.0] = 1.0
    gram = scatter / np.outer(std, std)
    allowed = allowed_predictors(prior_knowledge, p)

    # Work in causal order: target k's predictors are then positions 0..k-1
    # (a subset of them under prior knowledge), rows of the Gram matrix the
    # compiled engine reads as plain vectors.
    gram_ord = np.ascontiguousarray(gram[np.ix_(order, order)])
    scatter_ord = np.ascontiguousarray(scatter[np.ix_(order, order)])
    targets, predictor_sets = [], []
    for k in range(1, p):
        predictors = np.arange(k)
        if allowed is not None:
            predictors = predictors[allowed[order[k], order[:k]]]
        if len(predictors) == 0:
            continue  # exogenous given the prior knowledge
        if n <= len(predictors) + 1:
            raise ValueError(
                f"the adaptive lasso needs more samples than predictors + 1 to estimate "
                f"the noise variance for BIC: column {order[k]} has {len(predictors)} "
                f"predictors and there are {n} samples; use adjacency='ols'")
        targets.append(k)
        predictor_sets.append(predictors)
    if targets:
        bar.total = len(targets)  # exogenous variables are no work (drawn lazily: not yet)

    B = np.zeros((p, p))
    todo = range(len(targets))
    lasso = _compiled_lasso() if engine != "sklearn" else None
    if engine == "compiled" and lasso is None:
        raise RuntimeError("the compiled adaptive lasso (paralingam.adjacency._lasso) is not built")
    if lasso is not None and targets:
        n_threads = n_threads or default_threads()  # OpenMP's own default is not capped
        offsets = np.zeros(len(targets) + 1, dtype=np.intp)
        offsets[1:] = np.cumsum([len(s) for s in predictor_sets])
        on_gpu = backend == "cuda" and p >= CUDA_LASSO_MIN_FEATURES
        ols_coef, ols_rss, solved = _least_squares_factor(gram_ord, on_gpu)
        given = np.array([solved[k] and len(s) == k for k, s in zip(targets, predictor_sets)],
                         dtype=np.uint8)
        targets_arr = np.asarray(targets, dtype=np.intp)
        on_cpu = np.ones(len(targets), dtype=bool)
        B_ord = np.zeros((p, p))
        if on_gpu and given.any():
            B_gpu, done = _adaptive_lasso_rows_cuda(gram_ord, scatter_ord, targets_arr,
                                                    given.astype(bool), ols_coef, ols_rss,
                                                    n, gamma, n_threads, _ahead(bar, 0))
            B_ord += B_gpu
            on_cpu &= ~done
        if on_cpu.any():
            rows = np.flatnonzero(on_cpu)
            sets = [predictor_sets[t] for t in rows]
            sub_offsets = np.zeros(len(rows) + 1, dtype=np.intp)
            sub_offsets[1:] = np.cumsum([len(s) for s in sets])
            full = np.array([len(s) == k for k, s in zip(targets, predictor_sets)])
            if (full & ~given.astype(bool) & on_cpu).any():
                # predecessors linearly dependent: minimum-norm weights, as
                # sklearn's lstsq gives them, for the compiled engine
                ols_coef, ols_rss, filled = _min_norm_weights(X, order, std, gram_ord,
                                                              ols_coef, ols_rss, solved)
                given = (given.astype(bool) | (full & filled[targets_arr])).astype(np.uint8)
            B_cpu, fallback = lasso.adaptive_lasso_rows(
                gram_ord, scatter_ord, targets_arr[rows], sub_offsets,
                np.concatenate(sets).astype(np.intp), float(n), float(gamma),
                n_threads, ols_coef, ols_rss, given[rows],
                progress=_ahead(bar, len(targets) - len(rows)))
            B_ord += B_cpu
            todo = rows[fallback]
        else:
            todo = []
        B[np.ix_(order, order)] = B_ord

    degenerate = []
    report = _ahead(bar, len(targets) - len(todo))
    for i, t in enumerate(todo):
        if report is not None:
            report(i)
        target, predictors = order[targets[t]], order[predictor_sets[t]]
        B[target] = 0.0
        kept, coef, warned = _adaptive_lasso_row_sklearn(gram, scatter, target, predictors,
                                                         n, gamma)
        B[target, kept] = coef
        if warned:
            degenerate.append(int(target))
    if degenerate:
        warnings.warn(
            f"adaptive lasso: the LARS path of columns {degenerate} stopped early or "
            "dropped a regressor (nearly collinear predictors); their coefficients come "
            "from the shortened path, as in lingam.",
            AdjacencyWarning,
            stacklevel=user_stacklevel(),
        )
    if targets and bar.enabled:
        bar.update_to(bar.total)
    return B


def _ahead(bar, base):
    """``progress(done)`` moving ``bar`` to ``base + done`` (never back); None when disabled."""
    if not bar.enabled:
        return None

    def report(done):
        done = min(base + done, bar.total)
        if done > bar.n:
            bar.update_to(done)

    return report


def _on_gpu(call, step, pronoun):
    """``call()`` when the CUDA backend is usable; else None and a RuntimeWarning.

    The warning reads "<step> on the GPU failed (<why>); computing <pronoun> on
    the CPU" and points at the user's code (the first frame outside paralingam).
    """
    from .. import _gpu

    reason = _gpu.unavailable_reason()
    if reason is None:
        try:
            return call()
        except Exception as exc:  # out of memory, or a fault (recorded by _cuda_adjacency)
            reason = f"{type(exc).__name__}: {exc}"
    warnings.warn(f"{step} on the GPU failed ({reason}); computing {pronoun} on the CPU",
                  RuntimeWarning, stacklevel=user_stacklevel())
    return None


def _least_squares_factor(gram, on_gpu):
    """:func:`_ols_on_predecessors`, on the GPU when asked and usable, else on the host."""
    if on_gpu:
        from . import _cuda_adjacency

        out = _on_gpu(lambda: _cuda_adjacency.ols_on_predecessors(gram, SINGULAR_TOL),
                      "least squares", "them")
        if out is not None:
            return out
    return _ols_on_predecessors(gram)


def _adaptive_lasso_rows_cuda(gram, scatter, targets, given, ols_coef, ols_rss, n, gamma,
                              n_threads, progress=None):
    """LARS paths of the ``given`` targets on the GPU, refit on the host.

    Returns the rows computed (in ``gram``'s positions) and, per target,
    whether it was done here; the others (not given, or a path the GPU hands
    back) go to the CPU engine. When the GPU cannot run, nothing is done here
    and a warning says why.
    """
    from . import _cuda_adjacency
    from .. import _isa

    _lasso = _isa.load("adjacency._lasso")
    p = gram.shape[0]
    done = np.zeros(len(targets), dtype=bool)
    out = _on_gpu(lambda: _cuda_adjacency.lars_supports(gram, targets[given], ols_coef, ols_rss,
                                                        n, gamma, progress=progress),
                  "adaptive lasso", "it")
    if out is None:
        return np.zeros((p, p)), done
    kept, ok = out
    rows = np.flatnonzero(given)[ok]
    B, failed = _lasso.refit_rows(scatter, targets[rows], kept, n_threads)
    for t in targets[rows[failed]]:
        B[t] = 0.0
    done[rows[~failed]] = True
    return B, done


def _ols_on_predecessors(gram):
    """Least squares of every variable on all variables before it, from one factor.

    With ``gram = L L^T`` (lower Cholesky), the regression of variable ``k`` on
    variables ``0..k-1`` has coefficients ``L[k, :k] @ inv(L[:k, :k])``, which
    is ``-L[k, k] * inv(L)[k, :k]`` (row ``k`` of ``L @ inv(L) = I``), and
    residual sum of squares ``L[k, k] ** 2``: one O(p^3) factorisation and
    triangular inverse replace a k x k solve per target.

    Returns
    -------
    coef : ndarray, shape (p, p)
        Row ``k``: the coefficients of variable ``k`` on ``0..k-1``.
    rss : ndarray, shape (p,)
    solved : ndarray of bool, shape (p,)
        Rows that hold: every pivot before ``k`` keeps more than
        ``SINGULAR_TOL`` of its diagonal (as a per-target Cholesky requires) and
        row ``k`` of the factor exists. Other targets solve their own system.
    """
    # scipy's LAPACK, not numpy's: the adaptive lasso's paths past max_iter
    # flip supports on rounding-level changes of these weights, so the factor
    # and inverse stay the routines every result so far was computed with
    # (loaded without the import of scipy.linalg: paralingam._lapack).
    from .._lapack import lapack

    dpotrf, dtrtri = lapack("dpotrf", "dtrtri")

    p = gram.shape[0]
    coef, rss, solved = np.zeros((p, p)), np.zeros(p), np.zeros(p, dtype=bool)
    L, info = dpotrf(gram, lower=1, clean=1)
    rows = p if info == 0 else max(info - 1, 0)  # rows of the factor LAPACK completed
    pivots = np.diag(L)[:rows] ** 2
    bad = ~(pivots > SINGULAR_TOL * np.diag(gram)[:rows]) | ~np.isfinite(pivots)
    good = int(np.argmax(bad)) if bad.any() else rows  # pivots 0..good-1 hold
    m = min(good + 1, rows)  # targets 0..m-1 have a valid row and valid earlier pivots
    if m <= 1:
        return coef, rss, solved
    Lm = L[:m, :m]
    Linv, info = dtrtri(Lm, lower=1)
    if info != 0 or not np.isfinite(Linv).all():
        return coef, rss, solved
    coef[:m, :m] = np.tril(Linv, -1) * -np.diag(Lm)[:, None]
    rss[:m] = np.diag(Lm) ** 2
    solved[:m] = np.isfinite(coef[:m]).all(axis=1)
    return coef, rss, solved


def _min_norm_weights(X, order, std, gram, coef, rss, solved):
    """Least squares of every variable on all before it, past the Cholesky factor's rows.

    :func:`_ols_on_predecessors` solves the rows up to the first dependent
    variable (``solved``); every later row gets the minimum-norm solution over
    its predecessors on the standardised scale -- what least squares through
    the pseudo-inverse (``np.linalg.lstsq``, sklearn's ``LinearRegression``)
    gives -- from one Gram-Schmidt pass over the data (:func:`_min_norm_rows`)
    instead of a factorisation per target. The residual sum of squares is
    ``yy - g.b`` in ``gram``'s scale, as :func:`_adaptive_lasso_row_sklearn`
    computes it.

    Parameters
    ----------
    X : ndarray, shape (n_samples, p)
    order : ndarray of int
    std : ndarray, shape (p,)
        The columns' population standard deviations (1 for a constant column).
    gram : ndarray, shape (p, p)
        The standardised Gram matrix in causal order.
    coef, rss, solved : ndarray
        :func:`_ols_on_predecessors` of ``gram``.

    Returns
    -------
    coef, rss : ndarray
        Copies with the rows after the solved ones filled in.
    filled : ndarray of bool, shape (p,)
        Rows (positions in causal order) that hold.
    """
    p = gram.shape[0]
    filled = solved.copy()
    m = int(np.argmin(solved)) if not solved.all() else p  # rows 0..m-1 hold
    if m == p:
        return coef, rss, filled
    _memory.require("the adaptive lasso's minimum-norm least squares (dependent columns)",
                    _memory.min_norm_bytes(X.shape[0], p), _memory.FEWER)
    # rows 0..m-1 hold: their pivots 0..m-2 keep more than SINGULAR_TOL
    first = max(m - 1, 0)
    n = X.shape[0]
    if n > p and MIN_NORM_QR_RANK * _gram_rank(gram) > p:
        V = _data_vectors(X, order)
    else:
        # low rank: Gram-Schmidt on the centred columns, O(n p r), costs less
        # than reducing them to p rows by QR first, O(n p^2)
        V = np.array(X[:, order], dtype=np.float64)
        V -= V.mean(axis=0)
        V /= np.sqrt(n)
    V /= std[order]  # the standardised variables' vectors: lstsq's scale
    first = min(first, V.shape[0])
    rows = _min_norm_rows(V, first)[m - first:]
    coef, rss = coef.copy(), rss.copy()
    coef[m:] = rows
    rss[m:] = np.diag(gram)[m:] - np.einsum("ij,ij->i", rows, gram[m:])
    filled[m:] = np.isfinite(rows).all(axis=1) & np.isfinite(rss[m:])
    return coef, rss, filled


def _gram_rank(gram):
    """Numerical rank of ``gram`` (pivoted Cholesky, pivots above ``SINGULAR_TOL``
    of the largest diagonal entry), O(p^2 r): only to choose a route, the
    rows themselves do not depend on it."""
    from scipy.linalg.lapack import dpstrf

    top = float(np.max(np.diag(gram), initial=0.0))
    if not top > 0.0:
        return 0
    _, _, rank, _ = dpstrf(gram, tol=SINGULAR_TOL * top, lower=1)
    return int(rank)


def _compiled_lasso():
    from .. import _isa

    try:
        return _isa.load("adjacency._lasso")
    except ImportError:  # not built: sklearn's path for every target
        return None


def _adaptive_lasso_row_sklearn(gram, scatter, target, predictors, n, gamma):
    """One target with sklearn's LARS path: ``(kept, coef, warned)``."""
    # Lazy: sklearn is heavy to import.
    from sklearn import config_context
    from sklearn.linear_model import lars_path_gram

    m = len(predictors)
    G = gram[np.ix_(predictors, predictors)]
    g = gram[predictors, target]
    yy = gram[target, target]

    # 1. adaptive weights from least squares on the standardised data
    b_ols = _solve_spd(G, g)
    weight = np.abs(b_ols) ** gamma

    # 2. lasso path of the weighted problem, scored by BIC
    Gw = G * np.outer(weight, weight)
    gw = g * weight
    # The inputs are ours and valid: skip sklearn's per-call parameter checks.
    with warnings.catch_warnings(record=True) as caught, \
            config_context(skip_parameter_validation=True):
        warnings.simplefilter("always")
        _, _, path = lars_path_gram(
            gw, Gw, n_samples=n, max_iter=_LARS_MAX_ITER, alpha_min=0.0,
            method="lasso", eps=_LARS_EPS)
    rss_path = yy - 2.0 * (gw @ path) + np.einsum("ik,ij,jk->k", path, Gw, path)
    # Noise variance of the least-squares fit (sklearn: fit on the centred
    # data, divided by n - m - 1); floored so an exact fit stays finite.
    rss_ols = max(yy - g @ b_ols, _LARS_EPS * yy)
    noise_var = rss_ols / (n - m - 1)
    dof = (np.abs(path) > _LARS_EPS).sum(axis=0)
    # a constant target (yy = 0) has no noise: every BIC is NaN and argmin
    # takes the path's start, no predictor, as it should
    with np.errstate(divide="ignore", invalid="ignore"):
        bic = n * np.log(2.0 * np.pi * noise_var) + rss_path / noise_var + np.log(n) * dof
    best = path[:, np.argmin(bic)]
    kept = predictors[np.abs(best * weight) > 0.0]

    # 3. least squares on the kept predictors, original scale
    coef = np.zeros(0)
    if len(kept):
        coef = _solve_spd(scatter[np.ix_(kept, kept)], scatter[kept, target])
    return kept, coef, bool(caught)


def allowed_predictors(prior_knowledge, n_features):
    """Which predictors prior knowledge allows, or None without prior knowledge.

    Returns
    -------
    allowed : ndarray of bool, shape (n_features, n_features) or None
        ``allowed[target, j]`` is False where ``prior_knowledge[target, j] == 0``
        (no directed path from ``j`` to ``target``); the diagonal is False.

    Raises
    ------
    ValueError
        For a matrix that is not numeric, not of shape (n_features,
        n_features), or has values other than -1, 0, 1 and NaN.
    """
    if prior_knowledge is None:
        return None
    # the checks of fit and DirectLiNGAM (numeric, square, -1/0/1/NaN): a 2.0
    # or a 0.5 would otherwise silently keep the predictor
    pk = _prior_matrix(prior_knowledge, n_features)
    allowed = pk != 0  # -1 (unknown) and NaN keep the predictor, as in lingam
    np.fill_diagonal(allowed, False)
    return allowed


def _scatter(X):
    """Column means and the scatter matrix ``Xc.T @ Xc`` of the centred data."""
    mean = X.mean(axis=0)
    Xc = X - mean
    S = Xc.T @ Xc
    return mean, 0.5 * (S + S.T)


def _solve_spd(A, b):
    """Solve ``A x = b`` for a covariance-like ``A``; min-norm least squares if singular.

    ``A`` counts as singular when a Cholesky pivot keeps no more than
    ``SINGULAR_TOL`` of its diagonal entry: some variable is, to rounding, a
    linear combination of the others, and the Cholesky solution would be
    noise. (The compiled engine applies the same bound.)
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    try:
        factor = cho_factor(A, lower=True, check_finite=False)
        pivots = np.diag(factor[0]) ** 2
        if (pivots > SINGULAR_TOL * np.diag(A)).all():
            x = cho_solve(factor, b, check_finite=False)
            if np.isfinite(x).all():
                return x
    except LinAlgError:
        pass
    return _lstsq(A, b)


def _lstsq(A, b):
    return np.linalg.lstsq(A, b, rcond=None)[0]
