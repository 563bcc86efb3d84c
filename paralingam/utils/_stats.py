"""Statistics of ``paralingam.utils`` that lingam 1.13 exports, computed without lingam.

``f_correlation`` (Bach and Jordan's kernel F-correlation), the local
likelihood helpers of lingam's RESIT/BottomUpParceLiNGAM scores
(``likelihood_i``, ``log_p_super_gaussian``, ``variance_i``) and
``bic_select_logistic_l1``. scipy and scikit-learn are paralingam
dependencies; they are imported when a function is called.
"""

import numpy as np

__all__ = ["f_correlation", "likelihood_i", "log_p_super_gaussian", "variance_i",
           "bic_select_logistic_l1"]


def _vector(x, name):
    try:
        v = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if v.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name} has NaN or infinite values")
    return v


def f_correlation(x, y):
    """Kernel F-correlation of two variables (Bach and Jordan, 2002).

    lingam 1.13's ``f_correlation``: both variables standardised, Gaussian
    kernel Gram matrices approximated by incomplete Cholesky factors,
    regularised, and one minus the smallest eigenvalue of the regularised
    kernel-CCA matrix. 0 means independent.

    Parameters
    ----------
    x, y : array-like, shape (n_samples,)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For inputs of different lengths, not one-dimensional, or not finite.

    References
    ----------
    F. R. Bach and M. I. Jordan. Kernel independent component analysis.
    Journal of Machine Learning Research 3:1-48, 2002.
    """
    from scipy.sparse.linalg import eigsh

    x = _vector(x, "x")
    y = _vector(y, "y")
    n = x.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"x and y must be the same size; got {n} and {y.shape[0]}")
    # lingam's constants: a smaller regularisation and kernel width for large n
    kappa, sigma = (2e-3, 0.5) if n > 1000 else (2e-2, 1.0)

    Rs, Us = [], []
    for v in (x, y):
        v = (v - v.mean()) / v.std()
        G, perm = _incomplete_cholesky(v, sigma, n * kappa * 1e-2)
        G = G[np.argsort(perm), :]
        G = G - G.mean(axis=0)
        R, U = _regularised_svd(G, n, kappa)
        Rs.append(R)
        Us.append(U)
    s0, s1 = len(Rs[0]), len(Rs[1])
    R_kappa = np.eye(s0 + s1)
    cross = np.diag(Rs[1]) @ (Us[1].T @ Us[0]) @ np.diag(Rs[0])
    R_kappa[s0:, :s0] = cross
    R_kappa[:s0, s0:] = cross.T
    w, _ = eigsh(R_kappa, 1, which="SM")
    return 1 - w[0]


def _incomplete_cholesky(x, sigma, tol):
    """Pivoted incomplete Cholesky factor ``G`` (rows in pivot order ``perm``)
    of the Gaussian Gram matrix of ``x``, stopped when the residual trace is
    at most ``tol``."""
    n = x.shape[0]
    diag = np.ones(n)  # residual diagonal, in pivot order
    G = np.empty((n, 0))
    perm = np.arange(n)
    i = 0
    while np.sum(diag[i:n]) > tol:
        G = np.append(G, np.zeros((n, 1)), axis=1)
        if i > 0:
            jast = int(np.argmax(diag[i:n])) + i
            perm[[i, jast]] = perm[[jast, i]]
            G[[i, jast], :i] = G[[jast, i], :i]
        else:
            jast = 0
        G[i, i] = np.sqrt(diag[jast])
        rest = x[perm[i + 1:n]]
        K = np.exp(-0.5 / sigma**2 * np.abs(rest * rest + x[perm[i]] ** 2
                                              - 2 * rest * x[perm[i]]))[:, None]
        if i > 0:
            K = K - G[i + 1:n, 0:i] @ G[i, 0:i].reshape(-1, 1)
        G[i + 1:n, [i]] = 1 / G[i, i] * K
        diag[i + 1:n] = 1.0 - np.sum(G[i + 1:n, 0:i + 1] ** 2, axis=1)
        i += 1
    return G, perm


def _regularised_svd(G, n, kappa):
    """Eigen-directions of ``G`` with eigenvalues at least ``n * kappa / 100``,
    largest first, and their regularised weights ``D / (n kappa / 2 + D)``."""
    from scipy.linalg import eigh

    D, A = eigh(G.T @ G)
    keep = np.flatnonzero(D >= n * kappa * 1e-2)
    keep = keep[np.argsort(D[keep])[::-1]]
    D = D[keep]
    U = G @ (A[:, keep] @ np.diag(np.sqrt(1.0 / D)))
    return D / (n * kappa / 2 + D), U


def log_p_super_gaussian(s):
    """Log density of a standardised super-Gaussian disturbance.

    ``-sqrt(2) |s| - 0.35`` elementwise (lingam's constant).

    Parameters
    ----------
    s : array-like

    Returns
    -------
    ndarray
    """
    return -np.sqrt(2.0) * np.absolute(s) - 0.35


def variance_i(X, i, b_i):
    """Variance of the disturbance of variable ``i``: ``var(X[i] - b_i @ X)``.

    Parameters
    ----------
    X : array-like, shape (n_features, n_samples)
        Variables in rows (lingam's layout here).
    i : int
    b_i : array-like, shape (n_features,)
        Row ``i`` of the adjacency matrix.

    Returns
    -------
    float
        The population variance (``ddof=0``), which does not assume zero mean.
    """
    X = np.asarray(X, dtype=np.float64)
    return np.var(X[i] - np.dot(b_i, X))


def likelihood_i(x, i, b_i, bi_0):
    """Log-likelihood of variable ``i``'s standardised super-Gaussian disturbance.

    ``sum(log_p_super_gaussian((x[i] - b_i @ x - bi_0) / sd)) - n log(sd)``
    with ``sd`` the square root of :func:`variance_i`.

    Parameters
    ----------
    x : array-like, shape (n_features, n_samples)
        Variables in rows.
    i : int
    b_i : array-like, shape (n_features,)
        Row ``i`` of the adjacency matrix.
    bi_0 : float
        Intercept of variable ``i``.

    Returns
    -------
    float
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[1]
    var_i = variance_i(x, i, b_i)
    ll = 0.0
    ll += np.sum(log_p_super_gaussian((x[i] - np.dot(b_i, x) - bi_0) / np.sqrt(var_i)))
    ll -= n * np.log(np.sqrt(var_i))
    return ll


def bic_select_logistic_l1(X, y, Cs=50, max_iter=1000):
    """The L1-regularised logistic regression with the lowest BIC over a path of ``C``.

    lingam 1.13's ``bic_select_logistic_l1``: scikit-learn's logistic
    regression path (saga solver, intercept), each model scored by
    ``-2 loglik + (nonzeros + 1) log(n)``.

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
    y : array-like, shape (n_samples,)
        Binary target.
    Cs : int or array-like
        Number of inverse regularisation strengths (log-spaced) or the values.
    max_iter : int

    Returns
    -------
    best_coef : ndarray, shape (n_features,)
    best_intercept : float
    best_C : float
    bic_scores : list of float
        The BIC of each ``C``.
    Cs : ndarray
        The ``C`` values tried.
    """
    from sklearn.linear_model._logistic import _logistic_regression_path

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or len(y) != len(X):
        raise ValueError(f"X must be (n_samples, n_features) and y (n_samples,); got "
                         f"{X.shape} and {y.shape}")
    if len(np.unique(y)) != 2:
        raise ValueError(f"y must be binary; got {len(np.unique(y))} classes")
    coefs, Cs, _ = _logistic_regression_path(X, y, classes=np.unique(y), l1_ratio=1.0,
                                             solver="saga", fit_intercept=True,
                                             max_iter=max_iter, Cs=Cs)
    n_samples = X.shape[0]
    bic_scores = []
    best_bic = np.inf
    best_index = None
    eps = 1e-15
    for i in range(len(Cs)):
        coef, intercept = coefs[i][:-1], coefs[i][-1]
        probs = np.clip(1 / (1 + np.exp(-(X @ coef + intercept))), eps, 1 - eps)
        ll = np.sum(y * np.log(probs) + (1 - y) * np.log(1 - probs))
        bic = -2 * ll + (np.sum(coef != 0) + 1) * np.log(n_samples)
        bic_scores.append(bic)
        if bic < best_bic:
            best_bic = bic
            best_index = i
    return coefs[best_index, :-1], coefs[best_index, -1], Cs[best_index], bic_scores, Cs
