"""RCD's ancestor extraction (Maeda and Shimizu, 2020), computed without lingam.

lingam 1.13's ``extract_ancestors``: for growing sets ``U`` of variables,
after removing the effect of their known common ancestors, a variable of ``U``
is a sink when the residual of its regression on the others is independent
(HSIC) of each of them; a unique sink gets the others as ancestors. The tests
are Shapiro-Wilk (scipy), Pearson (scipy) and HSIC's gamma approximation
(:mod:`paralingam.lingam.hsic`); the regressions are least squares, or, with
``MLHSICR``, the coefficients that minimise the summed HSIC (L-BFGS, scipy).
"""

import itertools

import numpy as np

from ..lingam import hsic

__all__ = ["extract_ancestors"]

_BW_METHODS = ("mdbs", "scott", "silverman")


def extract_ancestors(X, max_explanatory_num=2, cor_alpha=0.01, ind_alpha=0.01,
                      shapiro_alpha=0.01, MLHSICR=True, bw_method="mdbs"):
    """The set of ancestors of each variable, RCD's Algorithm 1.

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
    max_explanatory_num : int
        Largest number of explanatory variables in a regression (``|U| - 1``).
    cor_alpha : float
        Significance level of Pearson's correlation test.
    ind_alpha : float
        Significance level of the HSIC independence test.
    shapiro_alpha : float
        Significance level of the Shapiro-Wilk normality test.
    MLHSICR : bool
        When least squares leaves dependent residuals, retry with the
        coefficients that minimise the summed HSIC.
    bw_method : {"mdbs", "scott", "silverman"}
        HSIC kernel width: median distance between samples, Scott's rule or
        Silverman's rule.

    Returns
    -------
    list of set of int
        ``M[i]``: the variables found to be ancestors of ``x_i``.

    References
    ----------
    T. N. Maeda and S. Shimizu. RCD: Repetitive causal discovery of linear
    non-Gaussian acyclic models with latent confounders. AISTATS 2020,
    PMLR 108:735-745.
    """
    from .._validation import as_data_matrix

    if bw_method not in _BW_METHODS:
        raise ValueError(f"bw_method must be one of {_BW_METHODS}; got {bw_method!r}")
    if (not isinstance(max_explanatory_num, (int, np.integer))
            or isinstance(max_explanatory_num, bool) or max_explanatory_num < 1):
        raise ValueError(f"max_explanatory_num must be an integer >= 1; "
                         f"got {max_explanatory_num!r}")
    X = as_data_matrix(X, allow_constant=True)[0]
    n_features = X.shape[1]
    M = [set() for _ in range(n_features)]
    size = 1
    history = {}
    while True:
        changed = False
        for U in itertools.combinations(range(n_features), size + 1):
            U = list(U)
            H_U = set.intersection(*(M[j] for j in U))  # common ancestors of U
            if tuple(U) in history and history[tuple(U)] == H_U:
                continue
            Y = _residual_matrix(X, U, H_U)
            if not _non_gaussian(Y, U, shapiro_alpha):
                continue
            if not all(_correlated(Y[:, i], Y[:, j], cor_alpha)
                       for i, j in itertools.combinations(U, 2)):
                continue
            sinks = []
            for xi in U:
                others = list(set(U) - {xi})
                if _ancestor_in_U(M, xi, others):
                    continue
                if _independent_of_residual(Y, xi, others, ind_alpha, bw_method, MLHSICR):
                    sinks.append(xi)
            if len(sinks) == 1:
                xi = sinks[0]
                others = set(U) - {xi}
                if not others <= M[xi]:
                    M[xi] |= others
                    changed = True
            history[tuple(U)] = H_U
        if changed:
            size = 1
        elif size < max_explanatory_num:
            size += 1
        else:
            break
    return M


def _ols_residual(X, endog, exog):
    """Residual and coefficients of the least-squares regression with intercept."""
    A = X[:, exog]
    A_mean = A.mean(axis=0)
    y = X[:, endog]
    y_mean = y.mean()
    coef = np.linalg.lstsq(A - A_mean, y - y_mean, rcond=None)[0]
    return y - ((A - A_mean) @ coef + y_mean), coef


def _residual_matrix(X, U, H_U):
    if not H_U:
        return X
    Y = np.zeros_like(X)
    for j in U:
        Y[:, j] = _ols_residual(X, j, list(H_U))[0]
    return Y


def _non_gaussian(Y, U, alpha):
    from scipy.stats import shapiro

    return all(shapiro(Y[:, j])[1] <= alpha for j in U)


def _correlated(a, b, alpha):
    from scipy.stats import pearsonr

    return pearsonr(a, b)[1] < alpha


def _ancestor_in_U(M, xi, others):
    """``xi`` already an ancestor of one of the others, or all of them already
    ancestors of ``xi``."""
    return any(xi in M[j] for j in others) or set(others) <= M[xi]


def _independent_of_residual(Y, xi, others, alpha, bw_method, MLHSICR):
    resid = _ols_residual(Y, xi, others)[0]
    if all(_independent(resid, Y[:, j], bw_method, alpha) for j in others):
        return True
    if len(others) == 1 or not MLHSICR:
        return False
    resid = _mlhsicr_residual(Y, xi, others)
    return all(_independent(resid, Y[:, j], bw_method, alpha) for j in others)


def _mlhsicr_residual(Y, xi, others):
    """Residual of ``xi`` on ``others`` with the coefficients that minimise the
    summed HSIC statistics of the residual against each regressor (L-BFGS
    from the least-squares coefficients, numerical gradient), as lingam."""
    from scipy.optimize import fmin_l_bfgs_b

    n = Y.shape[0]
    widths = [hsic.kernel_width(Y[:, j]) for j in others]
    Lcs = [hsic.centred_gram(Y[:, j], w)[1] for j, w in zip(others, widths)]
    initial = _ols_residual(Y, xi, others)[1]
    width_xi = hsic.kernel_width(Y[:, xi])

    def summed_hsic(coef):
        resid = Y[:, xi]
        # lingam moves the kernel width with the coefficients the same way
        width = width_xi
        for c, j, w in zip(coef, others, widths):
            resid = resid - c * Y[:, j]
            width = width - c * w
        Kc = hsic.centred_gram(resid, width)[1]
        return sum(np.sum(Kc.T * Lc) / n for Lc in Lcs)

    coefs = fmin_l_bfgs_b(func=summed_hsic, x0=initial, approx_grad=True)[0]
    resid = Y[:, xi]
    for c, j in zip(coefs, others):
        resid = resid - c * Y[:, j]
    return resid


def _rule_of_thumb_width(x, factor):
    """statsmodels' ``bw_scott`` (factor 1.059) / ``bw_silverman`` (0.9):
    ``factor * min(sd, IQR / 1.349) * n ** -0.2`` (sd alone when IQR is 0)."""
    sd = np.std(x, ddof=1)
    iqr = (np.percentile(x, 75) - np.percentile(x, 25)) / 1.349
    spread = min(sd, iqr) if iqr > 0 else sd
    return factor * spread * len(x) ** (-0.2)


def _independent(x, y, bw_method, alpha):
    if bw_method == "mdbs":
        p = hsic.hsic_test_gamma(x, y)[1]
    else:
        factor = 1.059 if bw_method == "scott" else 0.9
        p = _hsic_gamma_p(x, y, _rule_of_thumb_width(x, factor),
                          _rule_of_thumb_width(y, factor))
    return p > alpha


def _hsic_gamma_p(x, y, width_x, width_y):
    """p-value of the HSIC gamma test with given kernel widths (lingam's
    ``hsic_test_gamma``, whose widths paralingam.lingam.hsic fixes to the median
    heuristic)."""
    from scipy.stats import gamma

    n = len(x)
    K, Kc = hsic.centred_gram(x, width_x)
    L, Lc = hsic.centred_gram(y, width_y)
    stat = np.sum(Kc.T * Lc) / n
    var = (Kc * Lc / 6) ** 2
    var = (np.sum(var) - np.trace(var)) / n / (n - 1)
    var = 72 * (n - 4) * (n - 5) / n / (n - 1) / (n - 2) / (n - 3) * var
    mu_x = (K.sum() - np.trace(K)) / n / (n - 1)
    mu_y = (L.sum() - np.trace(L)) / n / (n - 1)
    mean = (1 + mu_x * mu_y - mu_x - mu_y) / n
    return gamma.sf(stat, mean**2 / var, scale=var * n / mean)
