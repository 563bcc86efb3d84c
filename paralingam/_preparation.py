"""Preparation of the data that the search and the adjacency step share.

Exact rescaling of the columns by powers of two (no rounding, no underflow
of tiny columns' squares) and the standardised rows with their correlation
matrix. ``paralingam.fit`` (:mod:`paralingam._api`), the CPU search and the
adjacency step (:mod:`paralingam.adjacency`) import it; it imports nothing of
the package.
"""

import numpy as np

# Entries squared at once when standardising (a block of rows, 512 KiB).
STANDARDISE_BLOCK = 1 << 16


def column_exponents(X, absmax=None):
    """Per column ``e`` with ``max |X[:, j]| * 2**-e[j]`` in [0.5, 1).

    Scaling the columns by ``2**-e`` is exact (no rounding), so the search,
    which standardises every variable, gives bit for bit the result it gives
    on ``X``, and least squares gives exactly scaled coefficients; but squares
    of tiny columns (|x| ~ 1e-170) can no longer underflow. The reference
    scales the same way.
    """
    if absmax is None:  # (as_data_matrix's, when given: the same maxima)
        absmax = np.abs(X).max(axis=0, initial=0.0)
    return np.frexp(absmax)[1]


def scale_columns(X, exponents):
    """``np.ldexp(X, -exponents, out=X)``: ``X``, its columns scaled by ``2**-exponents``, in place.

    A product by a power of two is rounded as ``ldexp`` rounds (both are
    exact, or correctly rounded into the subnormals), and runs several times
    faster; ``ldexp`` is left for factors that are not normal float64.
    """
    exponents = np.asarray(exponents)
    if exponents.size and np.abs(exponents).max() < 1000:
        return np.multiply(X, np.ldexp(1.0, -exponents), out=X)
    return np.ldexp(X, -exponents, out=X)


def standardise_rows(X):
    """Population-standardised copy of ``X`` with one variable per row.

    Returns
    -------
    Z : ndarray, shape (n_features, n_samples), C-contiguous float64
    cov : ndarray, shape (n_features, n_features)
        ``Z @ Z.T / n``: the correlation matrix, unit diagonal.
    """
    # An explicit copy: for a Fortran-ordered X, X.T is already C-contiguous
    # and ascontiguousarray would return a view that the lines below modify.
    Z = np.array(X.T, dtype=np.float64, order="C", copy=True)
    Z -= Z.mean(axis=1, keepdims=True)
    # (Z * Z).mean(axis=1) by blocks of rows: each row's sum is the same
    # (numpy sums each contiguous row alone), without an n x p temporary.
    sq = np.empty((Z.shape[0], 1))
    rows = max(1, STANDARDISE_BLOCK // max(1, Z.shape[1]))
    for r0 in range(0, Z.shape[0], rows):
        block = Z[r0:r0 + rows]
        sq[r0:r0 + rows, 0] = (block * block).mean(axis=1)
    Z /= np.sqrt(sq)
    cov = covariance_of_rows(Z)
    return Z, cov


def covariance_of_rows(Z):
    """``Z @ Z.T / n`` with an exact unit diagonal, symmetric."""
    cov = Z @ Z.T / Z.shape[1]
    cov = 0.5 * (cov + cov.T)
    np.fill_diagonal(cov, 1.0)
    return cov
