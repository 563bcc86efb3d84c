# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Column sums of the data preparation, compiled, in the order numpy adds them.

``noise_sums`` gives what ``paralingam.search.policy._noise_sums`` computes
with numpy (means, sums of squares, sums of squared deviations of a range of
columns) in two passes over the data instead of about a dozen numpy calls
per block of rows. numpy sums the first axis of a C-ordered array of two or
more columns row after row, each sum continued by the next row's value; the
loops here add in that order, each product and difference rounded on its
own. The module is built without contraction into fused multiply-adds
(``-ffp-contract=off`` in setup.py), which would round differently.
"""

import numpy as np

# Each thread reads a range of columns: when that is a few cache lines per
# row, every row in another page, the hardware prefetchers (which stop at
# page boundaries) see no stream, so the loops prefetch the range
# PL_SUMS_AHEAD rows ahead. Longer ranges stream on their own.
cdef extern from *:
    """
    #define PL_SUMS_AHEAD 16
    #define PL_SUMS_PREFETCH_BYTES 1024
    static inline void pl_prefetch_range(const void *p, Py_ssize_t bytes)
    {
        const char *c = (const char *)p;
        for (Py_ssize_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 3);
    }
    """
    const Py_ssize_t PL_SUMS_AHEAD
    const Py_ssize_t PL_SUMS_PREFETCH_BYTES
    void pl_prefetch_range(const void *p, Py_ssize_t nbytes) nogil

ctypedef fused real:
    float
    double


def _checked_sums(Py_ssize_t columns, Py_ssize_t n_factors, Py_ssize_t j0, Py_ssize_t j1):
    """The zeroed mean, sq and dev of columns ``j0:j1`` of ``columns`` (two or more), checked."""
    if j1 - j0 < 2 or j0 < 0 or j1 > columns or n_factors < j1:
        raise ValueError(f"noise_sums needs two or more of the {columns} columns; got {j0}:{j1}")
    return np.zeros(j1 - j0), np.zeros(j1 - j0), np.zeros(j1 - j0)


def noise_sums(const real[:, ::1] X, const double[::1] factors, Py_ssize_t j0, Py_ssize_t j1):
    """Means, sums of squares and sums of squared deviations of columns ``j0:j1`` of ``X * factors``.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features), float64 or float32, C-ordered
    factors : ndarray, shape (n_features,)
        Each column's factor (powers of two; ones for the data as they are).
        Float32 entries are widened to float64 before the product, as numpy's
        mixed product does.
    j0, j1 : int
        The columns (two or more: numpy sums a single column pairwise).

    Returns
    -------
    mean, sq, dev : ndarray, shape (j1 - j0,)
        ``mean = sum(x) / n``, ``sq = sum(x * x)``, ``dev = sum((x - mean)**2)``
        with the bits of numpy's ``mean(axis=0)`` and of the sums inside
        ``(x * x).sum(axis=0)`` and ``x.std(axis=0)``.
    """
    cdef Py_ssize_t n = X.shape[0], k = j1 - j0, i, j
    mean_a, sq_a, dev_a = _checked_sums(X.shape[1], factors.shape[0], j0, j1)
    cdef double[::1] mean = mean_a, sq = sq_a, dev = dev_a
    cdef const double[::1] f = factors[j0:j1]
    cdef double v, d
    cdef Py_ssize_t span = k * sizeof(X[0, 0])
    cdef Py_ssize_t ahead = PL_SUMS_AHEAD if span <= PL_SUMS_PREFETCH_BYTES else n
    with nogil:
        for i in range(n):
            if i + ahead < n:
                pl_prefetch_range(&X[i + ahead, j0], span)
            for j in range(k):
                mean[j] = mean[j] + <double>X[i, j0 + j] * f[j]
        for j in range(k):
            mean[j] = mean[j] / n
        for i in range(n):
            if i + ahead < n:
                pl_prefetch_range(&X[i + ahead, j0], span)
            for j in range(k):
                v = <double>X[i, j0 + j] * f[j]
                sq[j] = sq[j] + v * v
                d = v - mean[j]
                dev[j] = dev[j] + d * d
    return mean_a, sq_a, dev_a


def noise_sums_by_columns(const real[::1, :] X, const double[::1] factors, Py_ssize_t j0,
                          Py_ssize_t j1):
    """:func:`noise_sums` of Fortran-ordered ``X``, each column read where it lies.

    The same sums in the same order (each column's continued row after row),
    so the same bits: only the loops are turned. Eight columns are summed
    side by side (independent sums: their additions overlap instead of each
    waiting for the last), each read as one stream, where the C-ordered
    loops would read one element per row and column.
    """
    cdef Py_ssize_t n = X.shape[0], k = j1 - j0, i, c, jj, m
    mean_a, sq_a, dev_a = _checked_sums(X.shape[1], factors.shape[0], j0, j1)
    cdef double[::1] mean = mean_a, sq = sq_a, dev = dev_a
    cdef const double[::1] f = factors[j0:j1]
    cdef double s[8]
    cdef double q[8]
    cdef double e[8]
    cdef double v, d
    with nogil:
        for c in range(0, k, 8):
            m = min(8, k - c)
            for jj in range(m):
                s[jj] = 0.0
                q[jj] = 0.0
                e[jj] = 0.0
            for i in range(n):
                for jj in range(m):
                    s[jj] = s[jj] + <double>X[i, j0 + c + jj] * f[c + jj]
            for jj in range(m):
                s[jj] = s[jj] / n
            for i in range(n):
                for jj in range(m):
                    v = <double>X[i, j0 + c + jj] * f[c + jj]
                    q[jj] = q[jj] + v * v
                    d = v - s[jj]
                    e[jj] = e[jj] + d * d
            for jj in range(m):
                mean[c + jj] = s[jj]
                sq[c + jj] = q[jj]
                dev[c + jj] = e[jj]
    return mean_a, sq_a, dev_a
