"""Edge weights once the causal order is known."""

import numpy as np


def ols_adjacency(X, causal_order):
    """Least-squares regression of each variable on all earlier ones.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    causal_order : sequence of int

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
    data (a variable that is an exact combination of earlier ones) has no
    Cholesky factor; then each row is the minimum-norm least-squares solution.
    """
    order = np.asarray(causal_order, dtype=np.intp)
    p = X.shape[1]
    Xc = X - X.mean(axis=0)
    cov = (Xc.T @ Xc)[np.ix_(order, order)] / X.shape[0]
    B_ord = np.zeros((p, p))
    try:
        L = np.linalg.cholesky(cov)
        unit = L / np.diag(L)  # columns scaled to a unit diagonal
        B_ord = np.eye(p) - np.linalg.inv(unit)
        np.fill_diagonal(B_ord, 0.0)
        B_ord = np.tril(B_ord, -1)
        if not np.isfinite(B_ord).all():
            raise np.linalg.LinAlgError("non-finite factor")
    except np.linalg.LinAlgError:
        B_ord = np.zeros((p, p))
        for k in range(1, p):
            coef, *_ = np.linalg.lstsq(cov[:k, :k], cov[:k, k], rcond=None)
            B_ord[k, :k] = coef
    B = np.zeros((p, p))
    B[np.ix_(order, order)] = B_ord
    return B
