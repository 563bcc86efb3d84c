"""Prior knowledge in the adjacency step.

:func:`allowed_predictors` turns lingam's prior-knowledge matrix into the
predictors each target keeps: ``prior_knowledge[target, j] == 0`` ("no
directed path from ``j`` to ``target``") removes ``j``, as lingam does. For
least squares, a target with few excluded predictors takes its row from the
inverse factor of the whole order (:func:`_inverse_factor`,
:func:`_row_without`) instead of a factorisation of its own.
"""

import numpy as np

from ..prior import _as_matrix as _prior_matrix
from ._common import _EPS, _residual_sums


# Targets whose predictors prior knowledge restricts: with at most this
# fraction of their predecessors excluded, the row comes from the inverse
# factor of the whole order (_row_without, O(k^2 |E|)) instead of a
# factorisation per target (O(k^3)), where that factor's pivots all keep more
# than SCHUR_MIN_PIVOT of their variance.
SCHUR_MAX_EXCLUDED = 0.125

SCHUR_MIN_PIVOT = 1e-6


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


def _inverse_factor(cov, coef):
    """``inv(L)`` for ``cov = L L^T`` (causal order), over its well-conditioned start.

    With ``coef`` the regressions on predecessors and ``d`` their residual
    variances, ``inv(L) = diag(d)^(-1/2) (I - coef)``. Only the leading
    variables whose residual keeps more than ``SCHUR_MIN_PIVOT`` of their
    variance are returned: past a nearly dependent one the inverse factor
    would carry its rounding.
    """
    d = _residual_sums(cov, coef)
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
    # benign data stay well inside the rounding bound and near copies across
    # E and K land orders of magnitude outside it (docs/design/adjacency.rst)
    return b if (np.abs(residual) <= rounding).all() else None
