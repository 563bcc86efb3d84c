"""HSIC independence test with the gamma approximation (Gretton et al., 2008).

The statistic, kernel widths and null moments are those of lingam 1.13's
``hsic_test_gamma`` with its default bandwidth (median distance between the
first 100 samples), so p-values agree with lingam's. What differs is the
bookkeeping: for the p-value matrix of many variables each variable's centred
Gram matrix is built once, and the statistics and null variances of all pairs
come from matrix products instead of one test per pair.
"""

import numpy as np

# The gamma approximation's null variance carries the factor (n - 4)(n - 5) /
# ((n - 2)(n - 3)) (lingam's hsic_test_gamma): at n = 4 or 5 it is zero and the
# p-value NaN, at n = 3 it divides by zero. Six samples is the least it needs.
MIN_SAMPLES = 6

# Variables whose centred Gram matrices (and their squares) are held together
# at most use this much memory; past it the pairs are tested one by one.
_GRAM_MEMORY_BYTES = 256 * 2**20


def kernel_width(x):
    """Median-heuristic bandwidth of a Gaussian kernel.

    ``sqrt(median / 2)`` of the positive squared distances between the first
    100 samples (or all, when fewer).

    Parameters
    ----------
    x : ndarray, shape (n_samples,) or (n_samples, n_dims)

    Returns
    -------
    float
        NaN when no distance is positive (the samples are equal up to
        rounding): no Gaussian kernel fits them.
    """
    x = _as_columns(x)[:100]
    # The squared distances are expanded as |a|^2 + |b|^2 - 2 a.b, as in lingam:
    # which near-zero distances count as "positive" depends on this rounding,
    # and the median must pick the same element.
    sq = np.sum(x * x, axis=1)[:, None]
    dists = sq + sq.T - 2.0 * (x @ x.T)
    upper = dists[np.triu_indices(len(x), k=1)]
    positive = upper[upper > 0]
    if positive.size == 0:
        return float("nan")
    return float(np.sqrt(0.5 * np.median(positive)))


def centred_gram(x, width):
    """Gaussian-kernel Gram matrix and its doubly centred form.

    Parameters
    ----------
    x : ndarray, shape (n_samples,) or (n_samples, n_dims)
    width : float

    Returns
    -------
    K, Kc : ndarray, shape (n_samples, n_samples)
        ``K[a, b] = exp(-|x_a - x_b|^2 / (2 width^2))`` and ``H K H`` with
        the centring matrix ``H``.
    """
    x = _as_columns(x)
    diff = x[:, None, :] - x[None, :, :]
    K = np.exp(-np.sum(diff * diff, axis=2) / (2.0 * width**2))
    n = len(x)
    col = K.sum(axis=0)
    row = K.sum(axis=1)
    Kc = K - (col[None, :] + row[:, None]) / n + row.sum() / n**2
    return K, Kc


def hsic_test_gamma(X, Y):
    """HSIC test of independence between ``X`` and ``Y``, gamma approximation.

    Parameters
    ----------
    X, Y : ndarray, shape (n_samples,) or (n_samples, n_dims)

    Returns
    -------
    test_stat : float
        ``n`` times the biased HSIC estimate.
    p_value : float
        Upper tail of the gamma law fitted to the statistic's null mean and
        variance; 1 when ``X`` or ``Y`` is constant (see
        :func:`independence_p_values`).

    Raises
    ------
    ValueError
        When ``X`` and ``Y`` have different numbers of samples, or fewer than
        ``MIN_SAMPLES`` (6).
    """
    X, Y = _as_columns(X), _as_columns(Y)
    n = len(X)
    if len(Y) != n:
        raise ValueError(f"X and Y need the same number of samples; got {n} and {len(Y)}")
    _check_samples(n)
    width_x, width_y = kernel_width(X), kernel_width(Y)
    if np.isnan(width_x) or np.isnan(width_y):
        return 0.0, 1.0
    K, Kc = centred_gram(X, width_x)
    L, Lc = centred_gram(Y, width_y)
    stat = np.sum(Kc * Lc) / n
    sq_k, sq_l = Kc * Kc, Lc * Lc
    var_sum = np.sum(sq_k * sq_l) - np.sum(np.diag(sq_k) * np.diag(sq_l))
    p = _gamma_p_values(
        np.array([stat]), np.array([var_sum]), _null_kernel_mean(K, n),
        _null_kernel_mean(L, n), n)
    return float(stat), float(p[0])


def independence_p_values(E, constant=None):
    """p-values of pairwise HSIC independence tests between the columns of ``E``.

    A constant column is independent of every other: its p-values are 1.
    Such are the columns in ``constant`` (the errors of fully explained
    variables, zero up to rounding) and those whose kernel width is
    undefined (no two of the samples that set it differ), where the test
    itself would give NaN.

    Parameters
    ----------
    E : ndarray, shape (n_samples, n_features)
    constant : array-like of bool, shape (n_features,), optional
        Columns to treat as constant.

    Returns
    -------
    ndarray, shape (n_features, n_features)
        Symmetric, zero diagonal; entry ``[i, j]`` is the p-value of the test
        of independence between columns ``i`` and ``j``.

    Raises
    ------
    ValueError
        With two or more columns and fewer than ``MIN_SAMPLES`` (6) rows.
    """
    n, p = E.shape
    P = np.zeros((p, p))
    if p < 2:
        return P
    _check_samples(n)
    widths = np.array([kernel_width(E[:, i]) for i in range(p)])
    flat = np.isnan(widths)
    if constant is not None:
        flat |= np.asarray(constant, dtype=bool)
    keep = np.flatnonzero(~flat)
    sub = np.zeros((len(keep), len(keep)))
    if len(keep) > 1:
        if len(keep) * n * n * 16 <= _GRAM_MEMORY_BYTES:
            _all_pairs_at_once(E[:, keep], widths[keep], sub)
        else:
            for a in range(len(keep) - 1):
                for b in range(a + 1, len(keep)):
                    sub[a, b] = sub[b, a] = hsic_test_gamma(E[:, keep[a]], E[:, keep[b]])[1]
    P[np.ix_(keep, keep)] = sub
    P[flat, :] = 1.0
    P[:, flat] = 1.0
    np.fill_diagonal(P, 0.0)
    return P


def _check_samples(n):
    """ValueError unless ``n`` samples are enough for the gamma approximation."""
    if n < MIN_SAMPLES:
        raise ValueError(
            f"the HSIC gamma test needs at least {MIN_SAMPLES} samples (its null variance "
            f"has the factor (n - 4)(n - 5)); got {n}")


def _all_pairs_at_once(E, widths, P):
    n, p = E.shape
    flat = np.empty((p, n * n))  # centred Gram matrices, one per row
    mean = np.empty(p)
    for i in range(p):
        K, Kc = centred_gram(E[:, i], widths[i])
        flat[i] = Kc.ravel()
        mean[i] = _null_kernel_mean(K, n)
    stat = flat @ flat.T / n
    flat *= flat  # squares, elementwise
    diag = flat[:, :: n + 1]
    var_sum = flat @ flat.T - diag @ diag.T
    iu = np.triu_indices(p, k=1)
    P[iu] = _gamma_p_values(stat[iu], var_sum[iu], mean[iu[0]], mean[iu[1]], n)
    P.T[iu] = P[iu]


def _null_kernel_mean(K, n):
    """Mean of the off-diagonal kernel values (the diagonal of ``K`` is 1)."""
    return (K.sum() - np.trace(K)) / (n * (n - 1))


def _gamma_p_values(stat, var_sum, mu_x, mu_y, n):
    """Gamma-approximation p-values from the statistics and null moments."""
    from scipy.stats import gamma

    # var_sum is sum_{a != b} (Kc[a, b] Lc[a, b])^2; the 1/36 is lingam's (1/6)^2.
    var = var_sum / 36.0 / n / (n - 1)
    var = 72.0 * (n - 4) * (n - 5) / n / (n - 1) / (n - 2) / (n - 3) * var
    mean = (1.0 + mu_x * mu_y - mu_x - mu_y) / n
    shape = mean**2 / var
    scale = var * n / mean
    return gamma.sf(stat, shape, scale=scale)


def _as_columns(x):
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(-1, 1) if x.ndim == 1 else x
